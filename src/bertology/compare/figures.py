"""The comparison's figures, each from its table: the sink rate per model (bars), the per-layer curves on
relative depth (one line per model, one panel per statistic), the pattern classes' shares per model (stacked
bars) and the share of heads per sieve role per model (grouped bars). Each shows the rows pooled over tasks
(``task`` = all), or the one task's where the run has one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.compare.common import POOLED
from bertology.compare.depth import STATISTICS
from bertology.decoders.heads import SINK_EPSILON
from bertology.kovaleva.kovaleva_figures import CLASS_COLOURS
from bertology.kovaleva.patterns import CLASSES
from bertology.pipeline import plotting

#: a model's colour: the same in every figure (its place among the models)
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd")

LABELS = {"alpha_0": "alpha_0 (attention to the first token)", "entropy": "entropy (nats)",
          "entropy_ratio": "entropy / uniform", "cosine": "cosine, pretrained vs fine-tuned",
          **{f"pattern_{c}": f"share {c}" for c in CLASSES}}


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a figure shows: those pooled over tasks where a model has them, else its first task's."""
    if table.empty:
        return table
    keep = []
    for _, rows in table.groupby("model", sort=False):
        pooled = rows[rows["task"] == POOLED]
        keep.append(pooled if len(pooled) else rows[rows["task"] == rows["task"].iloc[0]])
    return pd.concat(keep)


def computed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that hold a value (not a "not computed" note)."""
    return table[~table["note"].fillna("").str.startswith("not computed")]


def colours(models: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}


def _task_label(rows: pd.DataFrame) -> str:
    tasks = list(dict.fromkeys(rows["task"]))
    return "pooled over tasks" if tasks == [POOLED] else ", ".join(tasks)


def _absent(table: pd.DataFrame, shown: pd.DataFrame) -> str:
    """"; not computed: a, b" for the models of `table` with no row in `shown`, else ""."""
    absent = [m for m in dict.fromkeys(table["model"]) if not len(shown) or m not in set(shown["model"])]
    return f"; not computed: {', '.join(absent)}" if absent else ""


def _bars(ax, models: list[str], values: list[float], kinds: list[str], colour: dict[str, str], title: str) -> None:
    x = np.arange(len(models))
    finite = [v if np.isfinite(v) else 0.0 for v in values]
    ax.bar(x, finite, color=[colour[m] for m in models])
    for i, v in enumerate(values):
        ax.text(i, (v if np.isfinite(v) else 0.0) + 0.02, f"{v:.2f}" if np.isfinite(v) else "not\ncomputed",
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [f"{m}\n({k})" for m, k in zip(models, kinds)], fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_title(title, fontsize=9)


def sinks_figure(table: pd.DataFrame, path: str | Path) -> Path:
    """sinks.png: per model Gu et al.'s sink rate (share of example x layer x head with alpha_0 > epsilon) and the
    share of heads whose mean alpha_0 > epsilon, side by side."""
    rows = headline(table)
    models = list(dict.fromkeys(table["model"]))
    shown = rows.set_index("model").reindex(models)
    colour = colours(models)
    epsilon = float(table["epsilon"].dropna().iloc[0]) if table["epsilon"].notna().any() else SINK_EPSILON
    fig, axes = plotting.new_figure(max(6.0, 1.6 * len(models) * 2), 3.8, ncols=2, sharey=True)
    kinds = [str(k) for k in shown["kind"]]
    _bars(axes[0], models, shown["sink_rate"].astype(float).tolist(), kinds, colour,
          f"Gu et al.'s sink rate: share of example x layer x head\nwith alpha_0 > {epsilon:g}")
    _bars(axes[1], models, shown["share_heads_over"].astype(float).tolist(), kinds, colour,
          f"share of heads whose mean alpha_0 > {epsilon:g}")
    axes[0].set_ylabel("share")
    fig.suptitle(f"Attention sinks per model ({_task_label(headline(computed(table))) if len(computed(table)) else 'no task'})",
                 fontsize=10)
    return plotting.save_figure(fig, path)


def depth_figure(table: pd.DataFrame, path: str | Path) -> Path:
    """depth.png: one panel per statistic, x = relative depth (layer + 1) / layers, one line per model (solid:
    pretrained, dashed: fine-tuned; the cosine compares the two)."""
    rows = headline(computed(table)) if len(table) else table
    models = list(dict.fromkeys(table["model"])) if len(table) else []
    colour = colours(models)
    stats = [s for s in STATISTICS if len(rows) and (rows["statistic"] == s).any()] or ["alpha_0"]
    ncols = min(3, len(stats))
    nrows = -(-len(stats) // ncols)
    fig, axes = plotting.new_figure(4.0 * ncols, 3.0 * nrows, ncols=ncols, nrows=nrows, squeeze=False)
    for ax, stat in zip(axes.ravel(), stats):
        sub = rows[rows["statistic"] == stat] if len(rows) else rows
        for (model, variant), curve in (sub.groupby(["model", "variant"], sort=False) if len(sub) else []):
            tuned = variant == "finetuned" and stat != "cosine"
            ax.plot(curve["depth"], curve["value"], "--" if tuned else "-", marker="o", markersize=3.5,
                    markerfacecolor="white" if tuned else colour[model], color=colour[model],
                    label=f"{model} ({variant})" if stat != "cosine" else model)
        ax.set_title(LABELS.get(stat, stat), fontsize=9)
        ax.set_xlim(0, 1.02)
        ax.set_xlabel("relative depth (layer / layers)", fontsize=8)
        if len(sub):
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not computed", ha="center", va="center", transform=ax.transAxes)
    for ax in axes.ravel()[len(stats):]:
        ax.axis("off")
    fig.suptitle(f"Per-layer curves on relative depth ({_task_label(rows) if len(rows) else 'no task'})"
                 f"{_absent(table, rows)}", fontsize=10)
    return plotting.save_figure(fig, path)


def patterns_figure(table: pd.DataFrame, path: str | Path) -> Path:
    """patterns.png: per model and variant the five classes' shares of the maps, stacked."""
    rows = headline(computed(table)) if len(table) else table
    bars = list(dict.fromkeys(zip(rows["model"], rows["variant"]))) if len(rows) else []
    fig, ax = plotting.new_figure(max(5.0, 1.1 * len(bars) + 2.5), 4.2)
    bottom = np.zeros(len(bars))
    for cls in CLASSES:
        values = np.array([float(rows[(rows["model"] == m) & (rows["variant"] == v) & (rows["class"] == cls)]
                                 ["share"].sum()) for m, v in bars])
        ax.bar(np.arange(len(bars)), values, bottom=bottom, color=CLASS_COLOURS[cls], label=cls)
        bottom += values
    ax.set_xticks(np.arange(len(bars)), [f"{m}\n{v}" for m, v in bars], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of maps")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"Kovaleva et al.'s pattern classes per model\n({_task_label(rows) if len(rows) else 'no task'})"
                 f"{_absent(table, rows)}", fontsize=9)
    return plotting.save_figure(fig, path)


