"""Value Zeroing (Mohebbi et al. 2023, docs/reference.md#newer-mixing-views) of one example: per layer l,
C_l[i, j] = 1 - cos(y_i, y_i^{-j}), y the layer's real output (n, D) and y^{-j} its output with token j's value
vectors zeroed in every head (the layers below as in the intact pass), rows normalised to sum 1 -> (L, n, n), rolled
out (:func:`value_zeroing_view`).

It needs only the layer whose output it compares (:func:`zeroing_blocks`: the element of the layers' ModuleList
holding each attention module), so it runs on pre-LN layers and decoders too (a grouped key/value head's value
vector is zeroed, so for every query head of its group).

Glossary: n tokens, D hidden size, L layers, H heads, dh head size.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from bertology.models.hooks import hooks, stop_forward
from bertology.norms.alti_globenc import normalise_rows, rollout
from bertology.norms.mixparts import LayerParts, MixingViewsUnsupported
from bertology.norms.values import AttentionBlock, Capture, attention_blocks, transformed_vectors


def cosine_distance_matrix(intact: torch.Tensor, zeroed: torch.Tensor) -> torch.Tensor:
    """Value Zeroing (Mohebbi et al. 2023): intact (n, D) the layer's output, zeroed (n_j, n, D) its output with token
    j's value vectors zeroed -> (n, n) float64 C[i, j] = 1 - cos(intact_i, zeroed_j,i), rows normalised. The cosine
    is taken in float64 whatever the model's dtype: 1 - cos of vectors that differ little cancels, and in float32 its
    rounding (about 6e-8) is a sizeable part of the distances of a small effect."""
    cos = torch.nn.functional.cosine_similarity(zeroed.double(), intact[None].double(), dim=-1)  # (n_j, n_i)
    return normalise_rows((1 - cos).T.clamp(min=0))


def _first(output) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _expand(output, copies: int):
    """A layer's output of one example (batch 1) repeated `copies` times along the batch."""
    if isinstance(output, torch.Tensor):
        return output.expand(copies, *output.shape[1:]).contiguous() if output.shape[0] == 1 else output
    if isinstance(output, (tuple, list)):
        return type(output)(_expand(o, copies) for o in output)
    return output


def _zero_values(block: AttentionBlock, out: torch.Tensor) -> torch.Tensor:
    """The value projection's output (n copies, n positions, *) with copy j's value vector at position j zeroed
    (every head)."""
    out = out.clone()
    n, T = out.shape[:2]
    H, dh = block.heads, block.head_dim
    j = torch.arange(n, device=out.device)
    if block.layout == "blocks":
        start, stop = block.value_columns()
        out[j, j, start:stop] = 0
    elif block.layout == "per_head":
        view = out.view(n, T, H, 3 * dh)
        view[j, j, :, 2 * dh:] = 0
    else:
        out[j, j] = 0
    return out


def zeroing_blocks(model: torch.nn.Module) -> list[AttentionBlock]:
    """The attention blocks Value Zeroing runs on: every one whose layer (``enclosing``, the element of the layers'
    ModuleList holding the attention module; its output is the layer's output) is found, whatever its residual and
    normalisation layout; else :class:`~bertology.norms.mixparts.MixingViewsUnsupported`."""
    blocks = attention_blocks(model)
    missing = [b.index for b in blocks if b.enclosing is None]
    if missing:
        raise MixingViewsUnsupported(f"{type(model).__name__}: the layer holding the attention of layers {missing} is "
                                     f"not found: Value Zeroing compares a layer's outputs")
    return blocks


