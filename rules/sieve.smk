# Pande et al. 2021, the heads hypothesis (steps: bertology.steps.sieve): sieve bias scores and one-sided
# t-tests per head and role, then the paper's Figs. 3-6 and a summary (role shares, overlaps, Spearman of
# local vs syntactic bias). The scores and sieve.csv of a store come from its one read, rule store_stats
# (rules/attention.smk).


rule sieve_figures:
    input:
        **{variant: output("store_stats", "sieve", variant=variant) for variant in RUN.stores},
        # the fine-tuned model's scores (the pretrained model's when nothing is fine-tuned: train.inits [])
        scores=output("store_stats", "sieve_scores", variant=RUN.stores[-1]),
    output:
        **outputs("sieve_figures"),
    params:
        step=step("sieve_figures"),
        files=step_files("sieve_figures"),
    log:
        layout.log("sieve_figures", "{task}"),
    benchmark:
        layout.benchmark("sieve_figures", "{task}")
    threads: step_threads("sieve_figures")
    resources:
        **step_resources("sieve_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# seedtag: '' for the first fine-tuning seed, -seedN for each further one (rules/seeds.smk asks for those)
rule sieve_delta:
    input:
        pretrained=output("store_stats", "sieve", task=TASK_NAMES, variant="pretrained"),
        finetuned=output("store_stats", "sieve", task=TASK_NAMES, variant="finetuned{seedtag}"),
    output:
        **outputs("sieve_delta"),
    params:
        step=step("sieve_delta"),
        files=step_files("sieve_delta"),
    log:
        layout.log("sieve_delta", "sieve_delta{seedtag}"),
    benchmark:
        layout.benchmark("sieve_delta", "sieve_delta{seedtag}")
    threads: step_threads("sieve_delta")
    resources:
        **step_resources("sieve_delta"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule sieve_summary:
    input:
        **{variant: output("store_stats", "sieve", task=TASK_NAMES, variant=variant) for variant in RUN.stores},
        **{f"{variant}_scores": output("store_stats", "sieve_scores", task=TASK_NAMES, variant=variant)
           for variant in RUN.stores},
    output:
        **outputs("sieve_summary"),
    params:
        step=step("sieve_summary"),
        files=step_files("sieve_summary"),
    log:
        layout.log("sieve_summary"),
    benchmark:
        layout.benchmark("sieve_summary")
    threads: step_threads("sieve_summary")
    resources:
        **step_resources("sieve_summary"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

