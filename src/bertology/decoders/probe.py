"""The decoder probe: causal attention maps of a model on the induction probe (random tokens repeated twice) and
on natural text, and the per-head tables of :mod:`bertology.decoders.heads` from them.

Glossary as in :mod:`bertology.decoders.heads` (E sequences, L layers, H query heads, T padded length, s the
repeated half). A grouped-query model (Llama, Qwen2, Mistral: key/value heads shared by a group of query heads)
gives one map per query head; sliding-window layers are taken as the model computes them (eager attention).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.decoders import heads

INDUCTION_SEQ_LEN = 50    # TransformerLens' induction demo
INDUCTION_BATCH = 10
SINK_TOKENS = 64          # Gu et al.: the first 64 tokens of each sequence
SINK_BATCH = 16           # examples per forward pass of the sink probe (at most 64 tokens each)


def causal_maps(model, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
    """(E, L, H, T, T) float64 attention maps of a causal model's base model (eager attention) on (E, T) ids
    (attention_mask: (E, T), None: all ones; token_type_ids: (E, T), None: the model is given none).

    The model must have been loaded with ``attn_implementation="eager"`` (other kernels return no weights).
    """
    import torch

    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        raise ValueError(f"{type(model).__name__} computes attention with {model.config._attn_implementation!r}, "
                         f"which returns no weights: load it with attn_implementation='eager'")
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(np.asarray(attention_mask))
    extra = {} if token_type_ids is None else {"token_type_ids": torch.as_tensor(np.asarray(token_type_ids),
                                                                                 dtype=torch.long)}
    with torch.no_grad():
        out = model.base_model(input_ids=ids, attention_mask=mask, output_attentions=True, **extra)
    if not out.attentions or out.attentions[0] is None:
        raise ValueError(f"{type(model).__name__} returned no attention weights")
    return torch.stack(out.attentions, dim=1).double().cpu().numpy()


def induction_probe(model, *, seed: int, seq_len: int = INDUCTION_SEQ_LEN, batch: int = INDUCTION_BATCH,
                    bos_id: int | None = None, token_types: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (E, 2s + 1), maps (E, L, H, 2s + 1, 2s + 1)) of the seeded induction probe: a BOS token (the
    tokenizer's, else token 0) and s uniform random tokens of the model's vocabulary repeated twice.
    token_types: the model is given token_type_ids (:func:`bertology.models.encoding.gives_token_type_ids`; one
    segment, all 0), else none."""
    rng = np.random.default_rng(seed)
    bos = 0 if bos_id is None else bos_id
    tokens = heads.repeated_random_tokens(rng, int(model.config.vocab_size), seq_len, batch, bos_id=bos)
    return tokens, causal_maps(model, tokens, token_type_ids=np.zeros_like(tokens) if token_types else None)


def induction_table(tokens: np.ndarray, maps: np.ndarray, seq_len: int) -> pd.DataFrame:
    """Per head: the induction demo's stripe score and the detection ("mul") scores of the induction,
    previous-token and duplicate-token patterns on the probe (means over its sequences).
    Columns: layer, head, induction_stripe, induction, previous_token, duplicate_token."""
    _, n_layers, n_heads, t, _ = maps.shape
    scores = {
        "induction_stripe": heads.induction_stripe_score(maps, seq_len),
        "induction": heads.detection_scores(maps, heads.induction_pattern(tokens)).mean(axis=0),
        "previous_token": heads.detection_scores(maps, heads.previous_token_pattern(t)).mean(axis=0),
        "duplicate_token": heads.detection_scores(maps, heads.duplicate_token_pattern(tokens)).mean(axis=0),
    }
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    return pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), **{k: v.ravel() for k, v in scores.items()}})


def sink_table(maps: np.ndarray, lengths: np.ndarray, epsilon: float = heads.SINK_EPSILON) -> pd.DataFrame:
    """Per head, over natural-text sequences: alpha_0 (mean over sequences) and the share of sequences with
    alpha_0 > epsilon; the whole model's sink rate (percent of sequence x layer x head) is
    ``100 * table.share_sink.mean()``. Columns: layer, head, alpha_0, share_sink, n."""
    alpha0 = heads.sink_alpha(maps, lengths)[..., 0]                          # (E, L, H)
    _, n_layers, n_heads = alpha0.shape
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    return pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), "alpha_0": alpha0.mean(axis=0).ravel(),
                         "share_sink": (alpha0 > epsilon).mean(axis=0).ravel(), "n": alpha0.shape[0]})


