"""How faithful each token view is (Abnar & Zuidema 2020, section 4; docs/reference.md#faithfulness).

Two importance scores of input token j for a classifier's predicted class c (predicted on the intact input):

- ablation: p_c(x) - p_c(x with token j replaced by the tokenizer's mask token, or its unk token where it has
  none): the drop in the predicted class's probability (negative when the replacement raises it). A decoder
  (no mask token; its unk is often its pad/eos, which its classifier skips when it looks for the last token) has
  token j deleted instead (:data:`DELETE`: the copy is one token shorter, the tokens after j move left);
- input x gradient: sum_d e_jd * d p_c / d e_jd, with e_j the token's input representation, the output of the
  model's embeddings module (word + position + segment embeddings, normalised: the first layer's input). Not the
  raw word embedding: where the embeddings module only normalises it (DeBERTa-v2 without absolute positions),
  p_c is invariant to its scale and the product is zero whatever the token's importance. A decoder has no
  embeddings module: e_j is the first layer's input (its hidden_states argument), the same quantity.

Each view (raw attention, norm-weighted attention, rollout, flow) is compared with each importance by Spearman's
rho over an example's ordinary tokens (specials left out: they are never ablated); :func:`summarise` gives the mean,
std and n of rho over examples and a bootstrap interval of the mean (scipy.stats.bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertology.pipeline.errors import UserError
from bertology.models.hooks import hooks

VIEWS = ("raw", "norm", "rollout", "flow", "alti", "globenc", "decompx", "value_zeroing", "alti_logit")
IMPORTANCES = ("ablation", "gradient")
#: the deletion curve's summary (DeYoung et al. 2020's comprehensiveness), a row of faithfulness.csv per view; its
#: baseline "view": a seeded random order of the tokens
AOPC, RANDOM = "aopc", "random"
#: the "replacement" that deletes the tokens (a decoder's ablation and AOPC; any token id is >= 0)
DELETE = -1


class NoReplacementToken(UserError, ValueError):
    """The tokenizer has neither a mask nor an unk token to ablate a token with."""


def replacement_token_id(tokenizer, model=None) -> int:
    """The tokenizer's mask token id, else its unk token id; :data:`DELETE` for a decoder `model`
    (:func:`bertology.models.kinds.model_kind`: a causal model has no mask token and was never trained on one)."""
    if model is not None:
        from bertology.models.kinds import model_kind

        if model_kind(model.config) == "decoder":
            return DELETE
    for name in ("mask_token_id", "unk_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise NoReplacementToken(f"the tokenizer {type(tokenizer).__name__} has neither a mask nor an unk token: token "
                             f"ablation has nothing to replace a token with; use a tokenizer with one, or leave the norm analyses out "
                             f"(analysis.norms.enabled: false)")


def _forward(model, ids: torch.Tensor, mask: torch.Tensor, token_type_ids: torch.Tensor | None, **kwargs):
    """The model's forward on (B, n) inputs; token_type_ids None: the model is given none."""
    extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    return model(input_ids=ids, attention_mask=mask, **extra, **kwargs)


