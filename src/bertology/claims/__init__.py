"""The papers' claims checked on a run: results/claims.csv, the ledger the report opens with.

A claim is declared in the registry beside the analysis whose tables it reads (:class:`bertology.registry.Claim`)
and computed by a small pure function of those tables (:mod:`.kovaleva`, :mod:`.pande`, :mod:`.clark`,
:mod:`.michel`, :mod:`.beyond`, :mod:`.decision`: this project's own, beside the per-head statistic it ranks):
DataFrames in, an effect, its interval, a named test and the heads behind it
out (:class:`.bootstrap.Result`). :mod:`.bootstrap` holds the bootstrap (Multi-Bootstrap with seeds) and the verdict
rule (Holm's adjustment over the ledger: :func:`bertology.stats.moments.adjust_p`); :mod:`.paired` the paired
bootstrap and permutation test of two models on the same examples (Table 1); :mod:`.ledger` builds the ledger;
:mod:`.render` its HTML for the report.

Adding a claim: one :class:`~bertology.registry.Claim` entry on its analysis (and, if no existing function fits,
one function here), and its test (tests/test_claims.py: holds, contradicted, n too small).
"""

from bertology.claims.bootstrap import (
                                    CONTRADICTED,
                                    HOLDS,
                                    INCONCLUSIVE,
                                    NOT_COMPUTED,
                                    VERDICTS,
                                    Boot,
                                    Result,
                                    bootstrap,
                                    verdict,
)

__all__ = ["CONTRADICTED", "HOLDS", "INCONCLUSIVE", "NOT_COMPUTED", "VERDICTS", "Boot", "Result", "bootstrap",
           "verdict"]
