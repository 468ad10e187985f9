"""ALTI on pre-norm layers and ALTI-Logit of one example, from a forward pass's captures (Ferrando et al. 2023;
docs/reference.md#newer-mixing-views), for :func:`bertology.norms.analysis.run_views`.

- :func:`prenorm_views`: a pre-norm model (:func:`bertology.norms.prenorm.prenorm_parts`): each layer's ALTI matrix
  (:func:`bertology.norms.alti_prenorm.prenorm_alti_layer`) and their rollout read at the target (``alti``); with a
  score head after the final norm (:func:`score_head`), ALTI-Logit (``alti_logit``, and the example's
  decision.parquet rows);
- :func:`postln_logit`: ALTI-Logit through post-LN layers (:func:`bertology.norms.mixparts.layer_parts`) and their
  classifier head, tracked back by the post-LN ALTI matrices the caller computed.

The ``alti_logit`` view of token j: sum over layers of layer l's attention part of token j's contribution to the
predicted class's logit minus the runner-up's (the authors' contrastive form; the predicted class's logit where the
head has one output), layer l's positions taken back to the input tokens by the ALTI rollout of the layers below
(:func:`bertology.norms.alti_logit.tracked_tokens`); per layer, that layer's tracked part.

Glossary: B batch, T padded length, n tokens, D hidden size, H heads, L layers, C classes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertology.norms import alti_logit as al
from bertology.norms.alti_prenorm import prenorm_alti_layer, rollouts
from bertology.norms.mixparts import LayerParts, PartsCapture
from bertology.norms.prenorm import PreNormCapture, PreNormParts, norm_of
from bertology.norms.values import Capture, linear_weight, transformed_vectors


@dataclass
class LogitViews:
    """One example's views: scores {view: (n,) float64}, layers {view: (L, n) float64}; decision: its
    decision.parquet rows (None: no ALTI-Logit); alti_error: max over layers of max |x + attention + b_O - r| /
    max |r| against the real residual sum r (rounding only); logit_error: :attr:`LogitDecomposition.error`."""

    scores: dict[str, np.ndarray]
    layers: dict[str, np.ndarray]
    decision: pd.DataFrame | None = None
    alti_error: float = 0.0
    logit_error: float = 0.0


def _relative(got: torch.Tensor, real: torch.Tensor) -> float:
    real = real.double()
    return float((got.double() - real).abs().max() / real.abs().max().clamp(min=1e-30))


def score_head(pc: PreNormCapture, row: int, target: int) -> tuple[torch.nn.Module | None, str | None]:
    """(the score linear, None) where the one call after the final norm is a linear reading the final norm's
    output at the target of row `row`, else (None, why not) in a few words."""
    calls = pc.head_calls
    if not calls:
        return None, "no classifier head runs after the final norm"
    if len(calls) != 1:
        names = ", ".join(type(m).__name__ for m, _, _ in calls)
        return None, (f"the head after the final norm is {len(calls)} linears ({names}) with nonlinear parts between "
                      f"them, not one score linear")
    module, x, _ = calls[0]
    fin = pc.final_out
    if x.shape != fin.shape or not torch.equal(x[row, target], fin[row, target]):
        return None, "the score head does not read the final norm's output"
    return module, None


@torch.no_grad()
def prenorm_views(parts: PreNormParts, cap: Capture, pc: PreNormCapture, attentions, row: int, n: int,
                  target: int, example: int, seconds: dict[str, float],
                  score: torch.nn.Module | None = None) -> LogitViews:
    """ALTI (and, with `score`, ALTI-Logit) of row `row` (real length n) of the last forward pass, run inside `cap`
    (``Capture(model, vectors=True)``: the value vectors) and `pc`; target: the classified position; example: the
    row's example_idx (decision.parquet's ``example``); seconds: adds each view's time."""
    t0 = time.perf_counter()
    mats, inputs, err = [], [], 0.0
    for i, p in enumerate(parts.layers):
        b = p.block
        f = transformed_vectors(b, cap.values[b.index][row:row + 1, :n])[0]                  # (H, n, D)
        alpha = attentions[b.index][row, :, :n, :n]
        c, y = prenorm_alti_layer(alpha, f, pc.x[i][row, :n], b.output.bias)
        if i in pc.r:
            err = max(err, _relative(y, pc.r[i][row, :n]))
        mats.append(c)
        if score is not None:                   # the MLP's output: the layer's output minus the real x + attention
            r = pc.r[i][row, target].double() if i in pc.r else y[target]
            inputs.append({"alpha_c": alpha[:, target], "f": f, "bias": b.output.bias,
                           "mlp": pc.out[i][row, target].double() - r})
    C = torch.stack(mats)
    rolled = rollouts(C)
    out = LogitViews({"alti": rolled[-1][target].cpu().numpy()}, {"alti": C[:, target].cpu().numpy()},
                     alti_error=err)
    t1 = time.perf_counter()
    seconds["alti"] = seconds.get("alti", 0.0) + (t1 - t0)
    if score is None:
        return out
    inputs[0]["x"] = pc.x[0][row, target]
    logits = pc.head_calls[0][2][row, target]
    dec = al.prenorm_decomposition(inputs, parts.final_norm, pc.final_in[row, target], score, logits)
    _logit_outputs(out, dec, rolled, example)
    seconds["alti_logit"] = seconds.get("alti_logit", 0.0) + (time.perf_counter() - t1)
    return out


