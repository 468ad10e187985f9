# The run's set-up: the config checked once, the environment every job inherits, the declared tasks and the run's
# values (RUN: the values of the wildcards and the settings switched on), from which every rule's outputs and the
# run's targets are expanded (rules/steps.smk). The names the rules share (layout, path, REGISTRY, ...) are imported
# here.
from bertology.analyses import REGISTRY
from bertology.analyses.capability import model_capabilities
from bertology.pipeline import layout
from bertology.pipeline.layout import path, paths
from bertology.pipeline.seedtags import (SEED_TAG_REGEX, STORE_VARIANT_REGEX, SYNTAX_MODEL_REGEX, configured_seeds,
                                         finetuned_variants, seed_tags, store_variants)
from bertology.pipeline.tasks import (SCORE_VARIANTS, SPLITS, STORE_VARIANTS, TASKS, VARIANT_INIT, declarations,
                                      declared_pipeline, get_task, register, task_names, task_param)
from bertology.pipeline.modelset import model_name
from bertology.registry import Run


include: "setup.smk"


# The model's config by its short name (one here; one per model in a run of several: rules/models.smk).
MODEL_CONFIGS = {model_name(config): config}
# The rules writing the run's pages (removed at start when stale: rules/handlers.smk).
PAGE_RULES = ["report", "explorer"]


# Declared tasks (a mapping in `tasks:`): known to get_task here, and handed to each job that reads one as
# --task JSON (rules/steps.smk, step_files).
DECLARED = declarations(config["tasks"])
PIPELINES = {name: declared_pipeline(decl, config) for name, decl in DECLARED.items()}
for _name, _decl in DECLARED.items():
    register(task_param(_decl, PIPELINES[_name]))
TASK_NAMES = task_names(config["tasks"])
# The norm analyses run when asked for and when the model's layers are ones value norms are computed for
# (norms.values.attention_blocks; otherwise onstart says why in one line and the rest of the workflow runs).
# A decoder (causal attention: GPT-2, Llama, Qwen2, Mistral, ...) also gets the decoder probe (rules/decoders.smk)
# and the ledger's decoder claims (bertology.models.kinds.model_kind). Both decided once per model and
# remembered (bertology.analyses.capability): reading the Snakefile imports neither torch nor transformers.
CAPABILITIES = model_capabilities(config["model"])
NORMS_ENABLED = bool(config["analysis"]["norms"]["enabled"]) and CAPABILITIES["norms"] is None
MODEL_KIND = CAPABILITIES["kind"]
DECODER = MODEL_KIND == "decoder"
INITS = list(config["train"]["inits"])
# The variants scored: `pretrained` (untrained head) and the fine-tuned variant of every configured init.
SCORED_VARIANTS = [v for v in SCORE_VARIANTS if v not in VARIANT_INIT or VARIANT_INIT[v] in INITS]
# Path tags of the fine-tuning seeds: '' for the first (train.seed: the plain paths, read by every
# analysis), '-seedN' for each further one of train.seeds; none when nothing is fine-tuned (train.inits: []).
SEED_TAGS = seed_tags(configured_seeds(config["train"])) if INITS else []
# Every fine-tuned analysis runs once per seed: the seed is part of the store variant's name (bertology.pipeline.seedtags):
# `finetuned` (the first seed), `finetuned-seedN`; `pretrained` has no fine-tuning seed and is computed once.
FINETUNED_VARIANTS = finetuned_variants(SEED_TAGS)
# Gold trees for heads as parsers (Clark et al.): the configured CoNLL-U files and, on the demo data, its own trees.
SYNTAX_FILES = list(config["analysis"]["syntax"]["conllu"])
if config["data"]["source"] == "demo":
    SYNTAX_FILES.append(path("demo_trees"))
FRAMENET_DIR = config["analysis"]["relations"]["framenet"]

# What this run computes: the values of the wildcards and the settings switched on (bertology.registry.CONDITIONS).
# Every rule's outputs (`outputs`) and the run's targets (`targets`) are expanded from the registry with it.
RUN = Run(
    tasks=tuple(TASK_NAMES), splits=tuple(SPLITS), stores=tuple(store_variants(SEED_TAGS[:1])), inits=tuple(INITS),
    seedtags=tuple(SEED_TAGS), finetuned=tuple(FINETUNED_VARIANTS),
    enabled=frozenset(c for c, on in (("norms", NORMS_ENABLED), ("gold_trees", bool(SYNTAX_FILES)),
                                      ("seeds", len(SEED_TAGS) > 1), ("framenet", bool(FRAMENET_DIR)),
                                      ("decoder", DECODER), ("random", "random" in INITS)) if on),
)


wildcard_constraints:
    task="|".join([*TASKS, *DECLARED]),
    split="|".join(SPLITS),
    init="pretrained|random",
    seedtag=SEED_TAG_REGEX,
