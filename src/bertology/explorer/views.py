"""The token views of the norm analyses (Abnar & Zuidema 2020; docs/reference.md#token-views): each example's
tokens scored by every view (token_scores.parquet, per variant), the fine-tuned model's token importance
(importance.parquet) and the per-example Spearman rho of each view with each importance
(faithfulness_examples.csv, summarised in faithfulness.csv).

Shapes: n an example's real length (its wordpieces in the store).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bertology.explorer.cells import num
from bertology.analyses.norms import FAITHFULNESS, FAITHFULNESS_EXAMPLES, IMPORTANCE_FILE
from bertology.explorer.inputs import TOKEN_SCORES, Inputs

log = logging.getLogger(__name__)
#: why a run that fine-tunes nothing (train.inits: []) has no token importance and no agreement with it
NO_FINE_TUNED = "no fine-tuned model in this run (train.inits: []): no token importance to compare the views with"


def by_example(df: pd.DataFrame) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray, list[str]]]]:
    """A token-score table (example_idx, position, word, method, score) -> {example_idx: {method: (positions,
    scores, words)}}, positions sorted."""
    out: dict[int, dict[str, tuple[np.ndarray, np.ndarray, list[str]]]] = {}
    for (idx, method), g in df.groupby(["example_idx", "method"], sort=False):
        g = g.sort_values("position")
        out.setdefault(int(idx), {})[str(method)] = (g["position"].to_numpy(np.int64), g["score"].to_numpy(float),
                                                     g["word"].astype(str).tolist())
    return out


def token_views(src: Inputs, task: str, variants: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token views of the norm analyses (Abnar & Zuidema 2020; docs/reference.md#token-views): (the page's
    block: methods, importances, what is missing and why, faithfulness.csv; the lookups `attach_views` attaches per
    example: {"scores": {variant: by example}, "importance": by example, "rho": {example_idx: {view: {importance:
    rho}}}})."""
    from bertology.norms.faithful import IMPORTANCES, VIEWS
    from bertology.norms.mixviews import SIGNED
    from bertology.norms.mixviews import VIEWS as NEWER

    block: dict[str, Any] = {"views": list(VIEWS), "importances": list(IMPORTANCES), "signed": list(SIGNED),
                             "newer": list(NEWER), "missing": {}, "scored": {}, "flow": {}, "mixing": {}, "methods": {}, "faith": {},
                             "importance_missing": None, "rho_missing": None, "sources": {}}
    look: dict[str, Any] = {"scores": {}, "importance": {}, "rho": {}}
    for v in variants:
        path = src.stat(task, v, TOKEN_SCORES)
        block["sources"][v] = src.name(path)
        if not src.readable(path):
            block["missing"][v] = (f"{src.absent(path)}: the norm analyses did not run for the {v} model "
                                   "(analysis.norms.enabled: false, or a model whose layers get no value norms; "
                                   "the workflow says which at start)")
            continue
        df = pd.read_parquet(path)
        look["scores"][v] = by_example(df)
        block["scored"][v] = int(df["example_idx"].nunique())
        block["flow"][v] = int(df.loc[df["method"] == "flow", "example_idx"].nunique())
        block["mixing"][v] = int(df.loc[df["method"].isin(NEWER), "example_idx"].nunique())
        block["methods"][v] = sorted(map(str, pd.unique(df["method"])))    # the views this model has at all
    imp = src.stat(task, "finetuned", IMPORTANCE_FILE)
    if src.readable(imp):
        look["importance"] = by_example(pd.read_parquet(imp))
    elif not src.expected(imp):  # a run that fine-tunes nothing (train.inits: [])
        block["importance_missing"] = NO_FINE_TUNED
    else:
        block["importance_missing"] = (f"{src.absent(imp)}: the fine-tuned model's token importance "
                                       "(norms_faithfulness) was not computed")
    rhos = src.stat(task, "finetuned", FAITHFULNESS_EXAMPLES)
    if src.readable(rhos):
        for r in pd.read_csv(rhos).itertuples(index=False):
            look["rho"].setdefault(int(r.example_idx), {}).setdefault(str(r.view), {})[str(r.importance)] = num(r.rho)
    else:
        block["rho_missing"] = (NO_FINE_TUNED if not src.expected(rhos)
                                else f"{src.absent(rhos)}: no per-example agreement with the importance")
    faith = src.stat(task, "finetuned", FAITHFULNESS)
    if src.readable(faith):
        for r in pd.read_csv(faith).itertuples(index=False):
            block["faith"].setdefault(str(r.view), {})[str(r.importance)] = {
                "mean": num(r.mean), "std": num(r.std), "n": int(r.n), "ci_low": num(r.ci_low),
                "ci_high": num(r.ci_high)}
    return block, look


def preferred_groups(look: dict[str, Any]) -> list[set[int]]:
    """The groups :func:`bertology.explorer.sampling.pick_examples` fills the page with: the examples with every
    view (flow, importance), then those with any token score."""
    scored: set[int] = set()
    full: set[int] = set(look["importance"])
    for by in look["scores"].values():
        scored |= set(by)
        full |= {i for i, m in by.items() if "flow" in m}
    return [full, scored] if scored or full else []


def attach_views(ex: dict[str, Any], look: dict[str, Any]) -> None:
    """ex["views"] {variant: {method: scores (n,)}}, ex["importance"] {importance: scores (n,)}, ex["rho"] {view:
    {importance: rho}} of one example, where its token scores cover exactly its n store positions (with the same
    wordpieces when the page has them); a mismatch is said in ex["views_note"] instead."""
    idx, n = ex["idx"], ex["n"]
    notes: list[str] = []

    def aligned(by: dict, what: str) -> dict[str, list]:
        got = {}
        for method, (positions, scores, words) in by.get(idx, {}).items():
            if not np.array_equal(positions, np.arange(n)) or (ex.get("tokenized") and words != ex["tokens"]):
                notes.append(f"{what} {method}: its {len(positions)} positions are not the store's {n} wordpieces")
                continue
            got[method] = [num(x) for x in scores]
        return got

    ex["views"] = {v: got for v, by in look["scores"].items() if (got := aligned(by, f"{v} token scores"))}
    ex["importance"] = aligned(look["importance"], "importance")
    ex["rho"] = look["rho"].get(idx, {})
    if notes:
        ex["views_note"] = notes
        log.warning("explorer: example_idx %d: %s", idx, "; ".join(notes))
