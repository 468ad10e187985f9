"""What a disabling sweep found, in words and figures (Kovaleva et al. 2019, Figs. 8-9).

- :func:`verdict`: one sentence per metric (gains, how many survive Benjamini-Hochberg, the random head);
- :func:`plot_heads`: Fig. 8, the metric with each head disabled as a layer x head heatmap around the
  baseline, significant changes starred;
- :func:`plot_layers`: Fig. 9, the metric with each whole layer disabled, with 95% bootstrap intervals.

Inputs are the frames of heads.csv / layers.csv (:mod:`bertology.ablation.significance`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def verdict(info: dict) -> str:
    """One sentence per metric from :attr:`SweepTables.summary_info <bertology.ablation.significance.SweepTables>`:
    how many gains there are and how many survive BH correction (summary.json's `verdict`)."""
    parts = []
    for metric, m in info["metrics"].items():
        h, l, r = m["heads"], m["layers"], m["random_head"]
        parts.append(
            f"{metric}: disabling one head raised the score for {h['gains']} heads (max +{h['max_gain']:.4f}), "
            f"{len(h['surviving_gains'])} of them significant after Benjamini-Hochberg at {info['alpha']}; "
            f"whole layers: {l['gains']} gains, {len(l['surviving_gains'])} significant; a random head changes "
            f"it by {r['delta']:+.4f} on average (95% CI {r['ci_low']:+.4f} to {r['ci_high']:+.4f}).")
    return " ".join(parts)



def plot_heads(heads: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Fig. 8: layer x head heatmap of the metric with one head disabled, one panel per metric.

    Colours diverge around the baseline (TwoSlopeNorm centred on it); the baseline is in the title and
    drawn on the colour bar; heads whose change survives BH correction are marked with a star.
    """
    from matplotlib.colors import TwoSlopeNorm

    from bertology.pipeline.plotting import new_figure, number_from_one, save_figure, symmetric_limit

    metrics = list(dict.fromkeys(heads["metric"]))
    n_layers, n_heads = int(heads["layer"].max()) + 1, int(heads["head"].max()) + 1
    fig, axes = new_figure(max(7.0, 4.6 * len(metrics) + 0.6), 0.45 * n_layers + 2.2, ncols=len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = heads[heads["metric"] == metric]
        grid = np.full((n_layers, n_heads), np.nan)
        grid[sub["layer"], sub["head"]] = sub["value"]
        base = float(sub["baseline"].iloc[0])
        half = symmetric_limit(grid - base, floor=1e-4)
        im = ax.imshow(grid, cmap="RdBu", norm=TwoSlopeNorm(vcenter=base, vmin=base - half, vmax=base + half),
                       aspect="auto")
        for _, r in sub[sub["significant"]].iterrows():
            ax.text(r["head"], r["layer"], "*", ha="center", va="center", fontsize=12, color="black")
        number_from_one(ax, "x", n_heads, label="head", every=1 if n_heads <= 16 else 2)
        number_from_one(ax, "y", n_layers, label="layer")
        ax.set_title(f"{metric} (baseline {base:.4f})")
        cbar = fig.colorbar(im, ax=ax, label=f"{metric} with the head disabled")
        cbar.ax.axhline(base, color="orange", linewidth=2)
    fig.suptitle(f"{task}: one head disabled at a time (uniform attention); * = significant after BH", fontsize=10)
    return save_figure(fig, path)


def plot_layers(layers: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Fig. 9: the metric with each whole layer disabled, with its 95% bootstrap interval and the baseline."""
    from bertology.pipeline.plotting import new_figure, number_from_one, save_figure

    metrics = list(dict.fromkeys(layers["metric"]))
    fig, axes = new_figure(max(7.0, 4.4 * len(metrics)), 3.8, ncols=len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = layers[layers["metric"] == metric].sort_values("layer")
        base = float(sub["baseline"].iloc[0])
        x = sub["layer"].to_numpy()
        colours = np.select([sub["delta"] > 0, sub["delta"] < 0], ["tab:blue", "tab:red"], "tab:gray")
        ax.bar(x, sub["value"], color=colours, alpha=0.8)
        if sub["ci_low"].notna().all():
            err = np.vstack([sub["value"] - (base + sub["ci_low"]), (base + sub["ci_high"]) - sub["value"]])
            ax.errorbar(x, sub["value"], yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=3)
        ax.axhline(base, color="orange", linewidth=2, label=f"baseline {base:.4f}")
        lo = min(sub["value"].min(), base + np.nanmin(sub["ci_low"]) if sub["ci_low"].notna().any() else base)
        hi = max(sub["value"].max(), base + np.nanmax(sub["ci_high"]) if sub["ci_high"].notna().any() else base)
        pad = max(0.05 * (hi - lo), 1e-3)
        ax.set_ylim(lo - pad, hi + pad)
        number_from_one(ax, "x", len(x), label="disabled layer (all heads)", positions=x)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric}")
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(f"{task}: one layer disabled at a time (error bars: 95% paired-bootstrap CI)", fontsize=10)
    return save_figure(fig, path)


def plot_importance(importance: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Michel et al.'s head importance as a layer x head map (importance.csv: normalised per layer, so each
    layer's row has unit l2 norm; the title says on which split and how many examples it was measured)."""
    from bertology.pipeline.plotting import layer_head_heatmap, new_figure, save_figure

    n_layers, n_heads = int(importance["layer"].max()) + 1, int(importance["head"].max()) + 1
    grid = np.full((n_layers, n_heads), np.nan)
    grid[importance["layer"], importance["head"]] = importance["importance"]
    fig, ax = new_figure(max(5.5, 0.42 * n_heads + 2.5), 0.42 * n_layers + 1.8)
    im = layer_head_heatmap(ax, grid, vmin=0.0, vmax=float(np.nanmax(grid)) or 1.0, cmap="viridis",
                            head_every=1 if n_heads <= 16 else 2)
    fig.colorbar(im, ax=ax, label="importance (l2-normalised per layer)")
    where = ""
    if {"split", "n"} <= set(importance.columns):
        where = f" on {int(importance['n'].iloc[0])} {importance['split'].iloc[0]} examples"
    ax.set_title(f"{task}: head importance E|dL/dξ|{where}", fontsize=10)
    return save_figure(fig, path)


def plot_pruning(pruning: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Michel et al. Fig. 3 style: the metric against the percentage of heads pruned, least important first,
    against random orders (mean, ±1 std band, min-max range), one panel per metric; the title gives the
    removal mode (zeroed output or uniform attention)."""
    from bertology.ablation.significance import curve_summary
    from bertology.pipeline.plotting import new_figure, save_figure

    summary = curve_summary(pruning)
    metrics = list(dict.fromkeys(pruning["metric"]))
    fig, axes = new_figure(max(6.0, 4.6 * len(metrics)), 3.8, ncols=len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        sub = summary[summary["metric"] == metric].sort_values("fraction")
        x = 100 * sub["fraction"].to_numpy()
        if sub["random_n"].max() > 0:
            n_random = int(sub["random_n"].max())
            ax.fill_between(x, sub["random_min"], sub["random_max"], color="tab:gray", alpha=0.15,
                            label=f"random orders: range (n={n_random})")
            if n_random > 1:
                ax.fill_between(x, sub["random_mean"] - sub["random_std"], sub["random_mean"] + sub["random_std"],
                                color="tab:gray", alpha=0.3, label="random orders: mean ± 1 std")
            ax.plot(x, sub["random_mean"], color="tab:gray", marker=".", label="random orders: mean")
        ax.plot(x, sub["importance"], color="tab:blue", marker="o", label="by importance (least first)")
        ax.axhline(float(sub["importance"].iloc[0]), color="orange", linestyle="--", linewidth=1, label="unpruned")
        ax.set_xlabel("heads pruned (%)")
        ax.set_ylabel(metric)
        ax.set_xlim(0, 100)
        ax.legend(loc="best", fontsize=7)
    mode = pruning["mode"].iloc[0] if "mode" in pruning.columns else "zero"
    how = "head output zeroed" if mode == "zero" else "head attends uniformly"
    fig.suptitle(f"{task}: pruning heads ({how}), evaluated on validation", fontsize=10)
    return save_figure(fig, path)


def plot_unavailable(title: str, reason: str, path: str | Path) -> Path:
    """A figure that says why an analysis could not run (so the report's section says it too)."""
    import textwrap

    from bertology.pipeline.plotting import new_figure, save_figure

    fig, ax = new_figure(6.4, 2.4)
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}\nnot computed:\n" + "\n".join(textwrap.wrap(reason, 70)), ha="center",
            va="center", fontsize=9, transform=ax.transAxes)
    return save_figure(fig, path)
