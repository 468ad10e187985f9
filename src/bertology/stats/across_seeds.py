"""Statistics over fine-tuning seeds: which per-head findings survive another seed.

With ``train.seeds: [s1, s2, ...]`` every fine-tuned analysis runs once per seed (bertology.pipeline.seedtags). This
module holds the pure functions that compare the seeds (the step is ``bertology.steps.seeds``):

- :func:`seed_moments`: a per-head statistic's mean, std and n over seeds, with each seed's value;
- :func:`fleiss_kappa_sets` and :func:`mean_pairwise_jaccard`: how far the seeds agree on the set of heads a
  sieve role is assigned to (Fleiss' kappa with seeds as raters and heads as subjects; Jaccard of each pair);
- :func:`multibootstrap_indices` / :func:`multibootstrap_samples` / :func:`multibootstrap`: the Multi-Bootstrap of
  Sellam et al. 2022 (The MultiBERTs, section 3): each replicate draws seeds and examples with replacement,
  together, and averages the per-seed, per-example values over both draws, so an interval reflects both
  sources of variance;
- :func:`verdict`: "every", "most", "some", "one" or "none" of the seeds (stats/{task}/seeds/findings.csv, the claims
  ledger's view over seeds: :func:`bertology.claims.ledger.findings_view`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: verdicts of :func:`verdict`, strongest first
VERDICTS = ("every", "most", "some", "one", "none")


def seed_moments(frames: Sequence[pd.DataFrame], seeds: Sequence[int], keys: Sequence[str],
                 value: str) -> pd.DataFrame:
    """One per-head table per seed -> its statistic over seeds.

    frames: one table per seed (same `keys` columns, e.g. layer, head, feature), column `value`; seeds: their
    seeds, in the same order. Returns keys + mean, std (ddof 1; NaN for n < 2), n (seeds with a finite value)
    and one column ``seed{N}`` per seed with that seed's value (NaN where the seed's table lacks the row).
    """
    if len(frames) != len(seeds):
        raise ValueError(f"{len(frames)} tables for {len(seeds)} seeds")
    keys = list(keys)
    wide = None
    for frame, seed in zip(frames, seeds):
        part = frame[keys + [value]].rename(columns={value: f"seed{seed}"})
        wide = part if wide is None else wide.merge(part, on=keys, how="outer")
    cols = [f"seed{s}" for s in seeds]
    values = wide[cols].to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    n = finite.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.where(finite, values, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)
        dev = np.where(finite, values - mean[:, None], 0.0)
        std = np.where(n > 1, np.sqrt((dev * dev).sum(axis=1) / np.maximum(n - 1, 1)), np.nan)
    out = wide[keys].copy()
    out["mean"], out["std"], out["n"] = mean, std, n
    for c in cols:
        out[c] = wide[c].to_numpy()
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def fleiss_kappa_sets(assigned: np.ndarray) -> float:
    """Fleiss' kappa of the seeds' assignments of one role: seeds are the raters, heads the subjects, and the
    two categories are "assigned" and "not assigned".

    assigned: (S, M) bool, S >= 2 seeds x M heads. Returns kappa in [-1, 1]; NaN when every seed puts every
    head in the same category (chance agreement is then 1 and kappa undefined).
    """
    from statsmodels.stats.inter_rater import fleiss_kappa

    a = np.asarray(assigned, dtype=bool)
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"assignments must be (seeds >= 2, heads), got shape {a.shape}")
    yes = a.sum(axis=0)
    table = np.stack([yes, a.shape[0] - yes], axis=1)  # (M, 2): raters per category per subject
    if (table.sum(axis=0) == 0).any():
        return float("nan")
    return float(fleiss_kappa(table, method="fleiss"))


def mean_pairwise_jaccard(assigned: np.ndarray) -> float:
    """Mean over pairs of seeds of the Jaccard index |A n B| / |A u B| of their assigned head sets.

    assigned: (S, M) bool, S >= 2. Pairs where both sets are empty have no Jaccard index and are left out;
    NaN when every pair is such.
    """
    a = np.asarray(assigned, dtype=bool)
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"assignments must be (seeds >= 2, heads), got shape {a.shape}")
    values = []
    for i in range(a.shape[0]):
        for j in range(i + 1, a.shape[0]):
            union = np.logical_or(a[i], a[j]).sum()
            if union:
                values.append(np.logical_and(a[i], a[j]).sum() / union)
    return float(np.mean(values)) if values else float("nan")


def multibootstrap_indices(n_seeds: int, n_examples: int, resamples: int,
                           seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The draws of the Multi-Bootstrap: seeds (B, S) and examples (B, N), each row drawn with replacement
    (numpy's default_rng(seed): first all seed draws, then all example draws)."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, n_seeds, size=(resamples, n_seeds)),
            rng.integers(0, n_examples, size=(resamples, n_examples)))


def multibootstrap_samples(values: np.ndarray, seed_draws: np.ndarray, example_draws: np.ndarray,
                           batch: int = 64) -> np.ndarray:
    """The statistic of each Multi-Bootstrap replicate: the mean of values[s, x] over the replicate's drawn
    seeds s and drawn examples x (every pair; NaN values left out).

    values: (S, N, K) per seed, example and cell (e.g. K = heads); seed_draws: (B, S); example_draws: (B, N).
    Returns (B, K). Computed through draw counts (a replicate's mean is sum_s sum_x c_s d_x v[s, x] over the
    same sum of c_s d_x), `batch` replicates at a time.
    """
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    v0 = np.where(ok, v, 0.0)
    n_seeds, n_examples = v.shape[:2]
    out = np.empty((seed_draws.shape[0], v.shape[2]))
    for start in range(0, seed_draws.shape[0], batch):
        sd, xd = seed_draws[start:start + batch], example_draws[start:start + batch]
        c = np.stack([np.bincount(row, minlength=n_seeds) for row in sd]).astype(np.float64)      # (b, S)
        d = np.stack([np.bincount(row, minlength=n_examples) for row in xd]).astype(np.float64)   # (b, N)
        num = np.einsum("bs,bsk->bk", c, np.einsum("bx,sxk->bsk", d, v0))
        den = np.einsum("bs,bsk->bk", c, np.einsum("bx,sxk->bsk", d, ok.astype(np.float64)))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + batch] = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
    return out


def multibootstrap(values: np.ndarray, *, resamples: int, seed: int,
                   confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point estimate and Multi-Bootstrap percentile interval of the mean over seeds and examples.

    values: (S, N, K). Returns mean (K,) (over every finite value), low (K,), high (K,) (the (1 - confidence) / 2
    and (1 + confidence) / 2 quantiles of the replicates, NaN replicates left out).
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(v.reshape(-1, v.shape[2]), axis=0) if np.isfinite(v).any() else np.full(v.shape[2], np.nan)
    seeds, examples = multibootstrap_indices(v.shape[0], v.shape[1], resamples, seed)
    samples = multibootstrap_samples(v, seeds, examples)
    tail = (1.0 - confidence) / 2.0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN cell gives a NaN interval
        low, high = np.nanquantile(samples, [tail, 1.0 - tail], axis=0)
    return mean, low, high


def verdict(holding: int, n_seeds: int) -> str:
    """How many of n_seeds seeds a finding holds in, in words: every, most (more than half), some, one, none."""
    if holding <= 0:
        return "none"
    if holding >= n_seeds:
        return "every"
    if holding * 2 > n_seeds:
        return "most"
    return "one" if holding == 1 else "some"


# --------------------------------------------------------------------------------------------------
# per-head tables -> seed tables

#: columns of multibootstrap.csv (metric: the disabling outcome; role: the sieve role; empty where none)
MULTIBOOTSTRAP_COLUMNS = ("quantity", "metric", "role", "layer", "head", "mean", "ci_low", "ci_high", "n_seeds",
                          "n_examples", "resamples", "confidence")


def role_tables(sieve: Sequence[pd.DataFrame], seeds: Sequence[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The seeds' sieve tables (layer, head, role, assigned) -> (roles, agreement).

    roles: layer, head, role, assigned (seeds assigning the role to the head), n_seeds, share.
    agreement: role, layer (empty = all heads), fleiss_kappa, jaccard (mean pairwise), heads_assigned (mean over
    seeds of the heads assigned the role), n_heads, n_seeds.
    """
    keys = ["layer", "head", "role"]
    wide = seed_moments([t.assign(assigned=t["assigned"].astype(float)) for t in sieve], seeds, keys, "assigned")
    cols = [f"seed{s}" for s in seeds]
    roles = wide[keys].copy()
    values = wide[cols].to_numpy(dtype=float)
    roles["assigned"] = np.nansum(values, axis=1).astype(int)
    roles["n_seeds"] = len(seeds)
    roles["share"] = roles["assigned"] / len(seeds)
    rows = []
    for role, sub in wide.groupby("role", sort=False):
        for layer, part in [(None, sub), *sub.groupby("layer")]:
            a = np.nan_to_num(part[cols].to_numpy(dtype=float)).astype(bool).T   # (S, heads)
            rows.append({"role": role, "layer": layer, "fleiss_kappa": fleiss_kappa_sets(a),
                         "jaccard": mean_pairwise_jaccard(a), "heads_assigned": float(a.sum(axis=1).mean()),
                         "n_heads": a.shape[1], "n_seeds": len(seeds)})
    agreement = pd.DataFrame(rows)
    agreement["layer"] = agreement["layer"].astype("Int64")  # empty = all heads
    return roles, agreement


