"""Configuration: the typed sections a step reads, and the validation of a whole config.

The JSON schema (``config.schema.yaml``, shipped inside the package; ``schemas/config.schema.yaml`` at the
top of a checkout points at it) is the only place a default lives. :func:`validate_config` runs
Snakemake's own ``validate`` (which fills the schema's defaults); when that fails it explains every
problem in one message that names the key and the allowed values (:mod:`bertology.pipeline.configerrors`).

A rule hands its job only the sections the step declares (``bertology.workflow.cli.STEPS``), as JSON
(:mod:`bertology.pipeline.configjson`); the job reads them as the frozen dataclasses below. Reading a section
the step did not declare raises at once, so a rule can never forget to pass (and re-run on) what its step reads.
Code given no config (a test, a benchmark, a library call) takes a section's schema defaults from
:func:`schema_section`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from bertology.pipeline.configerrors import explain, problems
from bertology.pipeline.errors import UserError

#: config keys bertology.store.schema.expected_attrs reads (a step that opens a store declares them)
EXPECT_SECTIONS = ("model", "data.seed", "data.max_length", "attention.split", "attention.examples",
                   "attention.keepbits", "attention.spacy_model")

SCHEMA_PATH = Path(str(resources.files("bertology") / "config.schema.yaml"))


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the key and what is allowed."""


# --------------------------------------------------------------------------------------------------
# the typed sections (field names = schema keys; no defaults here: the schema fills them)


@dataclass(frozen=True)
class DemoSizes:
    train: int
    validation: int


@dataclass(frozen=True)
class DataConfig:
    source: str
    max_train_examples: int | None
    max_eval_examples: int | None
    max_length: int
    seed: int
    short_split: str
    bad_rows: str
    demo: DemoSizes


@dataclass(frozen=True)
class LoraConfig:
    rank: int
    alpha: float
    dropout: float
    target_modules: tuple[str, ...] | None


@dataclass(frozen=True)
class TrainConfig:
    inits: tuple[str, ...]
    epochs: float
    batch_size: int
    learning_rate: float
    weight_decay: float
    warmup_ratio: float
    mixed_precision: str
    eval_batch_size: int
    seed: int
    seeds: tuple[int, ...] | None
    alpha: float
    max_grad_norm: float
    checkpoint_steps: int
    checkpoint_minutes: float
    method: str
    lora: LoraConfig


@dataclass(frozen=True)
class AttentionConfig:
    split: str
    examples: int | None
    batch_size: int
    chunk_size: int
    spacy_model: str
    keepbits: int | None
    word_models: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class SieveConfig:
    tau: float
    alpha: float
    window: int
    correction: str


@dataclass(frozen=True)
class PatternsConfig:
    classifier: str


@dataclass(frozen=True)
class RelationsConfig:
    framenet: str | None
    percentile: float
    framenet_filter: str


@dataclass(frozen=True)
class FeaturesConfig:
    negation: str


@dataclass(frozen=True)
class SyntaxConfig:
    conllu: tuple[str, ...]


@dataclass(frozen=True)
class NormsConfig:
    enabled: bool
    examples: int | None
    batch_size: int
    copy_tokens: int


@dataclass(frozen=True)
class FlowConfig:
    examples: int | None
    bootstrap: int
    confidence: float


@dataclass(frozen=True)
class MixingViewsConfig:
    examples: int | None
    globenc_rows: str
    decompx_bias_split: str
    decompx_first_layer_value_bias: str
    decompx_epsilon: float


@dataclass(frozen=True)
class SeedsConfig:
    bootstrap: int
    confidence: float


@dataclass(frozen=True)
class ClaimsConfig:
    bootstrap: int
    confidence: float


@dataclass(frozen=True)
class DaskConfig:
    scheduler: str | None


@dataclass(frozen=True)
class AnalysisConfig:
    sieve: SieveConfig
    patterns: PatternsConfig
    relations: RelationsConfig
    features: FeaturesConfig
    syntax: SyntaxConfig
    norms: NormsConfig
    flow: FlowConfig
    mixing_views: MixingViewsConfig
    seeds: SeedsConfig
    claims: ClaimsConfig
    dask: DaskConfig


@dataclass(frozen=True)
class PruningConfig:
    mode: str
    step: float
    random_orders: int
    importance_split: str
    importance_examples: int | None


@dataclass(frozen=True)
class AblationConfig:
    examples: int | None
    batch_size: int
    bootstrap: int
    seed: int
    config_batch: int
    alpha: float
    sweep: str
    pruning: PruningConfig


@dataclass(frozen=True)
class MlflowConfig:
    tracking_uri: str
    experiment: str
    required: bool
    live: bool