def roles_figure(table: pd.DataFrame, path: str | Path) -> Path:
    """roles.png: per variant, the share of heads per sieve role, one bar per model."""
    rows = headline(computed(table)) if len(table) else table
    variants = list(dict.fromkeys(rows["variant"])) if len(rows) else ["pretrained"]
    colour = colours(list(dict.fromkeys(table["model"])) if len(table) else [])
    models = list(dict.fromkeys(rows["model"])) if len(rows) else []
    roles = list(dict.fromkeys(rows["role"])) if len(rows) else []
    fig, axes = plotting.new_figure(max(6.0, 0.55 * len(roles) * max(1, len(models)) + 2), 3.2 * len(variants),
                                    nrows=len(variants), squeeze=False)
    width = 0.8 / max(1, len(models))
    for ax, variant in zip(axes[:, 0], variants):
        sub = rows[rows["variant"] == variant] if len(rows) else rows
        for i, model in enumerate(models):
            mine = sub[sub["model"] == model].set_index("role").reindex(roles)
            if mine["share"].notna().any():
                ax.bar(np.arange(len(roles)) + (i - (len(models) - 1) / 2) * width, mine["share"].astype(float),
                       width, color=colour[model], label=model)
        ax.set_xticks(np.arange(len(roles)), roles, fontsize=8, rotation=30)
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of heads")
        ax.set_title(f"Pande et al.'s sieve roles, {variant} ({_task_label(sub) if len(sub) else 'no task'})"
                     f"{_absent(table, rows)}", fontsize=9)
        ax.legend(fontsize=7)
    return plotting.save_figure(fig, path)


__all__ = ["depth_figure", "headline", "patterns_figure", "roles_figure", "sinks_figure"]
