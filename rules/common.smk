# Shared set-up: config validated once, the run's values (RUN), the one way a rule calls its step and names its
# outputs (the registry's declarations, bertology.analyses), the MLflow invocation.
import json
import os
import shlex
import sys

from bertology.pipeline import layout
from bertology.analyses import REGISTRY
from bertology.workflow.cli import STEPS, step_args, task_args
from bertology.pipeline.config import sections_json
from bertology.data import source_version
from bertology.claims.ledger import required_inputs as claims_inputs
from bertology.explorer import explorer_inputs
from bertology.analyses.capability import model_capabilities
from bertology.pipeline.layout import path, paths
from bertology.registry import Run
from bertology.pipeline.seedtags import (SEED_TAG_REGEX, STORE_VARIANT_REGEX, SYNTAX_MODEL_REGEX, configured_seeds,
                             finetuned_variants, seed_tags)
from bertology.pipeline.tasks import (SCORE_VARIANTS, SPLITS, STORE_VARIANTS, TASKS, VARIANT_INIT, declaration_file, declarations, declared_pipeline,
                             get_task, register, task_param)
from bertology.workflow.snakefile import check_config, setup_environment
from bertology.report.native import report_flags


def reported(output, name):
    """An output flagged for Snakemake's own report (snakemake --report report.zip): its category (the paper), its
    subcategory (the report section's title) and its caption (report/captions/, the registry's section text), by the
    output's figure name without the task, or table1, claims, report (bertology.report.native.report_flags)."""
    flags = report_flags(name)
    caption = os.path.join(workflow.basedir, flags["caption"]) if flags["caption"] else None
    return report(output, caption=caption, category=flags["category"], subcategory=flags["subcategory"])


# Snakemake's validate fills the schema's defaults (the only place they live); on failure one line names
# every bad key and the allowed values (no traceback: bertology.workflow.snakefile.fail). Before that, each config file
# read (config.yaml, --configfile, the profiles') is refused in one line if it repeats a key or is an alias bomb.
# The values of `--config` (strings, when nested) get the schema's types: --config 'data={"max_length": 64}'.
check_config(config, workflow.configfiles, workflow.basedir, getattr(workflow.config_settings, "config", None))


INVOCATION = setup_environment(config)

# The hub dataset's revision (empty for other sources): a new revision re-runs the data rule.
SOURCE_VERSION = source_version(config["data"]["source"])


envvars:
    "BERTOLOGY_INVOCATION",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "BERTOLOGY_TRACKING_LIVE",


# Declared tasks (a mapping in `tasks:`): known to get_task here, and handed to each job that reads one as
# --task JSON (step_files): the data rule gets the whole declaration, later steps what they read of it
# (bertology.pipeline.tasks.task_param), so a changed declaration re-runs exactly the jobs that read what changed.
DECLARED = declarations(config["tasks"])
PIPELINES = {name: declared_pipeline(decl, config) for name, decl in DECLARED.items()}
for _name, _decl in DECLARED.items():
    register(task_param(_decl, PIPELINES[_name]))
