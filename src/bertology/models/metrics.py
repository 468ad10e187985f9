"""GLUE metrics: accuracy, F1, MCC, Pearson and Spearman, one implementation for everything.

:func:`batched_metric` scores many prediction vectors against the same labels at once (one row per
configuration of a disabling sweep, or per bootstrap resample); :func:`compute_metrics` (Table 1, training
evaluation) is that same code on one row. The formulas reproduce, operation for operation, the libraries
the project used before (scikit-learn 1.9 ``accuracy_score``, ``f1_score(zero_division=0)``,
``matthews_corrcoef``; SciPy 1.17 ``pearsonr``, ``spearmanr``), so their numbers are equal bit for bit
(checked in tests/test_ablation_stats.py). The one deliberate difference: a constant prediction or label
vector (all values equal) has correlation 0, where SciPy says NaN (the paper's untrained-head case).

Glossary: E examples, C rows (configurations, resamples). Predictions are class ids (classification) or
scores (STS-B regression). The labels are one (E,) vector for every row, or (C, E), one per row (a bootstrap
resample of the examples draws the labels with the predictions: :func:`bertology.claims.paired`).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from bertology.pipeline.tasks import get_task

METRICS = ("accuracy", "f1", "macro_f1", "mcc", "pearson", "spearman")
#: the metrics of class ids, computed from confusion counts (:func:`confusion_metric`)
CLASSIFICATION = ("accuracy", "f1", "macro_f1", "mcc")


def predictions_from_logits(logits: np.ndarray, regression: bool) -> np.ndarray:
    """(..., E, K) logits -> (..., E) class ids; regression outputs (K == 1) -> (..., E) float64 scores."""
    logits = np.asarray(logits)
    if regression:
        if logits.ndim == 1:
            return logits.astype(np.float64)
        return logits[..., 0].astype(np.float64)
    return logits.argmax(axis=-1)


def _constant(a: np.ndarray) -> np.ndarray:
    """(C, E) -> (C,) True where every value of the row is equal."""
    return (a == a[:, :1]).all(axis=1)


def confusion(labels: np.ndarray, preds: np.ndarray,
              classes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's confusion counts: labels (E,) or (C, E), preds (C, E) class ids -> ((C, K, K) float64, (K,)):
    [c, i, j] = the examples of row c with label classes[i] predicted classes[j]; classes: the sorted ids of the
    labels and predictions (given: any sorted superset of them)."""
    if classes is None:
        classes = np.union1d(np.unique(labels), np.unique(preds))
    k = len(classes)
    cells = np.broadcast_to(confusion_cells(labels, preds, classes), preds.shape)   # (C, E)
    return row_counts(cells, k * k).reshape(-1, k, k), classes


