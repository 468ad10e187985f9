# Beyond attention weights (steps: bertology.steps.norms; docs/reference.md#norms):
#   results/stats/{task}/{variant}/norms.csv mixing.csv token_scores.parquet   value norms (Kobayashi et al. 2020),
#       context mixing (Kobayashi et al. 2021), raw/norm/rollout/flow token views (Abnar & Zuidema 2020): one pass
#       of each variant over analysis.norms.examples of the attention sample (flow on analysis.flow.examples);
#       ALTI, GlobEnc, DecompX and Value Zeroing on analysis.mixing_views.examples (token_scores.parquet, and
#       mixing_layers.parquet: each layer's own [CLS] row)
#   results/stats/{task}/finetuned/faithfulness.csv faithfulness_examples.csv importance.parquet   token ablation and
#       input x gradient of the fine-tuned classifier on the flow examples; Spearman of every view with every
#       importance per example (faithfulness_examples.csv, shown by the explorer) and summarised, with each view's
#       AOPC (deletion curve) against a random order; faithfulness_pairs.csv: every pair of views' paired difference
#   results/figures/{norms,mixing,faithfulness}-{task}.png


rule norms_views:
    input:
        unpack(_norms_inputs),
    output:
        norms=path("variant_stat", file="norms.csv"),
        mixing=path("variant_stat", file="mixing.csv"),
        scores=path("variant_stat", file="token_scores.parquet"),
        layers=path("variant_stat", file="mixing_layers.parquet"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("norms_views"),
        files=step_files,
    log:
        layout.log("norms_views", "{task}/{variant}"),
    benchmark:
        layout.benchmark("norms_views", "{task}/{variant}")
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
        sample=path("sample"),
        scores=path("variant_stat", variant="finetuned{seedtag}", file="token_scores.parquet"),
        model=path("model", init="pretrained"),
    output:
        table=path("variant_stat", variant="finetuned{seedtag}", file="faithfulness.csv"),
        examples=path("variant_stat", variant="finetuned{seedtag}", file="faithfulness_examples.csv"),
        pairs=path("variant_stat", variant="finetuned{seedtag}", file="faithfulness_pairs.csv"),
        importance=path("variant_stat", variant="finetuned{seedtag}", file="importance.parquet"),
    params:
        step=step("norms_faithfulness"),
        files=step_files,
    log:
        layout.log("norms_faithfulness", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("norms_faithfulness", "{task}{seedtag}")
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
        norms=paths("variant_stat", variant=STORE_VARIANTS, file="norms.csv"),
        mixing=paths("variant_stat", variant=STORE_VARIANTS, file="mixing.csv"),
        faithfulness=path("variant_stat", variant="finetuned", file="faithfulness.csv"),
    output:
        norms=reported(path("task_figure", name="norms"), "norms"),
        mixing=reported(path("task_figure", name="mixing"), "mixing"),
        faithfulness=reported(path("task_figure", name="faithfulness"), "faithfulness"),
    params:
        step=step("norms_figures"),
        files=step_files,
    log:
        layout.log("norms_figures", "{task}"),
    benchmark:
        layout.benchmark("norms_figures", "{task}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


if NORMS_ENABLED:
    TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant=STORE_VARIANTS,
                         file=["norms.csv", "mixing.csv", "token_scores.parquet", "mixing_layers.parquet"]))
    TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant="finetuned",
                         file=["faithfulness.csv", "faithfulness_pairs.csv"]))
    TARGETS.extend(paths("task_figure", name=["norms", "mixing", "faithfulness"], task=TASK_NAMES))
