"""Configuration: schema validation with defaults and messages that say how to fix the problem."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key and what is allowed."""


def load_schema(path: str | Path | None = None) -> dict:
    with open(path or SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def _fill_defaults(instance: Any, schema: dict) -> Any:
    """Fill schema defaults recursively (objects get their properties' defaults)."""
    if not isinstance(instance, dict) or schema.get("type") != "object":
        return instance
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            instance[key] = _fill_defaults(instance[key], sub)
    return instance


def _path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error: jsonschema.ValidationError, schema: dict) -> str:
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


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Return a validated deep copy of `config` with every default filled in.

    Raises ConfigError listing every problem, each naming its key and the allowed values.
    """
    schema = schema or load_schema()
    cfg = _fill_defaults(copy.deepcopy(dict(config)), schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n  - ".join(_describe(e, schema) for e in errors)
        raise ConfigError(f"invalid configuration:\n  - {lines}\n"
                          f"See schemas/config.schema.yaml for every key, its meaning and default.")
    _check_semantics(cfg)
    return cfg


def _check_semantics(cfg: dict) -> None:
    source = cfg["data"]["source"]
    if source not in ("demo", "hub"):
        path = Path(source)
        if not path.is_dir():
            raise ConfigError(
                f"config key 'data.source' is {source!r}: that is neither 'demo' nor 'hub', and no such "
                f"directory exists (relative to {Path.cwd()}). Give 'demo', 'hub', or the path of a "
                f"directory in GLUE's download-script layout (e.g. glue_data/ holding MRPC/dev.tsv).")


def load_config(path: str | Path) -> dict:
    """Read a YAML config file and validate it."""
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping of keys to values")
    return validate_config(raw)


def config_hash(obj: Any) -> str:
    """Stable short hash of a JSON-able object (used to tag stores and runs)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
