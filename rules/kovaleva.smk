# Kovaleva et al. 2019, sections 4.1-4.5, over the attention stores.
#   results/stats/{task}/{variant}/patterns.csv features.csv cls.csv relations.csv   one read of one store
#   results/stats/{task}/cosine.csv, features_diff.csv  pretrained vs fine-tuned, both stores read once, aligned
#   results/stats/framenet/links.parquet, counts.json   FrameNet sentences that survive the paper's filters
#   results/stats/{task}/{variant}/relations_framenet.csv   FrameNet link scores (merged into relations.csv)
#   results/figures/{patterns,relations,cosine,features,cls}-{task}.png, {patterns,cosine}-tasks.png
KOVALEVA_VARIANTS = ["pretrained", "finetuned"]
KOVALEVA_FIGURES = ["patterns", "relations", "cosine", "features", "cls"]
FRAMENET_DIR = config["analysis"]["relations"]["framenet"]
PATTERN_CLASSIFIER = config["analysis"]["patterns"]["classifier"]
KOVALEVA_PARAMS = as_json({k: config["analysis"][k] for k in ("patterns", "relations", "dask")})


rule kovaleva_stats:
    input:
        unpack(_kovaleva_stats_inputs),
    output:
        patterns="results/stats/{task}/{variant}/patterns.csv",
        features="results/stats/{task}/{variant}/features.csv",
        cls="results/stats/{task}/{variant}/cls.csv",
        relations="results/stats/{task}/{variant}/relations.csv",
    wildcard_constraints:
        variant="pretrained|finetuned",
    params:
        cfg=KOVALEVA_PARAMS,
        framenet=lambda wildcards, input: f"--framenet {input.framenet}" if "framenet" in input.keys() else "",
        outdir="results/stats/{task}/{variant}",
    log:
        "results/logs/kovaleva_stats/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/kovaleva_stats/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology kovaleva-stats --task {wildcards.task} --variant {wildcards.variant} --store {input.store} "
        "--words {input.words} {params.framenet} --params {params.cfg:q} --threads {threads} "
        "--outdir {params.outdir} > {log} 2>&1"


rule kovaleva_cosine:
    input:
        pretrained="results/attention/{task}/pretrained.zarr",
        finetuned="results/attention/{task}/finetuned.zarr",
        words="results/attention/{task}/words.parquet",
    output:
        cosine="results/stats/{task}/cosine.csv",
        features_diff="results/stats/{task}/features_diff.csv",
    params:
        dask=as_json({"dask": config["analysis"]["dask"]}),
    log:
        "results/logs/kovaleva_cosine/{task}.log",
    benchmark:
        "results/benchmarks/kovaleva_cosine/{task}.tsv"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology kovaleva-cosine --task {wildcards.task} --pretrained {input.pretrained} "
        "--finetuned {input.finetuned} --words {input.words} --params {params.dask:q} --threads {threads} "
        "--output {output.cosine} --features-diff {output.features_diff} > {log} 2>&1"


rule framenet_links:
    input:
        FRAMENET_DIR or [],
    output:
        links="results/stats/framenet/links.parquet",
        counts="results/stats/framenet/counts.json",
    log:
        "results/logs/framenet_links/framenet_links.log",
    benchmark:
        "results/benchmarks/framenet_links/framenet_links.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology framenet-links --framenet {input} --output {output.links} --counts {output.counts} > {log} 2>&1"


rule framenet_relations:
    input:
        unpack(_framenet_model_inputs),
    output:
        "results/stats/{task}/{variant}/relations_framenet.csv",
    wildcard_constraints:
        variant="pretrained|finetuned",
    params:
        cfg=as_json({"percentile": config["analysis"]["relations"]["percentile"],
                     "max_length": config["data"]["max_length"], "model": config["model"]}),
        model=lambda wildcards, input: input.model if "model" in input.keys() else config["model"],
    log:
        "results/logs/framenet_relations/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/framenet_relations/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology framenet-relations --task {wildcards.task} --variant {wildcards.variant} --links {input.links} "
        "--model {params.model:q} --params {params.cfg:q} --threads {threads} --output {output} > {log} 2>&1"


rule kovaleva_figures:
    input:
        stats=expand("results/stats/{{task}}/{variant}/{name}.csv", variant=KOVALEVA_VARIANTS,
                     name=["patterns", "features", "cls", "relations"]),
        cosine="results/stats/{task}/cosine.csv",
        features_diff="results/stats/{task}/features_diff.csv",
    output:
        [f"results/figures/{name}-{{task}}.png" for name in KOVALEVA_FIGURES],
    log:
        "results/logs/kovaleva_figures/{task}.log",
    benchmark:
        "results/benchmarks/kovaleva_figures/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology kovaleva-figures --task {wildcards.task} --stats-dir results/stats/{wildcards.task} "
        "--outdir results/figures > {log} 2>&1"


rule kovaleva_overview:
    input:
        patterns=expand("results/stats/{task}/{variant}/patterns.csv", task=TASK_NAMES, variant=KOVALEVA_VARIANTS),
        cosine=expand("results/stats/{task}/cosine.csv", task=TASK_NAMES),
    output:
        patterns="results/figures/patterns-tasks.png",
        cosine="results/figures/cosine-tasks.png",
    params:
        tasks=" ".join(TASK_NAMES),
    log:
        "results/logs/kovaleva_overview/kovaleva_overview.log",
    benchmark:
        "results/benchmarks/kovaleva_overview/kovaleva_overview.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology kovaleva-overview --tasks {params.tasks} --stats-dir results/stats --outdir results/figures "
        "> {log} 2>&1"


# Not a default target: a sheet of sampled maps for researchers to label (then `bertology patterns-train`).
rule patterns_sheet:
    input:
        "results/attention/{task}/finetuned.zarr",
    output:
        "results/patterns/{task}/labels.csv",
    log:
        "results/logs/patterns_sheet/{task}.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology patterns-export --store {input} --count 400 --outdir results/patterns/{wildcards.task} > {log} 2>&1"


TARGETS.extend(expand("results/stats/{task}/{variant}/{name}.csv", task=TASK_NAMES, variant=KOVALEVA_VARIANTS,
                      name=["patterns", "features", "cls", "relations"]))
TARGETS.extend(expand("results/stats/{task}/{name}.csv", task=TASK_NAMES, name=["cosine", "features_diff"]))
TARGETS.extend(expand("results/figures/{name}-{task}.png", name=KOVALEVA_FIGURES, task=TASK_NAMES))
TARGETS.extend(["results/figures/patterns-tasks.png", "results/figures/cosine-tasks.png"])
if FRAMENET_DIR:
    TARGETS.append("results/stats/framenet/counts.json")