def multibootstrap_table(values: np.ndarray, labels: pd.DataFrame, *, quantity: str, resamples: int, seed: int,
                         confidence: float) -> pd.DataFrame:
    """multibootstrap.csv rows of one quantity: values (S, N, K) per seed, example and cell; labels: K rows of
    the cell's keys (layer, head, ...). Adds quantity, mean, ci_low, ci_high, n_seeds, n_examples, resamples,
    confidence."""
    mean, low, high = multibootstrap(values, resamples=resamples, seed=seed, confidence=confidence)
    out = labels.reset_index(drop=True).copy()
    out.insert(0, "quantity", quantity)
    out["mean"], out["ci_low"], out["ci_high"] = mean, low, high
    out["n_seeds"], out["n_examples"] = values.shape[0], values.shape[1]
    out["resamples"], out["confidence"] = resamples, confidence
    return out


def faithfulness_table(per_seed: Sequence[pd.DataFrame], *, resamples: int, seed: int,
                       confidence: float) -> pd.DataFrame:
    """multibootstrap.csv rows of the token views' faithfulness (bertology.norms): per_seed, each seed's
    faithfulness_examples.csv (example_idx, view, importance, rho; AOPC in rho for importance ``aopc``). One row per
    view and importance (quantity ``faithfulness.{view}``, metric = the importance) and per importance the effect
    "newer decompositions minus rollout" (quantity ``faithfulness.newer_minus_rollout``,
    :func:`bertology.norms.ranking.newer_minus_rollout_values`), each with its Multi-Bootstrap interval over the
    seeds and the union of their examples (NaN where a seed lacks one)."""
    from bertology.norms.ranking import newer_minus_rollout_values

    frames = [f[np.isfinite(f["rho"].to_numpy(float))] for f in per_seed]
    cells = sorted({(v, i) for f in frames for v, i in zip(f["view"], f["importance"])},
                   key=lambda c: (c[1], c[0]))
    idx = sorted({int(x) for f in frames for x in f["example_idx"]})
    if not cells or not idx:
        return pd.DataFrame(columns=list(MULTIBOOTSTRAP_COLUMNS))
    values = np.full((len(frames), len(idx), len(cells) + 3), np.nan)
    col = {c: k for k, c in enumerate(cells)}
    pos = {x: k for k, x in enumerate(idx)}
    for s, f in enumerate(frames):
        for r in f.itertuples(index=False):
            values[s, pos[int(r.example_idx)], col[(r.view, r.importance)]] = r.rho
    imps = ("ablation", "gradient", "aopc")
    for k, imp in enumerate(imps):
        for s, f in enumerate(per_seed):
            eff = newer_minus_rollout_values(f, imp)
            for x, v in eff.items():
                values[s, pos[int(x)], len(cells) + k] = v
    labels = pd.DataFrame({"metric": [i for _, i in cells] + list(imps)})
    out = multibootstrap_table(values, labels, quantity="", resamples=resamples, seed=seed, confidence=confidence)
    out["quantity"] = [f"faithfulness.{v}" for v, _ in cells] + ["faithfulness.newer_minus_rollout"] * len(imps)
    return out


