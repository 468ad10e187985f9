# Every per-head analysis across fine-tuning seeds (issue 26; steps: bertology.steps.seeds).
# With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed: the seed is part of the store
# variant (finetuned = s1, finetuned-seedN = seed N; rules/common.smk maps a variant to its checkpoint) and
# the outputs without a variant in their path add the seed tag (cosine-seedN.csv, ablation/{task}/heads-seedN.csv).
# The pretrained store is computed once. Only the per-seed tables below are asked for here; the rules that
# make them are the ordinary ones (attention, kovaleva, sieve, ablation, norms).
#   results/stats/{task}/seeds/{features,cls,entropy,parser,relations,sieve,cosine,disabling,importance[,norms,syntax]}.csv
#       each per-head statistic's mean, std, n over seeds and each seed's value
#   results/stats/{task}/seeds/roles.csv, role_agreement.csv   sieve roles: seeds assigning each head; Fleiss' kappa
#       and mean pairwise Jaccard of the assigned sets (all heads, and by layer)
#   results/stats/{task}/seeds/multibootstrap.csv   fine-tuned - pretrained differences (cosine, sieve bias,
#       disabling delta) with a Multi-Bootstrap interval (seeds and examples resampled together)
#   results/stats/{task}/seeds/findings.csv          which of the papers' findings hold in every seed, most, one
#   results/figures/seeds-stability-{task}.png, seeds-roles-{task}.png
SEED_TABLES = ["features", "cls", "entropy", "parser", "relations", "sieve", "cosine", "disabling", "importance"]
SEED_TABLES += (["norms"] if NORMS_ENABLED else []) + (["syntax"] if SYNTAX_FILES else [])
SEED_OUTPUTS = SEED_TABLES + ["roles", "role_agreement", "multibootstrap", "findings"]


rule seed_stats:
    input:
        **{name: expand(f"results/stats/{{{{task}}}}/{{variant}}/{name}.csv", variant=FINETUNED_VARIANTS)
           for name in ["features", "cls", "entropy", "parser", "relations", "sieve"]
           + (["norms"] if NORMS_ENABLED else [])},
        sieve_scores=expand("results/stats/{{task}}/{variant}/sieve_scores.npz", variant=FINETUNED_VARIANTS),
        pretrained_scores="results/stats/{task}/pretrained/sieve_scores.npz",
        cosine=expand("results/stats/{{task}}/cosine{seedtag}.csv", seedtag=SEED_TAGS),
        cosine_examples=expand("results/stats/{{task}}/cosine_examples{seedtag}.npz", seedtag=SEED_TAGS),
        heads=expand("results/ablation/{{task}}/heads{seedtag}.csv", seedtag=SEED_TAGS),
        ablation_examples=expand("results/ablation/{{task}}/examples{seedtag}.npz", seedtag=SEED_TAGS),
        importance=expand("results/ablation/{{task}}/importance{seedtag}.csv", seedtag=SEED_TAGS),
        pruning=expand("results/ablation/{{task}}/pruning{seedtag}.csv", seedtag=SEED_TAGS),
        # heads as parsers on the gold trees, one store per seed (rules/clark.smk), when there are gold trees
        syntax=expand("results/stats/syntax/{{task}}-finetuned{seedtag}.csv", seedtag=SEED_TAGS)
        if SYNTAX_FILES
        else [],
    output:
        **{name: f"results/stats/{{task}}/seeds/{name}.csv" for name in SEED_OUTPUTS},
        stability="results/figures/seeds-stability-{task}.png",
        role_figure="results/figures/seeds-roles-{task}.png",
    params:
        step=step("seed_stats"),
        files=step_files,
    log:
        "results/logs/seed_stats/{task}.log",
    benchmark:
        "results/benchmarks/seed_stats/{task}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# What the explorer shows of the seeds (bertology.explorer.SEED_CATALOGUE, roles.csv): none with one seed.
SEED_EXPLORER_INPUTS = (expand("results/stats/{task}/seeds/{name}.csv", task=TASK_NAMES,
                               name=["cosine", "disabling", "importance", "entropy", "sieve", "roles"])
                        if len(SEED_TAGS) > 1 else [])


# One seed (the default): nothing here, and `make run` is what it was. Two or more: every further seed's
# per-variant outputs (so a partial run still has them) and the seed tables.
if len(SEED_TAGS) > 1:
    EXTRA_VARIANTS = FINETUNED_VARIANTS[1:]
    TARGETS.extend(expand("results/attention/{task}/{variant}.zarr", task=TASK_NAMES, variant=EXTRA_VARIANTS))
    TARGETS.extend(expand("results/stats/sieve_delta{seedtag}.csv", seedtag=SEED_TAGS[1:]))
    if SYNTAX_FILES:
        TARGETS.extend(expand("results/stats/syntax/{task}-{variant}.csv", task=TASK_NAMES, variant=EXTRA_VARIANTS))
    if NORMS_ENABLED:
        TARGETS.extend(expand("results/stats/{task}/{variant}/faithfulness.csv", task=TASK_NAMES,
                              variant=EXTRA_VARIANTS))
    TARGETS.extend(expand("results/stats/{task}/seeds/{name}.csv", task=TASK_NAMES, name=SEED_OUTPUTS))
    TARGETS.extend(expand("results/figures/seeds-{kind}-{task}.png", kind=["stability", "roles"], task=TASK_NAMES))
