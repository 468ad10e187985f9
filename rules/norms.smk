# Beyond attention weights (steps: bertology.steps.norms; docs/reference.md#norms):
#   results/stats/{task}/{variant}/norms.csv mixing.csv token_scores.parquet   value norms (Kobayashi et al. 2020),
#       context mixing (Kobayashi et al. 2021), raw/norm/rollout/flow token views (Abnar & Zuidema 2020): one pass
#       of each variant over analysis.norms.examples of the attention sample (flow on analysis.flow.examples)
#   results/stats/{task}/finetuned/faithfulness.csv faithfulness_examples.csv importance.parquet   token ablation and
#       input x gradient of the fine-tuned classifier on the flow examples; Spearman of every view with every
#       importance per example (faithfulness_examples.csv, shown by the explorer) and summarised
#   results/figures/{norms,mixing,faithfulness}-{task}.png


rule norms_views:
    input:
        unpack(_norms_inputs),
    output:
        norms="results/stats/{task}/{variant}/norms.csv",
        mixing="results/stats/{task}/{variant}/mixing.csv",
        scores="results/stats/{task}/{variant}/token_scores.parquet",
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("norms_views"),
        files=step_files,
    log:
        "results/logs/norms_views/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/norms_views/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# seedtag: '' for the first fine-tuning seed, -seedN for each further one (rules/seeds.smk asks for those)
rule norms_faithfulness:
    input:
        sample="results/attention/{task}/sample.parquet",
        scores="results/stats/{task}/finetuned{seedtag}/token_scores.parquet",
        model="results/models/{task}/pretrained{seedtag}",
    output:
        table="results/stats/{task}/finetuned{seedtag}/faithfulness.csv",
        examples="results/stats/{task}/finetuned{seedtag}/faithfulness_examples.csv",
        importance="results/stats/{task}/finetuned{seedtag}/importance.parquet",
    params:
        step=step("norms_faithfulness"),
        files=step_files,
    log:
        "results/logs/norms_faithfulness/{task}{seedtag}.log",
    benchmark:
        "results/benchmarks/norms_faithfulness/{task}{seedtag}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule norms_figures:
    input:
        norms=expand("results/stats/{{task}}/{variant}/norms.csv", variant=STORE_VARIANTS),
        mixing=expand("results/stats/{{task}}/{variant}/mixing.csv", variant=STORE_VARIANTS),
        faithfulness="results/stats/{task}/finetuned/faithfulness.csv",
    output:
        norms="results/figures/norms-{task}.png",
        mixing="results/figures/mixing-{task}.png",
        faithfulness="results/figures/faithfulness-{task}.png",
    params:
        step=step("norms_figures"),
        files=step_files,
    log:
        "results/logs/norms_figures/{task}.log",
    benchmark:
        "results/benchmarks/norms_figures/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


if NORMS_ENABLED:
    TARGETS.extend(expand("results/stats/{task}/{variant}/{name}", task=TASK_NAMES, variant=STORE_VARIANTS,
                          name=["norms.csv", "mixing.csv", "token_scores.parquet"]))
    TARGETS.extend(expand("results/stats/{task}/finetuned/faithfulness.csv", task=TASK_NAMES))
    TARGETS.extend(expand("results/figures/{name}-{task}.png", name=["norms", "mixing", "faithfulness"],
                          task=TASK_NAMES))
