# Clark et al. 2019, "What Does BERT Look At?" (steps: bertology.steps.clark).
#   results/stats/{task}/{variant}/entropy.csv parser.csv   written by store_stats in its one read of the store
#                                                            (rules/stores.smk)
#   results/figures/{entropy,parser}-{task}.png              entropy by layer; best head per relation (spaCy arcs)
#   gold trees (analysis.syntax.conllu, plus the demo's own trees when data.source is demo):
#   results/data/syntax/demo.conllu                          the demo grammar's sentences with their gold trees
#   results/attention/syntax/sample.parquet words.parquet sentences.csv counts.json   one example per sentence
#   results/attention/syntax/{model}.zarr                    model: pretrained | {task}-finetuned (same schema)
#   results/stats/syntax/{model}.csv (+ .json)               heads as parsers on the gold trees
#   results/figures/parser-syntax.png, results/stats/syntax/best_heads.csv   every model's best head per relation
DEMO_TREES = path("demo_trees")
SYNTAX_FILES = list(config["analysis"]["syntax"]["conllu"]) + ([DEMO_TREES] if config["data"]["source"] == "demo" else [])
SYNTAX_MODELS = ["pretrained"] + [f"{t}-finetuned" for t in TASK_NAMES]


rule clark_figures:
    input:
        entropy=paths("variant_stat", variant=STORE_VARIANTS, file="entropy.csv"),
        parser=paths("variant_stat", variant=STORE_VARIANTS, file="parser.csv"),
    output:
        entropy=reported(path("task_figure", name="entropy"), "entropy"),
        parser=reported(path("task_figure", name="parser"), "parser"),
    params:
        step=step("clark_figures"),
        files=step_files,
    log:
        layout.log("clark_figures", "{task}"),
    benchmark:
        layout.benchmark("clark_figures", "{task}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule demo_trees:
    output:
        conllu=DEMO_TREES,
    params:
        step=step("demo_trees"),
        files=step_files,
    log:
        layout.log("demo_trees"),
    benchmark:
        layout.benchmark("demo_trees")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_sentences:
    input:
        conllu=SYNTAX_FILES,
    output:
        sample=path("syntax_sample"),
        words=path("syntax_words"),
        sentences=path("syntax_sentences"),
        counts=path("syntax_counts"),
    params:
        step=step("syntax_sentences"),
        files=step_files,
    log:
        layout.log("syntax_sentences"),
    benchmark:
        layout.benchmark("syntax_sentences")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule extract_syntax:
    input:
        unpack(_syntax_extract_inputs),
    output:
        store=directory(path("syntax_store")),
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("extract_syntax"),
        files=step_files,
    log:
        layout.log("extract_syntax", "{model}"),
    benchmark:
        layout.benchmark("extract_syntax", "{model}")
    threads: 4  # capped to --cores locally, to max-threads in profiles/slurm
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_parser:
    input:
        store=path("syntax_store"),
        words=path("syntax_words"),
    output:
        table=path("syntax_stat"),
        summary=path("syntax_summary"),
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("syntax_parser"),
        files=step_files,
    log:
        layout.log("syntax_parser", "{model}"),
    benchmark:
        layout.benchmark("syntax_parser", "{model}")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule syntax_figures:
    input:
        tables=paths("syntax_stat", model=SYNTAX_MODELS),
    output:
        figure=reported(path("figure", name="parser-syntax"), "parser-syntax"),
        best=path("syntax_best"),
    params:
        step=step("syntax_figures"),
        files=step_files,
    log:
        layout.log("syntax_figures"),
    benchmark:
        layout.benchmark("syntax_figures")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(paths("task_figure", name=["entropy", "parser"], task=TASK_NAMES))
if SYNTAX_FILES:
    TARGETS.extend(paths("syntax_stat", model=SYNTAX_MODELS))
    TARGETS.extend([path("figure", name="parser-syntax"), path("syntax_best")])
