"""ALTI-Logit of a classifier (Ferrando et al. 2023, *Explaining How Transformers Use Context to Build Predictions*,
``get_logit_contributions`` of ``mt-upc/logit-explanations``; docs/reference.md#newer-mixing-views): each layer's,
head's and token's direct contribution to the logits at the classified position c.

The residual stream at c is a sum of parts, and every norm on the way to the logits is linear at its real input's
scale (:func:`bertology.norms.prenorm.linear_part`), so the logit is a sum of each part's image:

- pre-norm layers (x_{l+1} = x_l + attn_l + b_O + mlp_l): the final norm Nf at the real scale of its input at c,
  then the score head (one linear, the unembedding's part): logit = M v + M_b for every part v, M (C, D) = the
  score's weight pulled back through Nf's linear part (:func:`pull_back`), M_b = W b_Nf + b_score ("final_bias");
- post-LN layers (BERT: x_{l+1} = N2(N1(x_l + attn_l + b_O) + mlp_l)): each part is carried through the linear
  parts of the norms after it (N1, N2 of its own and of every later layer, at their real scales at c), the norms'
  biases are parts of their own ("norm_bias"), and the head (a pooler and a classifier: the linears called after
  the last layer) maps the last layer's output at c with each activation between two linears as its zero-origin
  slope act(z) / z at the real z (DecompX's treatment of the pooler's tanh, exact: the slope times the real z is
  the real activation); the head's biases go to "final_bias".

Parts per layer l: each head h, sum_j alpha_h[c, j] f_h(x_j) (its affine transformed vectors: the norm's and the
value's biases inside, the authors' ``aff_x_j_heads``); "attention_bias" b_O; "mlp" the MLP's output at c (its
biases inside); "embedding" x_0[c] (layer -1); "final_bias" (layer L). They add up to the model's logits
(:attr:`LogitDecomposition.error`). Per token, layer l's attention part sum_h alpha_h[c, j] f_h(x_j) is tracked back
to the input tokens by the ALTI rollout of the layers below it (the authors' ``track2input_tokens``):
:func:`tracked_tokens`.

Glossary: n tokens, D hidden size, H heads, L layers, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertology.norms.prenorm import Norm, norm_scale
from bertology.norms.values import linear_weight

DECISION_COLUMNS = ["example", "layer", "part", "head", "logit", "contrast", "predicted", "runner_up"]


def pull_back(norm: Norm, m: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """m (C, D) a linear map applied after the norm -> (C, D) the map applied to the norm's input through its linear
    part at `scale` (a 0-d tensor, :func:`bertology.norms.prenorm.norm_scale` of the real input): m diag(gain scale),
    centred per row for a LayerNorm (the transpose of subtracting the mean)."""
    if norm.kind == "identity":
        return m
    g = norm.gain(m)
    a = m * scale.to(m.dtype) if g is None else m * (g * scale.to(m.dtype))
    return a - a.mean(-1, keepdim=True) if norm.kind == "layernorm" else a


def attention_parts(alpha_c: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """alpha_c (H, n) the classified position's attention, f (H, n, D) the transformed vectors -> (heads (H, D)
    sum_j alpha_h[c, j] f_h(x_j), tokens (n, D) sum_h alpha_h[c, j] f_h(x_j))."""
    return torch.einsum("hj,hjd->hd", alpha_c, f), torch.einsum("hj,hjd->jd", alpha_c, f)


@dataclass
class LogitDecomposition:
    """One example's logits at the classified position as a sum of parts, every part (..., C) over the classes:
    heads (L, H, C), attention_bias (L, C), mlp (L, C), norm_bias (L, C) (post-LN layers' norm biases; None on
    pre-norm layers), embedding (C,), final_bias (C,); tokens (L, n, C) each layer's attention part per token;
    logits (C,) the model's real logits."""

    heads: torch.Tensor
    attention_bias: torch.Tensor
    mlp: torch.Tensor
    norm_bias: torch.Tensor | None
    embedding: torch.Tensor
    final_bias: torch.Tensor
    tokens: torch.Tensor
    logits: torch.Tensor

    def total(self) -> torch.Tensor:
        """(C,) the sum of every part."""
        total = self.heads.sum((0, 1)) + self.attention_bias.sum(0) + self.mlp.sum(0) + self.embedding + \
            self.final_bias
        return total if self.norm_bias is None else total + self.norm_bias.sum(0)

    @property
    def error(self) -> float:
        """max |sum of the parts - logits| / max |logits|: float rounding where the decomposition is exact."""
        real = self.logits.double()
        return float((self.total().double() - real).abs().max() / real.abs().max().clamp(min=1e-30))


