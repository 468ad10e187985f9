"""Figures of Clark et al.'s analyses: entropy by layer (their Fig. 4 style) and the best head per relation
against the fixed-offset baseline (their Fig. 5 style). Layers are numbered from 1 on the axes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.pipeline import plotting
from bertology.clark.parser import best_heads

VARIANT_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
#: relations shown in the parser figures: the most frequent ones, with at least MIN_N scored arcs (all of them
#: when no relation has that many)
MAX_RELATIONS = 16
MIN_N = 20


def entropy_figure(tables: dict[str, pd.DataFrame], title: str, path: str | Path) -> Path:
    """Per-head mean entropy by layer, one colour per variant (dots = heads, line = layer mean), with the
    uniform-attention reference; left: every real query row, right: the [CLS] row."""
    fig, axes = plotting.new_figure(11.0, 4.2, ncols=2, sharey=True)
    layers = 1
    for ax, (feature, reference, what) in zip(axes, (("all", "uniform", "all real query rows"),
                                                      ("cls", "uniform_cls", "the [CLS] row"))):
        for k, (variant, df) in enumerate(tables.items()):
            colour = VARIANT_COLOURS[k % len(VARIANT_COLOURS)]
            sub = df[df["feature"] == feature]
            layers = max(layers, int(df["layer"].max()) + 1)
            jitter = (k - (len(tables) - 1) / 2) * 0.12
            ax.scatter(sub["layer"] + jitter, sub["mean"], s=10, alpha=0.55, color=colour, linewidths=0)
            by_layer = sub.groupby("layer")["mean"].mean()
            ax.plot(by_layer.index, by_layer.to_numpy(), "-o", color=colour, ms=4, label=f"{variant} (layer mean)")
        ref = next(iter(tables.values()))
        ref_value = float(ref.loc[ref["feature"] == reference, "mean"].mean())
        if np.isfinite(ref_value):
            ax.axhline(ref_value, color="black", ls="--", lw=1, label=f"uniform attention ({ref_value:.2f} nats)")
        plotting.number_from_one(ax, "x", layers, label="layer")
        ax.set_title(f"entropy of {what}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean entropy (nats)")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title)
    return plotting.save_figure(fig, path)


def best_per_relation(table: pd.DataFrame) -> pd.DataFrame:
    """relation -> the best (layer, head, direction) over both directions: relation, direction, layer, head,
    accuracy, n, baseline_offset, baseline_accuracy; most frequent relations first."""
    best = best_heads(table)
    if best.empty:
        return best
    idx = best.groupby("relation")["accuracy"].idxmax()
    return best.loc[idx].sort_values(["n", "relation"], ascending=[False, True]).reset_index(drop=True)


def parser_figure(tables: dict[str, pd.DataFrame], title: str, path: str | Path,
                  max_relations: int = MAX_RELATIONS) -> Path:
    """Clark et al. Fig. 5 style: for each of the most frequent relations (n >= MIN_N), the accuracy of the best head
    (either direction; label `layer-head` and direction) per model, against the relation's fixed-offset
    baseline (black mark)."""
    bests = {label: best_per_relation(t) for label, t in tables.items()}
    first = next((b for b in bests.values() if not b.empty), None)
    shown = 0 if first is None else min(max_relations, int((first["n"] >= MIN_N).sum()) or len(first))
    fig, ax = plotting.new_figure(9.0, 1.2 + 0.45 * shown * max(1, len(tables)) ** 0.5)
    if first is None:
        ax.text(0.5, 0.5, "no dependency arc was scored", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        fig.suptitle(title)
        return plotting.save_figure(fig, path)
    frequent = first[first["n"] >= MIN_N] if (first["n"] >= MIN_N).any() else first
    relations = frequent["relation"].head(max_relations).tolist()
    y = np.arange(len(relations))
    height = 0.8 / max(1, len(bests))
    for k, (label, best) in enumerate(bests.items()):
        b = best.set_index("relation").reindex(relations)
        pos = y - 0.4 + height * (k + 0.5)
        ax.barh(pos, b["accuracy"], height=height, color=VARIANT_COLOURS[k % len(VARIANT_COLOURS)], label=label)
        for p, (_, row) in zip(pos, b.iterrows()):
            if np.isfinite(row["accuracy"]):
                arrow = "d→h" if row["direction"] == "dep_to_head" else "h→d"
                ax.text(min(row["accuracy"] + 0.01, 0.9), p, f"{int(row['layer']) + 1}-{int(row['head']) + 1} {arrow}",
                        va="center", fontsize=7)
    base = first.set_index("relation").reindex(relations)
    ax.scatter(base["baseline_accuracy"], y, marker="|", s=300, color="black", zorder=3,
               label="fixed-offset baseline")
    ax.set_yticks(y, [f"{r} (n={int(n)}, offset {int(o):+d})" for r, n, o in
                      zip(relations, base["n"], base["baseline_offset"])], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("accuracy of the best head (label: layer-head, direction)")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=len(labels))
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title)
    return plotting.save_figure(fig, path)