def sink_units(model, batches, *, tokens: int = SINK_TOKENS) -> pd.DataFrame:
    """Gu et al.'s alpha_0 of every head on every natural-text example, at most its first `tokens` tokens.

    batches: an iterable of (input_ids (B, T), attention_mask (B, T)[, token_type_ids (B, T) or None: where the
    model is given them, :func:`bertology.models.encoding.gives_token_type_ids`]) right-padded batches of the task's
    examples (their real tokens first). Returns one row per example x layer x head: example (0-based, in batch
    order), layer, head, alpha_0, n (the tokens read: min(length, tokens)).
    """
    frames, offset = [], 0
    for ids, mask, *types in batches:
        ids, mask = np.asarray(ids)[:, :tokens], np.asarray(mask)[:, :tokens]
        lengths = mask.sum(axis=1)
        t = int(lengths.max())
        tt = None if not types or types[0] is None else np.asarray(types[0])[:, :t]
        maps = causal_maps(model, ids[:, :t], mask[:, :t], tt)
        alpha0 = heads.sink_alpha(maps, lengths)[..., 0]                     # (B, L, H)
        b, n_layers, n_heads = alpha0.shape
        e, layer, head = np.meshgrid(np.arange(b) + offset, np.arange(n_layers), np.arange(n_heads), indexing="ij")
        frames.append(pd.DataFrame({"example": e.ravel(), "layer": layer.ravel(), "head": head.ravel(),
                                    "alpha_0": alpha0.ravel(), "n": np.repeat(lengths, n_layers * n_heads)}))
        offset += b
    return pd.concat(frames, ignore_index=True)


def induction_units(tokens: np.ndarray, maps: np.ndarray, seq_len: int) -> pd.DataFrame:
    """:func:`induction_table`'s scores per probe sequence (the units its means are taken over): one row per
    sequence x layer x head: sequence, layer, head, induction_stripe, induction, previous_token, duplicate_token."""
    e, n_layers, n_heads, t, _ = maps.shape
    scores = {
        "induction_stripe": np.stack([heads.induction_stripe_score(maps[i:i + 1], seq_len) for i in range(e)]),
        "induction": heads.detection_scores(maps, heads.induction_pattern(tokens)),
        "previous_token": heads.detection_scores(maps, heads.previous_token_pattern(t)),
        "duplicate_token": heads.detection_scores(maps, heads.duplicate_token_pattern(tokens)),
    }
    s, layer, head = np.meshgrid(np.arange(e), np.arange(n_layers), np.arange(n_heads), indexing="ij")
    return pd.DataFrame({"sequence": s.ravel(), "layer": layer.ravel(), "head": head.ravel(),
                         **{k: v.ravel() for k, v in scores.items()}})


def head_summary(sink: pd.DataFrame, induction: pd.DataFrame, epsilon: float = heads.SINK_EPSILON) -> pd.DataFrame:
    """Per head of one model: alpha_0 (mean over examples), share_sink (share of examples with alpha_0 >
    epsilon) from :func:`sink_units`' rows, and the means over probe sequences of :func:`induction_units`' scores.
    Columns: layer, head, alpha_0, share_sink, induction_stripe, induction, previous_token, duplicate_token."""
    s = sink.assign(share_sink=(sink["alpha_0"] > epsilon).astype(float))
    a = s.groupby(["layer", "head"])[["alpha_0", "share_sink"]].mean()
    b = induction.groupby(["layer", "head"])[["induction_stripe", "induction", "previous_token",
                                              "duplicate_token"]].mean()
    return a.join(b, how="outer").reset_index()


SINK_COLUMNS = ("variant", "example", "layer", "head", "alpha_0", "n")
INDUCTION_COLUMNS = ("variant", "sequence", "layer", "head", "induction_stripe", "induction", "previous_token",
                     "duplicate_token")


def probe_tables(sink: dict[str, pd.DataFrame], induction: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """decoder_sink.csv and decoder_induction.csv: :func:`sink_units` and :func:`induction_units` of each model of
    the probe (variant -> its rows, in the probe's order), with the variant as the first column."""
    s = pd.concat([f.assign(variant=v) for v, f in sink.items()], ignore_index=True)
    i = pd.concat([f.assign(variant=v) for v, f in induction.items()], ignore_index=True)
    return s[list(SINK_COLUMNS)], i[list(INDUCTION_COLUMNS)]
