# Data: results/data/{task}/{split}.parquet from the configured source (demo | hub | GLUE directory).


rule prepare_data:
    output:
        "results/data/{task}/{split}.parquet",
    params:
        data=as_json(config["data"]),
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
        "bertology prepare-data --task {wildcards.task} --split {wildcards.split} "
        "--params {params.data:q} --output {output} > {log} 2>&1"


TARGETS.extend(expand("results/data/{task}/{split}.parquet", task=TASK_NAMES, split=SPLITS))
