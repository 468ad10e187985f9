"""The decoder probe's figure: per head, Gu et al.'s alpha_0 and TransformerLens' induction score, for each model
of the probe (pretrained, its random initialisation, fine-tuned, fine-tuned from random)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.decoders.heads import SINK_EPSILON


def _grid(frame: pd.DataFrame, column: str) -> np.ndarray:
    """(L, H) means of `column` over the frame's units."""
    m = frame.groupby(["layer", "head"])[column].mean()
    layers, heads = int(m.index.get_level_values(0).max()) + 1, int(m.index.get_level_values(1).max()) + 1
    out = np.full((layers, heads), np.nan)
    for (layer, head), v in m.items():
        out[int(layer), int(head)] = v
    return out


def probe_figure(sink: pd.DataFrame, induction: pd.DataFrame, path: str | Path, *, task: str,
                 epsilon: float = SINK_EPSILON) -> Path:
    """figures/decoder-{task}.png: two rows of layer x head maps (alpha_0, with the heads above `epsilon`
    outlined; the induction "mul" score), one column per model of the probe, one colour scale per row."""
    from bertology.pipeline.plotting import layer_head_heatmap, new_figure, save_figure

    variants = [v for v in pd.unique(sink["variant"])]
    fig, axes = new_figure(max(2.6 * len(variants) + 1, 9.5), 7.2, nrows=2, ncols=len(variants), squeeze=False)
    for col, variant in enumerate(variants):
        alpha = _grid(sink[sink["variant"] == variant], "alpha_0")
        ind = _grid(induction[induction["variant"] == variant], "induction")
        share = 100 * float(np.nanmean(alpha > epsilon))
        im0 = layer_head_heatmap(axes[0, col], alpha, vmin=0, vmax=1, cmap="magma", annotate=False,
                                 marks=alpha > epsilon,
                                 title=f"{variant}: sink alpha_0\n{share:.0f}% of heads > {epsilon}")
        im1 = layer_head_heatmap(axes[1, col], ind, vmin=0, vmax=1, cmap="viridis", annotate=False,
                                 title=f"{variant}: induction score\nmax {np.nanmax(ind):.2f}")
    fig.colorbar(im0, ax=axes[0, :], shrink=0.8, label="alpha_0 (mean attention to token 0)")
    fig.colorbar(im1, ax=axes[1, :], shrink=0.8, label="induction score (share of attention)")
    fig.suptitle(f"{task}: attention sinks (Gu et al. 2024) and induction heads (Olsson et al. 2022)", fontsize=10)
    return save_figure(fig, path)
