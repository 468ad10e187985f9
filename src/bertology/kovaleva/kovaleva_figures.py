"""The paper's figures from the per-head CSVs: Fig. 2 (patterns), 3 (relations), 5 (cosine), 6 (features),
7 ([CLS] in the last layer). Layers and heads are numbered from 1 on the axes; each comparison shares one
colour scale (pretrained and fine-tuned panels of a quantity; all difference panels one diverging scale).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.pipeline import plotting
from bertology.kovaleva.features import CLS_FEATURES, FEATURES
from bertology.kovaleva.patterns import CLASSES
from bertology.pipeline.tasks import STORE_VARIANTS
CLASS_COLOURS = {"vertical": "#4c72b0", "diagonal": "#dd8452", "vertical+diagonal": "#8172b3", "block": "#55a868",
                 "heterogeneous": "#c44e52"}
FIG6_ORDER = ("sep", "cls") + tuple(f for f in FEATURES if f not in ("sep", "cls"))
LABELS = {"cls": "[CLS]", "sep": "[SEP]"}


def per_head(df: pd.DataFrame, column: str = "mean", **where) -> np.ndarray:
    """A long per-head table -> (L, H) array of `column` (rows selected by `where`)."""
    sel = df
    for key, value in where.items():
        sel = sel[sel[key] == value]
    sel = sel[(sel["layer"] >= 0) & (sel["head"] >= 0)]
    layers, heads = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    out = np.full((layers, heads), np.nan)
    out[sel["layer"].to_numpy(int), sel["head"].to_numpy(int)] = sel[column].to_numpy(float)
    return out


def _limits(*arrays: np.ndarray, floor: float = 0.0) -> tuple[float, float]:
    vals = np.concatenate([a[np.isfinite(a)].ravel() for a in arrays]) if arrays else np.zeros(0)
    if vals.size == 0:
        return 0.0, 1.0
    lo, hi = min(floor, float(vals.min())), float(vals.max())
    return lo, hi if hi > lo else lo + 1e-6


def _cosine_floor(*arrays: np.ndarray) -> float:
    """Lower end of a cosine colour scale: the smallest value rounded down to 0.005 (so small changes show)."""
    vals = np.concatenate([a[np.isfinite(a)].ravel() for a in arrays])
    if vals.size == 0:
        return 0.0
    return float(min(np.floor(vals.min() * 200) / 200, 0.995))


def _n_text(df: pd.DataFrame) -> str:
    n = df["n"].max() if "n" in df and len(df) else 0
    return f"n = {int(n)} examples" if np.isfinite(n) else "n = 0"


def patterns_figure(tables: dict[str, pd.DataFrame], task: str, path: str | Path) -> Path:
    """Fig. 2: the share of each pattern class overall (per variant) and per layer."""
    variants = [v for v in STORE_VARIANTS if v in tables]
    fig, axes = plotting.new_figure(4.0 + 4.0 * len(variants), 4.2, ncols=1 + len(variants))
    axes = np.atleast_1d(axes)
    ax = axes[0]
    bottom = np.zeros(len(variants))
    for cls in CLASSES:
        vals = np.array([float(tables[v].loc[(tables[v]["layer"] == -1) & (tables[v]["class"] == cls), "fraction"].sum())
                         for v in variants])
        ax.bar(variants, vals, bottom=bottom, color=CLASS_COLOURS[cls], label=cls)
        bottom += vals
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of attention maps")
    ax.set_xlabel("model")
    n_maps = {v: int(tables[v].loc[tables[v]["layer"] == -1, "n"].max()) for v in variants}
    ax.set_title("all heads (" + ", ".join(f"{v}: {n_maps[v]} maps" for v in variants) + ")", fontsize=9)
    for ax, v in zip(axes[1:], variants):
        df = tables[v][tables[v]["layer"] >= 0]
        counts = df.assign(k=df["fraction"] * df["n"]).groupby(["layer", "class"])["k"].sum().unstack("class")
        shares = counts.div(counts.sum(1), axis=0).reindex(columns=list(CLASSES)).fillna(0.0)
        bottom = np.zeros(len(shares))
        for cls in CLASSES:
            ax.bar(shares.index.to_numpy(), shares[cls].to_numpy(), bottom=bottom, color=CLASS_COLOURS[cls])
            bottom += shares[cls].to_numpy()
        plotting.number_from_one(ax, "x", len(shares), label="layer")
        ax.set_ylim(0, 1)
        ax.set_ylabel("fraction of attention maps")
        ax.set_title(f"{v}: per layer", fontsize=9)
    axes[0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.suptitle(f"Self-attention patterns (Kovaleva et al. Fig. 2) - {task}")
    return plotting.save_figure(fig, path)


def cosine_figure(cosine: pd.DataFrame, task: str, path: str | Path) -> Path:
    """Fig. 5: per-head cosine similarity of pretrained and fine-tuned maps (darker = changed more)."""
    values = per_head(cosine)
    lo = _cosine_floor(values)
    layers, heads = values.shape
    fig, ax = plotting.new_figure(max(5.5, 1.6 + 0.45 * heads), max(3.4, 1.6 + 0.4 * layers))
    im = plotting.layer_head_heatmap(ax, values, vmin=lo, vmax=1.0, cmap="magma", fmt="{:.3f}",
                                     title=f"mean cosine over examples ({_n_text(cosine)}); darker = more change")
    fig.colorbar(im, ax=ax, label="cosine similarity")
    fig.suptitle(f"Pretrained vs fine-tuned attention (Kovaleva et al. Fig. 5) - {task}", fontsize=10)
    return plotting.save_figure(fig, path)


def features_figure(tables: dict[str, pd.DataFrame], task: str, path: str | Path,
                    features: tuple[str, ...] = FIG6_ORDER, diff_table: pd.DataFrame | None = None) -> Path:
    """Fig. 6: attention to each feature per head; pretrained, fine-tuned (one scale per feature) and their
    difference (one diverging scale for all features). [SEP] and [CLS] (the paper's rows) come first.
    `diff_table` (features_diff.csv, the paired per-example differences) gives the difference panels when
    present; otherwise they are the difference of the two means (the same number: same examples). Without a
    fine-tuned table (a run that fine-tunes nothing) the pretrained panels alone."""
    present = [f for f in features if f in set(tables["pretrained"]["feature"])]
    pre = {f: per_head(tables["pretrained"], feature=f) for f in present}
    fine = "finetuned" in tables
    fin = {f: per_head(tables["finetuned"], feature=f) for f in present} if fine else {}
    if diff_table is not None:
        diff = {f: per_head(diff_table, feature=f) for f in present}
    else:
        diff = {f: fin[f] - pre[f] for f in fin}
    lim = plotting.symmetric_limit(np.concatenate([d.ravel() for d in diff.values()])) if diff else 1.0
    layers, heads = pre[present[0]].shape
    ncols = 3 if fine else 1
    fig, axes = plotting.new_figure(ncols * (1.5 + 0.32 * heads), len(present) * (0.9 + 0.3 * layers),
                                    nrows=len(present), ncols=ncols, squeeze=False)
    for r, f in enumerate(present):
        panels = (("pretrained", pre[f]),) + ((("fine-tuned", fin[f]),) if fine else ())
        lo, hi = _limits(*(arr for _, arr in panels))
        name = LABELS.get(f, f)
        for c, (label, arr) in enumerate(panels):
            im = plotting.layer_head_heatmap(axes[r, c], arr, vmin=lo, vmax=hi, cmap="viridis", annotate=False,
                                             title=f"{name}: {label}")
        fig.colorbar(im, ax=axes[r, :len(panels)].tolist(), label="attention / n", shrink=0.9)
        if not fine:
            continue
        im = plotting.layer_head_heatmap(axes[r, 2], diff[f], vmin=-lim, vmax=lim, cmap="RdBu_r", annotate=False,
                                         title=f"{name}: fine-tuned - pretrained")
        fig.colorbar(im, ax=axes[r, 2], label="difference", shrink=0.9)
    fig.suptitle(f"Attention to features (Kovaleva et al. Fig. 6) - {task}\n"
                 f"max over tokens of the type of (attention received / n),\nmean over the examples that have one",
                 fontsize=10)
    return plotting.save_figure(fig, path)


def cls_figure(tables: dict[str, pd.DataFrame], task: str, path: str | Path) -> Path:
    """Fig. 7: what [CLS] attends to in the last layer: feature x head, per variant (one shared scale)."""
    variants = [v for v in STORE_VARIANTS if v in tables]
    mats = {}
    for v in variants:
        df = tables[v]
        heads = int(df["head"].max()) + 1
        m = np.full((len(CLS_FEATURES), heads), np.nan)
        for i, f in enumerate(CLS_FEATURES):
            sub = df[df["feature"] == f]
            m[i, sub["head"].to_numpy(int)] = sub["mean"].to_numpy(float)
        mats[v] = m
    lo, hi = _limits(*mats.values())
    heads = next(iter(mats.values())).shape[1]
    fig, axes = plotting.new_figure(len(variants) * (2.0 + 0.45 * heads), 4.6, ncols=len(variants), squeeze=False)
    last = int(tables[variants[0]]["layer"].max()) + 1
    for ax, v in zip(axes[0], variants):
        im = ax.imshow(mats[v], vmin=lo, vmax=hi, cmap="viridis", aspect="auto", interpolation="nearest")
        ax.set_yticks(range(len(CLS_FEATURES)), [LABELS.get(f, f) for f in CLS_FEATURES])
        ax.set_ylabel("token type")
        plotting.number_from_one(ax, "x", heads, label=f"head (layer {last})")
        for (i, j), val in np.ndenumerate(mats[v]):
            if np.isfinite(val):
                ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if val < (lo + hi) / 2 else "black")
        ax.set_title(f"{v} ({_n_text(tables[v])})", fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="attention from [CLS] (max over tokens of the type)")
    fig.suptitle(f"[CLS] attention in the last layer (Kovaleva et al. Fig. 7) - {task}")
    return plotting.save_figure(fig, path)


#: the link sources of Fig. 3, with the direction of their attention (query -> key)
RELATION_SOURCES = {"framenet": "FrameNet target -> frame element", "dependency": "dependent -> head"}


def relations_figure(tables: dict[str, pd.DataFrame], task: str, path: str | Path) -> Path:
    """Fig. 3: mean max link attention per head, per link source (rows) and variant (columns); heads above
    the percentile outlined in red. One colour scale per source. Sources: RELATION_SOURCES (relations.csv's
    ``framenet_fe_target`` rows, the transposed FrameNet direction, are not drawn)."""
    variants = [v for v in STORE_VARIANTS if v in tables]
    sources = [s for s in RELATION_SOURCES if any(s in set(tables[v]["source"]) for v in variants)]
    if not sources:  # no link of any source (a task without annotated words: relations left out)
        fig, ax = plotting.new_figure(6.0, 1.6)
        ax.axis("off")
        ax.text(0.5, 0.5, f"{task}: no relation links (its words are not parsed: no spaCy pipeline for its "
                          f"language)", ha="center", va="center", wrap=True)
        return plotting.save_figure(fig, path)
    first = tables[variants[0]]
    layers, heads = int(first["layer"].max()) + 1, int(first["head"].max()) + 1
    fig, axes = plotting.new_figure(max(7.0, len(variants) * (1.8 + 0.45 * heads)),
                                    1.0 + len(sources) * max(2.4, 1.2 + 0.4 * layers),
                                    nrows=len(sources), ncols=len(variants), squeeze=False)
    for r, s in enumerate(sources):
        mats = {v: per_head(tables[v], source=s) for v in variants}
        flags = {v: per_head(tables[v], column="flagged", source=s) > 0.5 for v in variants}
        lo, hi = _limits(*mats.values())
        for c, v in enumerate(variants):
            n = tables[v].loc[tables[v]["source"] == s, "n"]
            im = plotting.layer_head_heatmap(axes[r, c], mats[v], vmin=lo, vmax=hi, cmap="viridis", marks=flags[v],
                                             title=f"{RELATION_SOURCES[s]}, {v} (n = {int(n.max()) if len(n) else 0})")
        fig.colorbar(im, ax=axes[r, :].tolist(), label="max attention on a link")
    fig.suptitle(f"Relation-specific heads (Kovaleva et al. Fig. 3) - {task}\n"
                 f"mean over examples of the max attention of a link's query wordpieces to its key wordpieces\n"
                 f"red outline: heads above the percentile", fontsize=10)
    return plotting.save_figure(fig, path)


def patterns_tasks_figure(tables: dict[str, dict[str, pd.DataFrame]], path: str | Path) -> Path:
    """Fig. 2 across tasks: the share of each class over all heads, one bar per task and variant."""
    labels, shares = [], []
    for task, by_variant in tables.items():
        for v in STORE_VARIANTS:
            if v in by_variant:
                df = by_variant[v]
                overall = df[df["layer"] == -1].set_index("class")["fraction"]
                labels.append(f"{task}\n{v}")
                shares.append([float(overall.get(c, 0.0)) for c in CLASSES])
    arr = np.array(shares)
    fig, ax = plotting.new_figure(2.0 + 0.9 * len(labels), 4.4)
    bottom = np.zeros(len(labels))
    for i, cls in enumerate(CLASSES):
        ax.bar(range(len(labels)), arr[:, i], bottom=bottom, color=CLASS_COLOURS[cls], label=cls)
        bottom += arr[:, i]
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("task / model")
    ax.set_ylabel("fraction of attention maps")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title("Self-attention patterns per task (Kovaleva et al. Fig. 2)")
    return plotting.save_figure(fig, path)


def cosine_tasks_figure(tables: dict[str, pd.DataFrame], path: str | Path) -> Path:
    """Fig. 5 across tasks: one panel per task, one colour scale for all of them."""
    mats = {task: per_head(df) for task, df in tables.items()}
    lo = _cosine_floor(*mats.values())
    layers, heads = next(iter(mats.values())).shape
    fig, axes = plotting.new_figure(max(6.5, len(mats) * (1.0 + 0.4 * heads) + 1.0), max(3.2, 1.6 + 0.38 * layers),
                                    ncols=len(mats), squeeze=False)
    for ax, (task, m) in zip(axes[0], mats.items()):
        im = plotting.layer_head_heatmap(ax, m, vmin=lo, vmax=1.0, cmap="magma", annotate=False,
                                         title=f"{task} ({_n_text(tables[task])})")
    fig.colorbar(im, ax=axes[0].tolist(), label="cosine similarity (darker = more change)")
    fig.suptitle("Pretrained vs fine-tuned attention per head\n(Kovaleva et al. Fig. 5), mean cosine over examples",
                 fontsize=10)
    return plotting.save_figure(fig, path)


def attention_map_figure(attn: np.ndarray, title: str, path: str | Path) -> Path:
    """One attention map (n x n, rows = queries) as an image with a colour bar (the annotation sheet)."""
    fig, ax = plotting.new_figure(4.2, 4.0)
    im = ax.imshow(attn, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax)
    return plotting.save_figure(fig, path)
