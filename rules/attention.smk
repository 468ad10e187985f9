# The attention store (docs/reference.md#store), its sample and its word annotations.
#   results/data/{task}/sample.parquet         the seeded sample of the attention split, in store order
#   results/data/{task}/words.parquet          spaCy words of the sample (POS, tag, dep, head)
#   results/attention/{task}/{variant}.zarr         variant: pretrained | finetuned
# An extraction writes {variant}.zarr.partial chunk by chunk (outside the declared output, so Snakemake's
# clean-up keeps it) and resumes from its last complete chunk; the final store appears only when complete.


rule attention_sample:
    input:
        data=path("data", split=config["attention"]["split"]),
    output:
        **outputs("attention_sample"),
    params:
        step=step("attention_sample"),
        files=step_files("attention_sample"),
    log:
        layout.log("attention_sample", "{task}"),
    benchmark:
        layout.benchmark("attention_sample", "{task}")
    threads: step_threads("attention_sample")
    resources:
        **step_resources("attention_sample"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule annotate_words:
    input:
        sample=path("sample"),
    output:
        **outputs("annotate_words"),
    params:
        step=step("annotate_words"),
        files=step_files("annotate_words"),
    log:
        layout.log("annotate_words", "{task}"),
    benchmark:
        layout.benchmark("annotate_words", "{task}")
    threads: step_threads("annotate_words")
    resources:
        **step_resources("annotate_words"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule extract_attention:
    input:
        unpack(_extract_inputs),
    output:
        **outputs("extract_attention"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("extract_attention"),
        files=step_files("extract_attention"),
        **cache_params("extract_attention"),
    cache: CACHING  # snakemake --cache: shared across working directories (rules/cache.smk)
    log:
        layout.log("extract_attention", "{task}/{variant}"),
    benchmark:
        layout.benchmark("extract_attention", "{task}/{variant}")
    threads: step_threads("extract_attention")
    resources:
        **step_resources("extract_attention"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


without_benchmark_when_cached(rules.extract_attention)


# The one read of an attention store (step: bertology.steps.stores): every store analysis of the registry
# (bertology.analyses: Kovaleva's patterns/features/cls/relations, Clark's entropy/parser, Pande's sieve, ...)
# from one read of results/attention/{task}/{variant}.zarr. Its outputs, its config sections and the run's final
# outputs of its tables all come from the registry: a new store analysis needs no edit here.

rule store_stats:
    input:
        unpack(_store_stats_inputs),
    output:
        **outputs("store_stats"),
    wildcard_constraints:
        variant=STORE_VARIANT_REGEX,
    params:
        step=step("store_stats"),
        files=step_files("store_stats"),
    log:
        layout.log("store_stats", "{task}/{variant}"),
    benchmark:
        layout.benchmark("store_stats", "{task}/{variant}")
    threads: step_threads("store_stats")
    resources:
        **step_resources("store_stats"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

