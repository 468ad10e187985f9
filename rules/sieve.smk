# Pande et al. 2021, the heads hypothesis (steps: bertology.steps.sieve): sieve bias scores and one-sided
# t-tests per head and role, then the paper's Figs. 3-6 and a summary (role shares, overlaps, Spearman of
# local vs syntactic bias). The scores and sieve.csv of a store come from its one read, rule store_stats
# (rules/kovaleva.smk).


rule sieve_figures:
    input:
        **{variant: f"results/stats/{{task}}/{variant}/sieve.csv" for variant in STORE_VARIANTS},
        scores="results/stats/{task}/finetuned/sieve_scores.npz",
    output:
        scores="results/figures/sieve-scores-{task}.png",
        overlap="results/figures/sieve-overlap-{task}.png",
        roles="results/figures/sieve-roles-{task}.png",
    params:
        step=step("sieve_figures"),
        files=step_files,
    log:
        "results/logs/sieve_figures/{task}.log",
    benchmark:
        "results/benchmarks/sieve_figures/{task}.tsv"
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
        pretrained=expand("results/stats/{task}/pretrained/sieve.csv", task=TASK_NAMES),
        finetuned=expand("results/stats/{task}/finetuned{{seedtag}}/sieve.csv", task=TASK_NAMES),
    output:
        table="results/stats/sieve_delta{seedtag}.csv",
        figure="results/figures/sieve-delta{seedtag}.png",
    params:
        step=step("sieve_delta"),
        files=step_files,
    log:
        "results/logs/sieve_delta/sieve_delta{seedtag}.log",
    benchmark:
        "results/benchmarks/sieve_delta/sieve_delta{seedtag}.tsv"
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
        **{variant: expand(f"results/stats/{{task}}/{variant}/sieve.csv", task=TASK_NAMES)
           for variant in STORE_VARIANTS},
        **{f"{variant}_scores": expand(f"results/stats/{{task}}/{variant}/sieve_scores.npz", task=TASK_NAMES)
           for variant in STORE_VARIANTS},
    output:
        table="results/stats/sieve_summary.csv",
    params:
        step=step("sieve_summary"),
        files=step_files,
    log:
        "results/logs/sieve_summary/sieve_summary.log",
    benchmark:
        "results/benchmarks/sieve_summary/sieve_summary.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(expand("results/stats/{task}/{variant}/sieve.csv", task=TASK_NAMES, variant=STORE_VARIANTS))
TARGETS.extend(expand("results/figures/sieve-{kind}-{task}.png", kind=["scores", "overlap", "roles"],
                      task=TASK_NAMES))
TARGETS.extend(["results/stats/sieve_delta.csv", "results/figures/sieve-delta.png",
                "results/stats/sieve_summary.csv"])
