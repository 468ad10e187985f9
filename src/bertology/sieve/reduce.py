"""Sieve scores of an attention store, the kernel of the one-pass reduction, and the per-head one-sided t-tests
(sieve.csv).

:class:`SieveKernel` is a sub-batch kernel (:class:`bertology.attention.onepass.BatchKernel`): the examples of each chunk
of `attention` (E, L, H, Q, K), taken in order of length, become per-example scores of every role (E, L, H, R) —
small — and the t-tests run on those. The workflow runs it in the same read of a store as every other store analysis
(:func:`bertology.attention.onepass.reduce_store`); :func:`compute_scores` runs it alone. Memory is bounded by a chunk
(processed in sub-batches of :data:`BATCH` examples) times the number of Dask workers.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bertology.pipeline.errors import MissingInputError
from bertology.attention.onepass import BatchKernel, Job, Outputs, StoreInfo, reduce_store
from bertology.stats.moments import adjust_p
from bertology.store import StoreError, open_store

from .masks import ROLES, SYNTACTIC_RELATIONS, build_masks, check_roles, chunk_relations, roles_for
from .scores import block_scores

log = logging.getLogger(__name__)

SIEVE_COLUMNS = ["layer", "head", "role", "n", "mean", "std", "t", "p_value", "assigned", "tau"]
EXTRA_COLUMNS = ["p_adjusted", "alpha", "correction"]
#: examples per sub-batch inside a store chunk: bounds the (E, R, T, T) sieve masks; the scores do not depend on it
BATCH = 8
SCORE_VARS = ("attention", "input_ids", "segment", "word_ids", "length", "example_idx")


@dataclass
class _ChunkScores:
    """A chunk's scores (E, L, H, R) while its sub-batches come, and its word relations (E, 4, W, W) or None."""

    scores: np.ndarray
    relations: np.ndarray | None


@dataclass(frozen=True)
class SieveKernel(BatchKernel):
    """Per-example sieve scores of every role, by sub-batches of examples of similar length: (E, L, H, R) per chunk,
    concatenated.

    Each sub-batch (:class:`bertology.attention.onepass.BatchKernel`: `batch` examples in order of length, one float32 block
    cropped to the longest, exact zeros past each length) gives its masks and ONE batched product
    (:func:`bertology.sieve.scores.block_scores`); the words of the syntactic roles are looked up once per chunk.
    roles: the roles scored (:func:`bertology.sieve.masks.roles_for`); window: ``analysis.sieve.window``;
    batch: examples per sub-batch (bounds the (batch, R, m, m) masks; the scores do not depend on it).
    """

    roles: tuple[str, ...] = ()
    window: int = 2
    batch: int = BATCH
    name: str = "sieve"
    variables: tuple[str, ...] = SCORE_VARS

    @property
    def needs_words(self) -> bool:
        return any(r in SYNTACTIC_RELATIONS or r == "syntactic" for r in self.roles)

    def prepare(self, words: pd.DataFrame | None, info: StoreInfo) -> pd.DataFrame | None:
        if self.needs_words and words is None:
            raise MissingInputError("the syntactic roles need the words table (results/data/{task}/words.parquet)")
        return words if self.needs_words else None

    def select(self, words: pd.DataFrame | None, example_idx: np.ndarray) -> pd.DataFrame | None:
        return None if words is None else words[words["example_idx"].isin(example_idx)]

    def empty_chunk(self, block: Mapping[str, np.ndarray], words: pd.DataFrame | None, info: StoreInfo) -> _ChunkScores:
        E = block["length"].shape[0]
        return _ChunkScores(np.empty((E, info.layers, info.heads, len(self.roles))),
                            chunk_relations(block["word_ids"], block["example_idx"], words, self.roles))

    def add_batch(self, part: _ChunkScores, attention: np.ndarray, rows: np.ndarray,
                  block: Mapping[str, np.ndarray], info: StoreInfo) -> None:
        m = attention.shape[-1]
        length = block["length"][rows]
        sieve, queries = build_masks(block["input_ids"][rows, :m], block["segment"][rows, :m],
                                     block["word_ids"][rows, :m], length,
                                     None if part.relations is None else part.relations[rows],
                                     specials=info.specials, window=self.window, roles=self.roles)
        part.scores[rows] = block_scores(attention, sieve, queries, length)

    def finish_chunk(self, part: _ChunkScores, info: StoreInfo) -> np.ndarray:
        return part.scores

    def combine(self, parts: list[np.ndarray], info: StoreInfo) -> xr.DataArray:
        return scores_array(np.concatenate(parts, axis=0), info.example_idx, self.roles)

    @classmethod
    def build(cls, job: Job) -> SieveKernel:
        """Every role of the job's task (:func:`sieve_kernel`), analysis.sieve.window."""
        return sieve_kernel(job.ds, job.store, job.words, task=job.task, window=job.config.analysis.sieve.window)

    def outputs(self, result: xr.DataArray, job: Job) -> Outputs:
        """sieve.csv (one-sided t-tests per head and role), the per-example scores (sieve_scores.npz) and their
        MLflow metrics."""
        from bertology.sieve.scores_io import scores_arrays

        cfg = job.config.analysis.sieve
        table, scores = sieve_result(result, job.ds.attrs, task=job.task, window=cfg.window, tau=cfg.tau,
                                     alpha=cfg.alpha, correction=cfg.correction)
        n_heads = len(table[["layer", "head"]].drop_duplicates())
        totals: dict[str, float] = {}
        metrics: list[tuple[dict[str, float], int | None]] = []
        for role, sub in table.groupby("role", sort=False):
            totals[f"heads.{role}"] = int(sub["assigned"].sum())
            totals[f"share.{role}"] = float(sub["assigned"].sum()) / max(n_heads, 1)
            for layer, lsub in sub.groupby("layer"):
                metrics.append(({f"heads_by_layer.{role}": int(lsub["assigned"].sum()),
                                 f"mean_bias_by_layer.{role}": float(lsub["mean"].mean())}, int(layer)))
        line = (f"sieve: {scores.sizes['example']} examples x {scores.sizes['layer']} layers x "
                f"{scores.sizes['head']} heads x {scores.sizes['role']} roles; {int(table['assigned'].sum())} "
                f"(head, role) assigned")
        return Outputs({"sieve": table, "sieve_scores": scores_arrays(scores, **scores.attrs)},
                       metrics + [(totals, None)], [line], artifacts=("sieve",))


