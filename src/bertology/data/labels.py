"""Class identity of a declared task's labels, one rule for every source format (docs/reference.md#declared-tasks):
a label that is a number (``1``, ``"1"``, ``"1.0"``, ``1.0``) is the class of that number, any other value the class
of its text; a missing value is only a null or an empty string.

>>> class_key("1.0"), class_key(1), class_key("NA"), class_key(""), class_key(float("nan"))
('1', '1', 'NA', None, None)
>>> label_id("1.0", class_index(["0", "1"])), label_id("neg", class_index(["neg", "pos"]))
(1, 0)
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd


#: a number as a label may be written: 1, -2, 0.5, 1.0, .5, 1e3 (not nan, inf, 0x10 or 1_000: those are names)
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def is_missing(value: Any) -> bool:
    """A missing value: None (an empty CSV cell, a JSON or Parquet null) or a float NaN (pandas' null)."""
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def number_text(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 2 ** 53 else repr(float(x))


def class_key(value: Any) -> str | None:
    """The class a label value names, the same for every source format: None when missing (a null or an empty
    string); a number's canonical text when it is a number or a text that writes one (``1``, ``"1"``, ``"1.0"``,
    ``1.0`` and ``"1e0"`` are all class ``"1"``; ``"0.50"`` is ``"0.5"``); else the text itself (``"None"``,
    ``"NA"`` and ``"nan"`` are names)."""
    if is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):  # as pandas writes a boolean column to CSV
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return number_text(float(value)) if math.isfinite(value) else str(value)
    text = str(value)
    if text == "":
        return None
    if NUMBER.fullmatch(text.strip()):
        return number_text(float(text.strip()))
    return text


def spelling(value: Any) -> str:
    """How a label value is written (for the line on numbers written two ways)."""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    return str(value)


def numbers_written_two_ways(values: list[Any]) -> dict[str, list[str]]:
    """The number classes among `values` written in more than one way: class -> its spellings (sorted), e.g.
    ``{"0": ["0", "0.0"]}`` for labels "0" and "0.0"."""
    spellings: dict[str, set[str]] = {}
    for v in values:
        key = class_key(v)
        if key is not None and NUMBER.fullmatch(key):
            spellings.setdefault(key, set()).add(spelling(v))
    return {k: sorted(s) for k, s in spellings.items() if len(s) > 1}


def class_order(name: str) -> tuple:
    return (0, float(name), "") if NUMBER.fullmatch(name) else (1, 0.0, name)


def class_index(names: list[str]) -> dict[str, int]:
    """class key -> label id of the class names (a declared name "1" and a label 1.0 are one class)."""
    return {class_key(n) or n: k for k, n in enumerate(names)}


def label_id(value: Any, index: dict[str, int]) -> int | None:
    """The label id of a label value: the class it names, else an id 0..K-1 it writes; None when neither."""
    key = class_key(value)
    if key is None:
        return None
    if key in index:
        return index[key]
    if NUMBER.fullmatch(key) and float(key).is_integer() and 0 <= float(key) < len(index):
        return int(float(key))
    return None


def class_names(ds: Any, column: str) -> list[str] | None:
    """The names of a ClassLabel feature, else None."""
    import datasets

    feature = ds.features.get(column)
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def label_names(decl: dict, frames: list[tuple[Any, pd.DataFrame]]) -> list[str]:
    """The class names in id order: declared, else a ClassLabel feature's, else the sorted distinct classes
    (:func:`class_key`; numbers in numeric order first) of the label column over `frames` ((dataset, frame) of the
    train and validation source splits). [] for regression."""
    if decl["kind"] == "regression":
        return []
    if decl.get("labels"):
        return [str(x) for x in decl["labels"]]
    ds = frames[0][0]
    names = class_names(ds, decl["label"])
    if names is not None:
        return names
    keys = {class_key(v) for _, df in frames for v in df[decl["label"]]}
    return sorted((k for k in keys if k is not None), key=class_order)
