"""The values of Snakemake's ``--config`` command line given the types the config schema asks for
(:func:`coerce_command_line`), before validation."""

from __future__ import annotations

from typing import Any

import yaml

from bertology.pipeline.config import load_schema

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

    >>> config = {"data": {"max_length": "64", "source": "demo"}, "train": {"seeds": ["42", "43"]}}
    >>> coerce_command_line(config, {"data": {"max_length": "64"}, "train": {"seeds": ["42", "43"]}})
    >>> config
    {'data': {'max_length': 64, 'source': 'demo'}, 'train': {'seeds': [42, 43]}}
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
