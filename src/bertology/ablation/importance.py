"""Head importance from gates on the heads' outputs (Michel et al. 2019, "Are Sixteen Heads Really Better
than One?", section 4.1; docs/reference.md#importance).

Every head h of every layer gets a gate xi_h multiplying its output (its context vector, before the
output projection): Att_h(x) -> xi_h * Att_h(x). With all gates at 1 the model is unchanged. The importance
of a head is the expected absolute sensitivity of the loss to its gate,

    I_h = E_x | dL(x) / d xi_h |   at xi = 1,

normalised per layer by the l2 norm over the layer's heads (the paper: "normalizing the importance scores
by layer (using the l2 norm) is important"). Michel et al. compute it on the training data (their code:
``calculate_head_importance(model, train_data, ...)``, optionally on a subset) and evaluate pruning on the
dev set.

Mechanism: transformers 5 has no ``head_mask``, so the gate is an attention function registered with
``transformers.AttentionInterface`` under :data:`GATE_IMPLEMENTATION`. It is the disabling attention of
:mod:`bertology.ablation.disable` (so ``bertology_disabled=`` keeps working) with each head's context
multiplied by its gate, read from the forward keyword ``model(..., bertology_gates=g)``, g float (L, H) or
(L, N, H). Per-example gates (L, N, H) make one backward pass give every example's own gradient
(example n's loss depends on gate row n only), so the absolute value is taken per example, as in the
definition, not on a batch sum.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size, E examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from bertology.ablation.disable import (disabling_attention_forward, enable_disabling, head_gates, module_layer,
                                        module_state)
from bertology.models import takes_token_type_ids
from bertology.ablation.disable import register as register_disabling

GATE_IMPLEMENTATION = "bertology_gate"
GATES_KWARG = "bertology_gates"


def layer_gates(gates: torch.Tensor | None, layer: int | None, n_rows: int, n_heads: int) -> torch.Tensor | None:
    """The (N, H) gates of one layer from a model-wide tensor (L, H) or (L, N, H); None if none given."""
    if gates is None:
        return None
    if layer is None:
        raise ValueError("the attention module has no layer_idx; cannot tell which gates are its own")
    if not isinstance(gates, torch.Tensor) or not gates.is_floating_point():
        raise ValueError(f"{GATES_KWARG} must be a float tensor of shape (L, H) or (L, N, H)")
    if gates.ndim == 2 and gates.shape[1] == n_heads:
        return gates[layer][None].expand(n_rows, n_heads)
    if gates.ndim == 3 and gates.shape[1:] == (n_rows, n_heads):
        return gates[layer]
    raise ValueError(f"{GATES_KWARG} has shape {tuple(gates.shape)}; expected (L, {n_heads}) or "
                     f"(L, {n_rows}, {n_heads}) for a batch of {n_rows}")


def gated_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float | None = None,
                            dropout: float = 0.0, **kwargs):
    """The registered attention function: the disabling attention, then each head's context times its gate.

    query: (N, H, Q, dh); key, value: (N, H, K, dh) -> (context (N, Q, H, dh), weights (N, H, Q, K)).
    The returned weights are the (possibly disabled) attention probabilities, not gated: the gate acts on
    the head's output.
    """
    context, weights = disabling_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                                   dropout=dropout, **kwargs)
    gates = kwargs.get(GATES_KWARG)
    if gates is None:
        state = module_state(module)
        gates = None if state is None else state.gates
    g = layer_gates(gates, module_layer(module), query.shape[0], query.shape[1])
    if g is not None:
        context = context * g[:, None, :, None].to(context.dtype)
    return context, weights


def register() -> None:
    """Register the gated attention function and its padding-mask builder (idempotent)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    register_disabling()
    AttentionInterface.register(GATE_IMPLEMENTATION, gated_attention_forward)
    AttentionMaskInterface.register(GATE_IMPLEMENTATION, eager_mask)


def enable_gates(model: torch.nn.Module) -> torch.nn.Module:
    """Switch a loaded model to the gated attention (behaves as eager with no gates and nothing disabled).

    Every architecture :func:`~bertology.ablation.disable.enable_disabling` accepts: models following
    AttentionInterface get the gated attention function; DeBERTa-v2's hook applies the gates itself. Gates
    and disabled heads: the forward keywords, or :func:`~bertology.ablation.disable.head_gates` /
    :func:`~bertology.ablation.disable.disabled_heads` on every architecture.
    """
    enable_disabling(model)
    if model.bertology_disabling == "attention_interface":
        register()
        model.set_attn_implementation(GATE_IMPLEMENTATION)
        if model.config._attn_implementation != GATE_IMPLEMENTATION:
            raise RuntimeError(f"{type(model).__name__} did not accept a custom attention implementation; "
                               f"it must follow transformers' AttentionInterface (BERT-family models do)")
    return model


