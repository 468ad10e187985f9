"""Figures of the norm analyses: weight share against norm-weighted share by layer (Kobayashi et al. 2020, Fig. 3
style), mixing ratio by layer (Kobayashi et al. 2021, Fig. 4 style), faithfulness of each view (Abnar & Zuidema
2020, Table 2 style)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.norms.tokens import CATEGORIES
from bertology.pipeline.plotting import new_figure, number_from_one, save_figure

MIXING_LABELS = {"attn_w": "attention weights", "attn_n": "attention (norms)", "attnres_w": "attention + residual "
                 "(weights)", "attnres_n": "attention + residual (norms)", "attnresln_n": "attention + residual + "
                 "LayerNorm (norms)"}


def plot_shares(tables: dict[str, pd.DataFrame], path: str | Path) -> Path:
    """tables: variant -> norms.csv. One panel per variant: per layer, the share each category gets by weight
    (solid) and by norm-weighted attention (dashed), pooled over the layer's heads."""
    fig, axes = new_figure(4.2 * len(tables), 3.6, ncols=len(tables), squeeze=False, sharey=True)
    colours = dict(zip(CATEGORIES, ("tab:red", "tab:blue", "tab:green", "tab:grey")))
    for ax, (variant, t) in zip(axes[0], tables.items()):
        layer = t[t["head"].isna()]
        L = int(t["layer"].max()) + 1 if len(t) else 0
        for cat in CATEGORIES:
            for measure, style in (("weight_share", "-"), ("norm_share", "--")):
                s = layer[(layer["category"] == cat) & (layer["measure"] == measure)].sort_values("layer")
                ax.plot(s["layer"], s["mean"], style, color=colours[cat], marker="o", ms=3,
                        label=f"{cat} ({'weight' if measure == 'weight_share' else 'norm'})")
        number_from_one(ax, "x", L, label="layer")
        ax.set_title(variant)
        ax.set_ylim(0, 1)
    axes[0, 0].set_ylabel("share of the attention")
    axes[0, -1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)


def plot_mixing(tables: dict[str, pd.DataFrame], path: str | Path) -> Path:
    """tables: variant -> mixing.csv. Mean context-mixing ratio by layer, one line per measure, one panel per variant."""
    fig, axes = new_figure(4.2 * len(tables), 3.6, ncols=len(tables), squeeze=False, sharey=True)
    for ax, (variant, t) in zip(axes[0], tables.items()):
        L = int(t["layer"].max()) + 1 if len(t) else 0
        for measure, label in MIXING_LABELS.items():
            s = t[t["measure"] == measure].sort_values("layer")
            if len(s):
                ax.errorbar(s["layer"], s["mean"], yerr=s["std"].fillna(0), marker="o", ms=3, capsize=2, label=label)
        number_from_one(ax, "x", L, label="layer")
        ax.set_title(variant)
        ax.set_ylim(0, 1)
    axes[0, 0].set_ylabel("context-mixing ratio (mean ± std over tokens)")
    axes[0, -1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)


IMPORTANCE_LABELS = {"ablation": "Spearman rho with token ablation", "gradient": "Spearman rho with input x gradient",
                     "aopc": "AOPC (mean probability drop, top 10-50% masked)"}


def plot_faithfulness(table: pd.DataFrame, path: str | Path) -> Path:
    """faithfulness.csv -> the ranking: one panel per importance (Spearman with ablation, with input x gradient; AOPC),
    the views sorted by their mean (most faithful on top) with bootstrap intervals; AOPC's random order as a dashed
    line."""
    imps = [i for i in IMPORTANCE_LABELS if (table["importance"] == i).any()] + \
        [i for i in dict.fromkeys(table["importance"]) if i not in IMPORTANCE_LABELS]
    n_views = max(int(table["view"].nunique()), 1)
    fig, axes = new_figure(4.0 * max(len(imps), 1), 0.9 + 0.32 * n_views, ncols=max(len(imps), 1), squeeze=False)
    for ax, imp in zip(axes[0], imps):
        s = table[(table["importance"] == imp) & (table["view"] != "random")].sort_values("mean", na_position="first")
        y = np.arange(len(s))
        err = np.vstack([s["mean"] - s["ci_low"], s["ci_high"] - s["mean"]])
        ax.errorbar(s["mean"], y, xerr=np.nan_to_num(err), fmt="o", ms=4, capsize=2, color="tab:blue")
        ax.set_yticks(y, [f"{v} (n={n})" for v, n in zip(s["view"], s["n"])], fontsize=7)
        rnd = table[(table["importance"] == imp) & (table["view"] == "random")]
        if len(rnd):
            ax.axvline(float(rnd["mean"].iloc[0]), color="grey", ls="--", lw=1, label="random order")
            ax.legend(fontsize=6, loc="lower right")
        ax.axvline(0, color="black", lw=0.5)
        ax.set_xlabel(IMPORTANCE_LABELS.get(imp, imp), fontsize=8)
    axes[0, 0].set_title("token views ranked by faithfulness (mean, 95% bootstrap interval over examples)",
                         fontsize=8, loc="left")
    return save_figure(fig, path)
