# Kovaleva et al. 2019, sections 4.1-4.5, over the attention stores (steps: bertology.steps.kovaleva).
#   results/stats/{task}/{variant}/patterns.csv features.csv cls.csv relations.csv   rule store_stats: one read
#     of one store gives them, Clark et al.'s entropy.csv and parser.csv and Pande et al.'s sieve.csv and
#     sieve_scores.npz (bertology.steps.stores; the outputs are bertology.registry.store_outputs())
#   results/stats/{task}/cosine.csv, features_diff.csv  pretrained vs fine-tuned, both stores read once, aligned
#   results/stats/framenet/links.parquet, counts.json   FrameNet sentences that survive the paper's filters
#   results/stats/{task}/{variant}/relations_framenet.csv   FrameNet link scores (merged into relations.csv)
#   results/figures/{patterns,relations,cosine,features,cls}-{task}.png, {patterns,cosine}-tasks.png
from bertology.registry import store_outputs

KOVALEVA_TABLES = ["patterns", "features", "cls", "relations"]
KOVALEVA_FIGURES = ["patterns", "relations", "cosine", "features", "cls"]
FRAMENET_DIR = config["analysis"]["relations"]["framenet"]
STORE_OUTPUTS = store_outputs()


# One read of a store for every store analysis of the registry (bertology.registry.store_analyses: Kovaleva's
# patterns/features/cls/relations, Clark's entropy/parser, Pande's sieve): its outputs are the registry's.
rule store_stats:
    input:
        unpack(_kovaleva_stats_inputs),
    output:
        **STORE_OUTPUTS,
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("store_stats"),
        files=step_files,
    log:
        "results/logs/store_stats/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/store_stats/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# seedtag: '' compares the first fine-tuning seed, -seedN seed N (rules/seeds.smk), with the one pretrained store
rule kovaleva_cosine:
    input:
        pretrained="results/attention/{task}/pretrained.zarr",
        finetuned="results/attention/{task}/finetuned{seedtag}.zarr",
        words="results/attention/{task}/words.parquet",
    output:
        cosine="results/stats/{task}/cosine{seedtag}.csv",
        features_diff="results/stats/{task}/features_diff{seedtag}.csv",
        examples="results/stats/{task}/cosine_examples{seedtag}.npz",
    params:
        step=step("kovaleva_cosine"),
        files=step_files,
    log:
        "results/logs/kovaleva_cosine/{task}{seedtag}.log",
    benchmark:
        "results/benchmarks/kovaleva_cosine/{task}{seedtag}.tsv"
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
        links="results/stats/framenet/links.parquet",
        counts="results/stats/framenet/counts.json",
    params:
        step=step("framenet_links"),
        files=step_files,
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
        STEP


rule framenet_relations:
    input:
        unpack(_framenet_model_inputs),
    output:
        table="results/stats/{task}/{variant}/relations_framenet.csv",
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("framenet_relations"),
        files=step_files,
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
        STEP


rule kovaleva_figures:
    input:
        **{name: expand(f"results/stats/{{{{task}}}}/{{variant}}/{name}.csv", variant=STORE_VARIANTS)
           for name in KOVALEVA_TABLES},
        cosine="results/stats/{task}/cosine.csv",
        features_diff="results/stats/{task}/features_diff.csv",
    output:
        **{name: f"results/figures/{name}-{{task}}.png" for name in KOVALEVA_FIGURES},
    params:
        step=step("kovaleva_figures"),
        files=step_files,
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
        STEP


rule kovaleva_overview:
    input:
        **{variant: expand(f"results/stats/{{task}}/{variant}/patterns.csv", task=TASK_NAMES)
           for variant in STORE_VARIANTS},
        cosine=expand("results/stats/{task}/cosine.csv", task=TASK_NAMES),
    output:
        patterns="results/figures/patterns-tasks.png",
        cosine="results/figures/cosine-tasks.png",
    params:
        step=step("kovaleva_overview"),
        files=step_files,
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
        STEP


# Not a default target: a sheet of sampled maps for researchers to label (then `bertology patterns-train`).
rule patterns_sheet:
    input:
        store="results/attention/{task}/finetuned.zarr",
    output:
        sheet="results/patterns/{task}/labels.csv",
        images=directory("results/patterns/{task}/images"),
    params:
        step=step("patterns_sheet"),
        files=step_files,
    log:
        "results/logs/patterns_sheet/{task}.log",
    benchmark:
        "results/benchmarks/patterns_sheet/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(expand("results/stats/{task}/{variant}/{name}.csv", task=TASK_NAMES, variant=STORE_VARIANTS,
                      name=KOVALEVA_TABLES))
TARGETS.extend(expand("results/stats/{task}/{name}.csv", task=TASK_NAMES, name=["cosine", "features_diff"]))
TARGETS.extend(expand("results/figures/{name}-{task}.png", name=KOVALEVA_FIGURES, task=TASK_NAMES))
TARGETS.extend(["results/figures/patterns-tasks.png", "results/figures/cosine-tasks.png"])
if FRAMENET_DIR:
    TARGETS.append("results/stats/framenet/counts.json")