def head_grid_labels(layers: int, heads: int, **extra: Sequence) -> pd.DataFrame:
    """Row labels of an (L, H, ...) array flattened in C order: layer, head and, per `extra` name, its values
    (the trailing axes, in order)."""
    grids = np.meshgrid(np.arange(layers), np.arange(heads), *[np.arange(len(v)) for v in extra.values()],
                        indexing="ij")
    out = pd.DataFrame({"layer": grids[0].ravel(), "head": grids[1].ravel()})
    for (name, values), grid in zip(extra.items(), grids[2:]):
        out[name] = np.asarray(list(values))[grid.ravel()]
    return out


def disabling_values(predictions: np.ndarray, labels: np.ndarray, layer: np.ndarray, head: np.ndarray,
                     regression: bool) -> tuple[np.ndarray, pd.DataFrame, str]:
    """Per-example change of one seed's outcome when a head is disabled alone.

    predictions: (C, E) of the sweep's configurations (baseline first); labels (E,); layer, head (C,) (-1 where
    none). Returns values (E, K) over the K single-head configurations (outcome disabled - outcome intact, where
    the outcome is correctness for a classifier and minus the squared error for a regressor), their layer/head
    labels, and the outcome's name (accuracy | neg_squared_error).
    """
    p, y = np.asarray(predictions, dtype=float), np.asarray(labels, dtype=float)
    outcome = -(p - y[None, :]) ** 2 if regression else (p == y[None, :]).astype(float)
    cols = np.nonzero((np.asarray(layer) >= 0) & (np.asarray(head) >= 0))[0]
    base = np.nonzero((np.asarray(layer) < 0) & (np.asarray(head) < 0))[0][0]
    values = (outcome[cols] - outcome[base][None, :]).T
    labels_df = pd.DataFrame({"layer": np.asarray(layer)[cols], "head": np.asarray(head)[cols]})
    return values, labels_df, ("neg_squared_error" if regression else "accuracy")


