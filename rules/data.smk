# Data: results/data/{task}/{split}.parquet from the configured source (demo | hub | GLUE directory).


rule prepare_data:
    output:
        table="results/data/{task}/{split}.parquet",
    params:
        step=step("prepare_data"),
        files=step_files,
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
