"""Heads as dependency parsers (Clark et al. 2019, section 4.2).

Word-level attention (as in Clark et al.): attention *to* a split word is the sum over its wordpieces,
attention *from* a split word the mean over its wordpieces,

    Wd[u, v] = mean_{s in wp(u)} sum_{t in wp(v)} A[s, t]        (specials are no word: never a candidate)

A head then predicts, for every word d, its syntactic head in two directions (Clark et al.'s code: the
attention matrix and its transpose):

- ``dep_to_head``: the word d attends to most, ``argmax_{v != d} Wd[d, v]``;
- ``head_to_dep``: the word that attends most to d, ``argmax_{v != d} Wd[v, d]``.

Candidates are the example's other words with at least one wordpiece in the store (a word cut off by
truncation is no candidate); ties go to the earlier word. An arc (dependent d, head h, relation r) is
scored when both d and h have wordpieces; roots (head == itself) are not arcs. Accuracy per relation,
direction, layer and head = correct / n over the scored arcs of that relation.

Fixed-offset baseline: always predict the word at the relation's most common relative position
``h - d`` (in word indices), counted over the same scored arcs; its accuracy is that position's count / n.
Ties between positions go to the smaller |offset|, then to the negative one (the head on the left).

Causal maps (a decoder's store, ``causal``): a word's row covers only itself and the words before it, so
``dep_to_head`` can only find a head on the dependent's left and ``head_to_dep`` (the column of d, read from the
rows of later words) only a head on its right. The candidates are those words (a first word has none in
``dep_to_head``, a last word none in ``head_to_dep``: never correct), and each direction's baseline is the most
common offset on its own side (``h - d < 0`` for ``dep_to_head``, ``> 0`` for ``head_to_dep``), its accuracy
that offset's count over all n arcs of the relation: the head and its baseline see the same arcs.

Glossary: L layers, H heads, n real length of one example, W words of one example, A arcs of one example.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


DIRECTIONS: tuple[str, ...] = ("dep_to_head", "head_to_dep")
COLUMNS: list[str] = ["relation", "direction", "layer", "head", "accuracy", "n", "baseline_offset",
                      "baseline_accuracy"]


@dataclass(frozen=True)
class Arcs:
    """The dependency arcs of one example: dependent and head word indices (A,), relation labels (A,)."""

    dependent: np.ndarray
    head: np.ndarray
    relation: np.ndarray

    @classmethod
    def from_words(cls, word: np.ndarray, head: np.ndarray, dep: np.ndarray) -> "Arcs":
        """Arcs of one example's words table rows (columns word, head, dep); roots (head == word) dropped."""
        word, head, dep = np.asarray(word, np.int64), np.asarray(head, np.int64), np.asarray(dep, dtype=object)
        keep = (word != head) & (head >= 0)
        return cls(word[keep], head[keep], dep[keep].astype(str))

    @property
    def size(self) -> int:
        return int(self.dependent.size)


