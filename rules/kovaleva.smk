# Kovaleva et al. 2019, sections 4.1-4.5, over the attention stores (steps: bertology.steps.kovaleva).
#   results/stats/{task}/{variant}/patterns.csv features.csv cls.csv relations.csv   written by store_stats in its
#     one read of the store (rules/attention.smk)
#   results/stats/{task}/cosine.csv, features_diff.csv  pretrained vs fine-tuned, both stores read once, aligned
#   results/data/framenet/links.parquet, counts.json   FrameNet sentences that survive the paper's filters
#   results/stats/{task}/{variant}/relations_framenet.csv   FrameNet link scores (merged into relations.csv)
#   results/figures/{patterns,relations,cosine,features,cls}-{task}.png, {patterns,cosine}-tasks.png


# seedtag: '' compares the first fine-tuning seed, -seedN seed N (rules/seeds.smk), with the one pretrained store
rule kovaleva_cosine:
    input:
        pretrained=path("store", variant="pretrained"),
        finetuned=path("store", variant="finetuned{seedtag}"),
        words=path("words"),
    output:
        **outputs("kovaleva_cosine"),
    params:
        step=step("kovaleva_cosine"),
        files=step_files("kovaleva_cosine"),
    log:
        layout.log("kovaleva_cosine", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("kovaleva_cosine", "{task}{seedtag}")
    threads: step_threads("kovaleva_cosine")
    resources:
        **step_resources("kovaleva_cosine"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule framenet_links:
    input:
        release=FRAMENET_DIR or [],
    output:
        **outputs("framenet_links"),
    params:
        step=step("framenet_links"),
        files=step_files("framenet_links"),
    log:
        layout.log("framenet_links"),
    benchmark:
        layout.benchmark("framenet_links")
    threads: step_threads("framenet_links")
    resources:
        **step_resources("framenet_links"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule framenet_relations:
    input:
        unpack(_framenet_model_inputs),
    output:
        **outputs("framenet_relations"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("framenet_relations"),
        files=step_files("framenet_relations"),
    log:
        layout.log("framenet_relations", "{task}/{variant}"),
    benchmark:
        layout.benchmark("framenet_relations", "{task}/{variant}")
    threads: step_threads("framenet_relations")
    resources:
        **step_resources("framenet_relations"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule kovaleva_figures:
    input:
        **{name: output("store_stats", name, variant=RUN.stores) for name in ("patterns", "features", "cls", "relations")},
        # the fine-tuned model's change (none when nothing is fine-tuned: train.inits [])
        cosine=output("kovaleva_cosine", "cosine", seedtag=RUN.values("first_seed")),
        features_diff=output("kovaleva_cosine", "features_diff", seedtag=RUN.values("first_seed")),
    output:
        **outputs("kovaleva_figures"),
    params:
        step=step("kovaleva_figures"),
        files=step_files("kovaleva_figures"),
    log:
        layout.log("kovaleva_figures", "{task}"),
    benchmark:
        layout.benchmark("kovaleva_figures", "{task}")
    threads: step_threads("kovaleva_figures")
    resources:
        **step_resources("kovaleva_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule kovaleva_overview:
    input:
        **{variant: output("store_stats", "patterns", task=TASK_NAMES, variant=[variant]) for variant in RUN.stores},
        cosine=output("kovaleva_cosine", "cosine", task=TASK_NAMES, seedtag=RUN.values("first_seed")),
    output:
        **outputs("kovaleva_overview"),
    params:
        step=step("kovaleva_overview"),
        files=step_files("kovaleva_overview"),
    log:
        layout.log("kovaleva_overview"),
    benchmark:
        layout.benchmark("kovaleva_overview")
    threads: step_threads("kovaleva_overview")
    resources:
        **step_resources("kovaleva_overview"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# Not a default target: a sheet of sampled maps for researchers to label (then `bertology patterns-train`).
rule patterns_sheet:
    input:
        store=path("store", variant="finetuned"),
    output:
        **outputs("patterns_sheet"),
    params:
        step=step("patterns_sheet"),
        files=step_files("patterns_sheet"),
    log:
        layout.log("patterns_sheet", "{task}"),
    benchmark:
        layout.benchmark("patterns_sheet", "{task}")
    threads: step_threads("patterns_sheet")
    resources:
        **step_resources("patterns_sheet"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

