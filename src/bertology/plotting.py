"""Shared figure style: matplotlib Agg, PNG at ~120 dpi, layers and heads numbered from 1 on axes (as in the
papers; CSVs keep 0-based ints), one colour scale per comparison.

Use :func:`new_figure` / :func:`save_figure`; label layer or head axes with :func:`number_from_one`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 120


def new_figure(width: float = 6.4, height: float = 4.8, **kwargs):
    """A fresh (figure, axes) pair (kwargs go to plt.subplots) with the project's layout defaults."""
    kwargs.setdefault("constrained_layout", True)
    return plt.subplots(figsize=(width, height), **kwargs)


def save_figure(fig, path: str | Path, dpi: int = DPI) -> Path:
    """Write `fig` as PNG (parent directories created), close it, return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return path


def number_from_one(ax, axis: str, n: int, *, label: str | None = None, every: int = 1,
                    positions: Sequence[float] | None = None) -> None:
    """Tick an axis of `n` items (0-based positions) with labels 1..n; `every` thins the labels."""
    pos = list(positions) if positions is not None else list(range(n))
    ticks = [p for i, p in enumerate(pos) if i % every == 0 or i == n - 1]
    labels = [str(i + 1) for i, _ in enumerate(pos) if i % every == 0 or i == n - 1]
    if axis == "x":
        ax.set_xticks(ticks, labels)
        if label:
            ax.set_xlabel(label)
    elif axis == "y":
        ax.set_yticks(ticks, labels)
        if label:
            ax.set_ylabel(label)
    else:
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")


def symmetric_limit(values, floor: float = 1e-9) -> float:
    """max |value| over finite values (>= floor): the half-range of one diverging colour scale."""
    import numpy as np

    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    return max(float(np.abs(arr).max()) if arr.size else 0.0, floor)