@dataclass(frozen=True)
class Example:
    """One example without padding: input_ids, attention_mask and token_type_ids (None: none) of shape (n,)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor | None = None


def _batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices of items of the given lengths, longest first, in batches of at most max_tokens padded tokens (at
    least one item each)."""
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    out: list[list[int]] = []
    for k in order:
        if out and lengths[out[-1][0]] * (len(out[-1]) + 1) <= max_tokens:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def class_probabilities(model, rows: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]], *,
                        max_tokens: int, pad_id: int = 0) -> torch.Tensor:
    """Softmax of the logits (float64) of each row (input_ids, attention_mask, token_type_ids; each (n_k,)) ->
    (rows, C). Rows are padded on the right to the longest of their batch (attention mask 0, `pad_id`,
    token type 0), longest first, at most `max_tokens` padded tokens a forward: a padded key gets weight exactly 0
    and the real positions keep their position ids, so each row's probabilities are its own forward's to float
    rounding (the matrix shapes differ)."""
    out: list[torch.Tensor | None] = [None] * len(rows)
    lengths = [int(r[0].shape[0]) for r in rows]
    with torch.no_grad():
        for batch in _batches(lengths, max_tokens):
            width = lengths[batch[0]]
            ids = torch.full((len(batch), width), int(pad_id), dtype=rows[batch[0]][0].dtype)
            mask = torch.zeros((len(batch), width), dtype=rows[batch[0]][1].dtype)
            with_tt = rows[batch[0]][2] is not None
            tts = torch.zeros((len(batch), width), dtype=rows[batch[0]][2].dtype) if with_tt else None
            for b, k in enumerate(batch):
                n = lengths[k]
                ids[b, :n], mask[b, :n] = rows[k][0], rows[k][1]
                if with_tt:
                    tts[b, :n] = rows[k][2]
            dev = rows[batch[0]][0].device
            p = torch.softmax(_forward(model, ids.to(dev), mask.to(dev), None if tts is None else tts.to(dev))
                              .logits.double(), -1)
            for b, k in enumerate(batch):
                out[k] = p[b]
    return torch.stack(out) if out else torch.zeros((0, 0), dtype=torch.float64)


def masked_drops(model, examples: list[Example], jobs: list[tuple[int, np.ndarray]], replacement: int, *,
                 max_tokens: int, pad_id: int = 0,
                 base: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The drop p_c(x_e) - p_c(x_e with positions replaced by `replacement`) of each job (e, positions (k,)), c the
    class example e's intact input predicts (`replacement` :data:`DELETE`: the positions are deleted; a copy
    with no token left gets NaN). Copies of every example in one stream of batches
    (:func:`class_probabilities`, `max_tokens` padded tokens a forward); a copy asked for twice (the same example and
    set of positions: ablation of token j and AOPC's top 1, or two views' equal top k) is computed once.
    base: (E, C) the intact examples' probabilities where already in hand (else one batched forward).
    Returns (drops (len(jobs),) float64, predicted classes (E,))."""
    if base is None:
        base = class_probabilities(model, [(x.input_ids, x.attention_mask, x.token_type_ids) for x in examples],
                                   max_tokens=max_tokens, pad_id=pad_id)
    classes = base.argmax(-1).cpu().numpy() if len(examples) else np.zeros(0, dtype=np.int64)
    keys: dict[tuple[int, tuple[int, ...]], int] = {}
    rows = []
    slot = np.empty(len(jobs), dtype=np.int64)
    for q, (e, pos) in enumerate(jobs):
        key = (int(e), tuple(sorted(int(j) for j in np.asarray(pos).ravel())))
        if key not in keys:
            keys[key] = len(rows)
            x = examples[key[0]]
            where = torch.as_tensor(key[1], dtype=torch.long, device=x.input_ids.device)
            if replacement == DELETE:
                keep = torch.ones_like(x.input_ids, dtype=torch.bool)
                keep[where] = False
                rows.append((x.input_ids[keep], x.attention_mask[keep],
                             None if x.token_type_ids is None else x.token_type_ids[keep]))
            else:
                ids = x.input_ids.clone()
                ids[where] = int(replacement)
                rows.append((ids, x.attention_mask, x.token_type_ids))
        slot[q] = keys[key]
    if not jobs:
        return np.zeros(0), classes
    empty = [k for k, r in enumerate(rows) if r[0].shape[0] == 0]
    if empty:                                       # nothing left to classify: NaN, the other rows as they are
        full = [k for k, r in enumerate(rows) if r[0].shape[0] > 0]
        got = class_probabilities(model, [rows[k] for k in full], max_tokens=max_tokens, pad_id=pad_id)
        p = torch.full((len(rows), base.shape[-1]), float("nan"), dtype=torch.float64, device=base.device)
        if full:
            p[torch.as_tensor(full, device=p.device)] = got.to(p.device)
    else:
        p = class_probabilities(model, rows, max_tokens=max_tokens, pad_id=pad_id)
    owner = np.array([e for e, _ in keys], dtype=np.int64)
    cls = torch.as_tensor(classes[owner], device=p.device)
    copy_p = p[torch.arange(len(rows), device=p.device), cls]
    base_p = base[torch.as_tensor(owner, device=base.device), cls.to(base.device)]
    drops = (base_p.to(copy_p.device) - copy_p).cpu().numpy()
    return drops[slot], classes


def ablation_jobs(e: int, positions: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Token ablation of example e: one copy per position."""
    return [(e, np.array([int(j)])) for j in np.asarray(positions).ravel()]


