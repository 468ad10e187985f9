"""Beyond attention weights (docs/reference.md#value-norms ff.): value norms (Kobayashi et al. 2020), context
mixing with the residual and LayerNorm (Kobayashi et al. 2021), rollout and flow (Abnar & Zuidema 2020), and how
faithful each view is to input-ablation and gradient importance.

Modules: :mod:`values` (hooks on the model's own modules: value vectors, f(x) norms, the residual stream),
:mod:`mixing`, :mod:`flow`, :mod:`faithful`, :mod:`stats` (norms.csv), :mod:`tokens` (special tokens and
punctuation from the tokenizer's API).
"""
