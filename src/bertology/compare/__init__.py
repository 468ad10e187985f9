"""Comparing models: the comparisons the papers make across models, each a pure function of every model's
tables (model short name -> its table read from the model's results root, every task concatenated) returning
one long table (docs/reference.md#compare):

- :func:`sinks`: Gu et al.'s attention sink, alpha_0 and the sink rate at epsilon = 0.3, and alpha_0 per layer;
- :func:`induction`: the best induction head (Olsson et al.) of each decoder;
- :func:`patterns`: Kovaleva et al.'s five pattern classes' shares;
- :func:`roles`: the share of heads per sieve role (Pande et al.);
- :func:`depth`: per-layer curves on relative depth, (layer + 1) / layers.

:mod:`bertology.compare.figures` draws them; the step ``compare`` (:mod:`bertology.steps.compare`) reads the
tables and writes both.
"""

from bertology.compare.common import DECODER, ENCODER, KINDS, POOLED, relative_depth
from bertology.compare.depth import DEPTH_COLUMNS, cosine_layers, depth, entropy_layers, pattern_layers
from bertology.compare.induction import INDUCTION_COLUMNS, induction
from bertology.compare.shares import PATTERN_COLUMNS, ROLE_COLUMNS, patterns, roles
from bertology.compare.sinks import SINK_COLUMNS, sinks

#: each table of the comparison and its columns (results/compare/{name}.csv)
COLUMNS = {"sinks": SINK_COLUMNS, "induction": INDUCTION_COLUMNS, "patterns": PATTERN_COLUMNS,
           "roles": ROLE_COLUMNS, "depth": DEPTH_COLUMNS}

__all__ = ["COLUMNS", "DECODER", "DEPTH_COLUMNS", "ENCODER", "INDUCTION_COLUMNS", "KINDS", "PATTERN_COLUMNS",
           "POOLED", "ROLE_COLUMNS", "SINK_COLUMNS", "cosine_layers", "depth", "entropy_layers", "induction",
           "pattern_layers", "patterns", "relative_depth", "roles", "sinks"]
