"""The claims ledger: every analysis's claims (:class:`bertology.registry.Claim`, declared on the analyses whose
tables they read) checked on the run, results/claims.csv (rule ``claims``, :mod:`bertology.steps.claims`). The report
opens with it; it has no section of its own."""

from __future__ import annotations

from bertology.claims.ledger import COLUMNS as CLAIMS_COLUMNS
from bertology.layout import rel
from bertology.registry import Analysis, Table

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="claims", config=("analysis.claims",),
        tables=(Table(rel("claims"), CLAIMS_COLUMNS),)),
)
