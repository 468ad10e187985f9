"""Kovaleva et al. 2019, Table 1: GLUE scores of the pretrained model (untrained head), the model
fine-tuned from a normal-distribution init, and the model fine-tuned from the pretrained weights.

table1.csv is long (task, variant, metric, value, n; values are fractions as bertology.metrics returns
them); table1.md lays it out like the paper (percentages, one decimal, F1/Acc pairs); the figure shows
grouped bars per task and metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from bertology.tasks import TASKS, get_task

VARIANT_ORDER = ("pretrained", "random-finetuned", "finetuned")  # the paper's column order of tasks.SCORE_VARIANTS
VARIANT_HEADERS = {
    "pretrained": "Pre-trained",
    "random-finetuned": "Fine-tuned, initialized with normal distr.",
    "finetuned": "Fine-tuned, initialized with pre-trained",
}
VARIANT_LABELS = {"pretrained": "pre-trained, untrained head", "random-finetuned": "fine-tuned from random init",
                  "finetuned": "fine-tuned from pre-trained"}
TASK_ORDER = ("mrpc", "stsb", "sst2", "qqp", "rte", "qnli", "mnli", "cola")  # the paper's row order
METRIC_SHORT = {"accuracy": "Acc", "f1": "F1", "mcc": "MCC", "pearson": "Pearson", "spearman": "Spearman"}
COLUMNS = ["task", "variant", "metric", "value", "n"]


def scores_frame(scores: Iterable[Mapping]) -> pd.DataFrame:
    """Score dicts (results/scores/{task}/{variant}.json) -> the long table (task, variant, metric, value, n).

    Rows follow the paper's task order, then the variant order, then the task's metric order.
    """
    rows = []
    for s in scores:
        for key in ("task", "variant", "metrics", "n"):
            if key not in s:
                raise ValueError(f"a score record lacks {key!r}: {dict(s)!r}; re-create it with the score rule")
        spec = get_task(s["task"])
        if s["variant"] not in VARIANT_ORDER:
            raise ValueError(f"unknown variant {s['variant']!r}; expected one of {VARIANT_ORDER}")
        for metric in spec.metrics:
            if metric not in s["metrics"]:
                raise ValueError(f"score of {s['task']}/{s['variant']} lacks metric {metric!r}")
            rows.append({"task": s["task"], "variant": s["variant"], "metric": metric,
                         "value": float(s["metrics"][metric]), "n": int(s["n"])})
    df = pd.DataFrame(rows, columns=COLUMNS)
    if df.empty:
        return df
    task_rank = {t: i for i, t in enumerate(TASK_ORDER)}
    df["_t"] = df["task"].map(task_rank)
    df["_v"] = df["variant"].map({v: i for i, v in enumerate(VARIANT_ORDER)})
    df["_m"] = [get_task(t).metrics.index(m) for t, m in zip(df["task"], df["metric"])]
    return df.sort_values(["_t", "_v", "_m"]).drop(columns=["_t", "_v", "_m"]).reset_index(drop=True)


def _size(n: int | None) -> str:
    """5801 -> '5.8K', 400000 -> '400K', 277 -> '277' (the paper's style)."""
    if n is None:
        return "–"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}K"
    if n >= 1_000:
        return f"{n / 1e3:.1f}K"
    return str(n)


def format_cell(values: Mapping[str, float], metrics: tuple[str, ...]) -> str:
    """{'f1': 0.879, 'accuracy': 0.823} -> '87.9/82.3' (percent, one decimal, in the task's metric order)."""
    if not values:
        return "–"
    return "/".join(f"{100 * values[m]:.1f}" if m in values else "–" for m in metrics)


def table1_markdown(df: pd.DataFrame, train_sizes: Mapping[str, int] | None = None) -> str:
    """The paper's layout: one row per task; Pre-trained | normal-init fine-tuned | pre-trained fine-tuned
    | Metric | Size (train examples) | n (eval examples)."""
    train_sizes = train_sizes or {}
    header = ["Dataset", *(VARIANT_HEADERS[v] for v in VARIANT_ORDER), "Metric", "Size", "Eval n"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    tasks = [t for t in TASK_ORDER if t in set(df["task"])]
    for task in tasks:
        spec = TASKS[task]
        sub = df[df["task"] == task]
        cells = []
        for variant in VARIANT_ORDER:
            v = sub[sub["variant"] == variant]
            cells.append(format_cell(dict(zip(v["metric"], v["value"])), spec.metrics))
        n = sorted(set(sub["n"]))
        metric = "/".join(METRIC_SHORT.get(m, m) for m in spec.metrics)
        lines.append("| " + " | ".join([spec.display, *cells, metric, _size(train_sizes.get(task)),
                                         "/".join(map(str, n))]) + " |")
    note = ("\nScores on the validation split (MNLI: matched), in percent. Size = training examples; "
            "Eval n = validation examples scored. Pre-trained = the pre-trained encoder with an untrained "
            "(seeded, randomly initialised) classification head.\n")
    return "\n".join(lines) + "\n" + note


def plot_table1(df: pd.DataFrame, path: str | Path, title: str | None = None) -> Path:
    """Grouped bars: one group per (task, metric), one bar per variant; values in percent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups = list(dict.fromkeys(zip(df["task"], df["metric"])))
    variants = [v for v in VARIANT_ORDER if v in set(df["variant"])]
    width = 0.8 / max(1, len(variants))
    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.3 * len(groups) + 2), 4.6))
    colours = {"pretrained": "#9e9e9e", "random-finetuned": "#e6a04e", "finetuned": "#3b75af"}
    for i, variant in enumerate(variants):
        sub = df[df["variant"] == variant].set_index(["task", "metric"])["value"]
        vals = [100 * sub.get(g, np.nan) for g in groups]
        bars = ax.bar(x + (i - (len(variants) - 1) / 2) * width, vals, width, label=VARIANT_LABELS[variant],
                      color=colours[variant])
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    ax.set_xticks(x, [f"{TASKS[t].display}\n{METRIC_SHORT.get(m, m)}" for t, m in groups])
    ax.set_xlabel("task and metric (validation split)")
    ax.set_ylabel("score (%)")
    lo = min(0.0, 100 * float(df["value"].min()) - 5) if len(df) else 0.0
    ax.set_ylim(lo, 105)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_title(title or "Table 1: GLUE scores by initialisation (Kovaleva et al. 2019)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
