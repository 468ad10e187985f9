"""Sieve scores over an attention store with Dask, and the per-head one-sided t-tests (sieve.csv).

One read of the store computes every role: each example chunk of `attention` (E, L, H, Q, K) becomes
per-example scores (E, L, H, R) — small — and the t-tests run on those. Memory is bounded by a chunk
(processed in sub-batches of `batch` examples) times the number of Dask workers.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from .masks import ROLES, SYNTACTIC_RELATIONS, check_roles, chunk_masks, roles_for
from .scores import example_scores

log = logging.getLogger(__name__)

SIEVE_COLUMNS = ["layer", "head", "role", "n", "mean", "std", "t", "p_value", "assigned", "tau"]
EXTRA_COLUMNS = ["p_adjusted", "alpha", "correction"]
WORD_COLUMNS = ["example_idx", "word", "dep", "head"]
DEFAULTS = {"tau": 3.0, "alpha": 0.05, "window": 2, "correction": "none"}


def sieve_params(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """`analysis.sieve` with defaults filled (accepts the section itself or the whole `analysis`)."""
    cfg = dict(cfg or {})
    if "sieve" in cfg and isinstance(cfg["sieve"], Mapping):
        cfg = dict(cfg["sieve"])
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown analysis.sieve key(s) {sorted(unknown)}; allowed: {', '.join(DEFAULTS)}")
    out = {**DEFAULTS, **cfg}
    if out["correction"] not in ("none", "fdr_bh"):
        raise ValueError(f"analysis.sieve.correction is {out['correction']!r}; use none or fdr_bh")
    if not 0 < float(out["alpha"]) < 1:
        raise ValueError(f"analysis.sieve.alpha must lie in (0, 1), got {out['alpha']}")
    return out


def open_attention(path: str | Path) -> xr.Dataset:
    """Open an attention store lazily through bertology.store.open_store, which refuses a missing,
    incomplete or malformed store and checks that rows sum to 1."""
    from bertology.store import open_store

    return open_store(path)


def _block_scores(attention: np.ndarray, input_ids: np.ndarray, token_type_ids: np.ndarray, word_ids: np.ndarray,
                  length: np.ndarray, example_idx: np.ndarray, words: pd.DataFrame | None, *, sep_token_id: int,
                  cls_token_id: int | None, window: int, roles: tuple[str, ...], batch: int) -> np.ndarray:
    """Scores (E, L, H, R) of one store chunk.

    Examples are taken in order of length in sub-batches of `batch`, each cropped to its longest example
    (positions past every length are padding), which bounds memory and skips most of the padding.
    """
    E = attention.shape[0]
    out = np.empty(attention.shape[:3] + (len(roles),), dtype=np.float64)
    if words is not None:  # once per chunk, so that sub-batches search a small frame
        words = words[words["example_idx"].isin(np.asarray(example_idx))]
    order = np.argsort(np.asarray(length), kind="stable")
    for lo in range(0, E, batch):
        sl = order[lo:lo + batch]
        m = max(int(np.max(length[sl])), 1)
        sieve, queries = chunk_masks(input_ids[sl, :m], token_type_ids[sl, :m], word_ids[sl, :m], length[sl],
                                     example_idx[sl], words, sep_token_id=sep_token_id, cls_token_id=cls_token_id,
                                     window=window, roles=roles)
        out[sl] = example_scores(attention[sl][..., :m, :m], sieve, queries, length[sl])
    return out


def compute_scores(ds: xr.Dataset, words: pd.DataFrame | None, *, roles: Sequence[str], window: int = 2,
                   compute_kwargs: Mapping[str, Any] | None = None, batch: int = 8) -> xr.DataArray:
    """Per-example sieve scores of every role: DataArray (example, layer, head, role), NaN without queries.

    ds: an attention store (section 5 of DESIGN), lazily opened; words: the words table (needed for the
    syntactic roles). compute_kwargs: passed to dask.compute (e.g. from bertology.daskutil.get_scheduler).
    """
    import dask
    import dask.array as da

    roles = check_roles(roles)
    if "sep_token_id" not in ds.attrs:
        raise ValueError("the attention store has no sep_token_id attribute (DESIGN section 5)")
    sep_id = int(ds.attrs["sep_token_id"])
    cls_id = int(ds.attrs["cls_token_id"]) if ds.attrs.get("cls_token_id") is not None else None
    att = ds["attention"].transpose("example", "layer", "head", "query", "key").data
    if not isinstance(att, da.Array):
        att = da.from_array(att, chunks=(min(64, max(att.shape[0], 1)), -1, -1, -1, -1))
    att = att.rechunk({1: -1, 2: -1, 3: -1, 4: -1})
    E, L, H, T, _ = att.shape
    echunks = att.chunks[0]

    def meta(name: str) -> list:
        arr = ds[name].data
        arr = arr if isinstance(arr, da.Array) else da.from_array(np.asarray(arr))
        arr = arr.rechunk((echunks,) + tuple((-1,) * (arr.ndim - 1)))
        return list(arr.to_delayed().ravel())

    blocks = list(att.to_delayed().ravel())
    ids, tt, wid, ln, ex = (meta(n) for n in ("input_ids", "token_type_ids", "word_ids", "length", "example_idx"))
    need_words = any(r in SYNTACTIC_RELATIONS or r == "syntactic" for r in roles)
    if need_words and words is None:
        raise ValueError("the syntactic roles need the words table (results/attention/{task}/words.parquet)")
    # one graph key for the (small) table, shared by every chunk's task
    words_d = dask.delayed(words[WORD_COLUMNS].copy(), pure=True) if need_words else None
    parts = []
    for i, size in enumerate(echunks):
        d = dask.delayed(_block_scores, pure=True)(
            blocks[i], ids[i], tt[i], wid[i], ln[i], ex[i], words_d, sep_token_id=sep_id, cls_token_id=cls_id,
            window=int(window), roles=roles, batch=int(batch))
        parts.append(da.from_delayed(d, shape=(size, L, H, len(roles)), dtype=np.float64))
    scores = da.concatenate(parts, axis=0) if parts else da.zeros((0, L, H, len(roles)))
    (values,) = dask.compute(scores, **dict(compute_kwargs or {}))
    return xr.DataArray(values, dims=("example", "layer", "head", "role"),
                        coords={"example_idx": ("example", np.asarray(ds["example_idx"].values, dtype=np.int64)),
                                "layer": np.arange(L), "head": np.arange(H), "role": list(roles)},
                        name="sieve_score")


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


def sieve_table(scores: np.ndarray, roles: Sequence[str], *, tau: float = 3.0, alpha: float = 0.05,
                correction: str = "none") -> pd.DataFrame:
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
    p_adj = p.copy()
    if correction == "fdr_bh":
        from statsmodels.stats.multitest import multipletests

        ok = np.isfinite(p)
        if ok.any():
            p_adj[ok] = multipletests(p[ok], alpha=alpha, method="fdr_bh")[1]
    elif correction != "none":
        raise ValueError(f"unknown correction {correction!r}; use none or fdr_bh")
    df["assigned"] = np.nan_to_num(p_adj, nan=1.0) < alpha
    df["tau"] = float(tau)
    df["p_adjusted"] = p_adj
    df["alpha"] = float(alpha)
    df["correction"] = correction
    return df[SIEVE_COLUMNS + EXTRA_COLUMNS]


def save_scores(path: str | Path, scores: xr.DataArray, **attrs: Any) -> Path:
    """Write per-example scores as a compressed .npz (scores, example_idx, layer, head, role, attrs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, scores=scores.values.astype(np.float32),
                        example_idx=scores["example_idx"].values, layer=scores["layer"].values,
                        head=scores["head"].values, role=np.asarray(scores["role"].values, dtype=str),
                        attrs=np.asarray([f"{k}={v}" for k, v in attrs.items()], dtype=str))
    tmp.replace(path)
    return path