def aopc_jobs(e: int, orders: dict[str, np.ndarray],
              fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)) -> list[tuple[str, tuple[int, np.ndarray]]]:
    """AOPC copies of example e: (view, job) for each view's top k = max(1, ceil(f m)) positions per fraction f."""
    import math

    return [(view, (e, order[:max(1, math.ceil(f * len(order) - 1e-9))]))
            for view, order in orders.items() for f in fractions if len(order)]


def aopc_values(orders: dict[str, np.ndarray], labelled: list[tuple[str, tuple[int, np.ndarray]]],
                drops: np.ndarray) -> dict[str, float]:
    """Mean drop per view of :func:`aopc_jobs`' copies (NaN for a view without ordinary tokens)."""
    per: dict[str, list[float]] = {v: [] for v in orders}
    for (view, _), d in zip(labelled, drops):
        per[view].append(float(d))
    return {v: float(np.mean(d)) if d else float("nan") for v, d in per.items()}


def ablation_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: np.ndarray,
                        replacement: int, *, batch_size: int,
                        token_type_ids: torch.Tensor | None = None) -> tuple[np.ndarray, int]:
    """Drop in the predicted class's probability when each of `positions` is replaced by `replacement`.

    input_ids, attention_mask, token_type_ids: one example (n,); positions: (k,) ints. Returns (importance (n,)
    float64, NaN outside `positions`; the predicted class c). One forward per `batch_size` ablated copies
    (:func:`masked_drops`; several examples at once: :func:`masked_drops` with :func:`ablation_jobs`).
    """
    n = input_ids.shape[0]
    x = Example(input_ids, attention_mask, token_type_ids)
    positions = np.asarray(positions, dtype=np.int64)
    drops, classes = masked_drops(model, [x], ablation_jobs(0, positions), replacement, max_tokens=batch_size * n)
    out = np.full(n, np.nan)
    out[positions] = drops
    return out, int(classes[0])


def _embeddings(model) -> torch.nn.Module:
    """The model's embeddings module (``model.base_model.embeddings``), where input x gradient is taken."""
    embeddings = getattr(model.base_model, "embeddings", None)
    if embeddings is None:
        raise ValueError(f"{type(model.base_model).__name__} has no embeddings module to take input x gradient at")
    return embeddings


def _leaf_hook(captured: list[torch.Tensor]):
    """A forward hook that makes the embeddings' output a leaf we differentiate against, appended to `captured`."""
    def hook(module, args, output):
        output = output[0] if isinstance(output, tuple) else output
        leaf = output.detach().requires_grad_(True)
        captured.append(leaf)
        return leaf
    return hook


def _first_layer_hook(captured: list[torch.Tensor]):
    """A forward pre-hook (with kwargs) that makes the first layer's input hidden states a leaf, appended to
    `captured` (a decoder: no embeddings module; the positions are added inside the layers or before this input)."""
    def hook(module, args, kwargs):
        if args:
            leaf = args[0].detach().requires_grad_(True)
            captured.append(leaf)
            return (leaf, *args[1:]), kwargs
        leaf = kwargs["hidden_states"].detach().requires_grad_(True)
        captured.append(leaf)
        return args, {**kwargs, "hidden_states": leaf}
    return hook


