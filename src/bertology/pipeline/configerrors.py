"""The text of a configuration error: every schema violation of a config in one message, each naming its key
and what is allowed (:func:`bertology.pipeline.config.validate_config` raises it)."""

from __future__ import annotations

from typing import Any


def _path(error, prefix: str = "") -> str:
    parts = [str(p) for p in error.absolute_path]
    return prefix + ".".join(parts) if parts else (prefix.rstrip(".") or "(top level)")


def describe(error, prefix: str = "") -> str:
    """One line for a jsonschema `error`: the dotted key (`prefix` + the error's path), its value and what is
    allowed."""
    if error.validator == "oneOf" and error.context:  # a `tasks` entry: a GLUE name or a declared task
        branch = 0 if isinstance(error.instance, str) else 1
        inner = [e for e in error.context if e.schema_path and e.schema_path[0] == branch
                 and e.validator not in ("if", "then")] or [e for e in error.context if e.validator != "if"]
        nested = [e for e in inner if e.validator != "type"] or inner
        if nested:
            return "; ".join(dict.fromkeys(describe(e, prefix) for e in nested))
    where = _path(error, prefix)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        scope = f"under '{where}'" if error.absolute_path or prefix else "at the top level"
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


def problems(values: Any, schema: dict, node: dict | None = None, prefix: str = "") -> list[str]:
    """Every violation of `values` against `node` of `schema` (None: the whole schema), one line each, sorted by
    key; `prefix`: the dotted key of `node` followed by a dot ("" at the top)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    if node is not None:
        validator = validator.evolve(schema=node)
    errors = sorted(validator.iter_errors(values), key=lambda e: list(map(str, e.absolute_path)))
    return [describe(e, prefix) for e in errors]


def explain(config: dict[str, Any], schema: dict) -> str:
    """Every schema violation of `config`, in one message naming each key and what is allowed."""
    found = "; ".join(problems(config, schema)) or "(no details)"
    return (f"invalid configuration: {found}. "
            f"See schemas/config.schema.yaml for every key, its meaning and default.")