def word_blocks(attn: np.ndarray, word_ids: np.ndarray, n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """Word-level attention among the words that have a wordpiece: (blocks (L, H, k, k) float64, words (k,) int64).

    attn: (L, H, n, n) cropped to the real length; word_ids: (>= n,) word index per position (-1 specials).
    blocks[..., i, j] = Wd[words[i], words[j]] = mean_{s in wp(u)} sum_{t in wp(v)} A[s, t], words ascending. Positions
    are grouped by word (stable sort); a one-piece word's row and column are copied as they are and only split words
    are summed (float64 sums of float32 attention), so equal attention stays exactly equal.
    """
    n = attn.shape[-1]
    ids = np.asarray(word_ids[:n]).astype(np.int64)
    pos = np.flatnonzero((ids >= 0) & (ids < n_words))
    if pos.size == 0:
        return np.zeros(attn.shape[:2] + (0, 0)), np.zeros(0, np.int64)
    order = pos[np.argsort(ids[pos], kind="stable")]  # the wordpieces of each word side by side
    w = ids[order]
    starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
    sizes = np.diff(np.r_[starts, w.size])
    split = np.flatnonzero(sizes > 1)
    if order[-1] - order[0] + 1 == order.size and (np.diff(order) == 1).all():  # slices are views: no copy
        sub = attn[..., order[0]:order[-1] + 1, order[0]:order[-1] + 1]
    else:
        sub = attn[..., order[:, None], order[None, :]]  # (L, H, p, p)
    sub = np.array(sub, dtype=np.float64)  # always a copy: the caller owns the blocks
    if not split.size:
        return sub, w[starts]  # one piece per word: the wordpiece attention is the word attention
    to_words = sub[..., starts]  # (L, H, p, k): sum over the pieces attended to
    for j in split:
        to_words[..., j] = sub[..., starts[j]:starts[j] + sizes[j]].sum(axis=-1)
    from_words = to_words[..., starts, :]  # (L, H, k, k): mean over the pieces attending
    for j in split:
        from_words[..., j, :] = to_words[..., starts[j]:starts[j] + sizes[j], :].sum(axis=-2) / sizes[j]
    return from_words, w[starts]


def word_attention(attn: np.ndarray, word_ids: np.ndarray, n_words: int) -> np.ndarray:
    """Word-level attention of one example.

    attn: (L, H, n, n) cropped to the real length; word_ids: (>= n,) word index per position (-1 specials).
    Returns (L, H, W, W) float64 with Wd[u, v] = mean_{s in wp(u)} sum_{t in wp(v)} A[s, t]; rows and columns of
    words without a wordpiece are 0 (:func:`word_blocks`; ties go to the earlier word, see :func:`predict_heads`).
    """
    out = np.zeros(attn.shape[:2] + (n_words, n_words))
    blocks, present = word_blocks(attn, word_ids, n_words)
    if present.size == 0:
        return out
    if present[-1] - present[0] + 1 == present.size:  # words numbered without gaps
        out[..., present[0]:present[-1] + 1, present[0]:present[-1] + 1] = blocks
    else:
        out[..., present[:, None], present[None, :]] = blocks
    return out


def predict_heads(wd: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Each head's predicted syntactic head of every word, in both directions.

    wd: (L, H, W, W) word-level attention; present: (W,) bool, words with a wordpiece. Returns (2, L, H, W)
    int64: [0] dep_to_head = argmax over candidates v of wd[..., d, v]; [1] head_to_dep = argmax over v of
    wd[..., v, d]; candidates are present words other than d; ties go to the earlier word.
    """
    W = wd.shape[-1]
    allowed = present[None, :] & ~np.eye(W, dtype=bool)  # allowed[d, v]
    to = np.where(allowed, wd, -np.inf).argmax(axis=-1)
    frm = np.where(allowed, np.swapaxes(wd, -1, -2), -np.inf).argmax(axis=-1)
    return np.stack([to, frm])


def predict_present(blocks: np.ndarray, rows: np.ndarray, causal: bool = False) -> np.ndarray:
    """:func:`predict_heads` of the words with a wordpiece, from their blocks (L, H, k, k) (:func:`word_blocks`),
    for the words at `rows` (A,) of those k: (2, L, H, A) indices into the k words, -1 where a word has no
    candidate. Overwrites the diagonal of `blocks` (a word is not its own head), and with ``causal`` the upper
    triangle too (a causal row sees no later word: dep_to_head's candidates are the earlier words, head_to_dep's
    the later ones): the caller gives blocks it owns. Needs k >= 2."""
    k = blocks.shape[-1]
    diagonal = np.arange(k)
    blocks[..., diagonal, diagonal] = -np.inf
    if not causal:
        return np.stack([blocks.argmax(axis=-1)[..., rows], blocks.argmax(axis=-2)[..., rows]])
    upper = np.triu_indices(k, 1)
    blocks[..., upper[0], upper[1]] = -np.inf
    to, frm = blocks.argmax(axis=-1)[..., rows], blocks.argmax(axis=-2)[..., rows]
    to[..., rows == 0] = -1                    # the first word has no earlier word
    frm[..., rows == k - 1] = -1               # the last word has no later word
    return np.stack([to, frm])


@dataclass
class ParserCounts:
    """Running counts: relation -> correct (2, L, H) per direction, n scored arcs, Counter of offsets h - d;
    ``skipped`` arcs whose dependent or head had no wordpiece (truncated, or a word the tokenizer lost);
    ``causal``: the maps were a decoder's (the candidates and baselines of the module docstring)."""

    correct: dict[str, np.ndarray] = field(default_factory=dict)
    n: Counter = field(default_factory=Counter)
    offsets: dict[str, Counter] = field(default_factory=dict)
    skipped: int = 0
    causal: bool = False

    def __add__(self, other: "ParserCounts") -> "ParserCounts":
        out = ParserCounts({k: v.copy() for k, v in self.correct.items()}, Counter(self.n),
                           {k: Counter(v) for k, v in self.offsets.items()}, self.skipped, self.causal)
        out += other
        return out

    def __iadd__(self, other: "ParserCounts") -> "ParserCounts":
        """Add `other`'s counts to these, in place (counts: the order does not matter)."""
        for rel, c in other.correct.items():
            self.correct[rel] = self.correct[rel] + c if rel in self.correct else c.copy()
            self.offsets.setdefault(rel, Counter()).update(other.offsets[rel])
        self.n.update(other.n)
        self.skipped += other.skipped
        self.causal = self.causal or other.causal
        return self

    def add_example(self, attn: np.ndarray, word_ids: np.ndarray, arcs: Arcs, causal: bool = False) -> None:
        """Score every arc of one example. attn: (L, H, n, n); word_ids: (>= n,); causal: a decoder's maps."""
        self.causal = self.causal or causal
        if arcs.size == 0:
            return
        n = attn.shape[-1]
        n_words = int(max(arcs.dependent.max(), arcs.head.max(), np.max(word_ids[:n], initial=-1))) + 1
        ids = np.asarray(word_ids[:n]).astype(np.int64)
        present = np.zeros(n_words, bool)
        present[ids[(ids >= 0) & (ids < n_words)]] = True
        ok = present[arcs.dependent] & present[arcs.head]
        self.skipped += int((~ok).sum())
        if not ok.any():
            return
        dep, head, rel = arcs.dependent[ok], arcs.head[ok], arcs.relation[ok]
        # the argmax over the present words only (the others are no candidates): same order, same ties
        blocks, words = word_blocks(attn, word_ids, n_words)
        predicted = predict_present(blocks, np.searchsorted(words, dep), causal)
        hits = (predicted >= 0) & (words[predicted] == head)  # (2, L, H, A); -1: no candidate
        labels, code = np.unique(rel, return_inverse=True)
        order = np.argsort(code, kind="stable")  # the arcs of each relation side by side
        starts = np.searchsorted(code[order], np.arange(labels.size))
        correct = np.add.reduceat(hits[..., order], starts, axis=-1, dtype=np.int64)  # (2, L, H, relations)
        offset = head - dep
        for i, r in enumerate(labels.tolist()):
            sel = order[starts[i]:starts[i + 1] if i + 1 < labels.size else order.size]
            self.correct[r] = self.correct[r] + correct[..., i] if r in self.correct else correct[..., i].copy()
            self.n[r] += int(sel.size)
            self.offsets.setdefault(r, Counter()).update(offset[sel].tolist())


def baseline(offsets: Counter, side: int = 0) -> tuple[int, float]:
    """(most common offset, its share of all arcs) of a relation's Counter of h - d; ties: smaller |offset|, then
    negative. side -1 or +1: only the offsets of that sign are candidates (a causal direction's reach); none there:
    (side, 0.0)."""
    total = sum(offsets.values())
    candidates = [o for o in offsets if side == 0 or o * side > 0]
    if not candidates:
        return side, 0.0
    best = min(candidates, key=lambda o: (-offsets[o], abs(o), o))
    return int(best), offsets[best] / total


def parser_table(counts: ParserCounts, layers: int, heads: int) -> pd.DataFrame:
    """parser.csv / syntax/{model}.csv: one row per relation, direction, layer and head (columns :data:`COLUMNS`),
    relations sorted by name. Every relation with at least one scored arc has all 2 x L x H rows."""
    frames = []
    layer, head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    for rel in sorted(counts.correct):
        n = counts.n[rel]
        for k, direction in enumerate(DIRECTIONS):
            offset, share = baseline(counts.offsets[rel], (-1, 1)[k] if counts.causal else 0)
            frames.append(pd.DataFrame({
                "relation": rel, "direction": direction, "layer": layer.ravel(), "head": head.ravel(),
                "accuracy": counts.correct[rel][k].ravel() / n, "n": n, "baseline_offset": offset,
                "baseline_accuracy": share}))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
            COLUMNS, ["object", "object", "int64", "int64", "float64", "int64", "int64", "float64"])})
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def best_heads(table: pd.DataFrame, min_n: int = 1) -> pd.DataFrame:
    """The best head of every relation and direction: relation, direction, layer, head, accuracy, n,
    baseline_offset, baseline_accuracy (rows of relations with n >= min_n), sorted by n descending."""
    t = table[table["n"] >= min_n]
    if t.empty:
        return t.copy()
    idx = t.groupby(["relation", "direction"])["accuracy"].idxmax()
    return t.loc[idx].sort_values(["n", "relation", "direction"], ascending=[False, True, True]).reset_index(drop=True)
