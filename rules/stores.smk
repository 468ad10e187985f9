# The one read of an attention store (step: bertology.steps.stores): every store analysis of the registry
# (bertology.analyses: Kovaleva's patterns/features/cls/relations, Clark's entropy/parser, Pande's sieve, ...)
# from one read of results/attention/{task}/{variant}.zarr. Its outputs, its config sections and the run's final
# outputs of its tables all come from the registry: a new store analysis needs no edit here.

rule store_stats:
    input:
        unpack(_store_stats_inputs),
    output:
        **REGISTRY.store_outputs(),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("store_stats"),
        files=step_files,
    log:
        layout.log("store_stats", "{task}/{variant}"),
    benchmark:
        layout.benchmark("store_stats", "{task}/{variant}")
    threads: 2
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(REGISTRY.store_targets(TASK_NAMES, STORE_VARIANTS))
