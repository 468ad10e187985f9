# Pande et al. 2021, the heads hypothesis (steps: bertology.steps.sieve): sieve bias scores and one-sided
# t-tests per head and role, then the paper's Figs. 3-6 and a summary (role shares, overlaps, Spearman of
# local vs syntactic bias). The scores and sieve.csv of a store come from its one read, rule store_stats
# (rules/stores.smk).


rule sieve_figures:
    input:
        **{variant: path("variant_stat", variant=variant, file="sieve.csv") for variant in STORE_VARIANTS},
        scores=path("variant_stat", variant="finetuned", file="sieve_scores.npz"),
    output:
        scores=reported(path("task_figure", name="sieve-scores"), "sieve-scores"),
        overlap=reported(path("task_figure", name="sieve-overlap"), "sieve-overlap"),
        roles=reported(path("task_figure", name="sieve-roles"), "sieve-roles"),
    params:
        step=step("sieve_figures"),
        files=step_files,
    log:
        layout.log("sieve_figures", "{task}"),
    benchmark:
        layout.benchmark("sieve_figures", "{task}")
    threads: 1
    resources:
        mem_mb=3000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# seedtag: '' for the first fine-tuning seed, -seedN for each further one (rules/seeds.smk asks for those)
rule sieve_delta:
    input:
        pretrained=paths("variant_stat", task=TASK_NAMES, variant="pretrained", file="sieve.csv"),
        finetuned=paths("variant_stat", task=TASK_NAMES, variant="finetuned{seedtag}", file="sieve.csv"),
    output:
        table=path("sieve_delta"),
        figure=reported(path("sieve_delta_figure"), "sieve-delta"),
    params:
        step=step("sieve_delta"),
        files=step_files,
    log:
        layout.log("sieve_delta", "sieve_delta{seedtag}"),
    benchmark:
        layout.benchmark("sieve_delta", "sieve_delta{seedtag}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule sieve_summary:
    input:
        **{variant: paths("variant_stat", task=TASK_NAMES, variant=variant, file="sieve.csv")
           for variant in STORE_VARIANTS},
        **{f"{variant}_scores": paths("variant_stat", task=TASK_NAMES, variant=variant, file="sieve_scores.npz")
           for variant in STORE_VARIANTS},
    output:
        table=path("sieve_summary"),
    params:
        step=step("sieve_summary"),
        files=step_files,
    log:
        layout.log("sieve_summary"),
    benchmark:
        layout.benchmark("sieve_summary")
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(paths("task_figure", name=["sieve-scores", "sieve-overlap", "sieve-roles"], task=TASK_NAMES))
TARGETS.extend([path("sieve_delta", seedtag=""), path("sieve_delta_figure", seedtag=""), path("sieve_summary")])