# what a job's --task gets of a declared task (bertology.registry.Step.task): plain, words, or the whole declaration
TASK_JSON = {
    "plain": {n: json.dumps(task_param(d, PIPELINES[n], words=False), sort_keys=True) for n, d in DECLARED.items()},
    "words": {n: json.dumps(task_param(d, PIPELINES[n]), sort_keys=True) for n, d in DECLARED.items()},
}
DECLARATIONS = {name: json.dumps(decl, sort_keys=True) for name, decl in DECLARED.items()}
# results/data/{task}/declaration.json, rewritten only when a declaration changes: the data rule's input
DECLARATION_FILES = {name: declaration_file(name, text, layout.ROOT) for name, text in DECLARATIONS.items()}
TASK_NAMES = [e["name"] if isinstance(e, dict) else e for e in config["tasks"]]
# The norm analyses run when asked for and when the model's layers are ones value norms are computed for
# (norms.values.attention_blocks; otherwise onstart says why in one line and the rest of the workflow runs).
# Decided once per model and remembered under .bertology/capability/ (bertology.analyses.capability): reading the
# Snakefile imports neither torch nor transformers.
NORMS_ENABLED = bool(config["analysis"]["norms"]["enabled"]) and model_capabilities(config["model"])["norms"] is None
# A decoder (causal attention: GPT-2, Llama, Qwen2, Mistral, ...) also gets the decoder probe (rules/decoders.smk)
# and the ledger's decoder claims (bertology.models.loading.model_kind, decided with the capabilities above).
MODEL_KIND = model_capabilities(config["model"])["kind"]
DECODER = MODEL_KIND == "decoder"
PAIR_TASKS = [t for t in TASK_NAMES if get_task(t).is_pair]
INITS = list(config["train"]["inits"])
# The variants scored: `pretrained` (untrained head) and the fine-tuned variant of every configured init.
SCORED_VARIANTS = [v for v in SCORE_VARIANTS if v not in VARIANT_INIT or VARIANT_INIT[v] in INITS]
# Path tags of the fine-tuning seeds: '' for the first (train.seed: the plain paths, read by every
# analysis), '-seedN' for each further one of train.seeds.
SEED_TAGS = seed_tags(configured_seeds(config["train"]))
# Every fine-tuned analysis runs once per seed: the seed is part of the store variant's name (bertology.pipeline.seedtags):
# `finetuned` (the first seed), `finetuned-seedN`; `pretrained` has no fine-tuning seed and is computed once.
FINETUNED_VARIANTS = finetuned_variants(SEED_TAGS)
# Gold trees for heads as parsers (Clark et al.): the configured CoNLL-U files and, on the demo data, its own trees.
DEMO_TREES = path("demo_trees")
SYNTAX_FILES = list(config["analysis"]["syntax"]["conllu"]) + ([DEMO_TREES] if config["data"]["source"] == "demo" else [])
FRAMENET_DIR = config["analysis"]["relations"]["framenet"]

# What this run computes: the values of the wildcards and the settings switched on (bertology.registry.CONDITIONS).
# Every rule's outputs (`outputs`) and the run's targets (`targets`) are expanded from the registry with it.
RUN = Run(
    tasks=tuple(TASK_NAMES), splits=tuple(SPLITS), stores=tuple(STORE_VARIANTS), inits=tuple(INITS),
    seedtags=tuple(SEED_TAGS), finetuned=tuple(FINETUNED_VARIANTS),
    enabled=frozenset(c for c, on in (("norms", NORMS_ENABLED), ("gold_trees", bool(SYNTAX_FILES)),
                                      ("seeds", len(SEED_TAGS) > 1), ("framenet", bool(FRAMENET_DIR)),
                                      ("decoder", DECODER), ("random", "random" in INITS)) if on),
)


def outputs(rule):
    """The rule's named outputs, as the registry declares them (bertology.registry.Registry.outputs), with
    Snakemake's directory() and the report flag (`reported`) applied where declared."""
    return REGISTRY.outputs(rule, RUN, directory=directory, report=reported)


def output(rule, name, **values):
    """One declared output of a rule as another rule's input, fields in `values` filled (a list gives one path
    per value)."""
    return REGISTRY.output(rule, name, **values)


def targets(run=RUN):
    """The run's final outputs (what `all` asks for): every declared output the run wants (Registry.targets)."""
    return REGISTRY.targets(run)


# `snakemake --cache` with SNAKEMAKE_OUTPUT_CACHE=DIR (docs/guide.md, "Reuse across experiments"): fine-tuned models
# and attention stores (`cache: True`) are shared through DIR by every working directory. What the params do
# not say on their own, the code that computes an output and the model's own files, enters their key then
# (bertology.workflow.provenance), and only then: a run without the cache never re-runs a job for an edit elsewhere.
CACHING = getattr(workflow.workflow_settings, "cache", None) is not None
if CACHING:
    # bertology.pipeline.outputcache: the cache readable at start (one line otherwise); each cached job that has to run checks
    # it can store its output before computing (BERTOLOGY_OUTPUT_CACHE); entries get a shared cache's modes
    # (group-writable directories at most, not Snakemake's 0666/0777) and the cache directory's group.
    import os as _os
    from bertology.pipeline.outputcache import CACHE_ENV, CACHING_ENV, check_cache_dir, share_permissions
    from bertology.workflow.snakefile import fail as _fail

    if (_why := check_cache_dir(_os.environ.get(CACHE_ENV))) is not None:
        _fail(_why)
    _os.environ[CACHING_ENV] = _os.environ[CACHE_ENV]
    share_permissions()