def classes(logits: torch.Tensor) -> tuple[int, int]:
    """(predicted, runner_up) of logits (C,): the largest and the second largest (runner_up -1 where C = 1)."""
    order = torch.argsort(logits.double(), descending=True)
    return int(order[0]), (int(order[1]) if len(order) > 1 else -1)


def prenorm_decomposition(layers: list[dict], final_norm: Norm, final_in: torch.Tensor, score: torch.nn.Module,
                          logits: torch.Tensor) -> LogitDecomposition:
    """ALTI-Logit through pre-norm layers. layers: per layer {"alpha_c" (H, n), "f" (H, n, D), "bias" (D,) b_O or
    None, "mlp" (D,) the MLP's output at c}, the first also "x" (D,) x_0[c]; final_in (D,) the final norm's real
    input at c; score: the linear after the final norm; logits (C,) the real logits -> :class:`LogitDecomposition`
    (float64)."""
    x = final_in.double()
    w = linear_weight(score).double()                                         # (C, D)
    m = pull_back(final_norm, w, norm_scale(final_norm, x))
    b = final_norm.shift(x)
    sb = getattr(score, "bias", None)
    const = (w @ b if b is not None else torch.zeros(w.shape[0], dtype=torch.float64, device=x.device)) + \
        (sb.double() if sb is not None else 0.0)
    return _assemble(layers, [(m, m, m)] * len(layers), m, const, logits)


def _assemble(layers: list[dict], maps: list[tuple], m_embed: torch.Tensor, const: torch.Tensor,
              logits: torch.Tensor, norm_bias: list[torch.Tensor] | None = None) -> LogitDecomposition:
    """The parts through each layer's maps (pre, mid, post) (C, D): pre applies to the attention block's parts, mid
    to the MLP's output."""
    heads, bias, mlp, tokens = [], [], [], []
    for lay, (pre, mid, _) in zip(layers, maps):
        h, t = attention_parts(lay["alpha_c"].double(), lay["f"].double())
        heads.append(h @ pre.T)
        tokens.append(t @ pre.T)
        bias.append(pre @ lay["bias"].double() if lay["bias"] is not None else torch.zeros_like(const))
        mlp.append(mid @ lay["mlp"].double())
    nb = torch.stack(norm_bias) if norm_bias else None
    return LogitDecomposition(torch.stack(heads), torch.stack(bias), torch.stack(mlp), nb,
                              m_embed @ layers[0]["x"].double(), const, torch.stack(tokens), logits.double())


