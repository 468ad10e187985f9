# The head explorer (one offline page: statistics on the layer x head grid, maps of a seeded sample of
# examples, dependency arcs) and the report (every table and figure on one self-contained page, linking
# the explorer).
from bertology.explorer import explorer_inputs


rule explorer:
    input:
        # every file the page reads (bertology.explorer.explorer_inputs): stores, words, the fine-tuned
        # tokenizer, data splits, sieve scores, every registry statistic's table; the norm analyses' tables
        # and token views with analysis.norms.enabled, the tables over seeds with two or more train.seeds
        reads=explorer_inputs(TASK_NAMES, norms=NORMS_ENABLED, seeds=len(SEED_TAGS) > 1, decoder=DECODER,
                              finetuned=bool(INITS))["required"],
        # the claims ledger: each claim with the heads behind it highlighted in the grid
        claims=output("claims", "ledger"),
    output:
        **outputs("explorer"),
    params:
        step=step("explorer"),
        files=step_files("explorer"),
    log:
        layout.log("explorer"),
    benchmark:
        layout.benchmark("explorer")
    threads: step_threads("explorer")
    resources:
        **step_resources("explorer"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# The report shows its declared inputs and nothing else (no crawling of results/): every other target of the run
# (rules/steps.smk `targets`), so it shows every table and figure the run makes and re-runs when any of them
# changes.


rule report:
    input:
        targets=[t for t in targets() if t != output("report", "report")],
    output:
        **outputs("report"),
    params:
        step=step("report"),
        files=step_files("report"),
    log:
        layout.log("report"),
    benchmark:
        layout.benchmark("report")
    threads: step_threads("report")
    resources:
        **step_resources("report"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

