# The input functions of the rules (snakemake --lint wants functions and rules apart): what a job reads that its
# wildcards decide (the split's source file, the variant's model, the config's optional inputs).
from bertology.data import source_version
from bertology.pipeline.tasks import declaration_file

# The hub dataset's revision (empty for other sources): a new revision re-runs the data rule.
SOURCE_VERSION = source_version(config["data"]["source"])
# results/data/{task}/declaration.json of each declared task, rewritten only when its declaration changes: the data
# rule's input
DECLARATION_FILES = {name: declaration_file(name, text, layout.ROOT) for name, text in TASK_JSON["whole"].items()}


def _source_version(wildcards):
    """The hub dataset's revision (a GLUE hub source, or a declared task's hub id without a pinned revision;
    empty otherwise): a new revision re-runs the data rule."""
    from bertology.data import declared_version

    if wildcards.task in DECLARED:
        return declared_version(DECLARED[wildcards.task])
    return SOURCE_VERSION


def _source_files(wildcards):
    """The file a split is read from (GLUE directories): editing it re-runs the data rule and what follows."""
    from bertology.data import source_files

    files = source_files(config["data"]["source"], wildcards.task, wildcards.split, DECLARED.get(wildcards.task))
    return [*files, *([DECLARATION_FILES[wildcards.task]] if wildcards.task in DECLARATION_FILES else [])]


def _score_model(wildcards):
    """The fine-tuned model (of the score's seed) a score needs (none for the untrained-head `pretrained` variant)."""
    model = layout.model_dir(wildcards.task, wildcards.variant, wildcards.seedtag)
    return [] if model is None else model


def _store_stats_inputs(wildcards):
    """The store and its words; the FrameNet relations and the pattern classifier when the config names them."""
    inputs = {
        "store": path("store", task=wildcards.task, variant=wildcards.variant),
        "words": path("words", task=wildcards.task),
    }
    if config["analysis"]["relations"]["framenet"] and get_task(wildcards.task).annotated:
        inputs["framenet"] = output("framenet_relations", "table", task=wildcards.task, variant=wildcards.variant)
    if config["analysis"]["patterns"]["classifier"] != "rule":
        inputs["classifier"] = config["analysis"]["patterns"]["classifier"]
    return inputs


def _variant_model(wildcards):
    """The one variant -> checkpoint mapping (bertology.pipeline.layout.variant_model): a fine-tuned store variant
    (`finetuned`, `finetuned-seedN`) -> its model directory, as {"model": path}; {} for `pretrained` (the config's
    `model`)."""
    model = layout.variant_model(wildcards.task, wildcards.variant)
    return {} if model is None else {"model": model}


def _framenet_model_inputs(wildcards):
    return {"links": path("framenet_links"), **_variant_model(wildcards)}


def _extract_inputs(wildcards):
    return {
        "sample": path("sample", task=wildcards.task),
        "words": path("words", task=wildcards.task),
        **_variant_model(wildcards),
    }


def _norms_inputs(wildcards):
    """The attention sample, the training split (token frequencies), the variant's attention store (its value
    norms) and, for a fine-tuned variant, its model."""
    return {
        "sample": path("sample", task=wildcards.task),
        "train": path("data", task=wildcards.task, split="train"),
        "store": path("store", task=wildcards.task, variant=wildcards.variant),
        **_variant_model(wildcards),
    }


def _syntax_extract_inputs(wildcards):
    """The gold sentences and, for a `{task}-finetuned[-seedN]` model, its fine-tuned model directory."""
    inputs = {"sample": path("syntax_sample"), "words": path("syntax_words")}
    model = layout.syntax_model(wildcards.model)  # TASK-finetuned[-seedN] -> its checkpoint
    if model is not None:
        inputs["model"] = model
    return inputs
