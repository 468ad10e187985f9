"""The config handed from a rule to its job: the sections its step declares as canonical JSON (the ``--config``
argument of every rule's command, :func:`sections_json`), and that JSON back as the typed
:class:`bertology.pipeline.config.Config` (:func:`sections_from_json`), the sections the step did not declare
left :class:`bertology.pipeline.config.Undeclared`. Reading them has no side effect: the job's command line
(bertology.workflow.cli) makes the declared tasks known to the task registry."""

from __future__ import annotations

import copy
import json
import typing
from typing import Any

from bertology.pipeline.config import Config, ConfigError, build
from bertology.pipeline.tasks import task_names


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
    """select_sections(...) as canonical JSON (the `--config` argument of a step).

    >>> sections_json({"model": "m", "data": {"seed": 42, "max_length": 128}}, ["data.seed", "model"])
    '{"data": {"seed": 42}, "model": "m"}'
    """
    return json.dumps(select_sections(config, keys), sort_keys=True)


def sections_values(text: str) -> dict[str, Any]:
    """The mapping of the JSON a rule passed (`--config`; empty text: none)."""
    try:
        values = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise ConfigError(f"--config is not valid JSON ({err}): {text[:200]!r}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"--config must be a JSON object, got {text[:200]!r}")
    return values


def typed_sections(values: dict[str, Any]) -> Config:
    """The typed config of handed-over `values` (:func:`sections_values`): `tasks` as the entries' names (a
    declared task's declaration stays in `values`); undeclared sections stay Undeclared."""
    if "tasks" in values:
        values = {**values, "tasks": task_names(values["tasks"])}
    return build(Config, values)


def sections_from_json(text: str) -> Config:
    """The typed config of one step from the JSON its rule passed (:func:`typed_sections`).

    >>> config = sections_from_json('{"data": {"seed": 42}, "tasks": ["rte", {"name": "own", "source": "x.csv"}]}')
    >>> config.data.seed, config.tasks
    (42, ('rte', 'own'))
    >>> config.model
    <undeclared model>
    """
    return typed_sections(sections_values(text))
