# Disabling heads and layers (Kovaleva et al. 2019, section 4.6, Figs. 8-9; docs/reference.md#disabling).
#   results/ablation/{task}/heads.csv      every head disabled alone (uniform attention over real tokens)
#   results/ablation/{task}/layers.csv     every layer's heads disabled together
#   results/ablation/{task}/summary.csv    random-head expectation, best/worst, gains surviving BH
#   results/ablation/{task}/summary.json   the same as counts, the verdict in words, the column meanings
#   results/figures/ablation-heads-{task}.png, ablation-layers-{task}.png
# Head importance and pruning (Michel et al. 2019; docs/reference.md#importance):
#   results/ablation/{task}/importance.csv  layer, head, importance (E|dL/d gate|, l2-normalised per layer)
#   results/ablation/{task}/pruning.csv     the metric with 0..100% of heads pruned, by importance and at random
#   results/figures/importance-{task}.png, pruning-{task}.png


# seedtag: '' for the first fine-tuning seed, -seedN for each further one (rules/seeds.smk asks for those)
rule ablation_sweep:
    input:
        model="results/models/{task}/pretrained{seedtag}",
        validation="results/data/{task}/validation.parquet",
    output:
        heads="results/ablation/{task}/heads{seedtag}.csv",
        layers="results/ablation/{task}/layers{seedtag}.csv",
        summary="results/ablation/{task}/summary{seedtag}.csv",
        info="results/ablation/{task}/summary{seedtag}.json",
        examples="results/ablation/{task}/examples{seedtag}.npz",
    params:
        step=step("ablation_sweep"),
        files=step_files,
    log:
        "results/logs/ablation_sweep/{task}{seedtag}.log",
    benchmark:
        "results/benchmarks/ablation_sweep/{task}{seedtag}.tsv"
    threads: 4  # capped to --cores locally, to max-threads in profiles/slurm
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,  # the `&gpu` line of profiles/slurm asks for one on a GPU partition
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule ablation_figures:
    input:
        heads="results/ablation/{task}/heads.csv",
        layers="results/ablation/{task}/layers.csv",
        summary="results/ablation/{task}/summary.csv",
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


rule ablation_pruning:
    input:
        model="results/models/{task}/pretrained{seedtag}",
        validation="results/data/{task}/validation.parquet",
        # the paper computes importance on the training data; ablation.pruning.importance_split chooses
        importance_data="results/data/{task}/"
        + config["ablation"]["pruning"]["importance_split"]
        + ".parquet",
    output:
        importance="results/ablation/{task}/importance{seedtag}.csv",
        pruning="results/ablation/{task}/pruning{seedtag}.csv",
    params:
        step=step("ablation_pruning"),
        files=step_files,
    log:
        "results/logs/ablation_pruning/{task}{seedtag}.log",
    benchmark:
        "results/benchmarks/ablation_pruning/{task}{seedtag}.tsv"
    threads: 4  # capped to --cores locally, to max-threads in profiles/slurm
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,  # the `&gpu` line of profiles/slurm asks for one on a GPU partition
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule pruning_figures:
    input:
        importance="results/ablation/{task}/importance.csv",
        pruning="results/ablation/{task}/pruning.csv",
    output:
        importance="results/figures/importance-{task}.png",
        pruning="results/figures/pruning-{task}.png",
    params:
        step=step("pruning_figures"),
        files=step_files,
    log:
        "results/logs/pruning_figures/{task}.log",
    benchmark:
        "results/benchmarks/pruning_figures/{task}.tsv"
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
            "results/ablation/{task}/importance.csv",
            "results/ablation/{task}/pruning.csv",
            "results/figures/importance-{task}.png",
            "results/figures/pruning-{task}.png",
        ],
        task=TASK_NAMES,
    )
)
