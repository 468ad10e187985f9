"""Kovaleva et al. 2019, Table 1: GLUE scores of the pretrained model (untrained head), the model
fine-tuned from a normal-distribution init, and the model fine-tuned from the pretrained weights.

Every cell is taken over the fine-tuning seeds (``train.seeds``): one score record per task, variant and
seed. table1.csv is long (task, variant, metric, value, n, std, n_seeds: value = the mean over seeds,
std = their sample standard deviation, n = validation examples; values are fractions as
bertology.models.metrics returns them); table1_tests.csv holds Welch's t-test of every pair of variants per
task and metric over seeds; table1.md lays it out like the paper (percentages, one decimal, F1/Acc
pairs, ± std and the significant differences marked); the figure shows grouped bars with the std.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from bertology.pipeline.plotting import save_figure
from bertology.pipeline.tasks import get_task
from bertology.pipeline.errors import InputError

VARIANT_ORDER = ("pretrained", "random-finetuned", "finetuned")  # the paper's column order of tasks.SCORE_VARIANTS
VARIANT_HEADERS = {
    "pretrained": "Pre-trained",
    "random-finetuned": "Fine-tuned, initialized with normal distr.",
    "finetuned": "Fine-tuned, initialized with pre-trained",
}
VARIANT_LABELS = {"pretrained": "pre-trained, untrained head", "random-finetuned": "fine-tuned from random init",
                  "finetuned": "fine-tuned from pre-trained"}
TASK_ORDER = ("mrpc", "stsb", "sst2", "qqp", "rte", "qnli", "mnli", "cola")  # the paper's row order
METRIC_SHORT = {"accuracy": "Acc", "f1": "F1", "macro_f1": "macro-F1", "mcc": "MCC", "pearson": "Pearson", "spearman": "Spearman"}
SEED_COLUMNS = ["task", "variant", "seed", "metric", "value", "n"]
COLUMNS = ["task", "variant", "metric", "value", "n", "std", "n_seeds"]
TEST_COLUMNS = ["task", "metric", "variant_a", "variant_b", "mean_a", "mean_b", "difference", "n_a", "n_b",
                "test", "statistic", "df", "p", "significant"]
# The pairs tested, each (a, b) with a the later column of the paper's table; the mark a cell of variant
# a carries when it differs significantly from b.
PAIRS = (("random-finetuned", "pretrained"), ("finetuned", "pretrained"), ("finetuned", "random-finetuned"))
MARKS = {"pretrained": "†", "random-finetuned": "‡"}
WELCH = "welch_t"


def _task_rank(tasks: Iterable[str]) -> dict[str, int]:
    """Rank of each task in the tables: GLUE tasks in the paper's row order, then declared tasks by name."""
    names = sorted(set(tasks), key=lambda t: (TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER), t))
    return {t: i for i, t in enumerate(names)}


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the paper's task order, then the variant order, then the task's metric order."""
    keys = {"_t": df["task"].map(_task_rank(df["task"])),
            "_v": df["variant"].map({v: i for i, v in enumerate(VARIANT_ORDER)}),
            "_m": [get_task(t).metrics.index(m) for t, m in zip(df["task"], df["metric"])]}
    extra = ["seed"] if "seed" in df.columns else []
    return (df.assign(**keys).sort_values(["_t", "_v", "_m", *extra], kind="stable")
            .drop(columns=list(keys)).reset_index(drop=True))


def scores_frame(scores: Iterable[Mapping]) -> pd.DataFrame:
    """Score dicts (results/scores/{task}/{variant}{seedtag}.json) -> the long per-seed table
    (task, variant, seed, metric, value, n); a record without 'seed' counts as one seed, -1.

    Rows follow the paper's task order, then the variant order, then the task's metric order, then the
    seed. Raises ValueError on a record lacking a key or metric, an unknown variant, or two records of
    the same task, variant and seed.
    """
    rows = []
    for s in scores:
        for key in ("task", "variant", "metrics", "n"):
            if key not in s:
                raise InputError(f"a score record lacks {key!r}: {dict(s)!r}; re-create it with the score rule")
        spec = get_task(s["task"])
        if s["variant"] not in VARIANT_ORDER:
            raise InputError(f"unknown variant {s['variant']!r}; expected one of {VARIANT_ORDER}")
        for metric in spec.metrics:
            if metric not in s["metrics"]:
                raise InputError(f"score of {s['task']}/{s['variant']} lacks metric {metric!r}")
            rows.append({"task": s["task"], "variant": s["variant"], "seed": int(s.get("seed", -1)),
                         "metric": metric, "value": float(s["metrics"][metric]), "n": int(s["n"])})
    df = pd.DataFrame(rows, columns=SEED_COLUMNS)
    if df.empty:
        return df
    dup = df.duplicated(["task", "variant", "seed", "metric"])
    if dup.any():
        task, variant, seed = df.loc[dup.idxmax(), ["task", "variant", "seed"]]
        raise InputError(f"two scores of {task}/{variant} with seed {seed}; give each seed's score once")
    return _order(df)


def aggregate_seeds(per_seed: pd.DataFrame) -> pd.DataFrame:
    """The per-seed table of :func:`scores_frame` -> one row per task, variant and metric (COLUMNS):
    value = mean over seeds, std = sample standard deviation (ddof 1; NaN for one seed), n_seeds = how
    many seeds, n = validation examples (the same for every seed, else ValueError)."""
    if per_seed.empty:
        return pd.DataFrame(columns=COLUMNS)
    groups = per_seed.groupby(["task", "variant", "metric"], sort=False)
    n_values = groups["n"].nunique()
    if (n_values > 1).any():
        task, variant, _ = n_values[n_values > 1].index[0]
        raise InputError(f"the seeds of {task}/{variant} were scored on different numbers of examples; "
                         f"re-run their score jobs on the same validation split")
    out = groups.agg(value=("value", "mean"), n=("n", "first"), std=("value", "std"),
                     n_seeds=("value", "size")).reset_index()
    return _order(out)[COLUMNS]


def variant_tests(per_seed: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Welch's two-sided t-test (scipy.stats.ttest_ind, equal_var=False) over seeds of every pair in
    PAIRS, per task and metric (TEST_COLUMNS; difference = mean_a - mean_b).

    No test (test 'none', p NaN, significant False) where a variant has fewer than two seeds, or where
    neither varies over seeds (the t statistic is undefined). No correction for the number of tests.
    """
    from scipy import stats

    rows = []
    for (task, metric), sub in per_seed.groupby(["task", "metric"], sort=False):
        values = {v: g["value"].to_numpy(dtype=float) for v, g in sub.groupby("variant")}
        for a, b in PAIRS:
            if a not in values or b not in values:
                continue
            xa, xb = values[a], values[b]
            row = {"task": task, "metric": metric, "variant_a": a, "variant_b": b, "mean_a": xa.mean(),
                   "mean_b": xb.mean(), "difference": xa.mean() - xb.mean(), "n_a": len(xa), "n_b": len(xb),
                   "test": "none", "statistic": math.nan, "df": math.nan, "p": math.nan, "significant": False}
            if min(len(xa), len(xb)) >= 2 and (xa.std() > 0 or xb.std() > 0):
                with warnings.catch_warnings():  # one constant side is fine: its variance is exactly 0
                    warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
                    res = stats.ttest_ind(xa, xb, equal_var=False)
                row.update(test=WELCH, statistic=float(res.statistic), df=float(res.df), p=float(res.pvalue),
                           significant=bool(res.pvalue < alpha))
            rows.append(row)
    out = pd.DataFrame(rows, columns=TEST_COLUMNS)
    if out.empty:
        return out
    task_rank = _task_rank(out["task"])
    pair_rank = {p: i for i, p in enumerate(PAIRS)}
    keys = {"_t": out["task"].map(task_rank),
            "_m": [get_task(t).metrics.index(m) for t, m in zip(out["task"], out["metric"])],
            "_p": [pair_rank[(a, b)] for a, b in zip(out["variant_a"], out["variant_b"])]}
    return out.assign(**keys).sort_values(list(keys), kind="stable").drop(columns=list(keys)).reset_index(drop=True)


