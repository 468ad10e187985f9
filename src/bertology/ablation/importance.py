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

Mechanism: transformers 5 has no ``head_mask``; the gates are those of :mod:`bertology.ablation.heads`
(a model passed through :func:`~bertology.ablation.heads.enable_heads`, gates set with
:func:`~bertology.ablation.heads.head_gates`), g float (L, H) or (L, N, H). Per-example gates (L, N, H) make
one backward pass give every example's own gradient (example n's loss depends on gate row n only), so the
absolute value is taken per example, as in the definition, not on a batch sum.

Glossary: N rows of a batch, L layers, H heads, Q query positions, K key positions, dh head size, E examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from bertology.ablation.heads import head_gates
from bertology.pipeline.errors import InputError


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


def gate_gradients(model, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None, attention_mask: torch.Tensor,
                   labels: torch.Tensor, gates: torch.Tensor | None = None) -> torch.Tensor:
    """d loss_n / d xi[l, n, h] for every example n of one batch: (N, L, H), at gates `gates` (default 1).

    input_ids, token_type_ids (None: the model is given none), attention_mask: (N, T); labels (N,); gates: (L, N, H)
    or None. The model
    must have been passed through :func:`~bertology.ablation.heads.enable_heads`. Only the gates' gradients are computed (the weights'
    are not asked for).
    """
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    n = input_ids.shape[0]
    dtype = next(model.parameters()).dtype
    xi = (torch.ones(n_layers, n, n_heads, dtype=dtype, device=input_ids.device) if gates is None
          else gates.detach().to(dtype=dtype, device=input_ids.device).clone())
    xi.requires_grad_(True)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
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
    """Michel et al.'s I_h over every example of `batches` (:class:`bertology.models.encoding.Batch`).

    labels: (E,) indexed by each batch's ``rows``. per_example=True runs one example at a time (the naive
    way, for the benchmark; same result). The model must be in eval mode (no dropout), passed through
    :func:`~bertology.ablation.heads.enable_heads`.
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
                tt = None if b.token_type_ids is None else b.token_type_ids[i:i + 1, :n_i]
                g = gate_gradients(model, b.input_ids[i:i + 1, :n_i], tt,
                                   b.attention_mask[i:i + 1, :n_i], y[i:i + 1])
                total += g.abs().sum(0).double().cpu().numpy()
        else:
            g = gate_gradients(model, b.input_ids, b.token_type_ids, b.attention_mask, y)
            total += g.abs().sum(0).double().cpu().numpy()
        count += len(batch.rows)
    if count == 0:
        raise InputError("no examples to compute head importance on")
    raw = total / count
    return Importance(raw=raw, importance=normalise_by_layer(raw), n=count)
