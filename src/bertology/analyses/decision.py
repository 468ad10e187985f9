"""Each head's share of the decision, from ALTI-Logit (Ferrando et al. 2023), and this project's own claim that
the heads which write most to the decision are the ones whose removal costs most, declared once. The table comes
from ``decision.parquet`` of the norms step (:mod:`bertology.claims.decision`); it is written when the norm
analyses run (analysis.norms.enabled and a supported model)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bertology.analyses.ablation import HEADS as DISABLING_HEADS
from bertology.analyses.ablation import IMPORTANCE
from bertology.analyses.norms import DECISION, EXTRA_SEEDS, STORES
from bertology.claims import decision as claims_decision
from bertology.pipeline.layout import rel
from bertology.registry import AcrossSeeds, Analysis, Claim, Section, Statistic, Step, Table, variant_table

#: the per-head statistic built on ALTI-Logit's parts per example (DECISION, the norms step's output)
DECISION_SHARE_FILE = "decision_share.csv"
DECISION_SHARE = variant_table(DECISION_SHARE_FILE)
#: the claims' own mark: no paper makes them
OURS = "ours (no paper makes this claim)"
OURS_SECTION = "built on ALTI-Logit, Ferrando et al. 2023"


def decision_share_table(decision: pd.DataFrame, config: Any) -> dict[str, pd.DataFrame]:
    """The table function of the rule ``decision_share``: decision.parquet -> decision_share.csv, the bootstrap's
    resamples and confidence from analysis.flow (the norm analyses' intervals over examples), seeded by
    data.seed."""
    flow = config.analysis.flow
    return {"table": claims_decision.decision_share(decision, resamples=flow.bootstrap, confidence=flow.confidence,
                                                    seed=int(config.data.seed))}


def _claim(against: str) -> Claim:
    importance = against == "importance"
    cost = ("importance.csv: raw (Michel et al.'s importance before the per-layer normalisation)" if importance
            else "ablation heads.csv: -delta of the headline metric (the disabling sweep's cost)")
    return Claim(f"decision_share_{against}", OURS, OURS_SECTION,
                 "The heads that write most to the decision (ALTI-Logit) are the heads whose removal costs most "
                 + ("(Michel et al.'s importance)." if importance else "(disabling them alone, Kovaleva 4.6)."),
                 f"decision_share.csv (finetuned): abs(mean), measure logit, per head; Spearman rho with {cost}",
                 claims_decision.share_against_cost,
                 (("decision", DECISION_SHARE, "analysis.norms.enabled"),
                  ("importance", IMPORTANCE, "") if importance else ("heads", DISABLING_HEADS, "")),
                 unit="heads", params=(("against", against),), config="analysis.norms.enabled",
                 anchor="decision", figure="importance" if importance else "ablation-heads",
                 paper_value="no paper: this project's own claim",
                 sentence="Heads that write most to the decision (their ALTI-Logit share of the predicted class's "
                          "logit) are the heads whose removal costs most (our own claim: no paper makes it).")


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="decision",
        claims=(_claim("importance"), _claim("disabling")),
        steps=(Step("decision_share", "functions", ("analysis.flow.bootstrap", "analysis.flow.confidence",
                                                    "data.seed"),
                    "each head's share of the decision (ALTI-Logit): mean contribution to the predicted class's "
                    "logit over the examples, with a bootstrap interval",
                    function=decision_share_table, inputs=(("decision", DECISION),)),),
        tables=(Table(DECISION_SHARE, claims_decision.COLUMNS, when="norms", rule="decision_share", output="table",
                      seeds=AcrossSeeds("decision_share", ("layer", "head", "measure")),
                      wanted=(STORES, EXTRA_SEEDS)),),
        section=Section(
            key="decision", paper="Ferrando et al. 2023 (ALTI-Logit); the claim is this project's own",
            title="Each head's share of the decision (ALTI-Logit)",
            measures="ALTI-Logit (Ferrando et al. 2023) splits the classifier's logit of the predicted class into "
            "additive parts: each head of each layer, the attention biases, the MLPs, the embeddings, the norms' "
            "biases of a post-LN model and the final bias. Per head: the mean over the examples of the norm analyses' sample of its part of the predicted "
            "class's logit (measure logit) and of the predicted minus the runner-up class's logit (contrast), with a "
            "percentile bootstrap interval over the examples (analysis.flow.bootstrap, analysis.flow.confidence). "
            "The table lists the heads that write most first. The claims rank the heads by |logit share| against "
            "Michel et al.'s importance and against the disabling sweep's cost (Spearman's rho over heads).",
            finding="No paper measures it per head: ALTI-Logit's authors track tokens, not heads. This project's own "
            "claim is that the heads which write most to the decision are the ones whose removal costs most; the "
            "ledger gives its verdict per task.",
            tables=(rel("variant_stat", variant="finetuned", file=DECISION_SHARE_FILE),)),
        statistics=(
            Statistic(id="decision_share", group="Share of the decision (ALTI-Logit)", label="decision share {k}",
                      desc="Mean over the examples of the head's ALTI-Logit part of the predicted class's logit "
                      "(logit) or of its margin over the runner-up (contrast); interval: bootstrap over the examples.",
                      table=DECISION_SHARE, key=("measure",), diverging=True, ci=("ci_low", "ci_high"),
                      optional=True, across_seeds=True),
        )),
)
