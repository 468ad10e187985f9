"""Per-layer curves on relative depth, (layer + 1) / layers, so that models of any depth share one axis: the
pattern classes' shares (patterns.csv), attention entropy (entropy.csv) and the pretrained-vs-fine-tuned cosine
(cosine.csv) per layer, each the mean over the layer's heads; alpha_0 comes from :mod:`bertology.compare.sinks`.
:func:`depth` joins them and adds the curves pooled over tasks (docs/reference.md#compare-depth)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bertology.compare.common import POOLED, VARIANTS, frame, missing, relative_depth, rows_of, size
from bertology.kovaleva.patterns import CLASSES

DEPTH_COLUMNS = ("model", "task", "kind", "variant", "statistic", "layer", "layers", "depth", "value", "n_heads",
                 "note")

#: the statistics of depth.csv, in the figure's order
STATISTICS = ("alpha_0", "entropy", "entropy_ratio", *(f"pattern_{c}" for c in CLASSES), "cosine")


def layer_curve(per_head: pd.DataFrame, layers: int, **labels: str) -> pd.DataFrame:
    """Per-head values (layer, head, value) -> depth.csv rows: per layer the mean over its heads (n_heads of
    them), at relative depth (layer + 1) / layers; labels: model, task, kind, variant, statistic."""
    curve = per_head.groupby("layer", as_index=False).agg(value=("value", "mean"), n_heads=("value", "size"))
    return curve.assign(**labels, layers=layers, depth=relative_depth(curve["layer"], layers), note="")[
        list(DEPTH_COLUMNS)]


def _variants(tables: Mapping[str, pd.DataFrame], model: str) -> list[str]:
    """The pretrained variant, and the fine-tuned one where the model has its rows for some task."""
    table = rows_of(tables, model)
    present = set(table["variant"]) if len(table) else set()
    return [v for v in VARIANTS if v == "pretrained" or v in present]


def _not_computed(model: str, task: str, kind: str, variant: str, statistic: str, note: str) -> pd.DataFrame:
    return frame([{"model": model, "task": task, "kind": kind, "variant": variant, "statistic": statistic,
                   "note": note}], DEPTH_COLUMNS)


def pattern_layers(patterns: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
                   sources: Mapping[str, str]) -> pd.DataFrame:
    """Each pattern class's share per layer (statistic ``pattern_{class}``): per head its fraction of maps
    (0 where the head has no row of the class), mean over the layer's heads; per model, task and variant.
    sources: the path text of each source (``patterns``), for the notes (:mod:`bertology.compare.common`)."""
    out = []
    for model, kind in kinds.items():
        for variant in _variants(patterns, model):
            for task in tasks:
                rows = rows_of(patterns, model, task, variant)
                rows = rows[(rows["layer"] >= 0) & (rows["head"] >= 0)] if len(rows) else rows
                if len(rows) == 0:
                    out.append(_not_computed(model, task, kind, variant, "pattern",
                                             missing(sources, "patterns", task, variant=variant)))
                    continue
                layers, _ = size(rows)
                wide = rows.pivot_table(index=["layer", "head"], columns="class", values="fraction",
                                        aggfunc="mean").reindex(columns=list(CLASSES)).fillna(0.0)
                for cls in CLASSES:
                    heads = wide[cls].rename("value").reset_index()
                    out.append(layer_curve(heads, layers, model=model, task=task, kind=kind, variant=variant,
                                           statistic=f"pattern_{cls}"))
    return pd.concat(out, ignore_index=True) if out else frame([], DEPTH_COLUMNS)


def entropy_layers(entropy: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
                   sources: Mapping[str, str]) -> pd.DataFrame:
    """Attention entropy per layer: ``entropy`` = the mean over heads of each head's mean entropy of its query
    rows (feature ``all``, nats); ``entropy_ratio`` = the mean over heads of that entropy over the head's uniform
    reference (feature ``uniform``: ln n, on a causal map ln(t + 1)), comparable across tokenizers and lengths.
    sources: the path text of each source (``entropy``), for the notes (:mod:`bertology.compare.common`)."""
    out = []
    for model, kind in kinds.items():
        for variant in _variants(entropy, model):
            for task in tasks:
                rows = rows_of(entropy, model, task, variant)
                wide = (rows.pivot_table(index=["layer", "head"], columns="feature", values="mean")
                        if len(rows) else pd.DataFrame())
                if "all" not in wide or "uniform" not in wide:
                    out.append(_not_computed(model, task, kind, variant, "entropy",
                                             missing(sources, "entropy", task, variant=variant)))
                    continue
                layers, _ = size(wide.reset_index())
                labels = {"model": model, "task": task, "kind": kind, "variant": variant}
                heads = wide.reset_index()
                out.append(layer_curve(heads.assign(value=heads["all"]), layers, **labels, statistic="entropy"))
                out.append(layer_curve(heads.assign(value=heads["all"] / heads["uniform"]), layers, **labels,
                                       statistic="entropy_ratio"))
    return pd.concat(out, ignore_index=True) if out else frame([], DEPTH_COLUMNS)


def cosine_layers(cosine: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], tasks: Sequence[str], *,
                  sources: Mapping[str, str]) -> pd.DataFrame:
    """The pretrained-vs-fine-tuned cosine per layer (statistic ``cosine``, variant ``finetuned``: the first
    seed's fine-tuned model against the pretrained one): the mean over the layer's heads of each head's mean cosine.
    Only where the model has a cosine.csv for some task: a model that was not fine-tuned has no curve and no note.
    sources: the path text of each source (``cosine``: the first seed's), for the notes
    (:mod:`bertology.compare.common`)."""
    out = []
    for model, kind in kinds.items():
        if len(rows_of(cosine, model)) == 0:
            continue
        for task in tasks:
            rows = rows_of(cosine, model, task)
            if len(rows) == 0:
                out.append(_not_computed(model, task, kind, "finetuned", "cosine", missing(sources, "cosine", task)))
                continue
            layers, _ = size(rows)
            out.append(layer_curve(rows.assign(value=rows["mean"]), layers, model=model, task=task, kind=kind,
                                   variant="finetuned", statistic="cosine"))
    return pd.concat(out, ignore_index=True) if out else frame([], DEPTH_COLUMNS)


def pooled(curves: pd.DataFrame) -> pd.DataFrame:
    """Each model's curves pooled over tasks: per variant, statistic and layer the mean of the tasks' values
    (``task`` = all, ``n_heads`` = the heads summed over tasks, ``note`` = the tasks), for the models and
    statistics computed on two or more tasks."""
    done = curves[curves["note"].fillna("") == ""]
    keys = ["model", "kind", "variant", "statistic", "layer", "layers"]
    if done.empty:
        return frame([], DEPTH_COLUMNS)
    grouped = done.groupby(keys, as_index=False, sort=False).agg(
        value=("value", "mean"), n_heads=("n_heads", "sum"), tasks=("task", lambda t: ", ".join(dict.fromkeys(t))),
        n_tasks=("task", "nunique"))
    grouped = grouped[grouped["n_tasks"] > 1]
    return grouped.assign(task=POOLED, depth=relative_depth(grouped["layer"], grouped["layers"]),
                          note="pooled over " + grouped["tasks"])[list(DEPTH_COLUMNS)]


def depth(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """depth.csv: the per-layer curves of `parts` (depth.csv rows: alpha_0, patterns, entropy, cosine), then their
    curves pooled over tasks; rows in the order model, task, variant, statistic (STATISTICS' order), layer."""
    rows = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else frame(
        [], DEPTH_COLUMNS)
    rows = pd.concat([rows, pooled(rows)], ignore_index=True) if len(rows) else rows
    order = {s: i for i, s in enumerate((*STATISTICS, "pattern"))}
    first = {c: list(dict.fromkeys(rows[c])) for c in ("model", "task", "variant")}
    keys = {f"_{c}": rows[c].map(first[c].index) for c in first}
    keys["_pooled"] = rows["task"].eq(POOLED)
    keys["_statistic"] = rows["statistic"].map(order).fillna(len(order))
    ranked = rows.assign(**keys).sort_values(["_model", "_pooled", "_task", "_variant", "_statistic", "layer"],
                                             kind="stable")
    return ranked.drop(columns=list(keys)).reset_index(drop=True)[list(DEPTH_COLUMNS)]

__all__ = ["DEPTH_COLUMNS", "STATISTICS", "cosine_layers", "depth", "entropy_layers", "layer_curve", "pattern_layers",
           "pooled"]
