# Clark et al. 2019, "What Does BERT Look At?" (steps: bertology.steps.clark).
#   results/stats/{task}/{variant}/entropy.csv parser.csv   written by store_stats in its one read of the store
#   results/figures/{entropy,parser}-{task}.png              entropy by layer; best head per relation (spaCy arcs)
#   gold trees (analysis.syntax.conllu, plus the demo's own trees when data.source is demo):
#   results/data/syntax/demo.conllu                          the demo grammar's sentences with their gold trees
#   results/attention/syntax/sample.parquet words.parquet sentences.csv counts.json   one example per sentence
#   results/attention/syntax/{model}.zarr                    model: pretrained | {task}-finetuned (same schema)
#   results/stats/syntax/{model}.csv (+ .json)               heads as parsers on the gold trees
#   results/figures/parser-syntax.png, results/stats/syntax/best_heads.csv   every model's best head per relation
DEMO_TREES = "results/data/syntax/demo.conllu"
SYNTAX_FILES = list(config["analysis"]["syntax"]["conllu"]) + ([DEMO_TREES] if config["data"]["source"] == "demo" else [])
SYNTAX_MODELS = ["pretrained"] + [f"{t}-finetuned" for t in TASK_NAMES]


rule clark_figures:
    input:
        entropy=expand("results/stats/{{task}}/{variant}/entropy.csv", variant=STORE_VARIANTS),
        parser=expand("results/stats/{{task}}/{variant}/parser.csv", variant=STORE_VARIANTS),
    output:
        entropy="results/figures/entropy-{task}.png",
        parser="results/figures/parser-{task}.png",
    params:
        step=step("clark_figures"),
        files=step_files,
    log:
        "results/logs/clark_figures/{task}.log",
    benchmark:
        "results/benchmarks/clark_figures/{task}.tsv"
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
        "results/logs/demo_trees/demo_trees.log",
    benchmark:
        "results/benchmarks/demo_trees/demo_trees.tsv"
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
        sample="results/attention/syntax/sample.parquet",
        words="results/attention/syntax/words.parquet",
        sentences="results/attention/syntax/sentences.csv",
        counts="results/attention/syntax/counts.json",
    params:
        step=step("syntax_sentences"),
        files=step_files,
    log:
        "results/logs/syntax_sentences/syntax_sentences.log",
    benchmark:
        "results/benchmarks/syntax_sentences/syntax_sentences.tsv"
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
        store=directory("results/attention/syntax/{model}.zarr"),
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("extract_syntax"),
        files=step_files,
    log:
        "results/logs/extract_syntax/{model}.log",
    benchmark:
        "results/benchmarks/extract_syntax/{model}.tsv"
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
        store="results/attention/syntax/{model}.zarr",
        words="results/attention/syntax/words.parquet",
    output:
        table="results/stats/syntax/{model}.csv",
        summary="results/stats/syntax/{model}.json",
    wildcard_constraints:
        model=SYNTAX_MODEL_REGEX,
    params:
        step=step("syntax_parser"),
        files=step_files,
    log:
        "results/logs/syntax_parser/{model}.log",
    benchmark:
        "results/benchmarks/syntax_parser/{model}.tsv"
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
        tables=expand("results/stats/syntax/{model}.csv", model=SYNTAX_MODELS),
    output:
        figure="results/figures/parser-syntax.png",
        best="results/stats/syntax/best_heads.csv",
    params:
        step=step("syntax_figures"),
        files=step_files,
    log:
        "results/logs/syntax_figures/syntax_figures.log",
    benchmark:
        "results/benchmarks/syntax_figures/syntax_figures.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(expand("results/stats/{task}/{variant}/{name}.csv", task=TASK_NAMES, variant=STORE_VARIANTS,
                      name=["entropy", "parser"]))
TARGETS.extend(expand("results/figures/{name}-{task}.png", name=["entropy", "parser"], task=TASK_NAMES))
if SYNTAX_FILES:
    TARGETS.extend(expand("results/stats/syntax/{model}.csv", model=SYNTAX_MODELS))
    TARGETS.append("results/figures/parser-syntax.png")
