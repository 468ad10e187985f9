"""Decoder heads: the statistics of attention sinks (Gu et al. 2024), induction heads (Olsson et al. 2022) and
previous- and duplicate-token heads (TransformerLens' head detector), as pure functions of attention maps
(:mod:`bertology.decoders.heads`). No model code here."""
