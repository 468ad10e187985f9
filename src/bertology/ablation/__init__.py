"""Disabling heads and layers (Kovaleva et al. 2019, section 4.6, Figs. 8-9; docs/reference.md#disabling).

A disabled head attends uniformly to the real tokens: A[t, s] = 1/n for s < n, applied to the attention
probabilities inside the forward pass. The package, by responsibility:

- :mod:`~bertology.ablation.heads`: interventions on heads, disabling and gates (one state, one attention
  function registered with transformers' AttentionInterface and its padding mask, or one forward hook for
  DeBERTa-v2; :func:`enable_heads`, :func:`disabled_heads`, :func:`head_gates`);
- :mod:`~bertology.ablation.uniform`: the attention of a disabled head (uniform over the real tokens) and one
  layer's eager attention with that alternative;
- :mod:`~bertology.ablation.sweep`: configurations (baseline, each head, each layer), padded batches, the
  naive sweep (one forward pass per configuration), and the one dispatcher: :func:`resolve_sweep` picks the
  fastest sweep the model allows, :func:`run_sweep` runs it;
- :mod:`~bertology.ablation.sweep_fast`: the fast sweep (reuses the layers below; BERT-layer encoders), whose
  pieces pruning reuses;
- :mod:`~bertology.ablation.sweep_prefix`: the prefix sweep (any model whose layers form one list: the kept
  outputs of the layers below stand in for them);
- :mod:`~bertology.ablation.stacking`: what the sweeps share (a model's inputs and outputs, configurations
  stacked along the batch);
- :mod:`~bertology.ablation.significance`: heads/layers/summary tables with paired bootstrap intervals, paired
  tests and Benjamini-Hochberg;
- :mod:`~bertology.ablation.ablation_figures`: the verdict in words and Figs. 8-9;
- :mod:`~bertology.ablation.importance` and :mod:`~bertology.ablation.pruning`: head importance from gates and
  pruning curves (Michel et al. 2019).

The step that runs it on files (rule ablation_sweep, ablation_figures) is :mod:`bertology.steps.ablation`;
nothing here touches paths given on a command line or MLflow.
"""

import importlib

#: where each name of the package lives: imported on first use (PEP 562), so that the figure steps, which need
#: only :mod:`~bertology.ablation.ablation_figures`, do not import torch through :mod:`~bertology.ablation.heads`
_HOMES = {
    "heads": ("ATTN_IMPLEMENTATION", "DISABLED_KWARG", "GATES_KWARG", "DisablingUnsupported", "disabled_heads",
              "enable_heads", "head_gates"),
    "figures": ("plot_heads", "plot_layers", "verdict"),
    "stats": ("COLUMN_DOCS", "TABLE_COLUMNS", "SweepTables", "sweep_tables"),
    "sweep": ("SWEEPS", "Configuration", "encode_batches", "forward_logits", "make_batches", "naive_sweep",
              "resolve_sweep", "run_sweep", "sweep_configurations"),
    "sweep_fast": ("fast_sweep",),
    "sweep_prefix": ("prefix_sweep",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
