"""Across-head summaries of the sieve tests: fine-tuning deltas (Fig. 6), role shares and overlaps (Fig. 4),
and the Spearman correlation of local and syntactic bias.

Choices (documented in the CSVs' column names):

- layer groups: the layers split into three consecutive groups as equal as possible
  (``numpy.array_split``; 12 layers -> 4/4/4 as in the paper, 6 -> 2/2/2); named initial, middle, final.
- delta: per task, role and layer group, the mean over heads of the heads' mean bias (sieve.csv `mean`)
  of the fine-tuned model minus the same for the pretrained model, over heads with both means finite.
- Spearman `spearman_rho`/`spearman_p`: across the heads of one model and task, the heads' mean local
  bias against their mean syntactic bias. `spearman_rho_examples`/`_p_examples`: pooled over
  (example, head) pairs of the per-example scores, which is closer to the paper's "local and syntactic
  sieve scores" wording; both are reported.
- overlap: |syntactic ∩ local| / |syntactic| (share of syntactic heads that are also local) and the
  Jaccard index |syntactic ∩ local| / |syntactic ∪ local|; NaN when the denominators are empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from .masks import ROLES
from bertology.pipeline.errors import InputError

LAYER_GROUPS: tuple[str, ...] = ("initial", "middle", "final")
DELTA_COLUMNS = ["task", "role", "layer_group", "pretrained", "finetuned", "delta", "n_heads"]
#: the fine-grained roles (the coarse `delimiter` and `syntactic` are unions of some of them)
FINE_ROLES: tuple[str, ...] = tuple(r for r in ROLES if r not in ("delimiter", "syntactic"))
#: the paper's four coarse roles (Fig. 4)
COARSE_ROLES: tuple[str, ...] = ("local", "block", "delimiter", "syntactic")


def layer_groups(n_layers: int) -> dict[int, str]:
    """layer (0-based) -> initial | middle | final: three consecutive groups as equal as possible."""
    if n_layers < 1:
        raise ValueError(f"need at least one layer, got {n_layers}")
    groups = np.array_split(np.arange(n_layers), 3)
    return {int(l): name for name, g in zip(LAYER_GROUPS, groups) for l in g}


def _check_table(table: pd.DataFrame, what: str) -> None:
    missing = {"layer", "head", "role", "mean", "assigned"} - set(table.columns)
    if missing:
        raise InputError(f"{what} lacks column(s) {sorted(missing)}: is it a sieve.csv?")


def sieve_delta(pretrained: pd.DataFrame, finetuned: pd.DataFrame, task: str) -> pd.DataFrame:
    """Fine-tuned minus pretrained mean bias per role and layer group (one task): DELTA_COLUMNS."""
    _check_table(pretrained, "the pretrained sieve table")
    _check_table(finetuned, "the fine-tuned sieve table")
    keys = ["layer", "head", "role"]
    both = pretrained[keys + ["mean"]].merge(finetuned[keys + ["mean"]], on=keys, suffixes=("_pre", "_fine"))
    if both.empty:
        raise InputError(f"{task}: the pretrained and fine-tuned sieve tables share no (layer, head, role)")
    n_layers = int(max(pretrained["layer"].max(), finetuned["layer"].max())) + 1
    both["layer_group"] = both["layer"].map(layer_groups(n_layers))
    both = both[np.isfinite(both["mean_pre"]) & np.isfinite(both["mean_fine"])]
    out = (both.groupby(["role", "layer_group"], sort=False)
           .agg(pretrained=("mean_pre", "mean"), finetuned=("mean_fine", "mean"), n_heads=("mean_pre", "size"))
           .reset_index())
    out["delta"] = out["finetuned"] - out["pretrained"]
    out["task"] = task
    order = {r: i for i, r in enumerate(ROLES)}
    out["_r"] = out["role"].map(order)
    out["_g"] = out["layer_group"].map({g: i for i, g in enumerate(LAYER_GROUPS)})
    return out.sort_values(["_r", "_g"])[DELTA_COLUMNS].reset_index(drop=True)


def role_sets(table: pd.DataFrame, roles: Iterable[str] | None = None) -> dict[str, set[tuple[int, int]]]:
    """role -> the set of (layer, head) assigned that role."""
    _check_table(table, "the sieve table")
    roles = list(roles) if roles is not None else [r for r in ROLES if r in set(table["role"])]
    hit = table[table["assigned"].astype(bool)]
    return {r: set(map(tuple, hit.loc[hit["role"] == r, ["layer", "head"]].to_numpy().tolist())) for r in roles}


def roles_per_head(table: pd.DataFrame, roles: Sequence[str] = FINE_ROLES) -> pd.DataFrame:
    """(layer, head) x roles boolean frame (every head of the table present), plus `n_roles`."""
    _check_table(table, "the sieve table")
    sub = table[table["role"].isin(roles)]
    wide = sub.pivot_table(index=["layer", "head"], columns="role", values="assigned", aggfunc="any",
                           fill_value=False)
    heads = pd.MultiIndex.from_frame(table[["layer", "head"]].drop_duplicates().sort_values(["layer", "head"]))
    wide = wide.reindex(index=heads, columns=[r for r in roles if r in set(sub["role"])], fill_value=False).astype(bool)
    wide["n_roles"] = wide.sum(axis=1)
    return wide


def _ratio(a: int, b: int) -> float:
    return a / b if b else float("nan")


def summarize(table: pd.DataFrame, scores: xr.DataArray | None = None, *, task: str, variant: str) -> dict:
    """One row of sieve_summary.csv for a task and variant (see the module docstring for definitions)."""
    _check_table(table, "the sieve table")
    heads = table[["layer", "head"]].drop_duplicates()
    n_heads = len(heads)
    present = [r for r in ROLES if r in set(table["role"])]
    sets = role_sets(table, present)
    any_role = set().union(*sets.values()) if sets else set()
    syn, loc = sets.get("syntactic", set()), sets.get("local", set())
    per_head = roles_per_head(table)
    row: dict = {"task": task, "variant": variant, "n_heads": n_heads,
                 "delimiter_heads": len(sets.get("delimiter", ())),
                 "share_delimiter": _ratio(len(sets.get("delimiter", ())), n_heads),
                 "no_role_heads": n_heads - len(any_role),
                 "share_no_role": _ratio(n_heads - len(any_role), n_heads),
                 "multi_skilled_heads": int((per_head["n_roles"] >= 2).sum()),
                 "syntactic_heads": len(syn), "local_heads": len(loc), "syntactic_and_local": len(syn & loc),
                 "overlap_syntactic_local": _ratio(len(syn & loc), len(syn)),
                 "jaccard_syntactic_local": _ratio(len(syn & loc), len(syn | loc))}
    means = table.pivot_table(index=["layer", "head"], columns="role", values="mean")
    rho = p = float("nan")
    if {"local", "syntactic"} <= set(means.columns):
        pair = means[["local", "syntactic"]].dropna()
        if len(pair) >= 3 and pair.nunique().min() > 1:
            res = stats.spearmanr(pair["local"], pair["syntactic"])
            rho, p = float(res.statistic), float(res.pvalue)
    row.update({"spearman_rho": rho, "spearman_p": p, "spearman_n_heads": int(len(means.dropna(
        subset=[c for c in ("local", "syntactic") if c in means.columns])) if len(means) else 0)})
    rho_e = p_e = float("nan")
    n_e = 0
    if scores is not None and {"local", "syntactic"} <= set(scores["role"].values.tolist()):
        a = np.asarray(scores.sel(role="local").values, dtype=np.float64).ravel()
        b = np.asarray(scores.sel(role="syntactic").values, dtype=np.float64).ravel()
        ok = np.isfinite(a) & np.isfinite(b)
        n_e = int(ok.sum())
        if n_e >= 3:
            res = stats.spearmanr(a[ok], b[ok])
            rho_e, p_e = float(res.statistic), float(res.pvalue)
    row.update({"spearman_rho_examples": rho_e, "spearman_p_examples": p_e, "spearman_n_pairs": n_e})
    for r in ROLES:
        row[f"heads_{r}"] = len(sets[r]) if r in sets else float("nan")
    return row
