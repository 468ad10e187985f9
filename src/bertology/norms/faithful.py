"""How faithful each token view is (Abnar & Zuidema 2020, section 4; docs/reference.md#faithfulness).

Two importance scores of input token j for a classifier's predicted class c (predicted on the intact input):

- ablation: p_c(x) - p_c(x with token j replaced by the tokenizer's mask token, or its unk token where it has
  none): the drop in the predicted class's probability (negative when the replacement raises it);
- input x gradient: sum_d e_jd * d p_c / d e_jd, with e_j the token's input representation, the output of the
  model's embeddings module (word + position + segment embeddings, normalised: the first layer's input). Not the
  raw word embedding: where the embeddings module only normalises it (DeBERTa-v2 without absolute positions),
  p_c is invariant to its scale and the product is zero whatever the token's importance.

Each view (raw attention, norm-weighted attention, rollout, flow) is compared with each importance by Spearman's
rho over an example's ordinary tokens (specials left out: they are never ablated); :func:`summarise` gives the mean,
std and n of rho over examples and a bootstrap interval of the mean (scipy.stats.bootstrap).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from bertology.errors import UserError

VIEWS = ("raw", "norm", "rollout", "flow", "alti", "globenc", "decompx", "value_zeroing")
IMPORTANCES = ("ablation", "gradient")
#: the deletion curve's summary (DeYoung et al. 2020's comprehensiveness), a row of faithfulness.csv per view; its
#: baseline "view": a seeded random order of the tokens
AOPC, RANDOM = "aopc", "random"


class NoReplacementToken(UserError, ValueError):
    """The tokenizer has neither a mask nor an unk token to ablate a token with."""


def replacement_token_id(tokenizer) -> int:
    """The tokenizer's mask token id, else its unk token id."""
    for name in ("mask_token_id", "unk_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise NoReplacementToken(f"the tokenizer {type(tokenizer).__name__} has neither a mask nor an unk token: token "
                             f"ablation has nothing to replace a token with; use a tokenizer with one, or leave the norm analyses out "
                             f"(analysis.norms.enabled: false)")


def _forward(model, ids: torch.Tensor, mask: torch.Tensor, token_type_ids: torch.Tensor | None, **kwargs):
    from bertology.models import takes_token_type_ids

    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None and takes_token_type_ids(model) else {}
    return model(input_ids=ids, attention_mask=mask, **extra, **kwargs)


def ablation_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: np.ndarray,
                        replacement: int, *, batch_size: int,
                        token_type_ids: torch.Tensor | None = None) -> tuple[np.ndarray, int]:
    """Drop in the predicted class's probability when each of `positions` is replaced by `replacement`.

    input_ids, attention_mask, token_type_ids: one example (n,); positions: (k,) ints. Returns (importance (n,)
    float64, NaN outside `positions`; the predicted class c). One forward per `batch_size` ablated copies.
    """
    n = input_ids.shape[0]
    with torch.no_grad():
        base = torch.softmax(_forward(model, input_ids[None], attention_mask[None],
                                      None if token_type_ids is None else token_type_ids[None]).logits.double(), -1)[0]
        c = int(base.argmax())
        out = np.full(n, np.nan)
        for start in range(0, len(positions), batch_size):
            pos = torch.as_tensor(np.asarray(positions[start:start + batch_size]), dtype=torch.long)
            ids = input_ids[None].repeat(len(pos), 1)
            ids[torch.arange(len(pos)), pos] = int(replacement)
            tt = None if token_type_ids is None else token_type_ids[None].expand(len(pos), -1)
            p = torch.softmax(_forward(model, ids, attention_mask[None].expand(len(pos), -1), tt).logits.double(), -1)
            out[pos.numpy()] = (base[c] - p[:, c]).cpu().numpy()
    return out, c


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                        token_type_ids: torch.Tensor | None = None, target: int | None = None) -> np.ndarray:
    """Input x gradient of the predicted (or `target`) class's probability: (n,) float64, sum_d e_jd dp/de_jd.

    input_ids, attention_mask, token_type_ids: one example (n,). e is the output of the model's embeddings module
    (``model.base_model.embeddings``), taken through a forward hook.
    """
    captured: list[torch.Tensor] = []

    def hook(module, args, output):  # the embeddings' output becomes a leaf we differentiate against
        output = output[0] if isinstance(output, tuple) else output
        leaf = output.detach().requires_grad_(True)
        captured.append(leaf)
        return leaf

    embeddings = getattr(model.base_model, "embeddings", None)
    if embeddings is None:
        raise ValueError(f"{type(model.base_model).__name__} has no embeddings module to take input x gradient at")
    handle = embeddings.register_forward_hook(hook)
    try:
        with torch.enable_grad():
            logits = _forward(model, input_ids[None], attention_mask[None],
                              None if token_type_ids is None else token_type_ids[None]).logits[0]
            probs = torch.softmax(logits.double(), -1)
            c = int(probs.argmax()) if target is None else int(target)
            (grad,) = torch.autograd.grad(probs[c], captured[-1])
    finally:
        handle.remove()
    return (grad[0].double() * captured[-1][0].detach().double()).sum(-1).cpu().numpy()


