# A run of several models (config `models:`, docs/reference.md#models). Each model's part of the workflow is the
# Snakefile again, as a Snakemake module with that model's whole config (bertology.pipeline.modelset.model_config:
# the run's, its `train`/`data` overrides merged in) and every path a model decides moved under results/m/{name}/
# (replace_prefix: bertology.pipeline.layout.model_prefixes); its rules are named `{name}__{rule}`
# (bertology.pipeline.modelset.rule_prefix). What no model decides (results/data/: prepared data, the attention
# sample and its words, the gold sentences, FrameNet links) comes from one more module, `bertology_shared`, once
# per run: the words are parsed as far as the farthest-seeing model sees each text (attention.word_models).
# Over the models: the run's comparisons, ledger, report and explorer (rules/compare.smk).
from bertology.analyses import REGISTRY
from bertology.pipeline import layout
from bertology.pipeline.modelset import model_config, model_entries, rule_prefix
from bertology.workflow.cli import step_args
from bertology.workflow.models import check_shared_rules, word_models
from bertology.pipeline.errors import UserError
from bertology.workflow.snakefile import fail


include: "setup.smk"


try:
    MODELS = model_entries(config)
except UserError as _err:
    fail(str(_err))
# each model's whole config; every one names all the run's models in attention.word_models (one words table)
MODEL_CONFIGS = {e.name: model_config(config, e) for e in MODELS}
WORD_MODELS = word_models(MODEL_CONFIGS.values())
for _c in MODEL_CONFIGS.values():
    _c["attention"]["word_models"] = WORD_MODELS
# The rules writing pages (removed at start when stale: rules/handlers.smk): every model's and the run's.
PAGE_RULES = [f"{rule_prefix(e.name)}{page}" for e in MODELS for page in ("report", "explorer")]
PAGE_RULES += ["models_report", "models_explorer"]


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


def step_files(inputs=None):
    """The `files` param of a run's rule: its named inputs (or `inputs`, files that are not the rule's inputs, such as
    the models' results roots) and outputs as --input/--output arguments."""
    return lambda wildcards, input, output: step_args({}, input if inputs is None else inputs, output)


def outputs(rule):
    """The named outputs of `rule` (one of the run's own, over its models: rules/compare.smk) as the registry
    declares them (bertology.registry.Registry.outputs); none is a directory or flagged for Snakemake's report."""
    return REGISTRY.outputs(rule)


def model_files(key, **values):
    """One path of layout template `key` under each model's results root, in the models' order."""
    return [layout.path(key, root=layout.model_root(e.name), **values) for e in MODELS]


def targets():
    """The run's final outputs: every model's, and the run's own over them."""
    return [*(f for e in MODELS for f in model_targets(e.name)), *rules.compare.output, *rules.models_ledger.output,
            *rules.models_explorer.output, *rules.models_report.output]


include: "compare.smk"