@dataclass(frozen=True)
class Config:
    model: str
    model_name: str | None
    models: tuple[Any, ...]
    tasks: tuple[str, ...]
    spacy_pipelines: dict[str, str]
    data: DataConfig
    train: TrainConfig
    attention: AttentionConfig
    analysis: AnalysisConfig
    ablation: AblationConfig
    mlflow: MlflowConfig


class Undeclared:
    """Stands for a config section a step did not declare; any use of it is a programming error."""

    def __init__(self, key: str):
        self._key = key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"config key {self._key!r} was not handed to this step: add it to the step's sections "
                           f"in bertology.workflow.cli.STEPS (the rule passes exactly those, and re-runs when they change)")

    def __repr__(self) -> str:
        return f"<undeclared {self._key}>"


def _convert(tp: Any, value: Any, key: str) -> Any:
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {key!r} must be a mapping, got {value!r}")
        return build(tp, value, prefix=f"{key}.")
    return tuple(value) if typing.get_origin(tp) is tuple else value


def build(cls: type, values: dict[str, Any], prefix: str = "") -> Any:
    """A section dataclass from a validated mapping; keys absent from it become :class:`Undeclared`."""
    hints = typing.get_type_hints(cls)
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown config key(s) {', '.join(sorted(prefix + k for k in unknown))}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        kwargs[f.name] = _convert(hints[f.name], values[f.name], key) if f.name in values else Undeclared(key)
    return cls(**kwargs)