def load_scores(path: str | Path) -> xr.DataArray:
    """Per-example scores saved by :func:`save_scores`: DataArray (example, layer, head, role)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sieve scores at {path}; run `snakemake {path}` first")
    with np.load(path, allow_pickle=False) as z:
        attrs = dict(s.split("=", 1) for s in z["attrs"].tolist())
        return xr.DataArray(z["scores"], dims=("example", "layer", "head", "role"),
                            coords={"example_idx": ("example", z["example_idx"]), "layer": z["layer"],
                                    "head": z["head"], "role": z["role"].tolist()},
                            name="sieve_score", attrs=attrs)


def read_words(path: str | Path | None) -> pd.DataFrame | None:
    if path is None:
        return None
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no words table at {path}; it is written with the attention store "
                                f"(snakemake {path})")
    words = pd.read_parquet(path, columns=None)
    missing = set(WORD_COLUMNS) - set(words.columns)
    if missing:
        raise ValueError(f"{path} lacks column(s) {sorted(missing)}; expected {', '.join(WORD_COLUMNS)}")
    return words


def run_sieve(store: str | Path, words_path: str | Path | None, *, task: str | None = None,
              params: Mapping[str, Any] | None = None, compute_kwargs: Mapping[str, Any] | None = None,
              batch: int = 8) -> tuple[pd.DataFrame, xr.DataArray]:
    """Scores and sieve table of one store. Roles: all, `block` only when the task is a pair task."""
    from bertology.tasks import get_task

    p = sieve_params(params)
    ds = open_attention(store)
    task = task or ds.attrs.get("task")
    if not task:
        raise ValueError("the task is unknown: pass --task (the store has no `task` attribute)")
    roles = roles_for(get_task(task).is_pair)
    words = read_words(words_path)
    if words is not None:
        covered = np.isin(ds["example_idx"].values, words["example_idx"].unique()).mean()
        if covered < 1:
            log.warning("the words table covers %.1f%% of the store's examples; the others have no syntactic "
                        "queries and are left out of the syntactic tests", 100 * covered)
    scores = compute_scores(ds, words, roles=roles, window=int(p["window"]), compute_kwargs=compute_kwargs,
                            batch=batch)
    table = sieve_table(scores.values, roles, tau=float(p["tau"]), alpha=float(p["alpha"]),
                        correction=str(p["correction"]))
    scores.attrs.update({"task": task, "variant": str(ds.attrs.get("variant", "")),
                         "model": str(ds.attrs.get("model", "")), "window": int(p["window"])})
    return table, scores


__all__ = ["ROLES", "compute_scores", "one_sided_tests", "sieve_table", "run_sieve", "save_scores", "load_scores",
           "sieve_params", "open_attention"]