def _size(n: int | None) -> str:
    """A data set's size in the paper's style.

    >>> _size(5801), _size(400000), _size(277)
    ('5.8K', '400K', '277')
    """
    if n is None:
        return "–"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}K"
    if n >= 1_000:
        return f"{n / 1e3:.1f}K"
    return str(n)


def format_cell(values: Mapping[str, float], metrics: tuple[str, ...], std: Mapping[str, float] | None = None,
                marks: Mapping[str, str] | None = None) -> str:
    """Percent, one decimal, in the task's metric order; a std follows its value (a NaN std, one seed, is left
    out); marks are appended to their metric's number.

    >>> format_cell({"f1": 0.879, "accuracy": 0.823}, ("f1", "accuracy"))
    '87.9/82.3'
    >>> format_cell({"f1": 0.879, "accuracy": 0.823}, ("f1", "accuracy"), std={"f1": 0.012, "accuracy": math.nan},
    ...             marks={"f1": "†"})
    '87.9 ± 1.2†/82.3'
    """
    if not values:
        return "–"
    std, marks = std or {}, marks or {}
    parts = []
    for m in metrics:
        if m not in values:
            parts.append("–")
            continue
        sd = std.get(m, math.nan)
        parts.append(f"{100 * values[m]:.1f}" + (f" ± {100 * sd:.1f}" if math.isfinite(sd) else "")
                     + marks.get(m, ""))
    return "/".join(parts)


