"""ALTI (Ferrando et al. 2022) and GlobEnc (Modarressi et al. 2022) of one post-LN layer, from its LN1 decomposition
(docs/reference.md#newer-mixing-views), and the row normalisation and rollout the newer mixing views share.

Per layer, one example of n tokens (no padding), i the receiving token, j the contributing one:

- ALTI: T_i(x_j) = g1(y_ij), g1 LN1's linear part with the token's own scale (:func:`bertology.norms.mixing.decompose`),
  y_i = LN1's real output; c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised to sum 1
  (:func:`alti_matrix`);
- GlobEnc: ||g2(T_i(x_j))||_2 with g2 LN2's linear part at the real LN2 input's scale (the FFN left out, as the paper
  does), the raw norms rolled out as the authors' code does (``globenc_rows="normalised"``: rows normalised to sum 1
  first, a variant of bertology's own) (:func:`globenc_matrix`);
- :func:`alti_globenc_layer`: both (n, n) matrices of one layer without the (n, n, D) decomposition whole in memory;
- :func:`rollout`: R = C_L ... C_1 of the per-layer matrices (L, n, n) (no identity added: the residual is in C).

Glossary: n tokens, D hidden size, L layers, H heads.
"""

from __future__ import annotations

import torch


def normalise_rows(c: torch.Tensor) -> torch.Tensor:
    """c (..., n, n) >= 0 -> rows divided by their sums (a row summing to 0 stays 0, as Mohebbi et al.'s code)."""
    s = c.sum(-1, keepdim=True)
    return torch.where(s > 0, c / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(c))


def rollout(c: torch.Tensor) -> torch.Tensor:
    """c (L, n, n) per-layer mixing matrices -> (n, n) R = C_L ... C_1 (no identity added: the residual is in C)."""
    out = c[0]
    for layer in c[1:]:
        out = layer @ out
    return out


