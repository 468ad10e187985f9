"""The page's sieve block (Pande et al. 2021): each head's test table per role (sieve.csv) and the distribution
of its per-example scores (sieve_scores.npz) as histograms against tau.

Shapes: L layers, H heads, R sieve roles (the union over both variants' tables, in order of appearance).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bertology.analyses.sieve import SIEVE_SCORES_FILE
from bertology.explorer.cells import num, truthy
from bertology.explorer.histograms import HIST_BINS, bin_counts, shared_ranges
from bertology.explorer.inputs import Inputs

#: sieve.csv columns shown per (layer, head, role)
TEST_STATISTICS = ("n", "mean", "std", "t", "p_value", "p_adjusted")


def roles_of(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The roles of the variants' sieve tables, in order of first appearance."""
    roles: list[str] = []
    for df in tables.values():
        roles += [r for r in df["role"].astype(str).unique() if r not in roles]
    return roles


def role_columns(df: pd.DataFrame, roles: list[str], L: int, H: int) -> dict[str, list]:
    """One variant's sieve.csv as flat (L * H * R,) columns (index (layer * H + head) * R + role): the test's
    statistics (None where absent) and `assigned` (0/1)."""
    R = len(roles)
    cols: dict[str, list] = {c: [None] * (L * H * R) for c in TEST_STATISTICS}
    cols["assigned"] = [0] * (L * H * R)
    for row in df.itertuples(index=False):
        rec = row._asdict()
        i = (int(rec["layer"]) * H + int(rec["head"])) * R + roles.index(str(rec["role"]))
        cols["assigned"][i] = int(truthy(rec["assigned"]))
        for c in TEST_STATISTICS:
            if c in rec:
                cols[c][i] = num(rec[c])
    return cols


def score_array(scores: Any, roles: list[str], L: int, H: int) -> np.ndarray:
    """A variant's per-example scores (DataArray (example, layer, head, role_npz)) on the page's roles: (N, L, H,
    R) float32, NaN for a role the file lacks."""
    a = np.full((scores.sizes["example"], L, H, len(roles)), np.nan, np.float32)
    have = [str(r) for r in scores["role"].values]
    for j, role in enumerate(roles):
        if role in have:
            a[..., j] = scores.values[..., have.index(role)]
    return a


def sieve_block(src: Inputs, task: str, L: int, H: int, tables: dict[str, pd.DataFrame],
                notes: list[str]) -> tuple[dict | None, dict[str, Any]]:
    """(sieve block of the page, {variant: scores DataArray}) or (None, {}) without sieve tables.

    tables: {variant: sieve.csv}. The block holds the roles, tau, alpha and the correction (of the first table),
    each variant's test columns (:func:`role_columns`) and, from the score files present, the shared histogram
    ranges ``hi`` (L * H * R,), the counts ``hist`` {variant: (L * H * R * bins,)} and ``n_scored``."""
    from bertology.sieve.scores_io import read_scores

    if not tables:
        return None, {}
    roles = roles_of(tables)
    first = next(iter(tables.values()))
    block: dict[str, Any] = {"roles": roles, "tau": num(first["tau"].iloc[0]),
                             "alpha": num(first["alpha"].iloc[0]), "correction": str(first["correction"].iloc[0]),
                             "stats": {v: role_columns(df, roles, L, H) for v, df in tables.items()},
                             "bins": HIST_BINS}
    scores = {}
    for v in tables:
        path = src.stat(task, v, SIEVE_SCORES_FILE)
        if src.readable(path):
            scores[v] = read_scores(path)
        else:
            notes.append(f"{src.absent(path)}: no score distributions for {v}")
    if scores:
        arrays = {v: score_array(s, roles, L, H) for v, s in scores.items()}
        hi = shared_ranges(list(arrays.values()), 1.5 * float(block["tau"]))
        block["hi"] = [num(x) for x in hi.ravel()]
        block["hist"] = {v: bin_counts(a, hi).astype(int).tolist() for v, a in arrays.items()}
        block["n_scored"] = {v: int(a.shape[0]) for v, a in arrays.items()}
    return block, scores

