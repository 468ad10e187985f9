# Pande et al. 2021, the heads hypothesis: sieve bias scores and one-sided t-tests per head and role,
# then the paper's Figs. 3-6 and a summary (role shares, overlaps, Spearman of local vs syntactic bias).
SIEVE_VARIANTS = ["pretrained", "finetuned"]


rule sieve:
    input:
        store="results/attention/{task}/{variant}.zarr",
        words="results/attention/{task}/words.parquet",
    output:
        csv="results/stats/{task}/{variant}/sieve.csv",
        scores="results/stats/{task}/{variant}/sieve_scores.npz",
    wildcard_constraints:
        variant="pretrained|finetuned",
    params:
        sieve=as_json(config["analysis"]["sieve"]),
        dask=as_json(config["analysis"]["dask"]),
    log:
        "results/logs/sieve/{task}/{variant}.log",
    benchmark:
        "results/benchmarks/sieve/{task}/{variant}.tsv"
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology sieve --task {wildcards.task} --variant {wildcards.variant} --store {input.store} "
        "--words {input.words} --params {params.sieve:q} --dask {params.dask:q} --threads {threads} "
        "--out {output.csv} --scores {output.scores} > {log} 2>&1"


rule sieve_figures:
    input:
        pretrained="results/stats/{task}/pretrained/sieve.csv",
        finetuned="results/stats/{task}/finetuned/sieve.csv",
        scores="results/stats/{task}/finetuned/sieve_scores.npz",
    output:
        scores="results/figures/sieve-scores-{task}.png",
        overlap="results/figures/sieve-overlap-{task}.png",
        roles="results/figures/sieve-roles-{task}.png",
    params:
        sieve=as_json(config["analysis"]["sieve"]),
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
        "bertology sieve-figures --task {wildcards.task} --sieve pretrained={input.pretrained} "
        "finetuned={input.finetuned} --scores {input.scores} --params {params.sieve:q} "
        "--out-scores {output.scores} --out-overlap {output.overlap} --out-roles {output.roles} > {log} 2>&1"


rule sieve_delta:
    input:
        expand("results/stats/{task}/{variant}/sieve.csv", task=TASK_NAMES, variant=SIEVE_VARIANTS),
    output:
        csv="results/stats/sieve_delta.csv",
        figure="results/figures/sieve-delta.png",
    params:
        tasks=" ".join(TASK_NAMES),
    log:
        "results/logs/sieve_delta/sieve_delta.log",
    benchmark:
        "results/benchmarks/sieve_delta/sieve_delta.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        "bertology sieve-delta --tasks {params.tasks} --stats-dir results/stats --out {output.csv} "
        "--figure {output.figure} > {log} 2>&1"


rule sieve_summary:
    input:
        expand("results/stats/{task}/{variant}/{name}", task=TASK_NAMES, variant=SIEVE_VARIANTS,
               name=["sieve.csv", "sieve_scores.npz"]),
    output:
        "results/stats/sieve_summary.csv",
    params:
        tasks=" ".join(TASK_NAMES),
        variants=" ".join(SIEVE_VARIANTS),
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
        "bertology sieve-summary --tasks {params.tasks} --variants {params.variants} --stats-dir results/stats "
        "--out {output} > {log} 2>&1"


TARGETS.extend(expand("results/stats/{task}/{variant}/sieve.csv", task=TASK_NAMES, variant=SIEVE_VARIANTS))
TARGETS.extend(expand("results/figures/sieve-{kind}-{task}.png", kind=["scores", "overlap", "roles"],
                      task=TASK_NAMES))
TARGETS.extend(["results/stats/sieve_delta.csv", "results/figures/sieve-delta.png",
                "results/stats/sieve_summary.csv"])