def scores_array(values: np.ndarray, example_idx: np.ndarray, roles: Sequence[str]) -> xr.DataArray:
    """Per-example scores (E, L, H, R) as the DataArray (example, layer, head, role) of sieve_scores.npz."""
    _, L, H, _ = values.shape
    return xr.DataArray(values, dims=("example", "layer", "head", "role"),
                        coords={"example_idx": ("example", np.asarray(example_idx, dtype=np.int64)),
                                "layer": np.arange(L), "head": np.arange(H), "role": list(roles)},
                        name="sieve_score")


def compute_scores(store: str | Path, words: pd.DataFrame | None, *, roles: Sequence[str], window: int,
                   compute_kwargs: Mapping[str, Any] | None = None, batch: int = BATCH,
                   expect: Mapping[str, Any] | None = None) -> xr.DataArray:
    """Per-example sieve scores of every role: DataArray (example, layer, head, role), NaN without queries (the
    sieve kernel alone; the workflow runs it with every other store analysis).

    store: an attention store (docs/reference.md#store; a path or fsspec URL); words: the words table (needed for the
    syntactic roles). compute_kwargs: for dask.compute (bertology.pipeline.daskutil.compute_kwargs).
    """
    kernel = SieveKernel(roles=check_roles(roles), window=int(window), batch=int(batch))
    return reduce_store(store, [kernel], words, expect=expect, compute_kwargs=compute_kwargs)[kernel.name]


def one_sided_tests(scores: np.ndarray, tau: float) -> dict[str, np.ndarray]:
    """One-sample t-tests of H0: mean <= tau along axis 0, NaNs omitted.

    scores: (E, ...) per-example scores. Returns n, mean, std (ddof 1), t, p_value, each shaped scores.shape[1:];
    t and p are scipy.stats.ttest_1samp(..., alternative="greater", nan_policy="omit") (NaN when n < 2).
    """
    scores = np.asarray(scores, dtype=np.float64)
    valid = ~np.isnan(scores)
    n = valid.sum(axis=0)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        mean = np.where(n > 0, np.nansum(scores, axis=0) / np.maximum(n, 1), np.nan)
        std = np.where(n > 1, np.nanstd(scores, axis=0, ddof=1) if scores.shape[0] > 1 else np.nan, np.nan)
        if scores.shape[0] > 1:
            res = stats.ttest_1samp(scores, float(tau), axis=0, nan_policy="omit", alternative="greater")
            t, p = np.asarray(res.statistic, dtype=np.float64), np.asarray(res.pvalue, dtype=np.float64)
        else:
            t = p = np.full(scores.shape[1:], np.nan)
    t = np.where(n > 1, t, np.nan)
    p = np.where(n > 1, p, np.nan)
    return {"n": n, "mean": mean, "std": std, "t": t, "p_value": p}


