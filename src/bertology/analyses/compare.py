"""Comparing models: the step that reads every model's results root and writes the comparisons the papers make
across models (:mod:`bertology.compare`, :mod:`bertology.steps.compare`; docs/reference.md#compare): the tables it
reads in each model's root (:data:`SOURCES`, their declared paths) and its outputs (:data:`OUTPUTS`)."""

from __future__ import annotations

from bertology.analyses.clark import ENTROPY
from bertology.analyses.decoders import SINKS
from bertology.analyses.kovaleva import FEATURES, PATTERNS
from bertology.analyses.sieve import SIEVE
from bertology.compare import COLUMNS
from bertology.compare.common import VARIANTS
from bertology.pipeline.layout import rel
from bertology.registry import Analysis, Output, Step

#: the tables the comparison reads in each model's results root: name -> (its path text under that root, as its
#: analysis declares it; the store variants read, () for a table of no store variant). The probe's tables are the
#: task's (the pretrained model's and its random initialisation's rows), the cosine the first fine-tuning seed's.
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "decoder_sink": (rel("decoder_sink"), ()),
    "decoder_induction": (rel("decoder_induction"), ()),
    "cosine": (rel("cosine", seedtag=""), ()),
    "features": (FEATURES, ("pretrained",)),
    "sinks": (SINKS, ("pretrained",)),
    "patterns": (PATTERNS, VARIANTS),
    "sieve": (SIEVE, VARIANTS),
    "entropy": (ENTROPY, VARIANTS),
}

#: the comparison's tables (bertology.compare.COLUMNS) and those it draws (each figure's output is the table's name
#: and ``_figure``)
TABLES = tuple(COLUMNS)
FIGURES = ("sinks", "depth", "patterns", "roles")

#: the step's outputs under the run's results root, wanted by no model's module (the run's targets list them:
#: rules/models.smk)
OUTPUTS: tuple[Output, ...] = (
    *(Output(rel("compare_table", name=name), rule="compare", output=name) for name in TABLES),
    *(Output(rel("compare_figure", name=name), rule="compare", output=f"{name}_figure") for name in FIGURES),
)

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="compare",
        steps=(Step("compare", "compare", ("tasks",),
                    "compare models (one --input roots=DIR per model's results root): sink rate, best induction "
                    "head, pattern and sieve-role shares, per-layer curves on relative depth"),),
        outputs=OUTPUTS),
)
