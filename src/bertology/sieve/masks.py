"""Sieves S(t) and query sets of every role for a chunk of examples (pure numpy, docs/reference.md#sieve).

For one example of real length n (specials included), Q = positions t < n that are neither [CLS] nor a
[SEP] (the one definition of both: :class:`bertology.store.SpecialTokens`). With window w:

==============  ===========================================================  =========================
role            S(t)                                                         queries t
==============  ===========================================================  =========================
local           {s in Q : |s - t| <= w}  (t itself included)                 Q
prev_local      {s in Q : 1 <= t - s <= w}                                   Q with S(t) non-empty
next_local      {s in Q : 1 <= s - t <= w}                                   Q with S(t) non-empty
block           {s in Q : segment(s) == segment(t)}  (pair tasks only)       Q
delimiter       {[CLS]} + every [SEP]                                        Q
cls             {[CLS]}                                                      Q
sep             every [SEP]                                                  Q with a [SEP]
nsubj dobj      wordpieces of the head word of t's word, when t's word is    wordpieces of dependents
amod advmod     a dependent of that relation (UD ``obj`` counts as dobj)
syntactic       union of the four relations' sieves                          union of their queries
==============  ===========================================================  =========================

Distances are in positions: a local window does not stop at a [SEP] but never contains one, since
every sieve except the delimiter ones lies inside Q. Queries whose sieve is empty are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bertology.store import SpecialTokens
from bertology.pipeline.config import ConfigError
from bertology.pipeline.errors import InputError

SYNTACTIC_RELATIONS: tuple[str, ...] = ("nsubj", "dobj", "amod", "advmod")
ROLES: tuple[str, ...] = ("local", "prev_local", "next_local", "block", "delimiter", "cls", "sep",
                          *SYNTACTIC_RELATIONS, "syntactic")
#: dependency labels mapped onto the four relations (UD `obj` counts as dobj; labels are lower-cased)
DEP_ALIASES: dict[str, str] = {"nsubj": "nsubj", "dobj": "dobj", "obj": "dobj", "amod": "amod", "advmod": "advmod"}


def roles_for(pair: bool) -> tuple[str, ...]:
    """The roles tested for a task: every role, `block` only for sentence-pair tasks."""
    return ROLES if pair else tuple(r for r in ROLES if r != "block")


def check_roles(roles: Sequence[str]) -> tuple[str, ...]:
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError(f"unknown sieve role(s) {unknown}; roles are: {', '.join(ROLES)}")
    return tuple(roles)


def word_relations(words: pd.DataFrame, example_idx: np.ndarray, n_words: int) -> np.ndarray:
    """Dependency arcs of the four relations as a word-level boolean array.

    words: the words table (columns example_idx, word, dep, head; other columns ignored), any examples.
    example_idx: (E,) the chunk's examples, in chunk order. Returns rel (E, 4, W, W) with W = n_words:
    rel[e, r, d, h] is True when word d of example e depends on word h through relation r
    (SYNTACTIC_RELATIONS order). Roots (head == word) and words >= W are ignored.
    """
    missing = {"example_idx", "word", "dep", "head"} - set(words.columns)
    if missing:
        raise InputError(f"the words table lacks column(s) {sorted(missing)}; "
                         "expected example_idx, word, dep, head (results/data/{task}/words.parquet)")
    example_idx = np.asarray(example_idx, dtype=np.int64)
    rel = np.zeros((len(example_idx), len(SYNTACTIC_RELATIONS), n_words, n_words), dtype=bool)
    if len(words) == 0 or n_words == 0:
        return rel
    row_of = pd.Series(np.arange(len(example_idx)), index=pd.Index(example_idx))
    if not row_of.index.is_unique:
        raise ValueError("example_idx of a chunk must be unique")
    dep = words["dep"].astype(str).str.lower().map(DEP_ALIASES)
    keep = dep.notna().to_numpy() & words["example_idx"].isin(row_of.index).to_numpy()
    sub = words.loc[keep]
    rel_code = dep[keep].map({r: i for i, r in enumerate(SYNTACTIC_RELATIONS)}).to_numpy(np.int64)
    e = row_of.loc[sub["example_idx"].to_numpy(np.int64)].to_numpy()
    d = sub["word"].to_numpy(np.int64)
    h = sub["head"].to_numpy(np.int64)
    ok = (d != h) & (d >= 0) & (h >= 0) & (d < n_words) & (h < n_words)
    rel[e[ok], rel_code[ok], d[ok], h[ok]] = True
    return rel


def build_masks(input_ids: np.ndarray, segment: np.ndarray, word_ids: np.ndarray, length: np.ndarray,
                relations: np.ndarray | None, *, specials: SpecialTokens, window: int,
                roles: Sequence[str] = ROLES) -> tuple[np.ndarray, np.ndarray]:
    """Sieves and query sets of `roles` for a chunk of E examples padded to T positions.

    input_ids, segment, word_ids: (E, T); length: (E,); relations: (E, 4, W, W) from
    :func:`word_relations` (None when no syntactic role is asked for); specials: the store's special ids.
    Returns sieve (E, R, T, T) bool with sieve[e, r, t, s] = s in S_r(t), and queries (E, R, T) bool:
    the queries of role r (t in Q with S_r(t) non-empty; for the syntactic roles, t's word must be a
    dependent of that relation). sieve rows of non-queries are all False.
    """
    roles = check_roles(roles)
    if window < 1:
        raise ValueError(f"the local window must be >= 1, got {window}")
    input_ids = np.asarray(input_ids)
    E, T = input_ids.shape
    segment = np.asarray(segment).reshape(E, T)
    word_ids = np.asarray(word_ids).astype(np.int64).reshape(E, T)
    length = np.asarray(length).astype(np.int64)
    if length.shape != (E,):
        raise ValueError(f"input_ids must be (E, T) and length (E,), got {input_ids.shape} and {length.shape}")
    cls, sep = specials.masks(input_ids, length)
    q = (np.arange(T)[None, :] < length[:, None]) & ~cls & ~sep            # (E, T): Q, the ordinary tokens
    pair_q = q[:, :, None] & q[:, None, :]                                  # (E, T, T): t, s both in Q
    pos = np.arange(T)
    diff = pos[None, :] - pos[:, None]                                      # diff[t, s] = s - t
    out = np.zeros((E, len(roles), T, T), dtype=bool)
    syntactic: np.ndarray | None = None
    if any(r in SYNTACTIC_RELATIONS or r == "syntactic" for r in roles):
        if relations is None:
            raise InputError("syntactic roles need the word relations (the words table)")
        W = relations.shape[-1]
        valid = q & (word_ids >= 0) & (word_ids < W)
        wid = np.where(valid, word_ids, 0)
        syntactic = relations[np.arange(E)[:, None, None, None], np.arange(len(SYNTACTIC_RELATIONS))[None, :, None, None],
                              wid[:, None, :, None], wid[:, None, None, :]]
        syntactic &= (valid[:, :, None] & valid[:, None, :])[:, None]        # (E, 4, T, T)
    for i, role in enumerate(roles):
        if role == "local":
            out[:, i] = pair_q & (np.abs(diff) <= window)[None]
        elif role == "prev_local":
            out[:, i] = pair_q & ((-diff >= 1) & (-diff <= window))[None]
        elif role == "next_local":
            out[:, i] = pair_q & ((diff >= 1) & (diff <= window))[None]
        elif role == "block":
            out[:, i] = pair_q & (segment[:, :, None] == segment[:, None, :])
        elif role == "delimiter":
            out[:, i] = q[:, :, None] & (cls | sep)[:, None, :]
        elif role == "cls":
            out[:, i] = q[:, :, None] & cls[:, None, :]
        elif role == "sep":
            out[:, i] = q[:, :, None] & sep[:, None, :]
        elif role == "syntactic":
            out[:, i] = syntactic.any(axis=1)
        else:
            out[:, i] = syntactic[:, SYNTACTIC_RELATIONS.index(role)]
    return out, out.any(axis=-1)


def chunk_relations(word_ids: np.ndarray, example_idx: np.ndarray, words: pd.DataFrame | None,
                    roles: Sequence[str]) -> np.ndarray | None:
    """The word relations (E, 4, W, W) of a chunk's examples (:func:`word_relations`), W = one more than the largest
    word index of word_ids (E, T) or of the chunk's words; None when no syntactic role is asked for."""
    roles = check_roles(roles)
    if not any(r in SYNTACTIC_RELATIONS or r == "syntactic" for r in roles):
        return None
    if words is None:
        raise InputError("syntactic roles need the words table (results/data/{task}/words.parquet)")
    wid_max = int(np.max(word_ids, initial=-1))
    sub = words[words["example_idx"].isin(np.asarray(example_idx))]
    n_words = max(wid_max, int(sub["word"].max()) if len(sub) else -1) + 1
    return word_relations(sub, example_idx, n_words)


def chunk_masks(input_ids: np.ndarray, segment: np.ndarray, word_ids: np.ndarray, length: np.ndarray,
                example_idx: np.ndarray, words: pd.DataFrame | None, *, specials: SpecialTokens,
                window: int, roles: Sequence[str] = ROLES) -> tuple[np.ndarray, np.ndarray]:
    """:func:`build_masks` for a store chunk, with the word relations looked up in the words table."""
    return build_masks(input_ids, segment, word_ids, length, chunk_relations(word_ids, example_idx, words, roles),
                       specials=specials, window=window, roles=roles)
