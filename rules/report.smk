# The report: every table and figure on one self-contained page. Included last: it needs every target.
# The step shows what it finds in the directory of its output (results/); every target is an input, so
# the report re-runs when any of them changes.
REPORT_INPUTS = list(TARGETS)


rule report:
    input:
        targets=REPORT_INPUTS,
    output:
        report="results/report.html",
    params:
        step=step("report"),
    log:
        "results/logs/report/report.log",
    benchmark:
        "results/benchmarks/report/report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.append("results/report.html")
