# The head explorer (one offline page: statistics on the layer x head grid, maps of a seeded sample of
# examples, dependency arcs) and the report (every table and figure on one self-contained page, linking
# the explorer). Included last: they need every target.


rule explorer:
    input:
        reads=explorer_inputs(TASK_NAMES)["required"],
        # optional reads the workflow produces (the importance map is shown when present)
        importance=paths("ablation", task=TASK_NAMES, name="importance", seedtag=""),
        norms=paths("variant_stat", task=TASK_NAMES, variant=STORE_VARIANTS, file=["norms.csv", "token_scores.parquet"])
        if NORMS_ENABLED
        else [],
        # the example view's token importance and the per-example agreement of each view with it
        faithfulness=paths("variant_stat", task=TASK_NAMES, variant="finetuned", file=list(TOKEN_VIEW_FILES))
        if NORMS_ENABLED
        else [],
        seeds=SEED_EXPLORER_INPUTS,  # the per-seed statistics (rules/seeds.smk; none with one seed)
    output:
        page=path("explorer"),
    params:
        step=step("explorer"),
        files=step_files,
    log:
        layout.log("explorer"),
    benchmark:
        layout.benchmark("explorer")
    threads: 1
    resources:
        mem_mb=3000,
        runtime=20,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.append(path("explorer"))

# The report shows its declared inputs and nothing else (no crawling of results/): every target, so it shows
# every table and figure the run makes (a rule file adds what the report should show to TARGETS) and re-runs
# when any of them changes.
REPORT_INPUTS = list(TARGETS)


rule report:
    input:
        targets=REPORT_INPUTS,
    output:
        report=path("report"),
    params:
        step=step("report"),
        files=step_files,
    log:
        layout.log("report"),
    benchmark:
        layout.benchmark("report")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.append(path("report"))
