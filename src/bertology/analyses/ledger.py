"""The claims ledger: every analysis's claims (:class:`bertology.registry.Claim`, declared on the analyses whose
tables they read) checked on the run, results/claims.csv (rule ``claims``, :mod:`bertology.steps.claims`). The report
opens with it; it has no section of its own."""

from __future__ import annotations

from bertology.claims.ledger import COLUMNS as CLAIMS_COLUMNS
from bertology.pipeline.layout import path, rel
from bertology.registry import ONCE, Analysis, Output, Step, Table, figure

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="claims",
        steps=(Step("claims", "claims", ("model", "tasks", "data.seed", "data.source", "train.seed", "train.seeds",
                                         "train.inits", "analysis.claims", "analysis.norms.enabled",
                                         "analysis.syntax.conllu"),
                    f"{path('claims')}, claims.md: the papers' claims checked on this run (effect, interval, "
                    f"test, verdict)", runtime=20),),
        tables=(Table(rel("claims"), CLAIMS_COLUMNS, rule="claims", output="ledger", report="claims",
                      wanted=(ONCE,)),),
        outputs=(Output(rel("claims_md"), rule="claims", output="markdown", wanted=(ONCE,)),
                 figure("claims", "forest", "claims", per_task=False))),
)