def top_first(scores: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """positions (m,) of the ordinary tokens ordered by scores[positions] (scores (n,)), largest first (ties: by
    position; NaN last)."""
    s = np.asarray(scores, float)[positions]
    key = np.where(np.isfinite(s), -s, np.inf)
    return positions[np.argsort(key, kind="stable")]


def aopc(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, orders: dict[str, np.ndarray],
         replacement: int, *, batch_size: int, token_type_ids: torch.Tensor | None = None,
         fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)) -> dict[str, float]:
    """AOPC (comprehensiveness, DeYoung et al. 2020) of each order: orders {view: positions (m,) most important
    first}; for each fraction f the top k = max(1, ceil(f m)) positions are replaced by `replacement` and the
    predicted class's probability drop p_c(x) - p_c(x with them replaced) is taken; AOPC = the mean over the
    fractions. input_ids, attention_mask, token_type_ids: one example (n,). All copies in batches of batch_size."""
    import math

    with torch.no_grad():
        base = torch.softmax(_forward(model, input_ids[None], attention_mask[None],
                                      None if token_type_ids is None else token_type_ids[None]).logits.double(), -1)[0]
        c = int(base.argmax())
        jobs = []
        for view, order in orders.items():
            m = len(order)
            for f in fractions:
                if m:
                    jobs.append((view, order[:max(1, math.ceil(f * m - 1e-9))]))
        drops: dict[str, list[float]] = {v: [] for v in orders}
        for start in range(0, len(jobs), batch_size):
            part = jobs[start:start + batch_size]
            ids = input_ids[None].repeat(len(part), 1)
            for k, (_, pos) in enumerate(part):
                ids[k, torch.as_tensor(np.ascontiguousarray(pos), dtype=torch.long)] = int(replacement)
            tt = None if token_type_ids is None else token_type_ids[None].expand(len(part), -1)
            p = torch.softmax(_forward(model, ids, attention_mask[None].expand(len(part), -1), tt).logits.double(), -1)
            for k, (view, _) in enumerate(part):
                drops[view].append(float(base[c] - p[k, c]))
    return {v: float(np.mean(d)) if d else float("nan") for v, d in drops.items()}


def norm_scores(alpha: np.ndarray | torch.Tensor, f: np.ndarray | torch.Tensor, target: int = 0) -> np.ndarray:
    """Norm-weighted view of the last layer: alpha (H, n, n), f (H, n, D) -> (n,) ||sum_h alpha_h[target, j] f_h(x_j)||
    (Kobayashi et al. 2020's layer-level norm)."""
    a, v = torch.as_tensor(alpha).double(), torch.as_tensor(f).double()
    return torch.einsum("hj,hjd->jd", a[:, target], v).norm(dim=-1).numpy()


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho of two score vectors over their common finite entries (NaN when fewer than 3 or constant)."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


def example_correlations(views: dict[str, np.ndarray], importances: dict[str, np.ndarray],
                         ordinary: np.ndarray) -> dict[tuple[str, str], float]:
    """Per (view, importance): Spearman's rho over the example's ordinary tokens (ordinary (n,) bool)."""
    return {(v, i): spearman(views[v][ordinary], importances[i][ordinary])
            for v in views for i in importances}


def summarise(rhos: pd.DataFrame, *, confidence: float, resamples: int, seed: int) -> pd.DataFrame:
    """rhos: long table (example_idx, view, importance, rho) -> faithfulness.csv rows (view, importance, mean, std,
    n, ci_low, ci_high): the mean of rho over the examples where it is defined, its std (ddof 1) and n, and the
    percentile bootstrap interval of the mean (scipy.stats.bootstrap, `resamples`, seeded; empty for n < 2)."""
    from scipy.stats import bootstrap

    rows = []
    for (view, imp), grp in rhos.groupby(["view", "importance"], sort=False):
        r = grp["rho"].to_numpy(float)
        r = r[np.isfinite(r)]
        n = len(r)
        lo = hi = np.nan
        if n >= 2 and np.ptp(r) > 0:
            ci = bootstrap((r,), np.mean, confidence_level=confidence, n_resamples=resamples, method="percentile",
                           random_state=np.random.default_rng(seed)).confidence_interval
            lo, hi = float(ci.low), float(ci.high)
        rows.append({"view": view, "importance": imp, "mean": float(r.mean()) if n else np.nan,
                     "std": float(r.std(ddof=1)) if n >= 2 else np.nan, "n": n, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=["view", "importance", "mean", "std", "n", "ci_low", "ci_high"])
