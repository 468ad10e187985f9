"""Pande et al. 2021 (The heads hypothesis): the claims, pure functions of sieve.csv (see
docs/reference.md#claims). Every function: ``(tables, boot, *, side, null) -> Result``."""

from __future__ import annotations

import pandas as pd

from bertology.claims.common import (
    FINAL,
    INITIAL,
    MIDDLE,
    Tables,
    group_difference,
    heads_of,
    layer_group,
    share_difference,
)
from bertology.claims.bootstrap import (
    Boot,
    Result,
    nan_result,
    spearman_over_units,
)


def _means(sieve: pd.DataFrame) -> pd.DataFrame:
    return sieve.pivot_table(index=["layer", "head"], columns="role", values="mean").sort_index()


def local_syntactic(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """Spearman's rho over heads between the mean local and the mean syntactic sieve bias (sieve.csv ``mean``);
    the paper reports 0.73-0.85; holds above `null` (0.5: a strong correlation); unit: heads; test:
    scipy.stats.spearmanr (against 0)."""
    units = []
    for t in tables:
        m = _means(t["sieve"])
        if not {"local", "syntactic"} <= set(m.columns):
            return nan_result("scipy.stats.spearmanr", 0, "sieve.csv lacks the local or syntactic role")
        units.append(m[["local", "syntactic"]].reset_index(drop=True).astype(float))

    return spearman_over_units(units, "local", "syntactic", boot, side=side, heads=heads_of(tables[0]["sieve"]))


def _per_head(sieve: pd.DataFrame) -> pd.DataFrame:
    """layer, head, group (0 initial, 1 middle, 2 final), n_roles (fine roles assigned), delimiter (assigned)."""
    from bertology.sieve.summary import roles_per_head

    wide = roles_per_head(sieve).reset_index()
    out = pd.DataFrame({"layer": wide["layer"].astype(int), "head": wide["head"].astype(int),
                        "n_roles": wide["n_roles"].astype(int)})
    delim = sieve[sieve["role"] == "delimiter"].set_index(["layer", "head"])["assigned"].astype(bool)
    out["delimiter"] = [bool(delim.get((l, h), False)) for l, h in zip(out["layer"], out["head"])]
    out["group"] = layer_group(out["layer"]).to_numpy()
    return out


def multiskilled_middle(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """The share of multi-skilled heads (two or more fine roles assigned, as sieve_summary.csv's
    ``multi_skilled_heads``) in the middle third of the layers minus that in the other two thirds; unit: heads
    (stratified); test: scipy.stats.fisher_exact."""
    heads = [_per_head(t["sieve"]) for t in tables]
    units = [pd.DataFrame({"multi": (h["n_roles"] >= 2).astype(float), "group": h["group"]}) for h in heads]
    h0 = heads[0]
    return share_difference(units, "multi", "group", {MIDDLE}, {INITIAL, FINAL}, boot, side=side,
                            heads=heads_of(h0, h0["n_roles"] >= 2))


def delimiter_last(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """The share of heads assigned the delimiter role in the last third of the layers minus that in the first
    third; unit: heads (stratified); test: scipy.stats.fisher_exact."""
    heads = [_per_head(t["sieve"]) for t in tables]
    units = [pd.DataFrame({"delim": h["delimiter"].astype(float), "group": h["group"]}) for h in heads]
    h0 = heads[0]
    return share_difference(units, "delim", "group", {FINAL}, {INITIAL}, boot, side=side,
                            heads=heads_of(h0, h0["delimiter"]))


def delimiter_delta_final(tables: Tables, boot: Boot, *, side: str, null: float) -> Result:
    """Per head, the fine-tuned minus the pretrained mean delimiter bias (sieve.csv of both variants); effect =
    its mean over the heads of the last third of the layers minus its mean over the other heads (holds below
    zero: fine-tuning lowers the delimiter bias most in the final layers); unit: heads (stratified); test:
    scipy.stats.mannwhitneyu."""
    units = []
    for t in tables:
        pre = t["sieve_pretrained"]
        fin = t["sieve"]
        pick = lambda s: s[s["role"] == "delimiter"].set_index(["layer", "head"])["mean"]
        d = (pick(fin) - pick(pre)).dropna().sort_index().reset_index()
        if d.empty:
            return nan_result("scipy.stats.mannwhitneyu", 0, "sieve.csv lacks the delimiter role")
        g = layer_group(d["layer"], int(pre["layer"].max()) + 1)
        units.append(pd.DataFrame({"delta": d["mean"].astype(float), "g": (g == FINAL).astype(int)}))
    fin = tables[0]["sieve"]
    heads = heads_of(fin, layer_group(fin["layer"]) == FINAL)
    return group_difference(units, "delta", "g", {1}, {0}, boot, side=side, heads=heads)
