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

from bertology.pipeline.io import write_png  # noqa: E402

DPI = 120


def new_figure(width: float = 6.4, height: float = 4.8, **kwargs):
    """A fresh (figure, axes) pair (kwargs go to plt.subplots) with the project's layout defaults."""
    kwargs.setdefault("constrained_layout", True)
    return plt.subplots(figsize=(width, height), **kwargs)


def save_figure(fig, path: str | Path, dpi: int = DPI) -> Path:
    """Write `fig` as PNG (parent directories created), close it, return the path."""
    path = write_png(fig, path, dpi)
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


def layer_head_heatmap(ax, values, *, vmin: float, vmax: float, cmap: str = "viridis", title: str | None = None,
                       annotate: bool | None = None, fmt: str = "{:.2f}", marks=None, head_every: int = 1):
    """Draw an (L, H) per-head array: rows = layers, columns = heads, both ticked from 1.

    Pass the same vmin/vmax to every panel of one comparison. `marks` is an optional (L, H) bool array
    of heads to outline (e.g. flagged heads). `annotate` (default: when L*H <= 150) writes each value.
    Returns the AxesImage (for a colour bar).
    """
    import numpy as np
    from matplotlib.patches import Rectangle

    arr = np.asarray(values, dtype=float)
    layers, heads = arr.shape
    im = ax.imshow(arr, vmin=vmin, vmax=vmax, cmap=cmap, aspect="auto", interpolation="nearest")
    number_from_one(ax, "y", layers, label="layer")
    number_from_one(ax, "x", heads, label="head", every=head_every)
    if title:
        ax.set_title(title, fontsize=9)
    if annotate is None:
        annotate = layers * heads <= 150
    if annotate:
        for (i, j), v in np.ndenumerate(arr):
            if np.isfinite(v):
                r, g, b, _ = im.cmap(im.norm(v))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")
    if marks is not None:
        for i, j in zip(*np.nonzero(np.asarray(marks, bool))):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.6))
    return im
