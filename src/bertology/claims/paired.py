"""Two models compared on the same examples: the Table 1 claims' interval and test (docs/reference.md#claims).

Each score record (scores/{task}/{variant}{seedtag}.json) holds, per validation example, its ``idx``, gold
``label`` and the model's ``prediction`` (``predictions``). :func:`paired_examples` lines up the fine-tuned
model's and the baseline's records of every seed on the same examples; :func:`paired_interval` is the paired
percentile bootstrap over the examples (with two or more seeds the Multi-Bootstrap over seeds and examples) of the
mean over seeds of metric(fine-tuned) - metric(baseline), the metric recomputed on every resample with the
project's metrics (F1, MCC and correlations are not means over examples): classification metrics from each
resample's confusion counts (:func:`bertology.models.metrics.confusion_metric`), correlations from the drawn rows
(:func:`bertology.models.metrics.batched_metric`);
:func:`paired_permutation_p` is the paired permutation test of that difference (``scipy.stats.permutation_test``,
``permutation_type="samples"``: each example's two predictions swapped between the models).

Dimension glossary: S fine-tuning seeds, N examples, B resamples (bootstrap replicates or permutations).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bertology.claims.bootstrap import MIN_UNITS, Boot, percentile, side_alternative
from bertology.claims.bootstrap import scipy_stats as st
from bertology.models.metrics import CLASSIFICATION, batched_metric, confusion_cells, confusion_metric, row_counts
from bertology.stats.across_seeds import multibootstrap_indices

#: the test of the Table 1 claims (Result.test)
TEST = "scipy.stats.permutation_test"
#: the columns of a score record's per-example predictions, as the ledger reads a record (pd.json_normalize)
COLUMNS = ("predictions.idx", "predictions.label", "predictions.prediction")
#: at most this many gathered values per metric call (rows x N): bounds the memory of a batch of resamples
BLOCK = 1 << 20
#: at most this many values of the (batch, N) arrays scipy.stats.permutation_test builds per batch (its "samples"
#: permutations loop over the N examples in Python once per batch, so fewer, larger batches are faster)
PERMUTATION_BLOCK = 1 << 22


def record_predictions(score: pd.DataFrame | None) -> pd.DataFrame | None:
    """A score record as the ledger reads it (one row, ``pd.json_normalize``) -> its per-example table (N rows:
    ``idx``, ``label``, ``prediction``) sorted by ``idx``; None when it has none or its lists disagree
    in length."""
    if score is None or not set(COLUMNS) <= set(score.columns):
        return None
    idx, label, pred = (score[c].iloc[0] for c in COLUMNS)
    if not isinstance(idx, list) or not len(idx) == len(label) == len(pred):
        return None
    return pd.DataFrame({"idx": idx, "label": label, "prediction": pred}).sort_values("idx", ignore_index=True)


def paired_examples(pairs: Sequence[tuple[pd.DataFrame | None, pd.DataFrame | None]]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | str:
    """Per seed (fine-tuned score record, baseline score record) -> labels (N,), fine (S, N), base (S, N): the gold
    labels and each seed's two models' predictions on the same N examples in ``idx`` order. Or, as a string, why
    the records cannot be paired: a record without per-example predictions, or records over other examples or
    labels."""
    tables = [(record_predictions(f), record_predictions(b)) for f, b in pairs]
    if not tables or any(f is None or b is None for f, b in tables):
        return "a score record holds no per-example predictions"
    first = tables[0][0]
    for t in (t for pair in tables for t in pair):
        if not (t["idx"].is_unique and t["idx"].equals(first["idx"]) and t["label"].equals(first["label"])):
            return "the score records are not on the same examples (idx) with the same labels"
    fine = np.stack([f["prediction"].to_numpy() for f, _ in tables])
    base = np.stack([b["prediction"].to_numpy() for _, b in tables])
    return first["label"].to_numpy(), fine, base


def _rows_per_block(n: int, budget: int = BLOCK) -> int:
    """How many resamples of N examples go into one block of at most `budget` values: at least one."""
    return max(1, budget // max(1, n))


def _classes(labels: np.ndarray, fine: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The sorted class ids of the labels and of every seed's two models' predictions: (K,)."""
    return np.union1d(np.unique(labels), np.union1d(np.unique(fine), np.unique(base)))


