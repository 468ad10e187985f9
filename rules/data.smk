# Data: results/data/{task}/{split}.parquet from the configured source (demo | hub | GLUE directory).
# The source file (GLUE directory, a declared task's file) is an input and the hub's revision a param, a
# declared task's declaration part of `files` (--task): editing any of them re-runs it.


rule prepare_data:
    input:
        source=_source_files,
    output:
        **outputs("prepare_data"),
    params:
        step=step("prepare_data"),
        files=step_files("prepare_data"),
        source_version=_source_version,
    log:
        layout.log("prepare_data", "{task}/{split}"),
    benchmark:
        layout.benchmark("prepare_data", "{task}/{split}")
    threads: step_threads("prepare_data")
    resources:
        **step_resources("prepare_data"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

