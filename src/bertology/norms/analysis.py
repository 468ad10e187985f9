"""One pass of a model over a sample: attention, value norms and mixing in the same forward, then the token views
(raw, norm-weighted, rollout, flow) and, for a classifier, token importance (docs/reference.md#norms ff.).

:func:`run_views` gives norms.csv, mixing.csv and token_scores.parquet; :func:`run_faithfulness` the importances
of the flow sample and faithfulness.csv. Both run example rows in length-sorted padded batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from bertology.models.encoding import Encoded, encode_frame
from bertology.norms import faithful as ff
from bertology.norms import flow as fl
from bertology.norms import logit_views as lv
from bertology.norms import mixparts as mp
from bertology.norms import mixviews as mv
from bertology.norms import prenorm as pn
from bertology.norms import value_zeroing as vz
from bertology.norms.alti_logit import DECISION_COLUMNS
from bertology.norms.decompx_prenorm import gated_reason
from bertology.norms.mixing import mixing_ratios
from bertology.norms.norm_stats import MixingStats, NormStats
from bertology.norms.tokens import TokenKinds
from bertology.norms.values import Capture, transformed_vectors
from bertology.pipeline.config import MixingViewsConfig

SCORE_COLUMNS = ["example_idx", "position", "word", "method", "score"]
LAYER_COLUMNS = ["example_idx", "layer", "position", "method", "score"]


def padded(enc: Encoded, rows: np.ndarray, pad_id: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The model inputs of `rows` padded to their longest (:meth:`Encoded.padded`,
    :meth:`bertology.models.encoding.Batch.inputs`): (kwargs, lengths (B,))."""
    return enc.padded(rows, pad_id).inputs(), torch.as_tensor(enc.lengths[rows])


def view_target(model, n: int) -> int:
    """The position the token views are read from, of an example of n tokens: 0 ([CLS]) for an encoder; for a
    decoder (:func:`bertology.models.kinds.model_kind`) its last token, n - 1, the one its sequence classifier reads and
    the only one whose causal row sees every token (row 0 attends to itself alone)."""
    from bertology.models.kinds import model_kind

    return n - 1 if model_kind(model.config) == "decoder" else 0


def _layer_rows(idx: int, method: str, per_layer: np.ndarray) -> pd.DataFrame:
    """mixing_layers.parquet rows of one example and view: per_layer (L, n) -> L * n rows."""
    L, n = per_layer.shape
    return pd.DataFrame({"example_idx": idx, "layer": np.repeat(np.arange(L), n), "position": np.tile(np.arange(n), L),
                         "method": method, "score": per_layer.reshape(-1)})


@dataclass
class ViewsResult:
    norms: pd.DataFrame
    mixing: pd.DataFrame
    scores: pd.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)
    examples: int = 0
    flow_examples: int = 0
    layers: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LAYER_COLUMNS))
    mixing_examples: int = 0
    mixing_note: str | None = None
    decompx_error: float = 0.0
    #: the newer mixing views computed (mixviews.VIEWS, less ALTI, GlobEnc and DecompX off a post-LN or pre-norm
    #: layout, DecompX on a pre-norm layer with a gated MLP)
    mixing_views: tuple[str, ...] = ()
    #: ALTI-Logit's parts per (example, layer, part, head) (decision.parquet; empty without a classifier head)
    decision: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DECISION_COLUMNS))
    #: max relative miss of the parts against the real tensors: pre-norm ALTI's x + attention + b_O, ALTI-Logit's logits
    alti_error: float = 0.0
    logit_error: float = 0.0


@dataclass(frozen=True)
class MixingPlan:
    """Which newer mixing views (:data:`bertology.norms.mixviews.VIEWS`) run on a model, and the layer parts they
    read: ``parts`` of a post-LN layout (:func:`bertology.norms.mixparts.layer_parts`) or ``pre`` of a pre-norm one
    (:func:`bertology.norms.prenorm.prenorm_parts`), the classifier head's linears ``head``, Value Zeroing's blocks
    ``zeroing``, ``gated`` (why DecompX is left out: a gated MLP) and ``note`` (every view left out, and why)."""

    parts: object = None
    pre: object = None
    head: list = field(default_factory=list)
    zeroing: object = None
    gated: str | None = None
    note: str | None = None
    views: tuple[str, ...] = ()


