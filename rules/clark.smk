# Clark et al. 2019, "What Does BERT Look At?" (steps: bertology.steps.clark).
#   results/stats/{task}/{variant}/entropy.csv parser.csv   written by store_stats in its one read of the store
#                                                            (rules/attention.smk)
#   results/figures/{entropy,parser}-{task}.png              entropy by layer; best head per relation (spaCy arcs)
#   gold trees (analysis.syntax.conllu, plus the demo's own trees when data.source is demo):
#   results/data/syntax/demo.conllu                          the demo grammar's sentences with their gold trees
#   results/data/syntax/sample.parquet words.parquet sentences.csv counts.json   one example per sentence
#   results/attention/syntax/{model}.zarr                    model: pretrained | {task}-finetuned (same schema)
#   results/stats/syntax/{model}.csv (+ .json)               heads as parsers on the gold trees
#   results/figures/parser-syntax.png, results/stats/syntax/best_heads.csv   every model's best head per relation


rule clark_figures:
    input:
        entropy=output("store_stats", "entropy", variant=RUN.stores),
        parser=output("store_stats", "parser", variant=RUN.stores),
    output:
        **outputs("clark_figures"),
    params:
        step=step("clark_figures"),
        files=step_files("clark_figures"),
    log:
        layout.log("clark_figures", "{task}"),
    benchmark:
        layout.benchmark("clark_figures", "{task}")
    threads: step_threads("clark_figures")
    resources:
        **step_resources("clark_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule demo_trees:
    output:
        **outputs("demo_trees"),
    params:
        step=step("demo_trees"),
        files=step_files("demo_trees"),
    log:
        layout.log("demo_trees"),
    benchmark:
        layout.benchmark("demo_trees")
    threads: step_threads("demo_trees")
    resources:
        **step_resources("demo_trees"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_sentences:
    input:
        conllu=SYNTAX_FILES,
    output:
        **outputs("syntax_sentences"),
    params:
        step=step("syntax_sentences"),
        files=step_files("syntax_sentences"),
    log:
        layout.log("syntax_sentences"),
    benchmark:
        layout.benchmark("syntax_sentences")
    threads: step_threads("syntax_sentences")
    resources:
        **step_resources("syntax_sentences"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule extract_syntax:
    input:
        unpack(_syntax_extract_inputs),
    output:
        **outputs("extract_syntax"),
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("extract_syntax"),
        files=step_files("extract_syntax"),
    log:
        layout.log("extract_syntax", "{model}"),
    benchmark:
        layout.benchmark("extract_syntax", "{model}")
    threads: step_threads("extract_syntax")
    resources:
        **step_resources("extract_syntax"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_parser:
    input:
        store=path("syntax_store"),
        words=path("syntax_words"),
    output:
        **outputs("syntax_parser"),
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("syntax_parser"),
        files=step_files("syntax_parser"),
    log:
        layout.log("syntax_parser", "{model}"),
    benchmark:
        layout.benchmark("syntax_parser", "{model}")
    threads: step_threads("syntax_parser")
    resources:
        **step_resources("syntax_parser"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_figures:
    input:
        tables=output("syntax_parser", "table", model=list(RUN.values("syntax_models"))),
    output:
        **outputs("syntax_figures"),
    params:
        step=step("syntax_figures"),
        files=step_files("syntax_figures"),
    log:
        layout.log("syntax_figures"),
    benchmark:
        layout.benchmark("syntax_figures")
    threads: step_threads("syntax_figures")
    resources:
        **step_resources("syntax_figures"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

