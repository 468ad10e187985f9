# The rules of a run of several models over its models (rules/models.smk): the comparisons, the run's ledger, explorer
# and report. Each runs its step (bertology.workflow.cli STEPS) with the config sections the step declares, its named
# inputs and outputs (`step_files`), its outputs as the registry declares them (`outputs`: bertology.analyses.compare,
# bertology.analyses.ledger); its log and benchmark under results/logs/, results/benchmarks/.
from bertology.pipeline.configjson import sections_json
from bertology.workflow.cli import STEPS
from bertology.workflow.models import compare_tables

RUN_STEP = "bertology {params.step} --config {params.config:q} {params.files} --threads {threads} > {log} 2>&1"


# The comparisons over the models (step: bertology.steps.compare; docs/reference.md#compare): Gu et al.'s sink rate,
# the best induction head, Kovaleva's pattern classes and the sieve roles per model, per-layer curves on relative
# depth. The step reads each model's results root (`roots`); the rule waits for exactly the tables it reads there
# (compare_tables: bertology.analyses.compare.SOURCES). results/compare/{sinks,induction,patterns,roles,depth}.csv
# and .png


rule compare:
    input:
        tables=compare_tables({e.name: model_targets(e.name) for e in MODELS}),
    output:
        **outputs("compare"),
    params:
        step="compare",
        config=sections_json(config, STEPS["compare"].config),
        files=step_files({"roots": [layout.model_root(e.name) for e in MODELS]}),
    log:
        layout.log("compare"),
    benchmark:
        layout.benchmark("compare")
    threads: STEPS["compare"].threads
    resources:
        **STEPS["compare"].resources,
    conda:
        "../envs/bertology.yaml"
    shell:
        RUN_STEP


# The run's ledger (step: bertology.steps.models; docs/reference.md#models-ledger): every model's claims.csv in the
# models' order, the forest plot with each claim's rows grouped by model, and per claim in how many models it holds,
# is contradicted, inconclusive or not computed. results/claims.csv, claims.md, figures/claims.png,
# compare/claims.csv


rule models_ledger:
    input:
        ledgers=model_files("claims"),
    output:
        **outputs("models_ledger"),
    params:
        step="models_ledger",
        config=sections_json(config, STEPS["models_ledger"].config),
        files=step_files(),
    log:
        layout.log("models_ledger"),
    benchmark:
        layout.benchmark("models_ledger")
    threads: STEPS["models_ledger"].threads
    resources:
        **STEPS["models_ledger"].resources,
    conda:
        "../envs/bertology.yaml"
    shell:
        RUN_STEP


# The run's explorer: one page switching between the models' explorers, one beside another. results/explorer.html


rule models_explorer:
    input:
        explorers=model_files("explorer"),
        reports=model_files("report"),
    output:
        **outputs("models_explorer"),
    params:
        step="models_explorer",
        config=sections_json(config, STEPS["models_explorer"].config),
        files=step_files(),
    log:
        layout.log("models_explorer"),
    benchmark:
        layout.benchmark("models_explorer")
    threads: STEPS["models_explorer"].threads
    resources:
        **STEPS["models_explorer"].resources,
    conda:
        "../envs/bertology.yaml"
    shell:
        RUN_STEP


# The run's report: the claims matrix over models x tasks, the counts across models, the forest plot, the
# comparisons, and each model's own report and explorer. results/report.html


rule models_report:
    input:
        targets=[
            *rules.models_ledger.output,
            *rules.compare.output,
            *model_files("report"),
            *model_files("explorer"),
            *rules.models_explorer.output,
        ],
    output:
        **outputs("models_report"),
    params:
        step="models_report",
        config=sections_json(config, STEPS["models_report"].config),
        files=step_files(),
    log:
        layout.log("models_report"),
    benchmark:
        layout.benchmark("models_report")
    threads: STEPS["models_report"].threads
    resources:
        **STEPS["models_report"].resources,
    conda:
        "../envs/bertology.yaml"
    shell:
        RUN_STEP