def _marks(tests: pd.DataFrame | None, task: str, variant: str) -> dict[str, str]:
    """metric -> the marks of the variants `variant` differs from significantly (MARKS), for one task."""
    if tests is None or tests.empty:
        return {}
    sig = tests[(tests["task"] == task) & (tests["variant_a"] == variant) & tests["significant"].astype(bool)]
    out: dict[str, str] = {}
    for metric, b in zip(sig["metric"], sig["variant_b"]):
        out[metric] = out.get(metric, "") + MARKS[b]
    return out


def table1_markdown(df: pd.DataFrame, train_sizes: Mapping[str, int] | None = None,
                    tests: pd.DataFrame | None = None, *, alpha: float,
                    unseen: Mapping[str, list[str]] | None = None) -> str:
    """The paper's layout from :func:`aggregate_seeds`'s table and :func:`variant_tests`'s: one row per task;
    Pre-trained | normal-init fine-tuned | pre-trained fine-tuned (mean ± std over seeds, significant
    differences marked) | Metric | Size (train examples) | Eval n (eval examples) | Seeds. `unseen`: task ->
    the validation classes that never occur in its training split (a declared task's ``unseen_labels: allow``),
    each task with any noted under the table."""
    train_sizes = train_sizes or {}
    header = ["Dataset", *(VARIANT_HEADERS[v] for v in VARIANT_ORDER), "Metric", "Size", "Eval n", "Seeds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    tasks = sorted(set(df["task"]), key=_task_rank(df["task"]).__getitem__)
    for task in tasks:
        spec = get_task(task)
        sub = df[df["task"] == task]
        cells = []
        for variant in VARIANT_ORDER:
            v = sub[sub["variant"] == variant]
            cells.append(format_cell(dict(zip(v["metric"], v["value"])), spec.metrics,
                                     std=dict(zip(v["metric"], v["std"])), marks=_marks(tests, task, variant)))
        n = sorted(set(sub["n"]))
        seeds = sorted(set(sub["n_seeds"]))
        metric = "/".join(METRIC_SHORT.get(m, m) for m in spec.metrics)
        lines.append("| " + " | ".join([spec.display, *cells, metric, _size(train_sizes.get(task)),
                                         "/".join(map(str, n)), "/".join(map(str, seeds))]) + " |")
    note = ("\nScores on the validation split (MNLI: matched), in percent. Size = training examples; "
            "Eval n = validation examples scored; Seeds = fine-tuning seeds (train.seeds) per cell. "
            "Pre-trained = the pre-trained encoder with an untrained (seeded, randomly initialised) "
            "classification head.\n")
    tested = 0 if tests is None or tests.empty else int((tests["test"] == WELCH).sum())
    if df.empty or df["n_seeds"].max() < 2:
        note += ("\nOne seed per cell: no test of the differences between variants "
                 "(list two or more train.seeds for the mean ± std over seeds and Welch's t-tests).\n")
    else:
        note += (f"\nMean ± standard deviation over seeds. {MARKS['pretrained']} differs from Pre-trained, "
                 f"{MARKS['random-finetuned']} differs from fine-tuned from normal init: Welch's two-sided "
                 f"t-test over seeds (scipy.stats.ttest_ind, equal_var=False), p < {alpha:g}, per task and "
                 f"metric, not corrected for the {tested} tests; table1_tests.csv holds every t, df and p. "
                 f"No test where a variant has one seed or neither varies over seeds.\n")
    for task, classes in sorted((unseen or {}).items()):
        if classes:
            note += (f"\n{task}: validation label(s) {', '.join(map(repr, classes))} never occur in its training "
                     f"split (unseen_labels: allow): the classifier was never trained on them, and its scores count "
                     f"them.\n")
    return "\n".join(lines) + "\n" + note


def plot_table1(df: pd.DataFrame, path: str | Path, title: str | None = None) -> Path:
    """Grouped bars: one group per (task, metric), one bar per variant (:func:`aggregate_seeds`'s table);
    values in percent, error bars = std over seeds where there are several."""
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
        sub = df[df["variant"] == variant].set_index(["task", "metric"])
        vals = [100 * sub["value"].get(g, np.nan) for g in groups]
        err = [100 * sub["std"].get(g, np.nan) if "std" in sub else np.nan for g in groups]
        bars = ax.bar(x + (i - (len(variants) - 1) / 2) * width, vals, width, label=VARIANT_LABELS[variant],
                      color=colours[variant], yerr=None if np.isnan(err).all() else np.nan_to_num(err),
                      error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    ax.set_xticks(x, [f"{get_task(t).display}\n{METRIC_SHORT.get(m, m)}" for t, m in groups])
    ax.set_xlabel("task and metric (validation split)")
    ax.set_ylabel("score (%)")
    lo = min(0.0, 100 * float(df["value"].min()) - 5) if len(df) else 0.0
    ax.set_ylim(lo, 105)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_title(title or "Table 1: GLUE scores by initialisation (Kovaleva et al. 2019)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
    fig.tight_layout()
    return save_figure(fig, path, dpi=130)
