"""Norm-based statistics of Kobayashi et al. 2020 (norms.csv) and the mixing table (mixing.csv); docs/reference.md#norms.

:class:`NormStats` is updated example by example (alpha, value norms, token categories, token frequencies) and
gives norms.csv: layer, head, category, measure, mean, std, n (head empty on the layer rows, pooled over heads).
Measures:

- ``weight_share``: per example, the share of the attention weight the category's keys receive,
  sum_{i, j in c} alpha_ij / sum_{i, j} alpha_ij (i over the real queries); mean, std, n over examples;
- ``norm_share``: the same with alpha_ij ||f(x_j)||;
- ``value_norm``: ||f(x_j)|| of the category's keys; mean, std, n over keys (pooled over examples);
- ``spearman_alpha_norm``: Spearman's rho between the attention a key receives (mean_i alpha_ij) and ||f(x_j)||,
  over the category's keys pooled over examples (std empty, n keys);
- ``spearman_norm_frequency`` (category ``ordinary`` = punctuation + other): Spearman's rho between ||f(x_j)|| and
  the frequency of token j in the task's training split.

Layer rows pool the layer's heads: summed weights for the shares, every (head, key) for value_norm and the
correlations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.norms.mixing import MEASURES as MIXING_MEASURES
from bertology.norms.tokens import CATEGORIES

NORMS_COLUMNS = ["layer", "head", "category", "measure", "mean", "std", "n"]
MIXING_COLUMNS = ["layer", "measure", "mean", "std", "n"]


class Moments:
    """Running sum, sum of squares and count of an array of statistics."""

    def __init__(self, shape: tuple[int, ...]):
        self.s, self.ss, self.n = np.zeros(shape), np.zeros(shape), np.zeros(shape, np.int64)

    def add(self, x: np.ndarray, valid: np.ndarray | None = None) -> None:
        x = np.asarray(x, float)
        ok = np.isfinite(x) if valid is None else (valid & np.isfinite(x))
        self.s += np.where(ok, x, 0.0)
        self.ss += np.where(ok, x * x, 0.0)
        self.n += ok

    def add_sums(self, s: np.ndarray, ss: np.ndarray, n: np.ndarray) -> None:
        self.s += s
        self.ss += ss
        self.n += n

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(self.n > 0, self.s / np.maximum(self.n, 1), np.nan)
            var = (self.ss - self.n * mean ** 2) / np.maximum(self.n - 1, 1)
            std = np.where(self.n > 1, np.sqrt(np.clip(var, 0, None)), np.nan)
        return mean, std


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


class NormStats:
    """Accumulates norms.csv over examples (L layers, H heads)."""

    def __init__(self, layers: int, heads: int):
        C = len(CATEGORIES)
        self.L, self.H = layers, heads
        self.share = {m: Moments((layers, heads, C)) for m in ("weight_share", "norm_share")}
        self.layer_share = {m: Moments((layers, C)) for m in ("weight_share", "norm_share")}
        self.norm = Moments((layers, heads, C))
        self.received: list[list[np.ndarray]] = [[] for _ in range(C)]   # per category: (L, H, k) arrays
        self.key_norms: list[list[np.ndarray]] = [[] for _ in range(C)]
        self.freq_norms: list[np.ndarray] = []                           # (L, H, k) of ordinary keys
        self.freqs: list[np.ndarray] = []

    def update(self, alpha: np.ndarray, norms: np.ndarray, categories: np.ndarray,
               frequency: np.ndarray | None = None) -> None:
        """One example: alpha (L, H, n, n), norms (L, H, n), categories (n,) codes, frequency (n,) or None."""
        alpha, norms = np.asarray(alpha, np.float64), np.asarray(norms, np.float64)
        onehot = (categories[:, None] == np.arange(len(CATEGORIES))[None, :]).astype(np.float64)   # (n, C)
        recv = alpha.sum(axis=-2)                                       # (L, H, n) attention each key receives
        recv_w = recv * norms                                           # sum_i alpha_ij ||f(x_j)||
        for name, r in (("weight_share", recv), ("norm_share", recv_w)):
            with np.errstate(invalid="ignore", divide="ignore"):
                self.share[name].add((r @ onehot) / r.sum(-1, keepdims=True))
                layer = r.sum(1)
                self.layer_share[name].add((layer @ onehot) / layer.sum(-1, keepdims=True))
        self.norm.add_sums(norms @ onehot, (norms ** 2) @ onehot,
                           np.broadcast_to(onehot.sum(0).astype(np.int64), (self.L, self.H, len(CATEGORIES))))
        n = alpha.shape[-1]
        for c in range(len(CATEGORIES)):
            keys = categories == c
            if keys.any():
                self.received[c].append(recv[..., keys] / n)
                self.key_norms[c].append(norms[..., keys])
        if frequency is not None:
            ordinary = categories >= 2
            if ordinary.any():
                self.freq_norms.append(norms[..., ordinary])
                self.freqs.append(np.asarray(frequency, np.float64)[ordinary])

    def table(self) -> pd.DataFrame:
        rows = []

        def add(layer, head, cat, measure, mean, std, n):
            rows.append((layer, head, cat, measure, mean, std, n))

        for name in ("weight_share", "norm_share"):
            mean, std = self.share[name].mean_std()
            lmean, lstd = self.layer_share[name].mean_std()
            for l in range(self.L):
                for c, cat in enumerate(CATEGORIES):
                    for h in range(self.H):
                        add(l, h, cat, name, mean[l, h, c], std[l, h, c], self.share[name].n[l, h, c])
                    add(l, None, cat, name, lmean[l, c], lstd[l, c], self.layer_share[name].n[l, c])
        mean, std = self.norm.mean_std()
        s, ss, cnt = self.norm.s.sum(1), self.norm.ss.sum(1), self.norm.n.sum(1)
        pooled = Moments((self.L, len(CATEGORIES)))
        pooled.add_sums(s, ss, cnt)
        pmean, pstd = pooled.mean_std()
        for l in range(self.L):
            for c, cat in enumerate(CATEGORIES):
                for h in range(self.H):
                    add(l, h, cat, "value_norm", mean[l, h, c], std[l, h, c], self.norm.n[l, h, c])
                add(l, None, cat, "value_norm", pmean[l, c], pstd[l, c], cnt[l, c])
        for c, cat in enumerate(CATEGORIES):
            if not self.received[c]:
                continue
            recv, nrm = np.concatenate(self.received[c], -1), np.concatenate(self.key_norms[c], -1)
            for l in range(self.L):
                for h in range(self.H):
                    add(l, h, cat, "spearman_alpha_norm", _spearman(recv[l, h], nrm[l, h]), np.nan, recv.shape[-1])
                add(l, None, cat, "spearman_alpha_norm", _spearman(recv[l].ravel(), nrm[l].ravel()), np.nan,
                    recv[l].size)
        if self.freqs:
            nrm, freq = np.concatenate(self.freq_norms, -1), np.concatenate(self.freqs)
            for l in range(self.L):
                for h in range(self.H):
                    add(l, h, "ordinary", "spearman_norm_frequency", _spearman(nrm[l, h], freq), np.nan, len(freq))
                add(l, None, "ordinary", "spearman_norm_frequency",
                    _spearman(nrm[l].ravel(), np.tile(freq, self.H)), np.nan, nrm[l].size)
        df = pd.DataFrame(rows, columns=NORMS_COLUMNS)
        df["head"] = df["head"].astype("Int64")
        df["n"] = df["n"].astype(np.int64)
        return df


class MixingStats:
    """Accumulates mixing.csv: per layer and measure, mean, std and n over the real tokens."""

    def __init__(self, layers: int):
        self.m = Moments((layers, len(MIXING_MEASURES)))

    def update(self, ratios: np.ndarray) -> None:
        """ratios (L, M, n) of one example (NaN where a measure does not apply)."""
        r = np.asarray(ratios, np.float64)
        ok = np.isfinite(r)
        self.m.add_sums(np.where(ok, r, 0).sum(-1), np.where(ok, r * r, 0).sum(-1), ok.sum(-1))

    def table(self) -> pd.DataFrame:
        mean, std = self.m.mean_std()
        rows = [(l, meas, mean[l, k], std[l, k], int(self.m.n[l, k]))
                for l in range(mean.shape[0]) for k, meas in enumerate(MIXING_MEASURES) if self.m.n[l, k] > 0]
        return pd.DataFrame(rows, columns=MIXING_COLUMNS)
