"""The newer context-mixing views of the top [CLS] of one example (docs/reference.md#newer-mixing-views): ALTI
(Ferrando et al. 2022), GlobEnc (Modarressi et al. 2022), DecompX (Modarressi et al. 2023) and Value Zeroing
(Mohebbi et al. 2023), run by :func:`example_views`.

Each view's arithmetic is its own module: :mod:`bertology.norms.mixparts` finds a post-LN layer's parts and keeps
their inputs and outputs (ALTI, GlobEnc and DecompX need that layout;
:class:`~bertology.norms.mixparts.MixingViewsUnsupported` says why not), :mod:`bertology.norms.alti_globenc`,
:mod:`bertology.norms.decompx` and :mod:`bertology.norms.value_zeroing` (which runs on any layer it finds, decoders
included).

One example of n tokens (no padding), from the batch's forward pass (row `row`, its real length n):

- ALTI, GlobEnc, Value Zeroing: each layer's (n, n) matrix C_l, aggregated by rollout: R = C_L ... C_1 (no identity
  added: the residual is in C), view = R[t] (n,) with t the views' target (0, [CLS]; a decoder's last token,
  :func:`bertology.norms.analysis.view_target`); per layer, C_l[t] (L, n);
- DecompX: the decomposition X (n, n, D) of every layer's output, the target's row through the classifier head:
  view = the predicted class's logit part of each token (signed); on a bare encoder (no head) ||X_L[t, j]||; per
  layer ||X_l[t, j]|| (L, n).

:func:`prenorm_example_views`: GlobEnc and DecompX of a pre-norm model (:mod:`bertology.norms.prenorm`;
:mod:`bertology.norms.globenc_prenorm`, :mod:`bertology.norms.decompx_prenorm`), the same views through its layers,
final norm and head (DecompX where its MLPs are not gated).

Glossary: n tokens, D hidden size, F the FFN's width, C classes, L layers, H heads, dh head size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from bertology.pipeline.config import MixingViewsConfig, schema_section
from bertology.norms.alti_globenc import alti_globenc_layer, rollout
from bertology.norms.decompx import decompx_head, decompx_layer
from bertology.norms.decompx_prenorm import decompx_prenorm_layer, mlp_activations, norm_parts
from bertology.norms.globenc_prenorm import prenorm_globenc_layer
from bertology.norms.mixparts import LayerParts, PartsCapture
from bertology.norms.prenorm import PreNormCapture, PreNormParts
from bertology.norms.value_zeroing import value_zeroing_view
from bertology.norms.values import Capture, linear_weight, transformed_vectors

VIEWS = ("alti", "globenc", "decompx", "value_zeroing")
#: views whose scores are signed (a diverging colour scale around 0)
SIGNED = ("decompx", "alti_logit")


def decompx_scores(top: torch.Tensor, mods: list, hin: list, hout: list, logits: torch.Tensor | None,
                   eps: float) -> tuple[np.ndarray, int | None]:
    """DecompX's token scores (n,) from the target's parts `top` (n, D) after the last layer: each token's part of
    the predicted class's logit through the head's linears `mods` (their inputs `hin`, outputs `hout`) where the
    last of them gives the model's `logits` (C,), with the predicted class; else the parts' norms and None."""
    if mods and logits is not None and linear_weight(mods[-1]).shape[0] == logits.shape[-1]:
        parts_logits = decompx_head(mods, top, hin, hout, eps)                                   # (n, C)
        predicted = int(logits.argmax())
        return parts_logits[:, predicted].double().cpu().numpy(), predicted
    return torch.linalg.vector_norm(top, dim=-1).double().cpu().numpy(), None


def _dt(model) -> torch.dtype:
    return next(model.parameters()).dtype


@dataclass
class ExampleViews:
    """One example's views: scores {view: (n,) float64} (the top [CLS] row of the aggregated matrix; DecompX's logit
    parts) and per layer {view: (L, n) float64} (row 0 of each layer's own matrix; DecompX: ||X_l[0, j]||)."""

    scores: dict[str, np.ndarray]
    layers: dict[str, np.ndarray]
    predicted: int | None = None
    #: max over layers of max |sum_j X_l[i, j] - h_l[i]| / max |h_l| (the decomposition against the real hidden
    #: states, every row i below the top layer and the target's row in it: rounding only, ~1e-6 in float32, where
    #: the layer is the layout DecompX follows)
    decompx_error: float = 0.0
    #: (L, n, n) ALTI's per-layer matrices (what ALTI-Logit tracks its token parts back by)
    alti: torch.Tensor | None = None


@torch.no_grad()
def example_views(model, parts: list[LayerParts], head: list[torch.nn.Module], cap: Capture, pc: PartsCapture,
                  attentions, row: int, n: int, logits: torch.Tensor | None, seconds: dict[str, float],
                  inputs: dict[str, torch.Tensor] | None = None, target: int = 0,
                  options: MixingViewsConfig | None = None) -> ExampleViews:
    """ALTI, GlobEnc and DecompX of row `row` (real length n) of the last forward pass (run inside `cap` =
    ``Capture(model, vectors=True)`` and `pc`), and Value Zeroing from `inputs` (this example alone, batch 1, no
    padding; None: no Value Zeroing). logits: (C,) the row's real logits (None: a bare encoder). seconds: adds each
    view's time. options: how GlobEnc and DecompX are computed (config analysis.mixing_views; None: the schema's
    defaults, the authors' choices)."""
    options = options or schema_section("analysis.mixing_views")
    t0 = time.perf_counter()
    alti, glob = [], []
    for p in parts:
        b = p.block
        f = transformed_vectors(b, cap.values[b.index][row:row + 1, :n])[0]
        a, g = alti_globenc_layer(attentions[b.index][row, :, :n, :n], f, cap.residual[b.index][row, :n],
                                  b.output.bias, b.post_norm, cap.sum_out[b.index][row, :n], p.final_norm,
                                  pc.ln2_in[b.index][row, :n], options.globenc_rows)
        alti.append(a)
        glob.append(g)
    t1 = time.perf_counter()                        # ALTI's time holds the one pass both views share
    A, G = torch.stack(alti), torch.stack(glob)
    scores = {"alti": rollout(A)[target].cpu().numpy()}
    layers = {"alti": A[:, target].cpu().numpy(), "globenc": G[:, target].cpu().numpy()}
    t2 = time.perf_counter()
    scores["globenc"] = rollout(G)[target].cpu().numpy()
    t1, t2 = t2, time.perf_counter()
    seconds["alti"] = seconds.get("alti", 0.0) + (t1 - t0)
    seconds["globenc"] = seconds.get("globenc", 0.0) + (t2 - t1)

    t0 = time.perf_counter()
    dt = torch.float64 if _dt(model) == torch.float64 else torch.float32
    first = parts[0].block.index
    x0 = cap.residual[first][row, :n].to(dt)
    X = torch.zeros(n, n, x0.shape[-1], dtype=dt, device=x0.device)
    X[torch.arange(n), torch.arange(n)] = x0
    dx_layers, err = [], 0.0
    for k, p in enumerate(parts):
        i = p.block.index
        last = k == len(parts) - 1
        keep = slice(target, target + 1) if last else slice(None)       # the top layer: the target's row alone
        X, _ = decompx_layer(p, X, attentions[i][row, :, :n, :n], cap.sum_in[i][row, :n], pc.z[i][row, :n],
                             pc.a[i][row, :n], pc.ln2_in[i][row, :n], first=i == first, options=options, rows=keep)
        real = pc.ln2_out[i][row, :n][keep].to(X.dtype)
        err = max(err, float((X.sum(1) - real).abs().max() / real.abs().max().clamp(min=1e-30)))
        dx_layers.append(torch.linalg.vector_norm(X[0 if last else target], dim=-1).double().cpu().numpy())
    top = X[0]                                                                       # (n, D): the target's parts
    scores["decompx"], predicted = decompx_scores(top, *pc.head_of(row, target), logits, options.decompx_epsilon)
    layers["decompx"] = np.stack(dx_layers)
    seconds["decompx"] = seconds.get("decompx", 0.0) + (time.perf_counter() - t0)
    if inputs is not None:
        scores["value_zeroing"], layers["value_zeroing"] = value_zeroing_view(model, parts, inputs, seconds, target)
    return ExampleViews(scores, layers, predicted, err, A)



def _head_of(pc: PreNormCapture, row: int, target: int) -> tuple[list[torch.nn.Module], list[torch.Tensor],
                                                                 list[torch.Tensor]]:
    """The head's linears that ran after the final norm, in call order, and their input and output of row `row`
    (position `target` where the head saw positions)."""
    def pick(t: torch.Tensor) -> torch.Tensor:
        return t[row] if t.ndim == 2 else t[row, target]

    return ([m for m, _, _ in pc.head_calls], [pick(i) for _, i, _ in pc.head_calls],
            [pick(o) for _, _, o in pc.head_calls])


@torch.no_grad()
def prenorm_example_views(model, parts: PreNormParts, cap: Capture, pc: PreNormCapture, attentions, row: int, n: int,
                          logits: torch.Tensor | None, seconds: dict[str, float], target: int,
                          options: MixingViewsConfig | None = None, decompx: bool = True) -> ExampleViews:
    """GlobEnc and (decompx: True, the MLPs not gated) DecompX of row `row` (real length n) of the last forward pass
    of a pre-norm model, run inside `cap` (``Capture(model, vectors=True)``: the value vectors) and `pc` (the layers'
    inputs, residual sums and outputs, the final norm's input, the head's calls); target: the classified position;
    logits (C,) the row's real logits (None: a bare model, DecompX's view ||Nf-part_j||). The same scores and
    per-layer rows as :func:`example_views`: GlobEnc's rollout row and per-layer C_l[t]; DecompX's logit parts of the
    predicted class and per-layer ||X_l[t, j]||; ``decompx_error`` against the real residual stream."""
    options = options or schema_section("analysis.mixing_views")
    t0 = time.perf_counter()
    mats = []
    for i, p in enumerate(parts.layers):
        b = p.block
        f = transformed_vectors(b, cap.values[b.index][row:row + 1, :n])[0]
        mats.append(prenorm_globenc_layer(attentions[b.index][row, :, :n, :n], f, pc.x[i][row, :n],
                                          options.globenc_rows))
    G = torch.stack(mats)
    scores = {"globenc": rollout(G)[target].cpu().numpy()}
    layers = {"globenc": G[:, target].cpu().numpy()}
    seconds["globenc"] = seconds.get("globenc", 0.0) + (time.perf_counter() - t0)
    if not decompx:
        return ExampleViews(scores, layers)
    t0 = time.perf_counter()
    dt = torch.float64 if _dt(model) == torch.float64 else torch.float32
    x0 = pc.x[0][row, :n].to(dt)
    X = torch.zeros(n, n, x0.shape[-1], dtype=dt, device=x0.device)
    X[torch.arange(n), torch.arange(n)] = x0
    dx_layers, err = [], 0.0
    for i, p in enumerate(parts.layers):
        last = i == len(parts.layers) - 1
        keep = slice(target, target + 1) if last else slice(None)          # the top layer: the target's row alone
        r_in = pc.r[i][row, :n]
        z, a = mlp_activations(p, r_in[keep])
        X, _ = decompx_prenorm_layer(p, X, attentions[p.block.index][row, :, :n, :n], pc.x[i][row, :n], r_in, z, a,
                                     first=i == 0, options=options, rows=keep)
        real = pc.out[i][row, :n][keep].to(X.dtype)
        err = max(err, float((X.sum(1) - real).abs().max() / real.abs().max().clamp(min=1e-30)))
        dx_layers.append(torch.linalg.vector_norm(X[0 if last else target], dim=-1).double().cpu().numpy())
    top = norm_parts(parts.final_norm, X, pc.final_in[row, target][None].to(X.dtype), options.decompx_epsilon)[0]
    scores["decompx"], predicted = decompx_scores(top, *_head_of(pc, row, target), logits, options.decompx_epsilon)
    layers["decompx"] = np.stack(dx_layers)
    seconds["decompx"] = seconds.get("decompx", 0.0) + (time.perf_counter() - t0)
    return ExampleViews(scores, layers, predicted, err)