def mixing_plan(model) -> MixingPlan:
    """The mixing views `model` gets (:class:`MixingPlan`): ALTI, GlobEnc and DecompX on a post-LN layout or a
    pre-norm one (DecompX only where the MLP is not gated), Value Zeroing wherever each layer is found. Reads the
    modules only: a model on the meta device (no weights) gets the same plan (bench/project_paper.py costs
    norms_views by it)."""
    parts, pre, head, note, zeroing, gated = None, None, [], None, None, None
    try:
        parts = mp.layer_parts(model)
        head = mp.head_linears(model)
    except mp.MixingViewsUnsupported as err:
        try:                             # a pre-norm model: ALTI, ALTI-Logit, GlobEnc, DecompX (MLP not gated)
            pre = pn.prenorm_parts(model)
            head = pn.head_candidates(model, pre)
            gated = gated_reason(pre)
            note = f"no DecompX: {gated}" if gated else None
        except mp.MixingViewsUnsupported as why:
            note = f"no ALTI, GlobEnc or DecompX: {err if 'post-LN layer' in str(why) else why}"
    try:
        zeroing = vz.zeroing_blocks(model)
    except mp.MixingViewsUnsupported as err:
        note = f"no ALTI, GlobEnc, DecompX or Value Zeroing: {err}" if parts is None and pre is None else \
            f"{note + '; ' if note else ''}no Value Zeroing: {err}"
    views = tuple(v for v in mv.VIEWS if (parts and v != "value_zeroing") or (pre and v in ("alti", "globenc"))
                  or (pre and not gated and v == "decompx") or (zeroing and v == "value_zeroing"))
    return MixingPlan(parts, pre, head, zeroing, gated, note, views)


