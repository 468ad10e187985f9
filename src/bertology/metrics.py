"""GLUE metrics, from scikit-learn and SciPy: accuracy, F1, MCC, Pearson and Spearman."""

from __future__ import annotations

import numpy as np
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from bertology.tasks import get_task


def predictions_from_logits(logits: np.ndarray, regression: bool) -> np.ndarray:
    """(E, C) logits -> (E,) class ids; (E, 1) or (E,) regression outputs -> (E,) scores."""
    logits = np.asarray(logits)
    if regression:
        return logits.reshape(len(logits), -1)[:, 0].astype(np.float64)
    return logits.argmax(axis=-1)


def _corr(fn, a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0  # a constant prediction carries no correlation (the paper's untrained-head case)
    return float(fn(a, b)[0])


METRIC_FUNCTIONS = {
    "accuracy": lambda y, p: float(accuracy_score(y, p)),
    "f1": lambda y, p: float(f1_score(y, p, zero_division=0.0)),
    "mcc": lambda y, p: float(matthews_corrcoef(y, p)),
    "pearson": lambda y, p: _corr(stats.pearsonr, np.asarray(y, float), np.asarray(p, float)),
    "spearman": lambda y, p: _corr(stats.spearmanr, np.asarray(y, float), np.asarray(p, float)),
}


def compute_metrics(task: str, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's metrics (TaskSpec.metrics) for (E,) predictions or (E, C) logits against (E,) labels.

    Values are fractions in [0, 1] (correlations in [-1, 1]); multiply by 100 for the paper's table.
    """
    spec = get_task(task)
    predictions = np.asarray(predictions)
    if predictions.ndim == 2 or (spec.is_regression and predictions.ndim > 1):
        predictions = predictions_from_logits(predictions, spec.is_regression)
    labels = np.asarray(labels)
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    return {name: METRIC_FUNCTIONS[name](labels, predictions) for name in spec.metrics}
