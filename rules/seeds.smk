# Every per-head analysis across fine-tuning seeds (steps: bertology.steps.seeds).
# With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed: the seed is part of the store
# variant (finetuned = s1, finetuned-seedN = seed N; rules/inputs.smk maps a variant to its checkpoint) and
# the outputs without a variant in their path add the seed tag (cosine-seedN.csv, ablation/{task}/heads-seedN.csv).
# The pretrained store is computed once. Only the per-seed tables below are asked for here; the rules that
# make them are the ordinary ones (attention, kovaleva, sieve, ablation, norms).
#   results/stats/{task}/seeds/{name}.csv   for every table the registry compares across seeds (features, cls,
#       entropy, parser, relations, sieve, cosine, disabling, importance[, norms, syntax]): each per-head
#       statistic's mean, std, n over seeds and each seed's value
#   results/stats/{task}/seeds/roles.csv, role_agreement.csv   sieve roles: seeds assigning each head; Fleiss' kappa
#       and mean pairwise Jaccard of the assigned sets (all heads, and by layer)
#   results/stats/{task}/seeds/multibootstrap.csv   fine-tuned - pretrained differences (cosine, sieve bias,
#       disabling delta) with a Multi-Bootstrap interval (seeds and examples resampled together)
#   results/stats/{task}/seeds/findings.csv: written by the claims rule (rules/claims.smk), a view of the ledger
#   results/figures/seeds-stability-{task}.png, seeds-roles-{task}.png
# The per-head tables over seeds are every table the registry compares across seeds (bertology.registry.AcrossSeeds:
# features, cls, entropy, parser, relations, sieve, cosine, disabling, importance, norms, syntax, ...), those of a
# switched-off setting left out (Registry.seed_inputs, Registry.outputs).


rule seed_stats:
    input:
        **REGISTRY.seed_inputs(FINETUNED_VARIANTS, SEED_TAGS, RUN.enabled),
        sieve_scores=output("store_stats", "sieve_scores", variant=FINETUNED_VARIANTS),
        pretrained_scores=output("store_stats", "sieve_scores", variant="pretrained"),
        # the token views' faithfulness per seed (norm analyses): Multi-Bootstrap rows in multibootstrap.csv
        faithfulness_examples=output("norms_faithfulness", "examples", seedtag=SEED_TAGS) if NORMS_ENABLED else [],
        cosine_examples=output("kovaleva_cosine", "examples", seedtag=SEED_TAGS),
        ablation_examples=output("ablation_sweep", "examples", seedtag=SEED_TAGS),
    output:
        **outputs("seed_stats"),
    params:
        step=step("seed_stats"),
        files=step_files("seed_stats"),
    log:
        layout.log("seed_stats", "{task}"),
    benchmark:
        layout.benchmark("seed_stats", "{task}")
    threads: step_threads("seed_stats")
    resources:
        **step_resources("seed_stats"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