def run_views(model, tokenizer, frame: pd.DataFrame, *, max_length: int, batch_size: int, flow_examples: int,
              frequencies: np.ndarray | None = None, device: str = "cpu",
              stored_norms: dict[int, np.ndarray] | None = None, mixing_examples: int | None = 0,
              mixing_options: MixingViewsConfig | None = None) -> ViewsResult:
    """Attention, value norms, mixing and token views of every example of `frame` (prepared rows, E of them); flow
    on the first `flow_examples` rows only (None = all), the newer mixing views (:mod:`bertology.norms.mixviews`)
    on the first `mixing_examples` (None = all; their per-layer rows in ``layers``): ALTI, GlobEnc and DecompX on a
    post-LN or a pre-norm layout (DecompX where the MLP is not gated), Value Zeroing wherever each layer is found
    (``mixing_note`` says what is left out and why).
    frequencies: (vocab,) token counts of the training split (None: no frequency correlation). The target of the
    views is position 0 ([CLS]); a decoder's last real token (:func:`view_target`).
    stored_norms: example idx -> its value norms (L, H, n) as the attention store holds them (`value_norm`): used
    instead of computing them again (the forward then keeps only the vectors mixing and the norm view need).
    mixing_options: how GlobEnc and DecompX are computed (config analysis.mixing_views; None: the schema's defaults).
    `model` may be a classifier (DecompX then runs through its head) or a bare encoder."""
    from contextlib import nullcontext

    kinds = TokenKinds(tokenizer)
    enc = encode_frame(tokenizer, frame, max_length)
    L, H = int(model.config.num_hidden_layers), int(model.config.num_attention_heads)
    norm_stats, mix_stats = NormStats(L, H), MixingStats(L)
    n_flow = len(frame) if flow_examples is None else min(int(flow_examples), len(frame))
    n_mix = len(frame) if mixing_examples is None else min(int(mixing_examples), len(frame))
    seconds = dict.fromkeys(("forward", "mixing", "stats", "raw", "norm", "rollout", "flow"), 0.0)
    plan = mixing_plan(model) if n_mix else MixingPlan()
    parts, pre, head, note, zeroing, gated, computed = (plan.parts, plan.pre, plan.head, plan.note, plan.zeroing,
                                                       plan.gated, plan.views)
    if not computed:
        n_mix = 0
    seconds.update(dict.fromkeys(computed, 0.0))
    rows_out: list[pd.DataFrame] = []
    layer_out: list[pd.DataFrame] = []
    vz_jobs: list[tuple[int, list[str]]] = []
    decompx_error = 0.0
    logit_out: list[pd.DataFrame] = []
    errors = {"alti": 0.0, "logit": 0.0}
    logit_note = None
    order = np.argsort(-enc.lengths, kind="stable")
    batches = [b for b in np.array_split(order, -(-len(order) // max(batch_size, 1))) if len(b)] if len(order) else []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with Capture(model, vectors=True, norms=stored_norms is None) as cap, torch.no_grad(), \
            (mp.PartsCapture(model, parts, head) if parts else nullcontext()) as pc, \
            (pn.PreNormCapture(model, pre, head) if pre else nullcontext()) as prc:
        last = cap.blocks[-1]
        for rows in batches:
            kwargs, lengths = padded(enc, rows, pad)
            kwargs = {k: v.to(device) for k, v in kwargs.items()}
            t0 = time.perf_counter()
            out = model(**kwargs, output_attentions=True)
            seconds["forward"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            ratios = mixing_ratios(cap, out.attentions, lengths).numpy()               # (B, L, M, T)
            seconds["mixing"] += time.perf_counter() - t0
            norms = None if stored_norms is not None else cap.value_norms(lengths).cpu().numpy()   # (B, L, H, T)
            alpha_all = torch.stack(out.attentions, 1).cpu()                           # (B, L, H, T, T)
            for k, r in enumerate(rows):
                n = int(lengths[k])
                target = view_target(model, n)
                ids = enc.input_ids[r]
                alpha = alpha_all[k, :, :, :n, :n].double().numpy()
                cats = kinds.categories(ids[None], np.array([n]))[0]
                t0 = time.perf_counter()
                key_norms = norms[k, :, :, :n] if norms is not None else stored_norms[int(enc.idx[r])]
                if key_norms.shape != (L, H, n):
                    raise ValueError(f"example {int(enc.idx[r])}: the store's value norms are {key_norms.shape}, the "
                                     f"model's tokens (L, H, n) = {(L, H, n)}: the store is of another tokenisation")
                norm_stats.update(alpha, key_norms, cats,
                                  None if frequencies is None else frequencies[ids].astype(np.float64))
                mix_stats.update(ratios[k, :, :, :n])
                seconds["stats"] += time.perf_counter() - t0
                views = {}
                t0 = time.perf_counter()
                views["raw"] = fl.raw_scores(alpha, target)
                t1 = time.perf_counter()
                f_last = transformed_vectors(last, cap.values[last.index][k:k + 1, :n])[0]
                views["norm"] = ff.norm_scores(alpha_all[k, -1, :, :n, :n], f_last.cpu(), target)
                t2 = time.perf_counter()
                views["rollout"] = fl.rollout_scores(alpha, target)
                t3 = time.perf_counter()
                seconds["raw"] += t1 - t0
                seconds["norm"] += t2 - t1
                seconds["rollout"] += t3 - t2
                if r < n_flow:
                    views["flow"] = fl.flow_scores(alpha, target)
                    seconds["flow"] += time.perf_counter() - t3
                words = [kinds.tokenizer.convert_ids_to_tokens(int(i)) for i in ids]
                lg = None
                if r < n_mix and parts:
                    logits = getattr(out, "logits", None) if head else None
                    ev = mv.example_views(model, parts, head, cap, pc, out.attentions, k, n,
                                          None if logits is None else logits[k], seconds, target=target,
                                          options=mixing_options)
                    views.update(ev.scores)
                    decompx_error = max(decompx_error, ev.decompx_error)
                    layer_out += [_layer_rows(int(enc.idx[r]), m, x) for m, x in ev.layers.items()]
                    if logits is not None:                   # ALTI-Logit through the post-LN layers and the head
                        lg = lv.postln_logit(parts, cap, pc, out.attentions, k, n, target, int(enc.idx[r]), ev.alti,
                                             seconds)
                        if isinstance(lg, str):
                            logit_note, lg = lg, None
                if r < n_mix and pre:
                    score, why = lv.score_head(prc, k, target) if getattr(out, "logits", None) is not None else \
                        (None, None)
                    logit_note = why or logit_note
                    lg = lv.prenorm_views(pre, cap, prc, out.attentions, k, n, target, int(enc.idx[r]), seconds, score)
                    logits = getattr(out, "logits", None)
                    ev = mv.prenorm_example_views(model, pre, cap, prc, out.attentions, k, n,
                                                  None if logits is None else logits[k], seconds, target,
                                                  options=mixing_options, decompx=not gated)
                    views.update(ev.scores)
                    decompx_error = max(decompx_error, ev.decompx_error)
                    layer_out += [_layer_rows(int(enc.idx[r]), m, x) for m, x in ev.layers.items()]
                if lg is not None:
                    views.update(lg.scores)
                    layer_out += [_layer_rows(int(enc.idx[r]), m, x) for m, x in lg.layers.items()]
                    logit_out += [] if lg.decision is None else [lg.decision]
                    errors = {"alti": max(errors["alti"], lg.alti_error), "logit": max(errors["logit"], lg.logit_error)}
                if r < n_mix and zeroing:
                    vz_jobs.append((r, words))
                for method, score in views.items():
                    rows_out.append(pd.DataFrame({"example_idx": int(enc.idx[r]), "position": np.arange(n),
                                                  "word": words, "method": method, "score": score}))
    # Value Zeroing's own forwards, after the pass (they would reset the capture's tensors)
    for r, words in vz_jobs:
        one, _ = padded(enc, np.array([r]), pad)
        score, per_layer = vz.value_zeroing_view(model, zeroing, {k: v.to(device) for k, v in one.items()}, seconds,
                                                 view_target(model, len(words)))
        rows_out.append(pd.DataFrame({"example_idx": int(enc.idx[r]), "position": np.arange(len(words)),
                                      "word": words, "method": "value_zeroing", "score": score}))
        layer_out.append(_layer_rows(int(enc.idx[r]), "value_zeroing", per_layer))
    scores = pd.concat(rows_out, ignore_index=True) if rows_out else pd.DataFrame(columns=SCORE_COLUMNS)
    scores = scores.sort_values(["example_idx", "method", "position"], kind="stable").reset_index(drop=True)
    layers = pd.concat(layer_out, ignore_index=True) if layer_out else pd.DataFrame(columns=LAYER_COLUMNS)
    layers = layers.sort_values(["example_idx", "method", "layer", "position"], kind="stable").reset_index(drop=True)
    if logit_note and n_mix:
        note = f"{note + '; ' if note else ''}no ALTI-Logit: {logit_note}"
    computed += ("alti_logit",) if logit_out else ()
    decision = pd.concat(logit_out, ignore_index=True) if logit_out else pd.DataFrame(columns=DECISION_COLUMNS)
    return ViewsResult(norm_stats.table(), mix_stats.table(), scores[SCORE_COLUMNS], seconds, len(frame), n_flow,
                       layers[LAYER_COLUMNS], n_mix, note, decompx_error, computed if n_mix else (), decision,
                       errors["alti"], errors["logit"])


@dataclass
class FaithfulnessResult:
    table: pd.DataFrame
    importance: pd.DataFrame
    rhos: pd.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)
    examples: int = 0


def run_faithfulness(model, tokenizer, frame: pd.DataFrame, scores: pd.DataFrame, *, max_length: int,
                     batch_size: int, confidence: float, resamples: int, seed: int,
                     device: str = "cpu", copy_tokens: int | None = None) -> FaithfulnessResult:
    """Importance (ablation, input x gradient) of the ordinary tokens of the examples whose token_scores have a
    ``flow`` view, and faithfulness.csv: Spearman of every view with every importance, per example, summarised, and
    each view's AOPC (importance ``aopc``, against a seeded random order, view ``random``; the per-example table's
    ``rho`` holds the example's AOPC there).

    frame: prepared rows containing those examples; scores: token_scores.parquet of the same (classifier) model.
    The intact forwards, the ablated and AOPC copies and the gradients of all examples run in batches of at most
    `copy_tokens` padded tokens (None: batch_size * max_length), examples of one length together
    (:func:`bertology.norms.faithful.masked_drops`): the same numbers as one example at a time, to float rounding.
    """
    copy_tokens = copy_tokens or batch_size * max_length
    kinds = TokenKinds(tokenizer)
    flow_idx = scores.loc[scores["method"] == "flow", "example_idx"].unique()
    sub = frame[frame["idx"].isin(flow_idx)].reset_index(drop=True)
    enc = encode_frame(tokenizer, sub, max_length)
    replacement = ff.replacement_token_id(tokenizer, model)
    by_example = {k: g for k, g in scores[scores["example_idx"].isin(flow_idx)].groupby("example_idx")}
    seconds = {"ablation": 0.0, "gradient": 0.0, "aopc": 0.0}
    imp_rows, rho_rows = [], []
    examples, ordinaries, views_of, orders_of = [], [], [], []
    for r in range(len(sub)):
        ids = torch.from_numpy(enc.input_ids[r]).to(device)
        tts = None if enc.token_type_ids is None else torch.from_numpy(enc.token_type_ids[r]).to(device)
        examples.append(ff.Example(ids, torch.ones_like(ids), tts))
        ordinary = kinds.categories(enc.input_ids[r][None], np.array([len(ids)]))[0] >= 2
        ordinaries.append(ordinary)
        g = by_example[int(enc.idx[r])]
        views = {v: g.loc[g["method"] == v].sort_values("position")["score"].to_numpy(float) for v in ff.VIEWS
                 if (g["method"] == v).any()}
        views_of.append(views)
        positions = np.flatnonzero(ordinary)
        orders = {v: ff.top_first(sc, positions) for v, sc in views.items()}
        orders[ff.RANDOM] = np.random.default_rng([int(seed), int(enc.idx[r])]).permutation(positions)
        orders_of.append(orders)
    # every example's masked copies in one stream of batches of copy_tokens tokens (the intact forward shared)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    t0 = time.perf_counter()
    base = ff.class_probabilities(model, [(x.input_ids, x.attention_mask, x.token_type_ids) for x in examples],
                                  max_tokens=copy_tokens, pad_id=pad_id)
    abl_jobs = [job for e, o in enumerate(ordinaries) for job in ff.ablation_jobs(e, np.flatnonzero(o))]
    abl_drops, classes = ff.masked_drops(model, examples, abl_jobs, replacement, max_tokens=copy_tokens,
                                         pad_id=pad_id, base=base)
    t1 = time.perf_counter()
    grads = ff.gradient_importances(model, examples, max_tokens=copy_tokens, pad_id=pad_id, targets=classes)
    t2 = time.perf_counter()
    labelled = [(e, view, job) for e, orders in enumerate(orders_of) for view, job in ff.aopc_jobs(e, orders)]
    aopc_drops, _ = ff.masked_drops(model, examples, [job for _, _, job in labelled], replacement,
                                    max_tokens=copy_tokens, pad_id=pad_id, base=base)
    seconds["ablation"] += t1 - t0
    seconds["gradient"] += t2 - t1
    seconds["aopc"] += time.perf_counter() - t2
    bounds = np.searchsorted(np.array([e for e, _, _ in labelled], dtype=np.int64), np.arange(len(examples) + 1))
    start = 0
    for r, x in enumerate(examples):
        n = len(x.input_ids)
        idx = int(enc.idx[r])
        abl = np.full(n, np.nan)
        k = int(ordinaries[r].sum())
        abl[np.flatnonzero(ordinaries[r])] = abl_drops[start:start + k]
        start += k
        words = [tokenizer.convert_ids_to_tokens(int(i)) for i in enc.input_ids[r]]
        importances = {"ablation": abl, "gradient": grads[r]}
        for method, score in importances.items():
            imp_rows.append(pd.DataFrame({"example_idx": idx, "position": np.arange(n), "word": words,
                                          "method": method, "score": score}))
        for (view, imp), rho in ff.example_correlations(views_of[r], importances, ordinaries[r]).items():
            rho_rows.append({"example_idx": idx, "view": view, "importance": imp, "rho": rho})
        lo, hi = bounds[r], bounds[r + 1]
        mine = [(view, job) for _, view, job in labelled[lo:hi]]
        for view, value in ff.aopc_values(orders_of[r], mine, aopc_drops[lo:hi]).items():
            rho_rows.append({"example_idx": idx, "view": view, "importance": ff.AOPC, "rho": value})
    rhos = pd.DataFrame(rho_rows, columns=["example_idx", "view", "importance", "rho"])
    table = ff.summarise(rhos, confidence=confidence, resamples=resamples, seed=seed)
    importance = pd.concat(imp_rows, ignore_index=True) if imp_rows else pd.DataFrame(columns=SCORE_COLUMNS)
    return FaithfulnessResult(table, importance[SCORE_COLUMNS], rhos, seconds, len(sub))
