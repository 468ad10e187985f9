"""The statistics every claim shares: a percentile bootstrap over the claim's units (heads, examples, layers,
seeds), the Multi-Bootstrap over seeds and units with two or more fine-tuning seeds, and the verdict rule
(Holm's adjustment: :func:`bertology.stats.moments.adjust_p`).

Dimension glossary: S fine-tuning seeds, N units (rows of a unit table: one per head, example, layer ...),
B bootstrap resamples.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


class LazyModule:
    """A module imported when one of its attributes is first used."""

    def __init__(self, name: str):
        self._module_name = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._module_name), attr)


#: scipy.stats, imported when a claim first uses it: the workflow reads the claims (registry entries) without it
scipy_stats = LazyModule("scipy.stats")


#: the verdicts of the ledger, in the order the report lists them
HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_COMPUTED = "holds", "contradicted", "inconclusive", "not computed"
VERDICTS = (HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_COMPUTED)
#: fewer units than this (per seed) give no interval: n too small to decide
MIN_UNITS = 3
#: fewer units than this in a stratum (a layer group compared with another) give no interval
MIN_STRATUM = 2


@dataclass(frozen=True)
class Boot:
    """How a claim's interval is drawn: `resamples` percentile-bootstrap replicates at `confidence`, seeded
    (analysis.claims.bootstrap, analysis.claims.confidence, data.seed: the defaults live in the schema)."""

    resamples: int
    confidence: float
    seed: int


@dataclass(frozen=True)
class Result:
    """What a claim function returns: the effect, its interval (NaN when n is too small to decide), a named
    test (``scipy.stats.wilcoxon`` ...) with its p-value, the number of units, and the heads behind the effect
    (``(layer, head)``, 0-based) for the explorer to highlight; computed: False when the run's tables hold nothing
    the claim can be computed from (the ledger's verdict is then `not computed`, the note saying why)."""

    effect: float
    ci_low: float
    ci_high: float
    test: str
    p: float
    n: int
    heads: tuple[tuple[int, int], ...] = ()
    note: str = ""
    extra: dict = field(default_factory=dict)
    computed: bool = True


def nan_result(test: str, n: int = 0, note: str = "", heads: tuple = ()) -> Result:
    return Result(float("nan"), float("nan"), float("nan"), test, float("nan"), int(n), heads, note)


def not_computed(test: str, note: str) -> Result:
    """A claim whose tables are there but empty for this model (an analysis the model does not allow): the
    ledger's verdict `not computed`, `note` saying why."""
    return Result(float("nan"), float("nan"), float("nan"), test, float("nan"), 0, (), note, computed=False)


def bootstrap(units: Sequence[pd.DataFrame], statistic: Callable[[pd.DataFrame], float], boot: Boot,
              strata: str | None = None,
              batched: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None) -> tuple[float, float, float, int]:
    """Point estimate and percentile interval of `statistic` over resampled units.

    units: one unit table per seed (S >= 1), N rows each (one per unit; the same units in the same order in
    every seed); statistic: table -> float (NaN where undefined). One seed: each replicate draws N rows with
    replacement (within each value of the `strata` column, so a comparison of groups keeps both groups).
    Two or more seeds: the Multi-Bootstrap (Sellam et al. 2022): each replicate draws S seeds and N units with
    replacement, together, and evaluates the statistic on the drawn seeds' drawn rows pooled. The estimate is
    the statistic of every seed's rows pooled. Returns (estimate, low, high, N); low and high are NaN when N <
    :data:`MIN_UNITS`, a stratum has fewer than :data:`MIN_STRATUM` units, or no replicate is finite.

    batched: the same statistic on every replicate at once, {column: (B, S*N) values of each replicate's rows}
    -> (B,), for the ledger's common statistics (:func:`batched_mean`, :func:`batched_group_difference`,
    :func:`batched_spearman`); the replicates are the same draws, the numbers equal to float rounding.
    """
    frames = [f.reset_index(drop=True) for f in units]
    pooled = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    estimate = float(statistic(pooled))
    n = len(frames[0])
    nan = float("nan")
    if n < MIN_UNITS or not math.isfinite(estimate) or any(len(f) != n for f in frames):
        return estimate, nan, nan, n
    groups = ([np.arange(n)] if strata is None else
              [np.nonzero((frames[0][strata] == g).to_numpy())[0] for g in pd.unique(frames[0][strata])])
    if strata is not None and min(len(g) for g in groups) < MIN_STRATUM:
        return estimate, nan, nan, n
    rng = np.random.default_rng(boot.seed)
    S = len(frames)
    draws = []
    for _ in range(boot.resamples):
        seeds = rng.integers(0, S, size=S) if S > 1 else np.zeros(1, dtype=int)
        draws.append((seeds, np.concatenate([g[rng.integers(0, len(g), size=len(g))] for g in groups])))
    if batched is not None:
        seeds = np.stack([d[0] for d in draws])                                  # (B, S)
        rows = np.stack([d[1] for d in draws])                                   # (B, N)
        columns = {}
        for c in frames[0].columns:
            values = np.stack([f[c].to_numpy() for f in frames])                 # (S, N)
            columns[c] = values[seeds[:, :, None], rows[:, None, :]].reshape(len(draws), -1)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)                      # all-NaN replicates give NaN
            samples = np.asarray(batched(columns), dtype=float)
    else:
        arrays = [f.to_numpy() for f in frames]
        samples = np.empty(boot.resamples)
        for b, (seeds, rows) in enumerate(draws):
            block = np.concatenate([arrays[s][rows] for s in seeds])
            samples[b] = statistic(pd.DataFrame(block, columns=frames[0].columns).infer_objects())
    low, high = percentile(samples, boot.confidence)
    return estimate, low, high, n


