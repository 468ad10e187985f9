"""Comparing models: the step that reads every model's results root and writes the comparisons the papers make
across models (:mod:`bertology.compare`, :mod:`bertology.steps.compare`; docs/reference.md#compare)."""

from __future__ import annotations

from bertology.registry import Analysis, Step

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="compare",
        steps=(Step("compare", "compare", ("tasks",),
                    "compare models (one --input roots=DIR per model's results root): sink rate, best induction "
                    "head, pattern and sieve-role shares, per-layer curves on relative depth"),)),
)
