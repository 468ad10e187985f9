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
        model=path("model", init="pretrained"),
        validation=path("data", split="validation"),
    output:
        **outputs("ablation_sweep"),
    params:
        step=step("ablation_sweep"),
        files=step_files("ablation_sweep"),
    log:
        layout.log("ablation_sweep", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("ablation_sweep", "{task}{seedtag}")
    threads: step_threads("ablation_sweep")
    resources:
        **step_resources("ablation_sweep"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule ablation_figures:
    input:
        heads=output("ablation_sweep", "heads", seedtag=""),
        layers=output("ablation_sweep", "layers", seedtag=""),
        summary=output("ablation_sweep", "summary", seedtag=""),
    output:
        **outputs("ablation_figures"),
    params:
        step=step("ablation_figures"),
        files=step_files("ablation_figures"),
    log:
        layout.log("ablation_figures", "{task}"),
    benchmark:
        layout.benchmark("ablation_figures", "{task}")
    threads: step_threads("ablation_figures")
    resources:
        **step_resources("ablation_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule ablation_pruning:
    input:
        model=path("model", init="pretrained"),
        validation=path("data", split="validation"),
        # the paper computes importance on the training data; ablation.pruning.importance_split chooses
        importance_data=path("data", split=config["ablation"]["pruning"]["importance_split"]),
    output:
        **outputs("ablation_pruning"),
    params:
        step=step("ablation_pruning"),
        files=step_files("ablation_pruning"),
    log:
        layout.log("ablation_pruning", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("ablation_pruning", "{task}{seedtag}")
    threads: step_threads("ablation_pruning")
    resources:
        **step_resources("ablation_pruning"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule pruning_figures:
    input:
        importance=output("ablation_pruning", "importance", seedtag=""),
        pruning=output("ablation_pruning", "pruning", seedtag=""),
    output:
        **outputs("pruning_figures"),
    params:
        step=step("pruning_figures"),
        files=step_files("pruning_figures"),
    log:
        layout.log("pruning_figures", "{task}"),
    benchmark:
        layout.benchmark("pruning_figures", "{task}")
    threads: step_threads("pruning_figures")
    resources:
        **step_resources("pruning_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