def plain_config(config: Any) -> dict[str, Any]:
    """A typed :class:`Config` (or any of its sections) back to a plain mapping, undeclared sections left out."""

    def conv(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            return {f.name: conv(getattr(value, f.name)) for f in dataclasses.fields(value)
                    if not isinstance(getattr(value, f.name), Undeclared)}
        if isinstance(value, tuple):
            return list(value)
        return value

    return conv(config)


# --------------------------------------------------------------------------------------------------
# the schema: the one place defaults live


@functools.lru_cache(maxsize=1)
def _parsed_schema() -> dict:
    with open(SCHEMA_PATH) as f:  # libyaml's parser where PyYAML has it: the same dict, ten times faster
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_schema() -> dict:
    """The config schema (src/bertology/config.schema.yaml), parsed once per process; each call gets its own copy."""
    return copy.deepcopy(_parsed_schema())


def schema_default(key: str) -> Any:
    """The schema's default of a dotted config key, e.g. ``schema_default("mlflow.tracking_uri")``: the one
    place defaults live (code that needs a default outside a validated config reads it here)."""
    node: dict = load_schema()
    for part in key.split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            raise KeyError(f"no config key {key!r} in the schema")
    if "default" not in node:
        raise KeyError(f"config key {key!r} has no default in the schema")
    return copy.deepcopy(node["default"])


def _section_node(key: str) -> tuple[dict, type]:
    """The schema node of the dotted section `key` and its dataclass."""
    node: dict | None = load_schema()
    cls: Any = Config
    for part in key.split("."):
        node = (node or {}).get("properties", {}).get(part)
        cls = typing.get_type_hints(cls).get(part) if dataclasses.is_dataclass(cls) else None
        if node is None or not dataclasses.is_dataclass(cls):
            raise KeyError(f"no config section {key!r} in the schema")
    return node, cls


@functools.cache
def _default_section(key: str) -> Any:
    node, cls = _section_node(key)
    return build(cls, _fill(node, {}), prefix=f"{key}.")


def schema_section(key: str, **changes: Any) -> Any:
    """The typed section of the dotted `key` holding the schema's defaults, `changes` replacing some keys (checked
    as the schema checks a config file's), for code given no config.

    >>> schema_section("analysis.mixing_views").decompx_epsilon
    1e-12
    >>> schema_section("analysis.mixing_views", globenc_rows="normalised").globenc_rows
    'normalised'
    >>> schema_section("analysis.mixing_views", globenc_rows="sum_one")
    Traceback (most recent call last):
    bertology.pipeline.config.ConfigError: config key 'analysis.mixing_views.globenc_rows' has value 'sum_one', which is not allowed; choose one of: raw, normalised
    """
    if not changes:
        return _default_section(key)
    node, cls = _section_node(key)
    values = {**_fill(node, {}), **changes}
    found = problems(values, load_schema(), node, prefix=f"{key}.")
    if found:
        raise ConfigError("; ".join(found))
    return build(cls, values, prefix=f"{key}.")


# --------------------------------------------------------------------------------------------------
# validation


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate `config` in place with Snakemake's ``validate`` (filling the schema's defaults) and return it.

    Raises ConfigError listing every problem, each naming its key and the allowed values.
    """
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    from bertology.pipeline.configfile import MAX_CONFIG_NODES, expanded_value_size

    if expanded_value_size(config) > MAX_CONFIG_NODES:  # before anything walks an alias bomb
        raise ConfigError(f"the config expands to more than {MAX_CONFIG_NODES:,} values through YAML aliases (*name): "
                          f"a config has a few hundred; this looks like an alias bomb. Write the values out")
    try:
        validate(config, str(SCHEMA_PATH))
    except WorkflowError:
        raise ConfigError(explain(config, load_schema())) from None
    _fill_task_defaults(config)
    _check_semantics(config)
    _check_tasks(config)
    _resolve_seeds(config)
    return config


def _fill(node: dict, value: Any) -> Any:
    """`value` with the defaults of schema `node` filled in (objects, recursively)."""
    if not isinstance(value, dict) or node.get("type") != "object":
        return value
    out = dict(value)
    for key, sub in node.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = _fill(sub, out[key])
    return out


def _fill_task_defaults(cfg: dict) -> None:
    """Fill the schema's defaults into each declared task (Snakemake's validate does not fill inside `oneOf`)."""
    node = load_schema()["$defs"]["declared_task"]
    cfg["tasks"] = [_fill(node, e) if isinstance(e, dict) else e for e in cfg["tasks"]]


def _check_tasks(cfg: dict) -> None:
    """Declared tasks: a name that is no GLUE name or reserved directory and is given once; metrics that fit the
    kind; a validation share only with a named train split."""
    from bertology.pipeline.tasks import RESERVED_NAMES, TASKS, task_names

    seen: set[str] = set()
    for name, entry in zip(task_names(cfg["tasks"]), cfg["tasks"]):
        if name in seen:
            raise ConfigError(f"tasks: two tasks are named {name!r}; give each task its own name (the name is its "
                              f"directory under results/)")
        seen.add(name)
        if not isinstance(entry, dict):
            continue
        if name in TASKS:
            raise ConfigError(f"tasks: the declared task {name!r} has the name of a GLUE task; name it otherwise "
                              f"(e.g. {name}_own), or list the GLUE task as the plain name {name}")
        if name.lower() in RESERVED_NAMES:
            raise ConfigError(f"tasks: {name!r} cannot name a task (results/stats/{name.lower()}/ holds the "
                              f"{name.lower()} analyses); choose another name")
        regression = entry["kind"] == "regression"
        wrong = [m for m in entry["metrics"] or () if (m in ("pearson", "spearman")) != regression]
        if wrong:
            allowed = "pearson, spearman" if regression else "accuracy, f1, macro_f1, mcc"
            raise ConfigError(f"tasks: {name}: metric(s) {', '.join(wrong)} do not fit kind {entry['kind']}; "
                              f"use {allowed}")
        if regression and entry["labels"] is not None:
            raise ConfigError(f"tasks: {name}: a regression task has no label names; drop `labels` or set "
                              f"kind: classification")
        if entry["pair"] is not None and entry["pair"] == entry["text"]:
            raise ConfigError(f"tasks: {name}: text and pair name the same column {entry['text']!r}")
        if entry["label"] is None and cfg["train"]["inits"]:
            raise ConfigError(f"tasks: {name} is text only (label: null), but train.inits "
                              f"{list(cfg['train']['inits'])} fine-tunes, which needs labels; name its label column "
                              f"(label: <column>), or set train.inits: [] to study the pretrained model only")


def _resolve_seeds(cfg: dict) -> None:
    """With train.seeds given, train.seed is its first entry: the seed of the plain model paths, the one
    every step that reads train.seed (the untrained head, the first model) uses."""
    seeds = cfg["train"]["seeds"]
    if seeds:
        cfg["train"]["seed"] = seeds[0]


def _check_semantics(cfg: dict) -> None:
    source = cfg["data"]["source"]
    if all(isinstance(e, dict) for e in cfg["tasks"]):
        return  # data.source is read for GLUE tasks only
    if source not in ("demo", "hub"):
        path = Path(source)
        if not path.is_dir():
            raise ConfigError(
                f"config key 'data.source' is {source!r}: that is neither 'demo' nor 'hub', and no such "
                f"directory exists (relative to {Path.cwd()}). Give 'demo', 'hub', or the path of a "
                f"directory in GLUE's download-script layout (e.g. glue_data/ holding MRPC/dev.tsv).")


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file and validate it (defaults filled). A key given twice, or aliases that expand
    past any sensible size, are refused before validation (:mod:`bertology.pipeline.configfile`)."""
    from bertology.pipeline.configfile import read_config_file

    raw = read_config_file(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping of keys to values")
    return validate_config(raw)


def config_hash(obj: Any) -> str:
    """Stable short hash of a JSON-able object (used to tag stores and runs)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