def _input_capture(model, captured: list[torch.Tensor]):
    """A :func:`bertology.models.hooks.hooks` scope whose hook captures e, the input representation input x gradient is
    taken at: the embeddings module's output, or, without one (a decoder), the first layer's input."""
    if getattr(model.base_model, "embeddings", None) is not None:
        return hooks(model, fwd=[(_embeddings(model), _leaf_hook(captured))])
    from bertology.norms.values import NormsUnsupported, attention_blocks

    try:
        first = attention_blocks(model)[0].enclosing
    except NormsUnsupported:
        first = None
    if first is None:
        _embeddings(model)                          # its error: nowhere to take the gradient at
    return hooks(model, pre=[(first, _first_layer_hook(captured))], with_kwargs=True)


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                        token_type_ids: torch.Tensor | None = None, target: int | None = None) -> np.ndarray:
    """Input x gradient of the predicted (or `target`) class's probability: (n,) float64, sum_d e_jd dp/de_jd.

    input_ids, attention_mask, token_type_ids: one example (n,). e is the output of the model's embeddings module
    (``model.base_model.embeddings``), taken through a forward hook.
    """
    captured: list[torch.Tensor] = []
    with _input_capture(model, captured), torch.enable_grad():
        logits = _forward(model, input_ids[None], attention_mask[None],
                          None if token_type_ids is None else token_type_ids[None]).logits[0]
        probs = torch.softmax(logits.double(), -1)
        c = int(probs.argmax()) if target is None else int(target)
        (grad,) = torch.autograd.grad(probs[c], captured[-1])
    return (grad[0].double() * captured[-1][0].detach().double()).sum(-1).cpu().numpy()


def gradient_importances(model, examples: list[Example], *, max_tokens: int, pad_id: int = 0,
                         targets: np.ndarray | None = None) -> list[np.ndarray]:
    """:func:`gradient_importance` of several examples, padded into batches of at most `max_tokens` tokens (as
    :func:`class_probabilities`): one forward and backward per batch of the sum over its rows of p_{c_k}(x_k); the
    rows do not interact (padded keys get weight 0), so each row's gradient is its own, to float rounding.
    targets: (E,) classes (None: each example's predicted class). Returns [(n_k,) float64]."""
    captured: list[torch.Tensor] = []
    lengths = [int(x.input_ids.shape[0]) for x in examples]
    out: list[np.ndarray | None] = [None] * len(examples)
    with _input_capture(model, captured):
        for batch in _batches(lengths, max_tokens):
            width = lengths[batch[0]]
            first = examples[batch[0]]
            ids = torch.full((len(batch), width), int(pad_id), dtype=first.input_ids.dtype,
                             device=first.input_ids.device)
            mask = torch.zeros((len(batch), width), dtype=first.attention_mask.dtype, device=ids.device)
            tts = None if first.token_type_ids is None else torch.zeros((len(batch), width),
                                                                        dtype=first.token_type_ids.dtype,
                                                                        device=ids.device)
            for b, k in enumerate(batch):
                n = lengths[k]
                ids[b, :n], mask[b, :n] = examples[k].input_ids, examples[k].attention_mask
                if tts is not None:
                    tts[b, :n] = examples[k].token_type_ids
            with torch.enable_grad():
                probs = torch.softmax(_forward(model, ids, mask, tts).logits.double(), -1)
                cls = probs.argmax(-1) if targets is None else torch.as_tensor(
                    np.asarray(targets)[batch], device=probs.device)
                (grad,) = torch.autograd.grad(probs[torch.arange(len(batch), device=probs.device), cls].sum(),
                                              captured[-1])
            prod = (grad.double() * captured[-1].detach().double()).sum(-1).cpu().numpy()
            captured.clear()
            for b, k in enumerate(batch):
                out[k] = prod[b, :lengths[k]]
    return out


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
    fractions. input_ids, attention_mask, token_type_ids: one example (n,). All copies in batches of batch_size
    (equal copies once: :func:`masked_drops`)."""
    labelled = aopc_jobs(0, orders, fractions)
    drops, _ = masked_drops(model, [Example(input_ids, attention_mask, token_type_ids)], [j for _, j in labelled],
                            replacement, max_tokens=batch_size * input_ids.shape[0])
    return aopc_values(orders, labelled, drops)


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