def _confusions(cells: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """Confusion counts of weighted examples: cells (N,) (:func:`bertology.models.metrics.confusion_cells` of one model's
    predictions), weights (b, N) whole numbers (draw counts, 0/1 swap masks) -> (b, K, K): per cell, the sum of
    its examples' weights."""
    order = np.argsort(cells, kind="stable")
    present, starts = np.unique(cells[order], return_index=True)
    out = np.zeros((weights.shape[0], k * k))
    out[:, present] = np.add.reduceat(weights[:, order], starts, axis=1)
    return out.reshape(-1, k, k)


def resampled_differences(metric: str, labels: np.ndarray, fine: np.ndarray, base: np.ndarray,
                          draws: np.ndarray) -> np.ndarray:
    """metric(fine) - metric(base) of every seed on every resample of the examples.

    labels: (N,); fine, base: (S, N) predictions (class ids or scores); draws: (B, N) example indices, the same
    for both models and every seed. Returns (B, S). Classification metrics from each resample's confusion counts
    (the draw counts times each example's cell: :func:`bertology.models.metrics.confusion_metric`); correlations from the
    drawn labels and predictions (:func:`bertology.models.metrics.batched_metric` with a label vector per row).
    """
    n_seeds, n = fine.shape
    out = np.empty((draws.shape[0], n_seeds))
    if metric in CLASSIFICATION:
        classes = _classes(labels, fine, base)
        k = len(classes)
        cells_f, cells_b = confusion_cells(labels, fine, classes), confusion_cells(labels, base, classes)  # (S, N)
    step = _rows_per_block(2 * n)
    for start in range(0, draws.shape[0], step):
        idx = draws[start:start + step]                                    # (b, N)
        b = idx.shape[0]
        if metric in CLASSIFICATION:
            w = row_counts(idx, n)                                        # (b, N)
            for s in range(n_seeds):
                out[start:start + b, s] = (confusion_metric(metric, _confusions(cells_f[s], w, k), classes)
                                           - confusion_metric(metric, _confusions(cells_b[s], w, k), classes))
            continue
        lab = labels[idx]
        both_labels = np.concatenate([lab, lab])                           # (2b, N)
        for s in range(n_seeds):
            m = batched_metric(metric, both_labels, np.concatenate([fine[s][idx], base[s][idx]]))  # (2b,)
            out[start:start + b, s] = m[:b] - m[b:]
    return out


def paired_interval(metric: str, labels: np.ndarray, fine: np.ndarray, base: np.ndarray,
                    boot: Boot) -> tuple[float, float]:
    """Percentile interval of the mean over seeds of metric(fine) - metric(base), resampling the examples.

    labels: (N,); fine, base: (S, N). Each of `boot.resamples` replicates draws N examples with replacement (the
    same for both models: paired) and, with S >= 2, S seeds with replacement, together (the Multi-Bootstrap of
    Sellam et al. 2022: :func:`bertology.stats.across_seeds.multibootstrap_indices`, seeded by `boot.seed`); its value is the
    mean over the drawn seeds (with their multiplicity) of each one's difference on the drawn examples. NaN, NaN
    when N < :data:`~bertology.claims.bootstrap.MIN_UNITS` or no replicate is finite.
    """
    n_seeds, n = fine.shape
    if n < MIN_UNITS:
        return float("nan"), float("nan")
    seed_draws, example_draws = multibootstrap_indices(n_seeds, n, boot.resamples, boot.seed)  # (B, S), (B, N)
    diffs = resampled_differences(metric, labels, fine, base, example_draws)                   # (B, S)
    counts = row_counts(seed_draws, n_seeds)                                                   # (B, S)
    return percentile((counts * diffs).sum(axis=1) / n_seeds, boot.confidence)


def swapped_differences(metric: str, labels: np.ndarray, fine: np.ndarray, base: np.ndarray,
                        swaps: np.ndarray) -> np.ndarray:
    """The mean over seeds of metric(one side) - metric(the other) when the two models' predictions of the
    examples `swaps` marks trade places (the same for every seed).

    labels: (N,); fine, base: (S, N); swaps: (R, N) bool, True where example i's fine-tuned prediction goes to the
    other side. Returns (R,); no swap gives the observed difference.
    """
    n_seeds, n = fine.shape
    out = np.zeros(swaps.shape[0])
    if metric in CLASSIFICATION:
        classes = _classes(labels, fine, base)
        k = len(classes)
        w = swaps.astype(np.float64)                                       # (R, N)
        for cells_f, cells_b in zip(confusion_cells(labels, fine, classes), confusion_cells(labels, base, classes),
                                    strict=True):
            # what the swaps move from the fine-tuned side to the other, and back
            moved = _confusions(cells_b, w, k) - _confusions(cells_f, w, k)             # (R, K, K)
            side_f = _confusions(cells_f, np.ones((1, n)), k) + moved
            side_b = _confusions(cells_b, np.ones((1, n)), k) - moved
            out += confusion_metric(metric, side_f, classes) - confusion_metric(metric, side_b, classes)
        return out / n_seeds
    step = _rows_per_block(2 * n)
    for start in range(0, swaps.shape[0], step):
        sw = swaps[start:start + step]
        r = sw.shape[0]
        for s in range(n_seeds):
            sides = np.concatenate([np.where(sw, base[s], fine[s]), np.where(sw, fine[s], base[s])])  # (2r, N)
            m = batched_metric(metric, labels, sides)
            out[start:start + r] += m[:r] - m[r:]
    return out / n_seeds


def paired_permutation_p(metric: str, labels: np.ndarray, fine: np.ndarray, base: np.ndarray, boot: Boot, *,
                         side: str) -> float:
    """One-sided p of the paired permutation test of the mean over seeds of metric(fine) - metric(base).

    labels: (N,); fine, base: (S, N). ``scipy.stats.permutation_test`` with ``permutation_type="samples"``: under
    the null the two models' predictions of an example are exchangeable, so each permutation swaps them or not,
    example by example (the same swap for every seed: :func:`swapped_differences`); `boot.resamples` permutations
    (every one of the 2**N when that is fewer: exact), rng seeded by `boot.seed`, alternative on the paper's `side`.
    """
    n = fine.shape[1]

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        """x, y: (..., N) example i's fine-tuned (i) or baseline (N + i) prediction on each side -> (...,)."""
        swaps = np.asarray(x).reshape(-1, n) >= n
        return swapped_differences(metric, labels, fine, base, swaps).reshape(np.shape(x)[:-1])

    res = st.permutation_test((np.arange(n), np.arange(n) + n), statistic, permutation_type="samples",
                              vectorized=True, n_resamples=boot.resamples, alternative=side_alternative(side),
                              batch=_rows_per_block(n, PERMUTATION_BLOCK), rng=np.random.default_rng(boot.seed))
    return float(res.pvalue)
