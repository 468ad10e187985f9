"""GlobEnc (Modarressi et al. 2022) of one pre-norm layer (docs/reference.md#newer-mixing-views).

A pre-norm layer's attention block writes r_i = x_i + sum_j sum_h alpha_h[i, j] f_h(x_j) + b_O, with f_h(x_j) =
(N1(x_j) W_V^h + b_V^h) W_O^h the transformed vector of :mod:`bertology.norms.values` (N1 the norm before attention,
applied to token j's own vector, so f_h(x_j) is token j's alone: N1's linear part at x_j's scale and its bias, the
value bias included, as the post-LN GlobEnc's value vectors hold b_V). GlobEnc's N_ENC decomposes the layer's output
with the feed-forward block left out (the paper leaves it out): here the residual stream after attention, r_i, whose
parts are T_i(x_j) = sum_h alpha_h[i, j] f_h(x_j) + [i = j] x_i (b_O in no token's part, as in the post-LN GlobEnc),
and c_ij = ||T_i(x_j)||_2. No norm follows the residual sum in a pre-norm layer (N2 is inside the MLP's branch, which
is left out), so neither of the post-LN GlobEnc's two LayerNorm linear parts has a counterpart: the rows keep the
residual stream's own scale.

Glossary: n tokens, D hidden size, H heads.
"""

from __future__ import annotations

import torch

from bertology.norms.alti_globenc import normalise_rows


def prenorm_globenc_layer(alpha: torch.Tensor, f: torch.Tensor, x: torch.Tensor, rows: str = "raw") -> torch.Tensor:
    """One pre-norm layer's GlobEnc matrix: alpha (H, n, n) attention, f (H, n, D) the transformed vectors f_h(x_j)
    (value bias included), x (n, D) the layer's input -> (n, n) float64 ||sum_h alpha_h[i, j] f_h(x_j) + [i = j]
    x_i||_2; rows: "raw" (rolled out as they are, as the authors' code does) or "normalised" (divided by their sums).

    From each key's H x H Gram matrix of f, O(n^2 H^2) instead of the O(n^2 D) of the (n, n, D) parts:
    ||sum_h a_h f_hj||^2 = a^T G_j a, plus on the diagonal 2 sum_h alpha_h[i, i] <f_hi, x_i> + ||x_i||^2."""
    alpha, f, x = alpha.double(), f.double(), x.double()
    fj = f.transpose(0, 1).contiguous()                                                # (n_j, H, D)
    keys_first = alpha.permute(2, 1, 0)                                                # (n_j, n_i, H)
    gram = torch.bmm(fj, fj.transpose(1, 2))                                           # (n_j, H, H)
    sq = (torch.bmm(keys_first, gram) * keys_first).sum(-1)                            # (n_j, n_i)
    own = alpha.diagonal(dim1=-2, dim2=-1).T                                           # (n, H) alpha_h[i, i]
    sq.diagonal().add_(2 * (own * torch.einsum("ihd,id->ih", fj, x)).sum(-1) + (x * x).sum(-1))
    c = sq.clamp(min=0).sqrt().T
    return normalise_rows(c) if rows == "normalised" else c
