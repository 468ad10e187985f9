# The report: every table and figure on one self-contained page. Included last: it needs every target.
REPORT_INPUTS = list(TARGETS)


rule report:
    input:
        REPORT_INPUTS,
    output:
        "results/report.html",
    params:
        cfg=as_json(config),
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
        "bertology report --results results --params {params.cfg:q} --output {output} > {log} 2>&1"


TARGETS.append("results/report.html")