def _logit_outputs(out: LogitViews, dec: al.LogitDecomposition, rolled: torch.Tensor, example: int) -> None:
    predicted, runner_up = al.classes(dec.logits)
    tracked = al.tracked_tokens(al.contrast_of(dec.tokens, predicted, runner_up), rolled)      # (L, n)
    out.scores["alti_logit"] = tracked.sum(0).cpu().numpy()
    out.layers["alti_logit"] = tracked.cpu().numpy()
    out.decision = al.decision_rows(dec, example, predicted, runner_up)
    out.logit_error = dec.error


@torch.no_grad()
def postln_logit(parts: list[LayerParts], cap: Capture, pc: PartsCapture, attentions, row: int, n: int,
                 target: int, example: int, alti: torch.Tensor, seconds: dict[str, float]) -> LogitViews | str:
    """ALTI-Logit through post-LN layers and the classifier head of row `row` (real length n) of the last forward
    pass (run inside `cap` and `pc`), tracked back by the layers' ALTI matrices alti (L, n, n) -> its
    :class:`LogitViews` (scores and layers of ``alti_logit`` only), or why not in a few words (a bare encoder, a head
    that does not read the target's last hidden state)."""
    t0 = time.perf_counter()
    mods, hin, hout = pc.head_of(row, target)
    last = parts[-1].block.index
    if not mods:
        return "no classifier head runs after the last layer"
    if hin[0].shape != pc.ln2_out[last][row, target].shape or \
            not torch.equal(hin[0], pc.ln2_out[last][row, target]):
        return "the classifier head does not read the classified position's last hidden state (pooling?)"
    if any(linear_weight(m).shape[1] != x.shape[-1] for m, x in zip(mods, hin)) or \
            any(o.shape != x.shape for o, x in zip(hout[:-1], hin[1:])):
        return "the classifier head's linears are not joined by elementwise activations"
    inputs = []
    for p in parts:
        b, i = p.block, p.block.index
        f = transformed_vectors(b, cap.values[i][row:row + 1, :n])[0]
        n1_out = cap.sum_out[i][row, target].double()
        n2_in = pc.ln2_in[i][row, target].double()
        inputs.append({"alpha_c": attentions[i][row, :, target, :n], "f": f, "bias": b.output.bias,
                       "n1": norm_of(b.post_norm, "LN1"), "n2": norm_of(p.final_norm, "LN2"),
                       "n1_in": cap.sum_in[i][row, target], "n2_in": n2_in, "mlp": n2_in - n1_out})
    inputs[0]["x"] = cap.residual[parts[0].block.index][row, target]
    dec = al.postln_decomposition(inputs, al.head_map(mods, hin, hout), hout[-1])
    out = LogitViews({}, {})
    _logit_outputs(out, dec, rollouts(alti), example)
    seconds["alti_logit"] = seconds.get("alti_logit", 0.0) + (time.perf_counter() - t0)
    return out
