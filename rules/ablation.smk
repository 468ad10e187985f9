# Disabling heads and layers (Kovaleva et al. 2019, section 4.6, Figs. 8-9; DESIGN section 6).
#   results/ablation/{task}/heads.csv      every head disabled alone (uniform attention over real tokens)
#   results/ablation/{task}/layers.csv     every layer's heads disabled together
#   results/ablation/{task}/summary.csv    random-head expectation, best/worst, gains surviving BH
#   results/ablation/{task}/summary.json   the same as counts, the verdict in words, the column meanings
#   results/figures/ablation-heads-{task}.png, ablation-layers-{task}.png


rule ablation_sweep:
    input:
        model="results/models/{task}/pretrained",
        validation="results/data/{task}/validation.parquet",
    output:
        heads="results/ablation/{task}/heads.csv",
        layers="results/ablation/{task}/layers.csv",
        summary="results/ablation/{task}/summary.csv",
        info="results/ablation/{task}/summary.json",
    params:
        step=step("ablation_sweep"),
        files=step_files,
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
        STEP


rule ablation_figures:
    input:
        heads="results/ablation/{task}/heads.csv",
        layers="results/ablation/{task}/layers.csv",
    output:
        heads="results/figures/ablation-heads-{task}.png",
        layers="results/figures/ablation-layers-{task}.png",
    params:
        step=step("ablation_figures"),
        files=step_files,
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
        STEP


TARGETS.extend(
    expand(
        [
            "results/ablation/{task}/heads.csv",
            "results/ablation/{task}/layers.csv",
            "results/ablation/{task}/summary.csv",
            "results/ablation/{task}/summary.json",
            "results/figures/ablation-heads-{task}.png",
            "results/figures/ablation-layers-{task}.png",
        ],
        task=TASK_NAMES,
    )
)