def cache_params(name):
    """The cached rule's extra params under --cache (code and model versions); none otherwise."""
    if not CACHING:
        return {}
    from bertology.workflow.provenance import code_version, model_version

    return {"code_version": code_version(name), "model_version": model_version(config["model"])}


def without_benchmark_when_cached(proxy):
    """Under --cache, drop the rule's benchmark file: Snakemake refuses one on a cached rule (a job taken from the
    cache has no run to measure), and its rule API has no way to unset one (Rule.benchmark's setter takes a path)."""
    if CACHING:
        proxy.rule._benchmark = None


wildcard_constraints:
    task="|".join([*TASKS, *DECLARED]),
    split="|".join(SPLITS),
    init="pretrained|random",
    seedtag=SEED_TAG_REGEX,


# Each rule runs its step the same way, `bertology <step>` with its wildcards, named inputs and
# outputs, the config sections the step declares (bertology.workflow.cli.STEPS) and its threads. The sections
# are part of the param, so changing one re-runs exactly the steps that read it.
STEP = "bertology {params.step} {params.files} --threads {threads} > {log} 2>&1"


def step(name):
    """The `step` param of the rule named `name`, i.e. its step and config sections (a plain string, so that
    Snakemake records it and re-runs the rule when a section changes)."""
    return f"{name} --config {shlex.quote(sections_json(config, STEPS[name].config))}"


def step_files(name):
    """The `files` param of the step `name`: the job's wildcards and named inputs/outputs as -w/--input/--output
    arguments, and what its step reads of a declared task (bertology.registry.Step.task: plain, words, whole)."""
    kind = STEPS[name].task

    def files(wildcards, input, output):
        tasks = (task_args(wildcards, TASK_JSON["plain"], whole=DECLARATIONS) if kind == "whole"
                 else task_args(wildcards, TASK_JSON[kind]))
        return " ".join(filter(None, [step_args(wildcards, input, output), tasks]))

    return files


def _source_version(wildcards):
    """The hub dataset's revision (a GLUE hub source, or a declared task's hub id without a pinned revision;
    empty otherwise): a new revision re-runs the data rule."""
    from bertology.data import declared_version

    if wildcards.task in DECLARED:
        return declared_version(DECLARED[wildcards.task])
    return SOURCE_VERSION


# Input functions used by the files in rules/ (snakemake --lint wants functions and rules apart).
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


def job_path(rule):
    """A rule's job as a path of its outputs' wildcards: {task}/{variant}, {task}{seedtag}, ..."""
    from bertology.pipeline.layout import wildcard_job

    return wildcard_job(next(iter(REGISTRY.outputs(rule).values())))


onstart:
    from bertology import cluster
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import (capability_notes, check_job_dirs, end_failed_at_exit, on_start,
                                    remove_stale_pages)

    # With the slurm executor: stop before submitting anything when a job asks for more than any node
    # offers (sinfo), and warn when the jobs would all track to one sqlite file. A no-op otherwise.
    cluster.check_workflow(workflow)
    on_start(INVOCATION, config)
    # The parent run never stays RUNNING, even when Snakemake exits without calling onerror; a file where a
    # job's directory must be stops the workflow now, in one line, its run FAILED.
    end_failed_at_exit(INVOCATION)
    check_job_dirs(workflow, INVOCATION)
    # report.html and explorer.html whose inputs (claims.csv, ...) are gone or about to be recomputed are removed
    # now, not left beside a ledger they no longer show after a kill (each is rewritten atomically after them)
    remove_stale_pages(workflow)
    for note in capability_notes(config):
        print(note, file=sys.stderr)
    # A local run's jobs fork from one process that has imported torch, transformers and the rest once
    # (bertology.workflow.jobserver; BERTOLOGY_JOB_SERVER=0 turns it off).
    jobserver.start_for_workflow(workflow)


onsuccess:
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import on_end

    jobserver.stop()
    on_end(INVOCATION, "FINISHED")


onerror:
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import on_end

    jobserver.stop()
    on_end(INVOCATION, "FAILED")