def removed_parts(alpha: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """What zeroing token j's value vectors takes from the attention output at position i: alpha (H, n, n), f (H, n, D)
    f_h(x_j) (value vectors through W_O^h, b_V included, b_O not) -> (n_j, n_i, D) sum_h alpha_h[i, j] f_h(x_j)."""
    return torch.bmm(alpha.permute(2, 1, 0).contiguous(), f.transpose(0, 1).contiguous())


@torch.no_grad()
def value_zeroing(model, parts: list[LayerParts] | list[AttentionBlock], inputs: dict[str, torch.Tensor],
                  method: str = "subtract") -> torch.Tensor:
    """Value Zeroing matrices of one example (inputs: model inputs of batch 1, no padding, n tokens) -> (L, n, n).

    parts: :func:`bertology.norms.mixparts.layer_parts` or :func:`zeroing_blocks` (only each block's ``enclosing``
    layer, value and output projections are used). Grouped key/value heads: token j's key/value vectors are zeroed,
    which zeroes it for every query head (removed = sum over the H query heads of alpha_h[i, j] f_h(x_j), f_h from
    the group's vector). A causal layer's C_l is lower-triangular (token j changes no output before it).

    One intact forward keeps every layer's output, attention and value vectors. Then one more forward pass zeroes,
    in each layer l, token j's value vectors in copy j only: its attention output at position i is the intact one less
    sum_h alpha_h[i, j] f_h(x_j) (the attention weights are not renormalised: a zeroed value vector adds nothing).
    Forward hooks (:func:`bertology.models.hooks.hooks`) take layer l's output (n copies, n, D) to its distances and hand
    the next layer layer l's kept intact output in its place (repeated along the batch to the copies), so each
    layer runs on its intact input; the pass stops at the last layer's output (:func:`bertology.models.hooks.stop_forward`).

    method "subtract" (the default): each layer runs once on the intact input (batch 1) and W_O's output o (1, n, D)
    becomes o - removed (n copies, n, D), broadcast through the rest of the layer (residual, LayerNorm,
    feed-forward): the queries, keys, values and attention of the n copies, which are the intact ones, are not
    computed again, nor W_O on them. "forward": the n copies run each whole layer with the value projection's output
    zeroed at (copy j, token j) (the literal definition; about 4/3 the cost). They agree to rounding."""
    if method not in ("subtract", "forward"):
        raise ValueError(f"value_zeroing method must be 'subtract' or 'forward', got {method!r}")
    blocks = [getattr(p, "block", p) for p in parts]
    layers = []
    for b in blocks:
        if not any(b.enclosing is m for m in layers):
            layers.append(b.enclosing)
    kept: list = []

    def record(module, args, output):
        kept.append(output)

    with hooks(model, fwd=[(m, record) for m in layers]), Capture(model, vectors=True, norms=False) as cap:
        intact = model(**inputs, output_attentions=method == "subtract")
    if len(kept) != len(blocks):
        raise RuntimeError(f"value zeroing: {len(kept)} layer calls in the intact pass for {len(blocks)} layers")
    n = inputs["input_ids"].shape[1]
    removed: dict[int, torch.Tensor] = {}
    if method == "subtract":
        for b in blocks:
            f = transformed_vectors(b, cap.values[b.index])[0]                          # (H, n, D)
            removed[b.index] = removed_parts(intact.attentions[b.index][0].to(f.dtype), f)
    copies = 1 if method == "subtract" else n
    big = {k: v.expand(copies, *v.shape[1:]) for k, v in inputs.items()}
    scores: list[torch.Tensor] = []
    state = {"call": 0}                              # layer calls entered; the k-th is blocks[k - 1]'s layer

    def enter(module, args):
        state["call"] += 1

    def zero_hook(module, args, output):
        return _zero_values(blocks[state["call"] - 1], output)

    def subtract_hook(module, args, output):
        return output - removed[blocks[state["call"] - 1].index].to(output.dtype)

    def leave(module, args, output):
        l = state["call"] - 1
        zeroed = _first(output)                                                     # (n copies, n, D)
        if zeroed.shape[:2] != (n, n):
            raise RuntimeError(f"value zeroing: layer {blocks[l].index} gave {tuple(zeroed.shape)} for {n} copies "
                               f"of {n} tokens (method={method!r}; 'forward' runs the copies whole)")
        scores.append(cosine_distance_matrix(_first(kept[l])[0], zeroed))
        if l == len(blocks) - 1:
            stop_forward()
        return _expand(kept[l], copies)

    zeroed_at: list = []
    for b in blocks:
        module = b.output if method == "subtract" else b.value
        if not any(module is m for m in zeroed_at):
            zeroed_at.append(module)
    fwd = [(m, subtract_hook if method == "subtract" else zero_hook) for m in zeroed_at]
    with hooks(model, pre=[(m, enter) for m in layers], fwd=fwd + [(m, leave) for m in layers]) as scope:
        model(**big)
    if not scope.stopped:
        raise RuntimeError(f"value zeroing: the forward pass reached {len(scores)} of {len(blocks)} layers")
    return torch.stack(scores)


def value_zeroing_view(model, parts: list[LayerParts] | list[AttentionBlock], inputs: dict[str, torch.Tensor], seconds: dict[str, float],
                       target: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Value Zeroing of one example (inputs: batch 1, no padding) -> (row `target` of the rollout (n,), each layer's
    own row (L, n)). Its forwards reset a :class:`~bertology.norms.values.Capture` open on the model: run it after
    the capture's tensors are used."""
    t0 = time.perf_counter()
    V = value_zeroing(model, parts, inputs).double()
    seconds["value_zeroing"] = seconds.get("value_zeroing", 0.0) + (time.perf_counter() - t0)
    return rollout(V)[target].cpu().numpy(), V[:, target].cpu().numpy()
