# Every per-head analysis across fine-tuning seeds (steps: bertology.steps.seeds).
# With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed: the seed is part of the store
# variant (finetuned = s1, finetuned-seedN = seed N; rules/common.smk maps a variant to its checkpoint) and
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
# switched-off setting left out; then the seeds analysis's own tables but findings.csv (the claims rule's).
from pathlib import PurePosixPath

SEED_CONDITIONS = [c for c, on in (("norms", NORMS_ENABLED), ("gold_trees", bool(SYNTAX_FILES))) if on]
SEED_INPUTS = REGISTRY.seed_inputs(FINETUNED_VARIANTS, SEED_TAGS, SEED_CONDITIONS)
SEED_OUTPUTS = list(SEED_INPUTS) + [PurePosixPath(t.path).stem for t in REGISTRY.analysis("seeds").tables
                                    if PurePosixPath(t.path).stem != "findings"]


rule seed_stats:
    input:
        **SEED_INPUTS,
        sieve_scores=paths("variant_stat", variant=FINETUNED_VARIANTS, file="sieve_scores.npz"),
        pretrained_scores=path("variant_stat", variant="pretrained", file="sieve_scores.npz"),
        # the token views' faithfulness per seed (norm analyses): Multi-Bootstrap rows in multibootstrap.csv
        faithfulness_examples=paths("variant_stat", variant=FINETUNED_VARIANTS, file="faithfulness_examples.csv")
        if NORMS_ENABLED
        else [],
        cosine_examples=paths("cosine_examples", seedtag=SEED_TAGS),
        ablation_examples=paths("ablation_examples", seedtag=SEED_TAGS),
    output:
        **{name: path("seed_stat", name=name) for name in SEED_OUTPUTS},
        stability=reported(path("task_figure", name="seeds-stability"), "seeds-stability"),
        role_figure=reported(path("task_figure", name="seeds-roles"), "seeds-roles"),
    params:
        step=step("seed_stats"),
        files=step_files,
    log:
        layout.log("seed_stats", "{task}"),
    benchmark:
        layout.benchmark("seed_stats", "{task}")
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# One seed (the default): nothing here, and `make run` is what it was. Two or more: every further seed's
# per-variant outputs (so a partial run still has them) and the seed tables.
if len(SEED_TAGS) > 1:
    EXTRA_VARIANTS = FINETUNED_VARIANTS[1:]
    TARGETS.extend(paths("store", task=TASK_NAMES, variant=EXTRA_VARIANTS))
    TARGETS.extend(paths("sieve_delta", seedtag=SEED_TAGS[1:]))
    TARGETS.extend(paths("sieve_delta_figure", seedtag=SEED_TAGS[1:]))
    if SYNTAX_FILES:
        TARGETS.extend(paths("syntax_stat", model=[f"{task}-{variant}" for task in TASK_NAMES
                                                   for variant in EXTRA_VARIANTS]))
    if NORMS_ENABLED:
        TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant=EXTRA_VARIANTS,
                             file=["norms.csv", "mixing.csv", "token_scores.parquet", "faithfulness.csv"]))
    TARGETS.extend(paths("seed_stat", task=TASK_NAMES, name=SEED_OUTPUTS))
    TARGETS.extend(paths("task_figure", name=["seeds-stability", "seeds-roles"], task=TASK_NAMES))
