# Kovaleva et al. 2019, sections 4.1-4.5, over the attention stores (steps: bertology.steps.kovaleva).
#   results/stats/{task}/{variant}/patterns.csv features.csv cls.csv relations.csv   written by store_stats in its
#     one read of the store (rules/stores.smk)
#   results/stats/{task}/cosine.csv, features_diff.csv  pretrained vs fine-tuned, both stores read once, aligned
#   results/stats/framenet/links.parquet, counts.json   FrameNet sentences that survive the paper's filters
#   results/stats/{task}/{variant}/relations_framenet.csv   FrameNet link scores (merged into relations.csv)
#   results/figures/{patterns,relations,cosine,features,cls}-{task}.png, {patterns,cosine}-tasks.png
KOVALEVA_TABLES = ["patterns", "features", "cls", "relations"]  # the figures' inputs
KOVALEVA_FIGURES = ["patterns", "relations", "cosine", "features", "cls"]
FRAMENET_DIR = config["analysis"]["relations"]["framenet"]


# seedtag: '' compares the first fine-tuning seed, -seedN seed N (rules/seeds.smk), with the one pretrained store
rule kovaleva_cosine:
    input:
        pretrained=path("store", variant="pretrained"),
        finetuned=path("store", variant="finetuned{seedtag}"),
        words=path("words"),
    output:
        cosine=path("cosine"),
        features_diff=path("features_diff"),
        examples=path("cosine_examples"),
    params:
        step=step("kovaleva_cosine"),
        files=words_step_files,
    log:
        layout.log("kovaleva_cosine", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("kovaleva_cosine", "{task}{seedtag}")
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule framenet_links:
    input:
        release=FRAMENET_DIR or [],
    output:
        links=path("framenet_links"),
        counts=path("framenet_counts"),
    params:
        step=step("framenet_links"),
        files=step_files,
    log:
        layout.log("framenet_links"),
    benchmark:
        layout.benchmark("framenet_links")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule framenet_relations:
    input:
        unpack(_framenet_model_inputs),
    output:
        table=path("variant_stat", file="relations_framenet.csv"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("framenet_relations"),
        files=step_files,
    log:
        layout.log("framenet_relations", "{task}/{variant}"),
    benchmark:
        layout.benchmark("framenet_relations", "{task}/{variant}")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule kovaleva_figures:
    input:
        **{name: paths("variant_stat", variant=STORE_VARIANTS, file=f"{name}.csv") for name in KOVALEVA_TABLES},
        cosine=path("cosine", seedtag=""),
        features_diff=path("features_diff", seedtag=""),
    output:
        **{name: reported(path("task_figure", name=name), name) for name in KOVALEVA_FIGURES},
    params:
        step=step("kovaleva_figures"),
        files=step_files,
    log:
        layout.log("kovaleva_figures", "{task}"),
    benchmark:
        layout.benchmark("kovaleva_figures", "{task}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule kovaleva_overview:
    input:
        **{variant: paths("variant_stat", task=TASK_NAMES, variant=variant, file="patterns.csv")
           for variant in STORE_VARIANTS},
        cosine=paths("cosine", task=TASK_NAMES, seedtag=""),
    output:
        patterns=reported(path("figure", name="patterns-tasks"), "patterns-tasks"),
        cosine=reported(path("figure", name="cosine-tasks"), "cosine-tasks"),
    params:
        step=step("kovaleva_overview"),
        files=step_files,
    log:
        layout.log("kovaleva_overview"),
    benchmark:
        layout.benchmark("kovaleva_overview")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# Not a default target: a sheet of sampled maps for researchers to label (then `bertology patterns-train`).
rule patterns_sheet:
    input:
        store=path("store", variant="finetuned"),
    output:
        sheet=path("patterns_labels"),
        images=directory(path("patterns_images")),
    params:
        step=step("patterns_sheet"),
        files=step_files,
    log:
        layout.log("patterns_sheet", "{task}"),
    benchmark:
        layout.benchmark("patterns_sheet", "{task}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


for _task in TASK_NAMES:
    TARGETS.extend([path("cosine", task=_task, seedtag=""), path("features_diff", task=_task, seedtag="")])
TARGETS.extend(paths("task_figure", name=KOVALEVA_FIGURES, task=TASK_NAMES))
TARGETS.extend([path("figure", name="patterns-tasks"), path("figure", name="cosine-tasks")])
if FRAMENET_DIR:
    TARGETS.append(path("framenet_counts"))