# --------------------------------------------------------------------------------------------------
# figures


def plot_stability(tables: dict[str, pd.DataFrame], path, *, task: str):
    """Per-head stability maps: for each (name -> a seed_moments table with layer, head, mean, std, one row per
    head) the mean over seeds and the std over seeds, side by side."""
    from bertology.pipeline.plotting import layer_head_heatmap, new_figure, save_figure

    items = [(n, t) for n, t in tables.items() if len(t)]
    fig, axes = new_figure(9.0, 2.6 * max(len(items), 1), nrows=max(len(items), 1), ncols=2, squeeze=False)
    for row, (name, t) in enumerate(items):
        layers, heads = int(t["layer"].max()) + 1, int(t["head"].max()) + 1
        for col, what in enumerate(("mean", "std")):
            grid = np.full((layers, heads), np.nan)
            grid[t["layer"].astype(int), t["head"].astype(int)] = t[what]
            finite = grid[np.isfinite(grid)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            im = layer_head_heatmap(axes[row, col], grid, vmin=lo, vmax=hi if hi > lo else lo + 1e-9,
                                    cmap="viridis" if what == "mean" else "magma",
                                    title=f"{task}: {name}, {what} over seeds")
            fig.colorbar(im, ax=axes[row, col])
    if not items:
        axes[0, 0].text(0.5, 0.5, "no per-head table", ha="center")
    return save_figure(fig, path)


def plot_role_agreement(agreement: pd.DataFrame, path, *, task: str):
    """Role agreement by layer: Fleiss' kappa and mean pairwise Jaccard of each role's assigned heads, per layer."""
    from bertology.pipeline.plotting import new_figure, number_from_one, save_figure

    fig, axes = new_figure(9.0, 3.4, ncols=2)
    per_layer = agreement[agreement["layer"].notna()]
    for ax, what, label in ((axes[0], "fleiss_kappa", "Fleiss' kappa"), (axes[1], "jaccard", "mean pairwise Jaccard")):
        for role, sub in per_layer.groupby("role", sort=False):
            if sub[what].notna().any():
                ax.plot(sub["layer"].astype(int), sub[what], marker="o", label=role)
        layers = int(per_layer["layer"].max()) + 1 if len(per_layer) else 1
        number_from_one(ax, "x", layers, label="layer")
        ax.set_ylabel(label)
        ax.set_title(f"{task}: {label} of sieve roles across seeds", fontsize=9)
    if axes[0].lines or axes[1].lines:
        axes[1].legend(fontsize=6, loc="best")
    else:
        axes[0].text(0.5, 0.5, "no role assigned to any head in any seed\n(or one category only): no agreement to show",
                     ha="center", va="center", transform=axes[0].transAxes, fontsize=8)
    return save_figure(fig, path)
