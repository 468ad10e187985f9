"""Configuration: validated once, then handed to each step as frozen, typed sections.

The JSON schema (``config.schema.yaml``, shipped inside the package; ``schemas/config.schema.yaml`` at the
top of a checkout points at it) is the only place a default lives. :func:`validate_config` runs
Snakemake's own ``validate`` (which fills the schema's defaults); when that fails it explains every
problem in one message that names the key and the allowed values.

A rule hands its job only the sections the step declares (``bertology.workflow.cli.STEPS``), as JSON; the job
turns them into the dataclasses below with :func:`sections_from_json`. Reading a section the step did
not declare raises at once, so a rule can never forget to pass (and re-run on) what its step reads.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

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
    origin = typing.get_origin(tp)
    if origin is tuple:
        return tuple(value)
    if origin in (typing.Union, types.UnionType):
        return value
    return value


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


# --------------------------------------------------------------------------------------------------
# sections: what a rule hands its job


def select_sections(config: dict[str, Any], keys: typing.Iterable[str]) -> dict[str, Any]:
    """The nested sub-mapping of a validated config holding only `keys` (dotted: ``analysis.sieve``)."""
    out: dict[str, Any] = {}
    for dotted in keys:
        src, dst = config, out
        parts = dotted.split(".")
        for part in parts[:-1]:
            if part not in src:
                raise ConfigError(f"config has no section {dotted!r}")
            src = src[part]
            dst = dst.setdefault(part, {})
        if parts[-1] not in src:
            raise ConfigError(f"config has no section {dotted!r}")
        dst[parts[-1]] = copy.deepcopy(src[parts[-1]])
    return out


def sections_json(config: dict[str, Any], keys: typing.Iterable[str]) -> str:
    """select_sections(...) as canonical JSON (the `--config` argument of a step)."""
    return json.dumps(select_sections(config, keys), sort_keys=True)


def sections_from_json(text: str) -> Config:
    """The typed config of one step from the JSON its rule passed; undeclared sections stay Undeclared."""
    try:
        values = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise ConfigError(f"--config is not valid JSON ({err}): {text[:200]!r}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"--config must be a JSON object, got {text[:200]!r}")
    if "tasks" in values:  # the typed config holds the names; declared tasks become known to get_task
        from bertology.pipeline.tasks import register, task_names, task_param

        for entry in values["tasks"]:
            if isinstance(entry, dict):
                register(task_param(entry, None, words=False) if "source" in entry else entry)
        values = {**values, "tasks": task_names(values["tasks"])}
    return build(Config, values)


# --------------------------------------------------------------------------------------------------
# validation


def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


_JSON_TYPES: dict[str, Any] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _alternatives(root: dict, node: dict | None) -> list[dict]:
    """The schema nodes a value at `node` may match: $ref resolved, oneOf/anyOf/allOf flattened."""
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _alternatives(root, target)
    out = [node]
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(key, []):
            out.extend(_alternatives(root, sub))
    out.extend(_alternatives(root, node.get("then")))
    return out


def _types(node: dict) -> list[str]:
    t = node.get("type")
    return [t] if isinstance(t, str) else list(t or [])


def _typed(text: str) -> list[Any]:
    """What a command-line string may stand for, as a config file's YAML would read it (``64`` an integer,
    ``false`` a boolean, ``null`` nothing), and a number in exponent form YAML 1.1 reads as a string (``1e-4``)."""
    out = []
    try:
        out.append(yaml.safe_load(text))
    except yaml.YAMLError:
        pass
    try:
        out.append(float(text))
    except ValueError:
        pass
    return [v for v in out if not isinstance(v, (str, dict, list))]


def coerce_command_line(config: dict, overrides: Any, root: dict | None = None, node: dict | None = None) -> None:
    """Give the values set on the command line (``snakemake --config``) the types the schema asks for, in place.

    Snakemake reads a nested ``--config`` value (``data={"max_length": 64}``) with YAML's BaseLoader, so every
    scalar in it is a string: here each string the schema does not take as it is, but takes as the YAML of a
    config file would read it (``"64"`` -> 64 for an integer key, ``"false"`` -> False, ``"null"`` -> None, each item
    of ``[42, 43]``), becomes that value. `overrides` is the command line's own mapping (Snakemake's
    ``workflow.config_settings.config``): only the keys it sets are touched, so a config file's values are never
    coerced. A value that fits no type is left as it is, for validation to name it.
    """
    root = load_schema() if root is None else root
    node = root if node is None else node
    if not isinstance(overrides, dict) or not isinstance(config, dict):
        return
    alts = _alternatives(root, node)
    for key, given in overrides.items():
        if key not in config:
            continue
        subs = [a["properties"][key] for a in alts if key in a.get("properties", {})]
        subs += [a["additionalProperties"] for a in alts if isinstance(a.get("additionalProperties"), dict)]
        if subs:
            config[key] = _coerce(config[key], given, root, subs[0])


def _coerce(value: Any, given: Any, root: dict, node: dict) -> Any:
    alts = _alternatives(root, node)
    if isinstance(given, dict) and isinstance(value, dict):
        coerce_command_line(value, given, root, node)
        return value
    if isinstance(value, list):
        items = [a["items"] for a in alts if "array" in _types(a) and isinstance(a.get("items"), dict)]
        return [_coerce(v, v, root, items[0]) for v in value] if items else value
    if isinstance(value, str):
        types = {t for a in alts for t in _types(a)} - {"string"}
        for typed in _typed(value) if types else []:
            if any(_JSON_TYPES[t](typed) for t in types if t in _JSON_TYPES):
                return typed
    return value


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


def _path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error) -> str:
    if error.validator == "oneOf" and error.context:  # a `tasks` entry: a GLUE name or a declared task
        branch = 0 if isinstance(error.instance, str) else 1
        inner = [e for e in error.context if e.schema_path and e.schema_path[0] == branch
                 and e.validator not in ("if", "then")] or [e for e in error.context if e.validator != "if"]
        nested = [e for e in inner if e.validator != "type"] or inner
        if nested:
            return "; ".join(dict.fromkeys(_describe(e) for e in nested))
    where = _path(error)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        scope = f"under '{where}'" if error.absolute_path else "at the top level"
        return (f"unknown config key(s) {', '.join(repr(e) for e in extra)} {scope}; "
                f"allowed keys are: {', '.join(allowed)}")
    if error.validator == "enum":
        return (f"config key '{where}' has value {error.instance!r}, which is not allowed; "
                f"choose one of: {', '.join(map(str, error.validator_value))}")
    if error.validator == "type":
        want = error.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"config key '{where}' must be of type {want}, got {error.instance!r}"
    desc = error.schema.get("description", "") if isinstance(error.schema, dict) else ""
    hint = f" ({desc.strip()})" if desc else ""
    return f"config key '{where}': {error.message}{hint}"


def explain(config: dict[str, Any]) -> str:
    """Every schema violation of `config`, one line each, naming the key and what is allowed."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = "; ".join(_describe(e) for e in errors) or "(no details)"
    return (f"invalid configuration: {problems}. "
            f"See schemas/config.schema.yaml for every key, its meaning and default.")


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
        raise ConfigError(explain(config)) from None
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


def _resolve_seeds(cfg: dict) -> None:
    """With train.seeds given, train.seed is its first entry: the seed of the plain model paths, the one
    every step that reads train.seed (the untrained head, the first model) uses."""
    seeds = cfg["train"].get("seeds")
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
