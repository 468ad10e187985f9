# The attention store (DESIGN section 5) and its word annotations.
#   results/attention/{task}/words.parquet          spaCy words of the sampled examples (POS, tag, dep, head)
#   results/attention/{task}/{variant}.zarr         variant: pretrained | finetuned
# An extraction writes {variant}.zarr.partial chunk by chunk (outside the declared output, so Snakemake's
# clean-up keeps it) and resumes from its last complete chunk; the final store appears only when complete.

ATTENTION_SPLIT = config["attention"]["split"]
ATTENTION_VARIANTS = ["pretrained", "finetuned"]
# Only what the sample and the words depend on: changing the batch size never re-annotates.
ANNOTATE_PARAMS = as_json(
    {
        "attention": {k: config["attention"].get(k) for k in ("split", "examples", "spacy_model")},
        "seed": config["data"]["seed"],
    }
)
# The sections the store depends on: analysis settings never re-extract.
EXTRACT_PARAMS = as_json(
    {
        "attention": config["attention"],
        "max_length": config["data"]["max_length"],
        "model": config["model"],
        "seed": config["data"]["seed"],
    }
)


rule annotate_words:
    input:
        data=f"results/data/{{task}}/{ATTENTION_SPLIT}.parquet",
    output:
        "results/attention/{task}/words.parquet",
    params:
        cfg=ANNOTATE_PARAMS,
    log:
        "results/logs/annotate_words/{task}.log",
    benchmark:
        "results/benchmarks/annotate_words/{task}.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology annotate-words --task {wildcards.task} --data {input.data} --params {params.cfg:q} "
        "--output {output} --no-progress > {log} 2>&1"


rule extract_attention:
    input:
        unpack(_extract_inputs),
    output:
        directory("results/attention/{task}/{variant}.zarr"),
    wildcard_constraints:
        variant="pretrained|finetuned",
    params:
        cfg=EXTRACT_PARAMS,
        model_dir=lambda wildcards, input: f"--model-dir {input.model}" if "model" in input.keys() else "",
    log:
        "results/logs/extract_attention/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/extract_attention/{task}/{variant}.tsv"
    threads: 4  # scaled down to --cores by Snakemake
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology extract-attention --task {wildcards.task} --variant {wildcards.variant} "
        "--data {input.data} --words {input.words} {params.model_dir} --params {params.cfg:q} "
        "--output {output} --threads {threads} > {log} 2>&1"


TARGETS.extend(expand("results/attention/{task}/words.parquet", task=TASK_NAMES))
TARGETS.extend(expand("results/attention/{task}/{variant}.zarr", task=TASK_NAMES, variant=ATTENTION_VARIANTS))