def confusion_cells(labels: np.ndarray, preds: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each example's cell of the confusion counts, i * K + j for label classes[i] and prediction classes[j]:
    labels and preds of broadcastable shapes (..., E), classes (K,) sorted -> int array in [0, K * K)."""
    return np.searchsorted(classes, labels) * len(classes) + np.searchsorted(classes, preds)


def row_counts(codes: np.ndarray, size: int) -> np.ndarray:
    """How often each value occurs in each row: codes (C, E) ints in [0, size) -> (C, size) float64."""
    rows = codes.shape[0]
    flat = (codes + (np.arange(rows) * size)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(np.float64)


def confusion_metric(name: str, counts: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """A classification metric of each row's confusion counts: counts (C, K, K) over the sorted `classes` (K,)
    (:func:`confusion`) -> (C,). The counts may be any whole numbers (a bootstrap resample's examples counted with
    their draws: bertology.claims.paired); the arithmetic is on whole numbers until the last division, so a row's
    value does not depend on how its counts were summed.

    accuracy: correct / all; f1: 2 tp / (2 tp + fp + fn) of class 1, 0 when undefined (or no class 1); macro_f1:
    that per class, averaged over the classes present in the row's labels or predictions (scikit-learn's
    ``f1_score(average="macro", zero_division=0)``); mcc: scikit-learn's multi-class ``matthews_corrcoef``, 0 when
    undefined.
    """
    tp = np.diagonal(counts, axis1=1, axis2=2)        # (C, K)
    t = counts.sum(axis=2)                             # (C, K): labels of each class
    p = counts.sum(axis=1)                             # (C, K): predictions of each class
    if name == "accuracy":
        return tp.sum(axis=1) / counts.sum(axis=(1, 2))
    if name == "f1":
        one = np.flatnonzero(classes == 1)
        if one.size == 0:
            return np.zeros(counts.shape[0])
        tp1 = tp[:, one[0]]
        denom = 2 * tp1 + (p[:, one[0]] - tp1) + (t[:, one[0]] - tp1)
        return np.where(denom > 0, 2 * tp1 / np.maximum(denom, 1), 0.0)
    if name == "macro_f1":
        total = np.zeros(counts.shape[0], dtype=np.float64)
        present = np.zeros(counts.shape[0], dtype=np.float64)
        for k in range(len(classes)):                  # in class order, as scikit-learn sums them
            denom = 2 * tp[:, k] + (p[:, k] - tp[:, k]) + (t[:, k] - tp[:, k])
            here = denom > 0                           # class k is in the row's labels or predictions
            total += np.where(here, 2 * tp[:, k] / np.maximum(denom, 1), 0.0)
            present += here
        return total / np.maximum(present, 1)
    if name == "mcc":
        s = counts.sum(axis=(1, 2))
        cov_ytyp = tp.sum(axis=1) * s - (p * t).sum(axis=1)
        cov_ypyp = s * s - (p * p).sum(axis=1)
        cov_ytyt = s * s - (t * t).sum(axis=1)
        denom = cov_ytyt * cov_ypyp
        out = np.zeros(counts.shape[0])
        ok = denom > 0
        out[ok] = cov_ytyp[ok] / np.sqrt(denom[ok])
        return out
    raise ValueError(f"{name!r} is no classification metric; known: {', '.join(CLASSIFICATION)}")


def _classification(name: str):
    """The batched form of a classification metric: labels (E,) or (C, E), preds (C, E) -> (C,), through each row's
    confusion counts."""
    def metric(labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
        return confusion_metric(name, *confusion(labels, preds))
    return metric


def _pearson(labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """Pearson r per row, SciPy's ``pearsonr(labels, row)`` steps along the last axis; 0 for a constant side.

    Inputs must be C-contiguous (a reduction over a strided axis sums in another order).
    """
    if preds.shape[1] < 2:
        return np.zeros(preds.shape[0])
    x = np.broadcast_to(labels, preds.shape)
    y = preds
    xmean = x.mean(axis=-1, keepdims=True)
    ymean = y.mean(axis=-1, keepdims=True)
    xm = x - xmean
    ym = y - ymean
    xmax = np.abs(xm).max(axis=-1, keepdims=True)
    ymax = np.abs(ym).max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normxm = xmax * np.linalg.norm(xm / xmax, axis=-1, keepdims=True)
        normym = ymax * np.linalg.norm(ym / ymax, axis=-1, keepdims=True)
        r = np.vecdot(xm / normxm, ym / normym, axis=-1)
    r = np.clip(r, -1.0, 1.0)
    if preds.shape[1] == 2:
        r = np.round(r)  # two points lie on a line: exactly -1 or 1 (as SciPy)
    return np.where(_constant(x) | _constant(y), 0.0, r)


def _spearman(labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """Spearman rho per row (average ranks), SciPy's ``spearmanr(labels, row)``: ``np.corrcoef`` of the
    ranks, element [1, 0]; 0 for a constant side."""
    if preds.shape[1] < 2:
        return np.zeros(preds.shape[0])
    rank_p = stats.rankdata(preds, axis=1)
    x = np.stack([np.broadcast_to(stats.rankdata(labels, axis=-1), rank_p.shape), rank_p], axis=1)  # (C, 2, E)
    x = x - x.mean(axis=2, keepdims=True)
    c = x @ x.swapaxes(1, 2)                                                                # (C, 2, 2)
    c *= np.true_divide(1, x.shape[2] - 1)
    sd = np.sqrt(np.diagonal(c, axis1=1, axis2=2))                                          # (C, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = c / sd[:, :, None]
        c = c / sd[:, None, :]
    r = np.clip(c[:, 1, 0], -1.0, 1.0)
    return np.where(_constant(preds) | _constant(np.atleast_2d(labels)), 0.0, r)


_BATCHED = {**{name: _classification(name) for name in CLASSIFICATION}, "pearson": _pearson, "spearman": _spearman}


def batched_metric(name: str, labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
    """One GLUE metric for many prediction vectors at once: labels (E,) (the same for every row) or (C, E) (one per
    row), preds (C, E) -> (C,) float64.

    accuracy; binary F1 of class 1 (0 when undefined); macro-F1; MCC; Pearson; Spearman with average ranks.
    """
    labels = np.asarray(labels)
    preds = np.asarray(preds)
    if preds.ndim != 2 or preds.shape[1] != labels.shape[-1]:
        raise ValueError(f"preds must be (C, E) with E = {labels.shape[-1]}, got {preds.shape}")
    if labels.ndim not in (1, 2) or (labels.ndim == 2 and labels.shape != preds.shape):
        raise ValueError(f"labels must be (E,) or (C, E) = {preds.shape}, got {labels.shape}")
    if name not in _BATCHED:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    if name in ("pearson", "spearman"):
        labels = np.ascontiguousarray(labels, dtype=np.float64)
        preds = np.ascontiguousarray(preds, dtype=np.float64)
    return _BATCHED[name](labels, preds)


def compute_metrics(task: str, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's metrics (TaskSpec.metrics) for (E,) predictions or (E, K) logits against (E,) labels.

    :func:`batched_metric` on one row. Values are fractions in [0, 1] (correlations in [-1, 1]); multiply
    by 100 for the paper's table.
    """
    spec = get_task(task)
    predictions = np.asarray(predictions)
    if predictions.ndim == 2 or (spec.is_regression and predictions.ndim > 1):
        predictions = predictions_from_logits(predictions, spec.is_regression)
    labels = np.asarray(labels)
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    return {name: float(batched_metric(name, labels, predictions[None])[0]) for name in spec.metrics}
