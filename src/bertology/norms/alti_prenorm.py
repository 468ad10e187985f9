"""ALTI of a pre-norm layer (Ferrando et al. 2023, *Explaining How Transformers Use Context to Build Predictions*,
code ``mt-upc/logit-explanations``, ``src/contributions.py``; docs/reference.md#newer-mixing-views).

A pre-norm layer's attention block writes r_i = x_i + sum_j sum_h alpha_h[i, j] f_h(x_j) + b_O, with f_h(x_j) =
(N1(x_j) W_V^h + b_V^h) W_O^h the transformed vector of :mod:`bertology.norms.values`. The norm N1 is exactly its
linear part at x_j's own scale plus its bias (:func:`bertology.norms.prenorm.linear_part`), so f_h(x_j) is the
authors' affine transformed vector (their linear part plus the bias term theta = (b_N1 W_V^h + b_V^h) W_O^h), the
same for a LayerNorm and an RMSNorm. Per layer, one example of n tokens:

- T_i(x_j) = sum_h alpha_h[i, j] f_h(x_j) + [i = j] x_i: the residual passes around N1 to its own token;
- y_i = sum_j T_i(x_j) + b_O: the out-projection bias is counted in the output but in no token's share;
- c_ij = max(0, ||y_i||_1 - ||T_i(x_j) - y_i + eps||_1), eps = 1e-6 (``F.pairwise_distance(..., p=1)``'s default,
  added to every coordinate of the difference), rows normalised to sum 1 (:func:`prenorm_alti_layer`);
- tracked back to the input tokens by the rollout of the layers' matrices, R_l = C_l ... C_0 (:func:`rollouts`),
  read at the classified position.

The normalisation and the rollout run in float64; the authors' code stores them in a float32 buffer (a departure
of 1e-7 relative, float32's rounding).

Glossary: n tokens, D hidden size, H heads, L layers.
"""

from __future__ import annotations

import torch

from bertology.norms.alti_globenc import normalise_rows

#: ``torch.nn.functional.pairwise_distance``'s default eps, added to each coordinate of T_i(x_j) - y_i
PAIRWISE_EPS = 1e-6


def prenorm_alti_layer(alpha: torch.Tensor, f: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None,
                       chunk_elements: int = 1 << 20) -> tuple[torch.Tensor, torch.Tensor]:
    """One pre-norm layer's ALTI matrix: alpha (H, n, n) attention, f (H, n, D) the transformed vectors f_h(x_j)
    (value bias included), x (n, D) the layer's input, bias (D,) b_O or None -> (C (n, n) float64, rows summing to 1
    (a row of zeros stays zero); y (n, D) float64 = x + attention + b_O, the block's output as the parts give it).

    T_i(x_j) is formed a block of rows at a time (one batched product over the keys, K = H), never the whole
    (n, n, D) decomposition: chunk_elements bounds the entries held at once; the L1 distances by ``torch.cdist(p=1)``
    from y_i - eps."""
    alpha, f, x = alpha.double(), f.double(), x.double()
    H, n, D = f.shape
    b = torch.zeros(D, dtype=torch.float64, device=x.device) if bias is None else bias.double()
    y = torch.matmul(alpha, f).sum(0) + x + b                                               # (n, D)
    y_l1 = y.abs().sum(-1)
    keys_first = alpha.permute(2, 1, 0)                                                     # (n_j, n_i, H)
    fj = f.transpose(0, 1).contiguous()                                                     # (n_j, H, D)
    c = torch.empty(n, n, dtype=torch.float64, device=x.device)
    step = max(1, chunk_elements // max(n * D, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        t = torch.bmm(keys_first[:, lo:hi].contiguous(), fj).transpose(0, 1).contiguous()  # (c, n_j, D)
        t[:, lo:hi].diagonal(dim1=0, dim2=1).add_(x[lo:hi].T)                              # + x_i at j = i
        dist = torch.cdist((y[lo:hi] - PAIRWISE_EPS)[:, None], t, p=1)[:, 0]               # ||T - y + eps||_1
        c[lo:hi] = (y_l1[lo:hi, None] - dist).clamp(min=0)
    return normalise_rows(c), y


def rollouts(c: torch.Tensor) -> torch.Tensor:
    """c (L, n, n) per-layer matrices -> (L, n, n): R_l = C_l ... C_0 (the authors' ``compute_joint_attention``; no
    identity added: the residual is in C)."""
    out = [c[0]]
    for layer in c[1:]:
        out.append(layer @ out[-1])
    return torch.stack(out)
