# Data: results/data/{task}/{split}.parquet from the configured source (demo | hub | GLUE directory).
# The source file (GLUE directory) is an input and the hub's revision a param: editing either re-runs it.


rule prepare_data:
    input:
        source=_source_files,
    output:
        table="results/data/{task}/{split}.parquet",
        skipped="results/data/{task}/{split}.skipped.csv",
    params:
        step=step("prepare_data"),
        files=step_files,
        source_version=SOURCE_VERSION,
    log:
        "results/logs/prepare_data/{task}/{split}.log",
    benchmark:
        "results/benchmarks/prepare_data/{task}/{split}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(expand("results/data/{task}/{split}.parquet", task=TASK_NAMES, split=SPLITS))