def batched_mean(column: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """The replicates' mean of `column`, NaN left out: (B, M) -> (B,) (NaN where a replicate has no value)."""
    return lambda cols: np.nanmean(cols[column].astype(float), axis=1)


def batched_group_difference(column: str, flag: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """mean(`column` where `flag` == 1) - mean(`column` where `flag` == 0) per replicate, NaN left out:
    (B, M) -> (B,)."""
    def stat(cols: dict[str, np.ndarray]) -> np.ndarray:
        x, g = cols[column].astype(float), cols[flag].astype(int)
        return np.nanmean(np.where(g == 1, x, np.nan), axis=1) - np.nanmean(np.where(g == 0, x, np.nan), axis=1)
    return stat


def batched_spearman(a: str, b: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """Spearman's rho of columns `a` and `b` per replicate (Pearson's r of their average ranks, as
    ``scipy.stats.spearmanr``): (B, M) -> (B,); NaN where either column is constant. For columns without NaN
    (the caller checks)."""
    def stat(cols: dict[str, np.ndarray]) -> np.ndarray:
        ra = scipy_stats.rankdata(cols[a].astype(float), axis=1)
        rb = scipy_stats.rankdata(cols[b].astype(float), axis=1)
        ra -= ra.mean(axis=1, keepdims=True)
        rb -= rb.mean(axis=1, keepdims=True)
        den = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
        rho = np.where(den > 0, (ra * rb).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)
        return np.clip(rho, -1.0, 1.0)
    return stat


def percentile(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The equal-tailed percentile interval of (B,) bootstrap replicates at `confidence`, the non-finite ones left
    out (NaN, NaN when none is finite)."""
    samples = np.asarray(samples, dtype=float)
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return float(low), float(high)


def seed_bootstrap(values: Sequence[float], boot: Boot) -> tuple[float, float]:
    """Percentile interval of the mean of per-seed values over resampled seeds (NaN with fewer than
    :data:`MIN_UNITS` finite values: two seeds decide nothing)."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if v.size < MIN_UNITS:
        return float("nan"), float("nan")
    rng = np.random.default_rng(boot.seed)
    return percentile(v[rng.integers(0, v.size, size=(boot.resamples, v.size))].mean(axis=1), boot.confidence)


def verdict(ci_low: float, ci_high: float, *, side: str, null: float) -> str:
    """The verdict rule: `holds` when [ci_low, ci_high] lies wholly on the paper's side of `null` (side '>':
    above it, '<': below it), `contradicted` when wholly on the other side, else `inconclusive` (an interval
    touching the null, or none: NaN)."""
    if side not in (">", "<"):
        raise ValueError(f"side must be '>' or '<', got {side!r}")
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return INCONCLUSIVE
    above, below = ci_low > null, ci_high < null
    if above:
        return HOLDS if side == ">" else CONTRADICTED
    if below:
        return HOLDS if side == "<" else CONTRADICTED
    return INCONCLUSIVE


def side_alternative(side: str) -> str:
    """The one-sided alternative of a scipy test on the paper's side: '>' -> greater, '<' -> less."""
    return "greater" if side == ">" else "less"


def safe_p(fn: Callable[[], float]) -> float:
    """A test's p-value, NaN where the test is undefined on these data (too few values, all ties)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = float(fn())
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return float("nan")
    return p if math.isfinite(p) else float("nan")


def spearman_over_units(units: Sequence[pd.DataFrame], a: str, b: str, boot: Boot, *, side: str,
                        heads: tuple = ()) -> Result:
    """Spearman's rho of columns `a` and `b` (rows: heads) bootstrapped over `units` (one frame per seed, rows with
    NaN dropped per replicate), and the one-sided ``scipy.stats.spearmanr`` p-value of all units' rows pooled on the
    paper's `side` (NaN with fewer than 3 rows). rho is NaN where fewer than 3 rows remain or a column is
    constant."""
    units = [u.reset_index(drop=True) for u in units]

    def rho(t: pd.DataFrame) -> float:
        t = t.dropna()
        if len(t) < 3 or t[a].nunique() < 2 or t[b].nunique() < 2:
            return float("nan")
        return float(scipy_stats.spearmanr(t[a], t[b]).statistic)

    whole = not any(u.isna().any().any() for u in units)  # NaN rows are dropped per replicate: one at a time
    est, low, high, n = bootstrap(units, rho, boot, batched=batched_spearman(a, b) if whole else None)
    pooled = pd.concat(units, ignore_index=True).dropna()
    p = safe_p(lambda: scipy_stats.spearmanr(pooled[a], pooled[b], alternative=side_alternative(side)).pvalue) \
        if len(pooled) >= 3 else np.nan
    return Result(est, low, high, "scipy.stats.spearmanr", p, n, heads)