# --------------------------------------------------------------------------------------------------
# the loss and its gradient with respect to the gates
# --------------------------------------------------------------------------------------------------

def per_example_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(N, K) logits, (N,) labels -> (N,) losses: cross-entropy for K > 1 classes, squared error for K = 1
    (the losses transformers' sequence classifiers train with)."""
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))   # half precision -> float32
    if logits.shape[-1] == 1:
        return (logits[:, 0] - labels.to(logits.dtype)) ** 2
    return torch.nn.functional.cross_entropy(logits, labels.long(), reduction="none")


def gate_gradients(model, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor,
                   labels: torch.Tensor, gates: torch.Tensor | None = None) -> torch.Tensor:
    """d loss_n / d xi[l, n, h] for every example n of one batch: (N, L, H), at gates `gates` (default 1).

    input_ids, token_type_ids, attention_mask: (N, T); labels (N,); gates: (L, N, H) or None. The model
    must have gates enabled (:func:`enable_gates`). Only the gates' gradients are computed (the weights'
    are not asked for).
    """
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    n = input_ids.shape[0]
    dtype = next(model.parameters()).dtype
    xi = (torch.ones(n_layers, n, n_heads, dtype=dtype, device=input_ids.device) if gates is None
          else gates.detach().to(dtype=dtype, device=input_ids.device).clone())
    xi.requires_grad_(True)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if takes_token_type_ids(model):
        inputs["token_type_ids"] = token_type_ids
    with torch.enable_grad(), head_gates(model, xi):
        logits = model(**inputs).logits
        loss = per_example_loss(logits, labels.to(logits.device)).sum()
        (grad,) = torch.autograd.grad(loss, xi)
    return grad.transpose(0, 1)


def normalise_by_layer(raw: np.ndarray) -> np.ndarray:
    """(L, H) -> (L, H): each layer's row divided by its l2 norm (a row of zeros stays zero)."""
    raw = np.asarray(raw, dtype=np.float64)
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    return np.divide(raw, norm, out=np.zeros_like(raw), where=norm > 0)


@dataclass(frozen=True)
class Importance:
    """raw: (L, H) mean |dL/d xi| over examples; importance: raw normalised per layer (l2); n: examples."""

    raw: np.ndarray
    importance: np.ndarray
    n: int

    def frame(self, split: str):
        """Long table: layer, head, importance (normalised), raw, n, split."""
        import pandas as pd

        n_layers, n_heads = self.raw.shape
        layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
        return pd.DataFrame({"layer": layer, "head": head, "importance": self.importance.ravel(),
                             "raw": self.raw.ravel(), "n": self.n, "split": split})


def head_importance(model, batches: Sequence, labels: np.ndarray, progress: bool = True,
                    per_example: bool = False) -> Importance:
    """Michel et al.'s I_h over every example of `batches` (:class:`bertology.ablation.sweep.Batch`).

    labels: (E,) indexed by each batch's ``rows``. per_example=True runs one example at a time (the naive
    way, for the benchmark; same result). The model must be in eval mode (no dropout) with gates enabled.
    """
    from tqdm.auto import tqdm

    if model.training:
        raise ValueError("call model.eval() first: importance is measured on the deterministic model")
    device = next(model.parameters()).device
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    total = np.zeros((n_layers, n_heads))
    count = 0
    labels_t = torch.as_tensor(np.array(labels))
    for batch in tqdm(batches, desc="head importance", unit="batch", disable=not progress):
        b = batch.to(device)
        y = labels_t[torch.as_tensor(batch.rows)]
        if per_example:
            for i in range(len(batch.rows)):
                n_i = int(b.attention_mask[i].sum())
                g = gate_gradients(model, b.input_ids[i:i + 1, :n_i], b.token_type_ids[i:i + 1, :n_i],
                                   b.attention_mask[i:i + 1, :n_i], y[i:i + 1])
                total += g.abs().sum(0).double().cpu().numpy()
        else:
            g = gate_gradients(model, b.input_ids, b.token_type_ids, b.attention_mask, y)
            total += g.abs().sum(0).double().cpu().numpy()
        count += len(batch.rows)
    if count == 0:
        raise ValueError("no examples to compute head importance on")
    raw = total / count
    return Importance(raw=raw, importance=normalise_by_layer(raw), n=count)
