"""The page's numbers: JSON-safe floats kept to SIG significant digits, and per-head values laid out on the
layer x head grid (row-major: index layer * H + head). Pure; no file is read here.

Shapes: L layers, H heads.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

SIG = 6  # significant digits kept for statistics


def num(v: Any) -> float | None:
    """A JSON-safe float with SIG significant digits (None for NaN/inf/missing or a value that is no number)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return float(f"{f:.{SIG}g}")


def grid(df: pd.DataFrame, column: str, L: int, H: int) -> list[float | None]:
    """Values of `column` of a table with layer and head columns on the (L * H,) grid, row-major (layer * H +
    head); None where the table has no row (rows outside the grid are ignored)."""
    out: list[float | None] = [None] * (L * H)
    for lay, head, v in zip(df["layer"].to_numpy(), df["head"].to_numpy(), df[column].to_numpy()):
        lay, head = int(lay), int(head)
        if 0 <= lay < L and 0 <= head < H:
            out[lay * H + head] = num(v)
    return out


def truthy(v: Any) -> bool:
    """A boolean cell as pandas reads it from a CSV (True, "true", 1, 1.0, "1")."""
    return str(v).strip().lower() in ("true", "1", "1.0")


def flags(df: pd.DataFrame, column: str, L: int, H: int) -> list[int]:
    """A boolean column on the (L * H,) grid as 0/1 (0 where the table has no row)."""
    out = [0] * (L * H)
    for lay, head, v in zip(df["layer"].to_numpy(), df["head"].to_numpy(), df[column].to_numpy()):
        if 0 <= int(lay) < L and 0 <= int(head) < H:
            out[int(lay) * H + int(head)] = int(truthy(v))
    return out


def counts(df: pd.DataFrame, column: str, L: int, H: int) -> list[int]:
    """How many rows of each head have the boolean `column` true, on the (L * H,) grid."""
    out = [0] * (L * H)
    for lay, head, v in zip(df["layer"].to_numpy(), df["head"].to_numpy(), df[column].to_numpy()):
        if truthy(v):
            out[int(lay) * H + int(head)] += 1
    return out
