# A run of several models (config `models:`, docs/reference.md#models). Each model's part of the workflow is the
# Snakefile again, as a Snakemake module with that model's whole config (bertology.pipeline.modelset.model_config:
# the run's, its `train`/`data` overrides merged in) and every path a model decides moved under results/m/{name}/
# (replace_prefix: bertology.pipeline.layout.model_prefixes); its rules are named `{name}__{rule}`
# (bertology.pipeline.modelset.rule_prefix). What no model decides (results/data/: prepared data, the attention
# sample and its words, the gold sentences, FrameNet links) comes from one more module, `bertology_shared`, once
# per run: the words are parsed as far as the farthest-seeing model sees each text (attention.word_models).
# Over the models: the run's ledger, comparisons, report and explorer (rules below).
from bertology.analyses import REGISTRY
from bertology.pipeline import layout
from bertology.pipeline.modelset import model_config, model_entries, rule_prefix
from bertology.workflow.models import check_shared_rules, word_models
from bertology.pipeline.errors import UserError
from bertology.workflow.snakefile import check_config, fail, setup_environment


check_config(config, workflow.configfiles, workflow.basedir, getattr(workflow.config_settings, "config", None))


INVOCATION = setup_environment(config)


envvars:
    "BERTOLOGY_INVOCATION",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "BERTOLOGY_TRACKING_LIVE",


try:
    MODELS = model_entries(config)
except UserError as _err:
    fail(str(_err))
# each model's whole config; every one names all the run's models in attention.word_models (one words table)
MODEL_CONFIGS = {e.name: model_config(config, e) for e in MODELS}
WORD_MODELS = word_models(MODEL_CONFIGS.values())
for _c in MODEL_CONFIGS.values():
    _c["attention"]["word_models"] = WORD_MODELS
include: "handlers.smk"


# The rules whose every output lies under results/data/: computed once, by the shared module (the `use rule` lines
# below name them; check_shared_rules stops the workflow when the registry says otherwise).
SHARED_RULES = ["prepare_data", "attention_sample", "annotate_words", "demo_trees", "syntax_sentences", "framenet_links"]
check_shared_rules(SHARED_RULES, REGISTRY)


module bertology_shared:
    snakefile:
        "../Snakefile"
    config:
        # the first model's config (its shared rules read nothing a model decides but the words' cut, which names
        # every model); its jobs' MLflow runs are tagged model `shared`
        {**MODEL_CONFIGS[MODELS[0].name], "model_name": "shared"}


use rule prepare_data, attention_sample, annotate_words, demo_trees, syntax_sentences, framenet_links from bertology_shared


for _entry in MODELS:
    _module = f"bertology_model_{rule_prefix(_entry.name)}"
    _alias = rule_prefix(_entry.name)

    module:
        name:
            _module
        snakefile:
            "../Snakefile"
        config:
            MODEL_CONFIGS[_entry.name]
        replace_prefix:
            layout.model_prefixes(_entry.name)

    use rule * from _module exclude prepare_data, attention_sample, annotate_words, demo_trees, syntax_sentences, framenet_links as _alias*


def model_targets(name):
    """Every output the model named `name` makes (its module's `all`, under results/m/{name}/)."""
    return list(getattr(rules, rule_prefix(name) + "all").input)


def targets():
    """The run's final outputs: every model's, and the comparisons over them."""
    return [*(f for e in MODELS for f in model_targets(e.name)),
            *(layout.path("compare", file=file) for file in COMPARE_FILES.values())]


# The comparisons over the models (step: bertology.steps.compare; docs/reference.md#compare): Gu et al.'s sink rate,
# the best induction head, Kovaleva's pattern classes and the sieve roles per model, per-layer curves on relative
# depth. The step reads each model's results root (`roots`); the rule waits for exactly the tables it reads there
# (model_tables). results/compare/{sinks,induction,patterns,roles,depth}.csv and .png
from bertology.pipeline.configjson import sections_json
from bertology.steps.compare import FILES as COMPARE_FILES
from bertology.workflow.cli import STEPS, step_args
from bertology.workflow.models import compare_tables


rule compare:
    input:
        tables=compare_tables({e.name: model_targets(e.name) for e in MODELS}),
    output:
        **{name: layout.path("compare", file=file) for name, file in COMPARE_FILES.items()},
    params:
        config=sections_json(config, STEPS["compare"].config),
        files=lambda wildcards, output: step_args({}, {"roots": [layout.model_root(e.name) for e in MODELS]}, output),
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
        "bertology compare --config {params.config:q} {params.files} --threads {threads} > {log} 2>&1"
