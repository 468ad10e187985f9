"""Every analysis, declared once, beside the others of its family; collected here into the one registry.

One module per family (``pipeline``: data, fine-tuning, the attention store, the pages and the tools; ``kovaleva``,
``ablation``, ``clark``, ``norms``, ``decision``, ``sieve``, ``decoders``, ``seeds``; ``ledger``: the claims
ledger; ``compare``: comparing models), each a tuple ``ANALYSES`` of :class:`bertology.registry.Analysis` entries. The order of the families below, then of the entries
in each, is the order of the report's sections and of the explorer's statistics. A new family is a module here
and its line in ``FAMILIES``; the types and the queries are in :mod:`bertology.registry`.
"""

from __future__ import annotations

from bertology.analyses import ablation, clark, compare, decision, decoders, kovaleva, ledger, norms, pipeline, seeds, sieve
from bertology.registry import Registry

#: the families, in the report's order
FAMILIES = (pipeline, kovaleva, ablation, clark, norms, decision, sieve, decoders, seeds, ledger, compare)

#: the one registry of analyses (:class:`bertology.registry.Registry`)
REGISTRY = Registry(a for family in FAMILIES for a in family.ANALYSES)

__all__ = ["FAMILIES", "REGISTRY"]
