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
        **outputs("norms_views"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("norms_views"),
        files=step_files("norms_views"),
    log:
        layout.log("norms_views", "{task}/{variant}"),
    benchmark:
        layout.benchmark("norms_views", "{task}/{variant}")
    threads: step_threads("norms_views")
    resources:
        **step_resources("norms_views"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# seedtag: '' for the first fine-tuning seed, -seedN for each further one (rules/seeds.smk asks for those)
rule norms_faithfulness:
    input:
        sample=path("sample"),
        scores=output("norms_views", "scores", variant="finetuned{seedtag}"),
        model=path("model", init="pretrained"),
    output:
        **outputs("norms_faithfulness"),
    params:
        step=step("norms_faithfulness"),
        files=step_files("norms_faithfulness"),
    log:
        layout.log("norms_faithfulness", "{task}{seedtag}"),
    benchmark:
        layout.benchmark("norms_faithfulness", "{task}{seedtag}")
    threads: step_threads("norms_faithfulness")
    resources:
        **step_resources("norms_faithfulness"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule norms_figures:
    input:
        norms=output("norms_views", "norms", variant=RUN.stores),
        mixing=output("norms_views", "mixing", variant=RUN.stores),
        # the fine-tuned model's (none when nothing is fine-tuned: train.inits [])
        faithfulness=output("norms_faithfulness", "table", seedtag=RUN.values("first_seed")),
    output:
        **outputs("norms_figures"),
    params:
        step=step("norms_figures"),
        files=step_files("norms_figures"),
    log:
        layout.log("norms_figures", "{task}"),
    benchmark:
        layout.benchmark("norms_figures", "{task}")
    threads: step_threads("norms_figures")
    resources:
        **step_resources("norms_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

