# Fine-tuning and Table 1 (Kovaleva et al. 2019, section 4.3).
#   results/models/{task}/{init}/          fine-tuned model (safetensors, tokenizer, config with labels)
#   results/scores/{task}/{variant}.json   pretrained | finetuned | random-finetuned on the validation split
#   results/tables/table1.{csv,md}, results/figures/table1.png
# Resumable state lives in results/checkpoints/{task}/{init}/ (outside the declared output, so that
# Snakemake's clean-up of an interrupted job keeps it).

TRAIN_PARAMS = as_json(
    {
        "model": config["model"],
        "max_length": config["data"]["max_length"],
        "train": {k: v for k, v in config["train"].items() if k != "inits"},
    }
)
# The `pretrained` score depends on the head's seed and the evaluation settings only.
SCORE_PARAMS = as_json(
    {
        "model": config["model"],
        "max_length": config["data"]["max_length"],
        "train": {k: config["train"][k] for k in ("seed", "eval_batch_size", "mixed_precision")},
    }
)
VARIANT_OF_INIT = {"pretrained": "finetuned", "random": "random-finetuned"}
SCORE_VARIANTS = ["pretrained"] + [VARIANT_OF_INIT[i] for i in INITS]


rule train_model:
    input:
        train="results/data/{task}/train.parquet",
        validation="results/data/{task}/validation.parquet",
    output:
        model=directory("results/models/{task}/{init}"),
    params:
        cfg=TRAIN_PARAMS,
        checkpoints="results/checkpoints/{task}/{init}",
    log:
        "results/logs/train_model/{task}/{init}.log",
    benchmark:
        "results/benchmarks/train_model/{task}/{init}.tsv"
    threads: 8  # scaled down to --cores by Snakemake
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology train --task {wildcards.task} --init {wildcards.init} --params {params.cfg:q} "
        "--train-data {input.train} --eval-data {input.validation} --output {output.model} "
        "--checkpoint-dir {params.checkpoints} --threads {threads} > {log} 2>&1"


rule score:
    input:
        data="results/data/{task}/validation.parquet",
        model=_score_model,
    output:
        "results/scores/{task}/{variant}.json",
    wildcard_constraints:
        variant="pretrained|finetuned|random-finetuned",
    params:
        cfg=lambda wc: SCORE_PARAMS if wc.variant == "pretrained" else TRAIN_PARAMS,
        model_dir=lambda wc, input: f"--model-dir {input.model}" if input.model else "",
    log:
        "results/logs/score/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/score/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology evaluate --task {wildcards.task} --variant {wildcards.variant} --params {params.cfg:q} "
        "--data {input.data} {params.model_dir} --output {output} --threads {threads} > {log} 2>&1"


rule table1:
    input:
        scores=expand("results/scores/{task}/{variant}.json", task=TASK_NAMES, variant=SCORE_VARIANTS),
        train=expand("results/data/{task}/train.parquet", task=TASK_NAMES),
    output:
        csv="results/tables/table1.csv",
        md="results/tables/table1.md",
        figure="results/figures/table1.png",
    params:
        model=config["model"],
    log:
        "results/logs/table1/table1.log",
    benchmark:
        "results/benchmarks/table1/table1.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology table1 --scores {input.scores} --train-data {input.train} --model {params.model:q} "
        "--csv {output.csv} --md {output.md} --figure {output.figure} > {log} 2>&1"


TARGETS.extend(
    [
        *expand("results/models/{task}/{init}", task=TASK_NAMES, init=INITS),
        "results/tables/table1.csv",
        "results/tables/table1.md",
        "results/figures/table1.png",
    ]
)