def sieve_table(scores: np.ndarray, roles: Sequence[str], *, tau: float, alpha: float,
                correction: str) -> pd.DataFrame:
    """sieve.csv from per-example scores (E, L, H, R): one row per (layer, head, role).

    Columns layer, head, role, n, mean, std, t, p_value, assigned, tau, then p_adjusted (Benjamini-Hochberg
    across all heads x roles with a p-value when correction == "fdr_bh", else equal to p_value), alpha,
    correction. assigned = p_adjusted < alpha.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 4 or scores.shape[-1] != len(roles):
        raise ValueError(f"scores must be (E, L, H, R={len(roles)}), got {scores.shape}")
    E, L, H, R = scores.shape
    res = one_sided_tests(scores, tau)
    layer, head, role = np.meshgrid(np.arange(L), np.arange(H), np.arange(R), indexing="ij")
    df = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), "role": np.asarray(roles, dtype=object)[role.ravel()],
                       **{k: v.ravel() for k, v in res.items()}})
    df["n"] = df["n"].astype(np.int64)
    p = df["p_value"].to_numpy()
    if correction not in ("none", "fdr_bh"):
        raise ValueError(f"unknown correction {correction!r}; use none or fdr_bh")
    p_adj = adjust_p(p, "fdr_bh") if correction == "fdr_bh" else p.copy()
    df["assigned"] = np.nan_to_num(p_adj, nan=1.0) < alpha
    df["tau"] = float(tau)
    df["p_adjusted"] = p_adj
    df["alpha"] = float(alpha)
    df["correction"] = correction
    return df[SIEVE_COLUMNS + EXTRA_COLUMNS]


def sieve_kernel(ds, store: str | Path, words: pd.DataFrame | None, *, task: str | None, window: int,
                 batch: int = BATCH) -> SieveKernel:
    """The sieve kernel of one opened store (:func:`bertology.store.open_store`): every role, `block` only for
    pair tasks. task: the GLUE task (default: the store's `task` attribute). Logs a warning when examples of a
    pair task have no second segment, or when the words table does not cover every example."""
    from bertology.pipeline.tasks import get_task

    task = task or ds.attrs.get("task")
    if not task:
        raise StoreError(f"the task of {store} is unknown: the store has no `task` attribute")
    spec = get_task(task)
    roles = roles_for(spec.is_pair)
    if not spec.annotated:  # no dependency parses (no spaCy pipeline for the task's language): no syntactic roles
        roles = tuple(r for r in roles if r not in (*SYNTACTIC_RELATIONS, "syntactic"))
    if "block" in roles:
        second = float((ds["segment"] == 1).any("query").mean())  # (example,) booleans: small
        if second < 1:
            log.warning("%s: %.1f%% of the examples of pair task %s have no second segment (store variable "
                        "`segment`); the block sieve of those examples spans the first text only",
                        store, 100 * (1 - second), task)
        covered = np.isin(ds["example_idx"].values, words["example_idx"].unique()).mean()
        if covered < 1:
            log.warning("the words table covers %.1f%% of the store's examples; the others have no syntactic "
                        "queries and are left out of the syntactic tests", 100 * covered)
    return SieveKernel(roles=check_roles(roles), window=int(window), batch=int(batch))


def sieve_result(scores: xr.DataArray, attrs: Mapping[str, Any], *, task: str | None, window: int, tau: float,
                 alpha: float, correction: str) -> tuple[pd.DataFrame, xr.DataArray]:
    """(sieve.csv, the scores with the attributes sieve_scores.npz records) from the kernel's scores; attrs: the
    store's attributes."""
    table = sieve_table(scores.values, [str(r) for r in scores["role"].values], tau=float(tau), alpha=float(alpha),
                        correction=str(correction))
    scores.attrs.update({"task": task or attrs.get("task"), "variant": str(attrs.get("variant", "")),
                         "model": str(attrs.get("model", "")), "window": int(window)})
    return table, scores


def run_sieve(store: str | Path, words: pd.DataFrame | None, *, task: str | None = None, tau: float, alpha: float,
              window: int, correction: str, compute_kwargs: Mapping[str, Any] | None = None,
              batch: int = BATCH, expect: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, xr.DataArray]:
    """Scores and sieve table of one store (validated by open_store), the sieve kernel alone. Roles: all,
    `block` only for pair tasks.

    task: the GLUE task (default: the store's `task` attribute); tau, alpha, window, correction: analysis.sieve;
    expect: the attributes the store must have (:func:`bertology.store.expected_attrs`).
    """
    ds = open_store(store, expect=expect)
    kernel = sieve_kernel(ds, store, words, task=task, window=window, batch=batch)
    scores = reduce_store(store, [kernel], words, compute_kwargs=compute_kwargs, opened=ds)[kernel.name]
    return sieve_result(scores, ds.attrs, task=task, window=window, tau=tau, alpha=alpha, correction=correction)


__all__ = ["ROLES", "compute_scores", "one_sided_tests", "sieve_table", "run_sieve"]