def alti_matrix(parts: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """ALTI (Ferrando et al. 2022, eq. 8-9): parts (n, n, D) T_i(x_j), y (n, D) the real output y_i (sum_j T_i(x_j)
    plus what no token contributes) -> (n, n) max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised."""
    dist = (y[:, None, :] - parts).abs().sum(-1)
    c = (y.abs().sum(-1)[:, None] - dist).clamp(min=0)
    return normalise_rows(c)


def ln_linear(parts: torch.Tensor, norm: torch.nn.LayerNorm, real_in: torch.Tensor) -> torch.Tensor:
    """LayerNorm's linear part on parts (n, m, D) of each token's input, at the scale of the token's real input
    real_in (n, D): gamma * (v - mean(v)) / sqrt(var(real_in) + eps) -> (n, m, D) (beta left out)."""
    real = real_in.to(parts.dtype)
    scale = (real.var(-1, unbiased=False) + norm.eps).rsqrt()
    gamma = norm.weight.to(parts.dtype) if norm.weight is not None else 1.0
    return (parts - parts.mean(-1, keepdim=True)) * scale[:, None, None] * gamma


def globenc_matrix(ln1_parts: torch.Tensor, norm2: torch.nn.LayerNorm, ln2_in: torch.Tensor,
                   rows: str = "raw") -> torch.Tensor:
    """GlobEnc (Modarressi et al. 2022, N_ENC): ln1_parts (n, n, D) the LN1 decomposition (beta1 and b_O left out),
    LN2 and its real input (n, D) -> (n, n) ||g2(parts)||_2 (the FFN is not decomposed: its output is left out;
    beta2 left out). rows: "raw" (the authors' code rolls these out as they are) or "normalised" (rows divided by
    their sums, bertology's variant)."""
    c = torch.linalg.vector_norm(ln_linear(ln1_parts, norm2, ln2_in), dim=-1)
    return normalise_rows(c) if rows == "normalised" else c


def alti_globenc_layer(alpha: torch.Tensor, f: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None,
                       norm1: torch.nn.LayerNorm, y: torch.Tensor, norm2: torch.nn.LayerNorm, ln2_in: torch.Tensor,
                       rows: str = "raw", chunk_elements: int = 1 << 20) -> tuple[torch.Tensor, torch.Tensor]:
    """One post-LN layer's ALTI and GlobEnc matrices (:func:`alti_matrix` and :func:`globenc_matrix` of the LN1
    decomposition of :func:`bertology.norms.mixing.decompose`) -> ((n, n), (n, n)) float64, the same numbers to
    rounding, without the (n, n, D) decomposition ever whole in memory.

    alpha (H, n, n), f (H, n, D) the transformed vectors f_h(x_j), residual (n, D) the layer's input x, bias (D,) b_O
    or None, norm1 the LayerNorm after the residual; y (n, D) that LayerNorm's real output; norm2 and its real input
    ln2_in (n, D) (GlobEnc); rows: GlobEnc's "raw" or "normalised"; chunk_elements: the most decomposition entries
    held at once (ALTI).

    LayerNorm's linear part g1 is linear, so T_i(x_j) = g1(sum_h alpha_h[i, j] f_h(x_j) + [i = j] x_i)
    = s1_i (sum_h alpha_h[i, j] f'_h(x_j) + [i = j] x'_i), with f' and x' centred and multiplied by gamma1 once and
    s1_i = 1 / sqrt(var(LN1's input_i) + eps).
    ALTI: ||y_i - T_i(x_j)||_1 for a block of rows at a time (one batched product over the keys, K = H, and one L1
    distance kernel). GlobEnc: ||g2(T_i(x_j))||_2 = s2_i s1_i ||sum_h alpha_h[i, j] w_hj + [i = j] u_i|| with
    w = g2's centring and gamma2 applied to f', u to x': a quadratic form of each key's H x H Gram matrix of w,
    O(n^2 H^2) instead of O(n^2 D)."""
    alpha, f, x = alpha.double(), f.double(), residual.double()
    H, n, D = f.shape
    dev = x.device
    b = torch.zeros(D, dtype=torch.float64, device=dev) if bias is None else bias.double()
    ones = torch.ones(D, dtype=torch.float64, device=dev)
    g1 = norm1.weight.double() if norm1.weight is not None else ones
    g2 = norm2.weight.double() if norm2.weight is not None else ones
    s1 = ((torch.matmul(alpha, f).sum(0) + x + b).var(-1, unbiased=False) + norm1.eps).rsqrt()      # (n,)
    s2 = (ln2_in.double().var(-1, unbiased=False) + norm2.eps).rsqrt()
    fc = ((f - f.mean(-1, keepdim=True)) * g1).transpose(0, 1).contiguous()                       # (n_j, H, D)
    xc = (x - x.mean(-1, keepdim=True)) * g1                                                      # (n, D)
    keys_first = alpha.permute(2, 1, 0)                                                           # (n_j, n_i, H)
    # ALTI, a block of rows at a time
    y = y.double()
    y_l1 = y.abs().sum(-1)
    alti = torch.empty(n, n, dtype=torch.float64, device=dev)
    step = max(1, chunk_elements // max(n * D, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        t = torch.bmm(keys_first[:, lo:hi].contiguous(), fc).transpose(0, 1).contiguous()        # (c, n_j, D)
        t[:, lo:hi].diagonal(dim1=0, dim2=1).add_(xc[lo:hi].T)                                    # + x'_i at j = i
        t *= s1[lo:hi, None, None]
        alti[lo:hi] = (y_l1[lo:hi, None] - torch.cdist(y[lo:hi, None], t, p=1)[:, 0]).clamp(min=0)
    # GlobEnc from the Gram matrices
    w = (fc - fc.mean(-1, keepdim=True)) * g2                                                      # (n_j, H, D)
    u = (xc - xc.mean(-1, keepdim=True)) * g2                                                      # (n, D)
    gram = torch.bmm(w, w.transpose(1, 2))                                                         # (n_j, H, H)
    sq = (torch.bmm(keys_first, gram) * keys_first).sum(-1)                                        # (n_j, n_i)
    own = alpha.diagonal(dim1=-2, dim2=-1).T                                                       # (n, H) alpha_h[i, i]
    sq.diagonal().add_(2 * (own * torch.einsum("ihd,id->ih", w, u)).sum(-1) + (u * u).sum(-1))
    glob = sq.clamp(min=0).sqrt().T * (s1 * s2)[:, None]
    return normalise_rows(alti), (normalise_rows(glob) if rows == "normalised" else glob)
