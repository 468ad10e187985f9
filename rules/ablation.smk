# Disabling heads and layers (Kovaleva et al. 2019, section 4.6, Figs. 8-9; DESIGN section 6).
#   results/ablation/{task}/heads.csv      every head disabled alone (uniform attention over real tokens)
#   results/ablation/{task}/layers.csv     every layer's heads disabled together
#   results/ablation/{task}/summary.csv    random-head expectation, best/worst, gains surviving BH (+ .json)
#   results/figures/ablation-heads-{task}.png, ablation-layers-{task}.png

ABLATION_PARAMS = as_json({"ablation": config["ablation"], "max_length": config["data"]["max_length"]})


rule ablation_sweep:
    input:
        model="results/models/{task}/pretrained",
        data="results/data/{task}/validation.parquet",
    output:
        heads="results/ablation/{task}/heads.csv",
        layers="results/ablation/{task}/layers.csv",
        summary="results/ablation/{task}/summary.csv",
    params:
        cfg=ABLATION_PARAMS,
    log:
        "results/logs/ablation_sweep/{task}.log",
    benchmark:
        "results/benchmarks/ablation_sweep/{task}.tsv"
    threads: 4  # scaled down to --cores by Snakemake
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,  # profiles/slurm asks for one
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology ablation-sweep --task {wildcards.task} --model {input.model} --data {input.data} "
        "--params {params.cfg:q} --heads {output.heads} --layers {output.layers} --summary {output.summary} "
        "--threads {threads} > {log} 2>&1"


rule ablation_figures:
    input:
        heads="results/ablation/{task}/heads.csv",
        layers="results/ablation/{task}/layers.csv",
    output:
        heads="results/figures/ablation-heads-{task}.png",
        layers="results/figures/ablation-layers-{task}.png",
    log:
        "results/logs/ablation_figures/{task}.log",
    benchmark:
        "results/benchmarks/ablation_figures/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology ablation-figures --task {wildcards.task} --heads {input.heads} --layers {input.layers} "
        "--out-heads {output.heads} --out-layers {output.layers} > {log} 2>&1"


TARGETS.extend(
    expand(
        [
            "results/ablation/{task}/heads.csv",
            "results/ablation/{task}/layers.csv",
            "results/ablation/{task}/summary.csv",
            "results/figures/ablation-heads-{task}.png",
            "results/figures/ablation-layers-{task}.png",
        ],
        task=TASK_NAMES,
    )
)