def head_map(head: list[torch.nn.Module], head_in: list[torch.Tensor],
             head_out: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """A classifier head of linears in call order, each one's real input and output at c ((F_k,), (G_k,)) -> (M (C, D),
    const (C,)) with logits = M h + const for the head's input h: between two linears, the activation as its
    zero-origin slope in_{k+1} / out_k at the real values (0 where out_k = 0: the activation's value there is 0 and
    every part's share of it too)."""
    m = linear_weight(head[-1]).double()
    b = getattr(head[-1], "bias", None)
    const = b.double() if b is not None else torch.zeros(m.shape[0], dtype=torch.float64, device=m.device)
    for k in range(len(head) - 2, -1, -1):
        out, nxt = head_out[k].double(), head_in[k + 1].double()
        slope = torch.where(out != 0, nxt / torch.where(out != 0, out, torch.ones_like(out)), torch.zeros_like(out))
        m = m * slope
        bk = getattr(head[k], "bias", None)
        if bk is not None:
            const = const + m @ bk.double()
        m = m @ linear_weight(head[k]).double()
    return m, const


def postln_decomposition(layers: list[dict], head: tuple[torch.Tensor, torch.Tensor],
                         logits: torch.Tensor) -> LogitDecomposition:
    """ALTI-Logit through post-LN layers. layers: per layer {"alpha_c", "f", "bias" as :func:`prenorm_decomposition`,
    "n1", "n2" (:class:`~bertology.norms.prenorm.Norm` of the LayerNorm after attention + residual and after
    MLP + residual), "n1_in", "n2_in" (D,) their real inputs at c, "mlp" (D,) the MLP's output at c (N2's input
    minus N1's output)}, the first also "x" (D,) x_0[c]; head: (M (C, D), const (C,)) of :func:`head_map`; logits
    (C,) -> :class:`LogitDecomposition` (float64)."""
    m, const = head
    maps, nbias = [], []
    for lay in reversed(layers):
        post = m
        mid = pull_back(lay["n2"], post, norm_scale(lay["n2"], lay["n2_in"].double()))
        pre = pull_back(lay["n1"], mid, norm_scale(lay["n1"], lay["n1_in"].double()))
        nb = torch.zeros_like(const)
        for norm, after in ((lay["n1"], mid), (lay["n2"], post)):
            b = norm.shift(after)
            if b is not None:
                nb = nb + after @ b
        maps.append((pre, mid, post))
        nbias.append(nb)
        m = pre
    return _assemble(layers, maps[::-1], m, const, logits, nbias[::-1])


def tracked_tokens(per_layer: torch.Tensor, rolled: torch.Tensor) -> torch.Tensor:
    """per_layer (L, n) each layer's attention part per token (one class's or the contrast's logit), rolled (L, n, n)
    the ALTI rollouts R_l = C_l ... C_0 -> (L, n): layer 0's as it is, layer l's through R_{l-1} (its positions'
    shares of the input tokens)."""
    out = [per_layer[0]]
    for layer in range(1, per_layer.shape[0]):
        out.append(per_layer[layer] @ rolled[layer - 1].to(per_layer.dtype))
    return torch.stack(out)


def contrast_of(values: torch.Tensor, predicted: int, runner_up: int) -> torch.Tensor:
    """values (..., C) -> (...,) predicted minus runner-up (the predicted class's value where there is no
    runner-up)."""
    return values[..., predicted] - (values[..., runner_up] if runner_up >= 0 else 0.0)


def decision_rows(dec: LogitDecomposition, example: int, predicted: int, runner_up: int) -> pd.DataFrame:
    """decision.parquet's rows of one example (:data:`DECISION_COLUMNS`): per layer each head ("head"), "attention_bias",
    "mlp" and, on post-LN layers, "norm_bias" (head -1), "embedding" (layer -1) and "final_bias" (layer L); logit:
    the part's contribution to the predicted class's logit, contrast: to predicted minus runner-up (NaN where the
    head has one output)."""
    L, H, _ = dec.heads.shape
    layer, part, head, vals = [], [], [], []
    for lay in range(L):
        layer += [lay] * H
        part += ["head"] * H
        head += list(range(H))
        vals.append(dec.heads[lay])
        for name, t in (("attention_bias", dec.attention_bias), ("mlp", dec.mlp), ("norm_bias", dec.norm_bias)):
            if t is None:
                continue
            layer.append(lay)
            part.append(name)
            head.append(-1)
            vals.append(t[lay][None])
    layer += [-1, L]
    part += ["embedding", "final_bias"]
    head += [-1, -1]
    vals += [dec.embedding[None], dec.final_bias[None]]
    v = torch.cat(vals).cpu()
    contrast = contrast_of(v, predicted, runner_up).numpy() if runner_up >= 0 else np.full(len(v), np.nan)
    return pd.DataFrame({"example": int(example), "layer": np.asarray(layer, dtype=np.int64), "part": part,
                         "head": np.asarray(head, dtype=np.int64), "logit": v[:, predicted].numpy(),
                         "contrast": contrast, "predicted": int(predicted), "runner_up": int(runner_up)},
                        columns=DECISION_COLUMNS)
