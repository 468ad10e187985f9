"""Several models in one run: the config's ``models:`` list read into :class:`ModelEntry` items, each model's short
name, and the whole config each model's part of the workflow runs with (docs/reference.md#models).

An entry of ``models:`` is what ``model:`` accepts (a shortcut, a hub name or a directory) or a mapping
``{name: SHORT, model: ID_OR_DIR, train: {...}, data: {...}}`` whose ``train`` and ``data`` override the run's for
that model. A model's short name is the mapping's ``name``, else the last component of what names it (a shortcut is
its own name, ``google/bert_uncased_L-2_H-128_A-2`` gives ``bert_uncased_L-2_H-128_A-2``, ``/data/my-bert/`` gives
``my-bert``); it names the model's results folder ``results/m/{name}/``, its rows of the ledger (the ``model``
column) and its MLflow runs (the ``model`` tag).

>>> [e.name for e in model_entries({"models": ["minilm-l6", "/data/my-bert/", {"name": "llama", "model": "x/y"}]})]
['minilm-l6', 'my-bert', 'llama']
>>> model_name({"model": "google/bert_uncased", "model_name": None})
'bert_uncased'
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from bertology.pipeline.errors import UserError

#: what a short name may hold: it is a folder name, a ledger value and part of rule names
NAME_REGEX = r"[A-Za-z0-9][A-Za-z0-9._-]*"

#: ``data`` keys that decide the prepared data, the attention sample and the words every model shares: one value
#: for the run, never a model's own
SHARED_DATA_KEYS = ("source", "max_train_examples", "max_eval_examples", "seed", "short_split", "bad_rows", "demo")


@dataclass(frozen=True)
class ModelEntry:
    """One model of the run: its short name, what names it for loading, and its overrides of ``train``/``data``."""

    name: str
    model: str
    train: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)


def short_name(model: str) -> str:
    """The short name of a model named by `model` (a shortcut, a hub name or a directory): its last path component,
    each run of characters a folder name should not hold (anything but letters, digits, '.', '_', '-') as '-'.

    >>> short_name("minilm-l6"), short_name("results/models/rte/pretrained/"), short_name("/runs/my model (v2)")
    ('minilm-l6', 'pretrained', 'my-model-v2')
    """
    last = PurePosixPath(str(model).replace("\\", "/").rstrip("/") or ".").name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip("-._") or "model"


def _check_name(name: str, where: str) -> str:
    if not re.fullmatch(NAME_REGEX, name):
        raise UserError(f"{where}: the model's short name {name!r} is not a folder name (letters, digits, '.', '_', "
                        f"'-'; starting with a letter or digit): give the entry a `name:`, e.g. "
                        f"{{name: my-model, model: {name!r}}}")
    return name


def model_name(config: Mapping[str, Any]) -> str:
    """The short name of a one-model config: ``model_name`` when set, else :func:`short_name` of ``model``."""
    given = config.get("model_name")
    return _check_name(str(given) if given else short_name(config["model"]), "model_name")


def model_entries(config: Mapping[str, Any]) -> list[ModelEntry]:
    """The run's models: the entries of ``models:``, or the one ``model:`` when that list is empty or absent.

    Two entries with the same short name, a per-model ``data`` key the models must share (:data:`SHARED_DATA_KEYS`)
    or an entry without a model are errors that name the entry and the fix."""
    items: Sequence[Any] = config.get("models") or []
    if not items:
        return [ModelEntry(model_name(config), str(config["model"]))]
    out: list[ModelEntry] = []
    for i, item in enumerate(items):
        where = f"models[{i}]"
        if isinstance(item, Mapping):
            if not item.get("model"):
                raise UserError(f"{where} has no `model:`; an entry is a model name or {{name: SHORT, model: ID}}")
            model = str(item["model"])
            name = _check_name(str(item.get("name") or short_name(model)), where)
            data = dict(item.get("data") or {})
            shared = sorted(set(data) & set(SHARED_DATA_KEYS))
            if shared:
                raise UserError(f"{where} ({name}) sets data.{', data.'.join(shared)}: every model of a run reads the "
                                f"same prepared data and attention sample, so set it once in `data:` (a model may set "
                                f"its own data.max_length)")
            out.append(ModelEntry(name, model, dict(item.get("train") or {}), data))
        else:
            out.append(ModelEntry(_check_name(short_name(str(item)), where), str(item)))
    seen: dict[str, int] = {}
    for i, entry in enumerate(out):
        if entry.name in seen:
            raise UserError(f"models[{seen[entry.name]}] and models[{i}] are both named {entry.name!r}: give one of "
                            f"them its own `name:` ({{name: OTHER, model: {entry.model!r}}})")
        seen[entry.name] = i
    return out


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s keys set, mappings merged key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def model_config(config: Mapping[str, Any], entry: ModelEntry) -> dict[str, Any]:
    """The whole config one model's part of the workflow runs with: the run's, without ``models``, with ``model``
    and ``model_name`` the entry's and its ``train``/``data`` overrides merged in.

    >>> c = model_config({"models": ["a"], "model": "x", "train": {"epochs": 3, "seed": 1}},
    ...                  ModelEntry("b", "hub/b", {"epochs": 1}))
    >>> c["model"], c["model_name"], c["train"], "models" in c
    ('hub/b', 'b', {'epochs': 1, 'seed': 1}, False)
    """
    out = {k: copy.deepcopy(v) for k, v in config.items() if k != "models"}
    out["model"], out["model_name"] = entry.model, entry.name
    if entry.train:
        out["train"] = _merge(out.get("train") or {}, entry.train)
    if entry.data:
        out["data"] = _merge(out.get("data") or {}, entry.data)
    return out


def rule_prefix(name: str) -> str:
    """The prefix of a model's rules in a run of several models (a Python identifier).

    >>> rule_prefix("minilm-l6")
    'minilm_l6__'
    """
    return re.sub(r"\W", "_", name) + "__"
