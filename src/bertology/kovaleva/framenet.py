"""Kovaleva et al. 4.2 on FrameNet: filtered sentences, target -> frame-element links, and link scores.

A FrameNet release directory holds ``fulltext/*.xml`` (sentences with one annotation set per evoked
frame: a Target layer and an FE layer of character spans) and ``frame/*.xml`` (each frame element's
``coreType``). One *item* is one (sentence, frame annotation set): the paper's unit, "a sentence annotated
for one frame" (its sentences come from FrameNet's lexical-unit examples, one frame each; a full-text
sentence carries one annotation set per frame, each an item here). A *link* joins the frame-evoking
target to one core frame element of the item. The paper's filters, in order:

1. the sentence has at most 12 tokens (FrameNet's whitespace tokens);
2. the annotation set has a target and at least one core frame element (coreType Core or
   Core-Unexpressed) with an overt span;
3. every core frame element of the set spans at most 3 tokens (the paper: "sentences with frame
   elements of 3 tokens or less");
4. the distance filter, "we exclude sentences where the linked objects are less than two tokens apart"
   (min |i - j| < 2 over the FE's and the target's tokens: adjacent or overlapping). ``mode="sentence"``
   (``analysis.relations.framenet_filter: sentence``, the paper): an item with any such close link is
   excluded whole. ``mode="link"``: only the close links are dropped, and the item is kept while at least
   one link is left.

:func:`filter_items` counts the items and sentences that survive each step, and the links before and after
the distance filter (:data:`COUNT_KEYS`). Link scores of a model (:func:`link_scores_both`): per item and
head, max over the item's links and every wordpiece pair of A[target piece, FE piece] -- the target's
wordpieces are the queries, as in the paper's "high attention weight for 'he' while processing 'agitated'"
(docs/reference.md#relations); relations.csv ``source: framenet``. The transposed direction, A[FE piece, target piece],
is ``source: framenet_fe_target`` (:data:`DIRECTIONS`), for comparison.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bertology.kovaleva import relations as rel
from bertology.pipeline.config import ConfigError

log = logging.getLogger(__name__)

NS = {"fn": "http://framenet.icsi.berkeley.edu"}
CORE_TYPES = frozenset({"Core", "Core-Unexpressed"})
MAX_SENTENCE_TOKENS = 12
MAX_FE_TOKENS = 3
MIN_LINK_DISTANCE = 2


@dataclass
class Item:
    """One (sentence, frame) annotation: token spans of the target and of each core frame element."""

    sentence_id: str
    doc: str
    text: str
    tokens: list[str]
    frame: str
    target: list[int]
    fes: dict[str, list[int]] = field(default_factory=dict)


def tokenize(text: str) -> list[tuple[str, int, int]]:
    """FrameNet full-text sentences are whitespace-tokenised: (token, start, end inclusive)."""
    return [(m.group(), m.start(), m.end() - 1) for m in re.finditer(r"\S+", text)]


def tokens_in_span(spans: list[tuple[str, int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens overlapping the inclusive character range [start, end]."""
    return [i for i, (_, s, e) in enumerate(spans) if s <= end and e >= start]


def frame_core_types(frame: ET.Element) -> dict[str, str]:
    """FE name -> coreType of one frame (the parsed root of frame/<frame>.xml)."""
    return {fe.get("name"): fe.get("coreType", "") for fe in frame.findall("fn:FE", NS)}


def parse_fulltext(root: ET.Element, doc: str, core_types: Mapping[str, Mapping[str, str]],
                   missing: set[str] | None = None) -> list[Item]:
    """Every (sentence, frame) annotation set of one full-text document with its core FEs (no length filter).

    root: the parsed fulltext/<doc>.xml; core_types: frame -> FE name -> coreType (:func:`frame_core_types` of
    every frame/*.xml). The FEs of a frame without an entry are treated as non-core, with one warning per
    frame (frames already warned about are in `missing`).
    """
    missing = set() if missing is None else missing
    items: list[Item] = []
    for sent in root.iter(f"{{{NS['fn']}}}sentence"):
        text_el = sent.find("fn:text", NS)
        if text_el is None or not text_el.text:
            continue
        text = text_el.text
        spans = tokenize(text)
        for aset in sent.findall("fn:annotationSet", NS):
            frame = aset.get("frameName")
            if not frame:
                continue
            target: list[int] = []
            fes: dict[str, list[int]] = {}
            if frame not in core_types and frame not in missing:
                log.warning("frame file of %s is missing: its frame elements are treated as non-core", frame)
                missing.add(frame)
            core = core_types.get(frame, {})
            for layer in aset.findall("fn:layer", NS):
                name = layer.get("name")
                for label in layer.findall("fn:label", NS):
                    if label.get("start") is None or label.get("end") is None:
                        continue  # null instantiation: no overt span
                    toks = tokens_in_span(spans, int(label.get("start")), int(label.get("end")))
                    if name == "Target":
                        target.extend(toks)
                    elif name == "FE" and core.get(label.get("name")) in CORE_TYPES:
                        fes.setdefault(label.get("name"), []).extend(toks)
            items.append(Item(sent.get("ID", ""), doc, text, [t for t, _, _ in spans], frame,
                              sorted(set(target)), {k: sorted(set(v)) for k, v in fes.items()}))
    return items


def release_items(documents: Iterable[tuple[str, ET.Element]],
                  core_types: Mapping[str, Mapping[str, str]]) -> list[Item]:
    """All annotation sets of a FrameNet release: documents = (doc name, parsed fulltext root) in order."""
    missing: set[str] = set()
    return [item for doc, root in documents for item in parse_fulltext(root, doc, core_types, missing)]


def link_distance(fe: list[int], target: list[int]) -> int:
    """Token distance of a frame element and its target: min |i - j| (0 when they overlap)."""
    return min(abs(i - j) for i in fe for j in target)


def item_links(item: Item, min_distance: int = MIN_LINK_DISTANCE) -> list[tuple[str, list[int], list[int]]]:
    """(FE name, FE tokens, target tokens) of the FEs at least `min_distance` tokens from the target."""
    return [(name, toks, item.target) for name, toks in item.fes.items()
            if toks and item.target and link_distance(toks, item.target) >= min_distance]


def core_links(item: Item) -> int:
    """Links of an item before the distance filter: its core FEs with an overt span (0 without a target)."""
    return sum(1 for toks in item.fes.values() if toks) if item.target else 0


FILTER_MODES = ("sentence", "link")
FILTER_STEPS = ("short_sentences", "with_core_fe", "short_core_fes", "links_2_apart")
#: Every key of :func:`filter_items`' counts, in order: the input, then for each step of FILTER_STEPS the
#: annotation sets (items) and sentences left after it; the links before the distance filter, the close
#: links (< min_distance), the links kept; and the survivors (= the last step's).
COUNT_KEYS: tuple[str, ...] = (("sentences", "annotation_sets")
                               + tuple(f"{step}_{unit}" for step in FILTER_STEPS for unit in ("sets", "sentences"))
                               + ("core_links", "close_links", "links", "surviving_sets", "surviving_sentences"))


def filter_items(items: list[Item], *, max_tokens: int = MAX_SENTENCE_TOKENS, max_fe_tokens: int = MAX_FE_TOKENS,
                 min_distance: int = MIN_LINK_DISTANCE, mode: str = "sentence") -> tuple[list[Item], dict[str, int]]:
    """The paper's filters; returns the surviving items and the counts after each step (:data:`COUNT_KEYS`).

    mode: ``sentence`` (the paper: an item with any link closer than `min_distance` is excluded) or
    ``link`` (only the close links go; the item stays while one link is left). "sentences" counts the
    distinct FrameNet sentences among the items.
    """
    if mode not in FILTER_MODES:
        raise ConfigError(f"analysis.relations.framenet_filter is {mode!r}; use `sentence` (the paper: exclude a "
                         f"sentence with linked objects less than {min_distance} tokens apart) or `link` (drop only "
                         f"the close links)")

    def far_enough(i: Item) -> bool:
        far = len(item_links(i, min_distance))
        return far > 0 and (mode == "link" or far == core_links(i))

    counts = {"sentences": len({i.sentence_id for i in items}), "annotation_sets": len(items)}
    steps = [
        ("short_sentences", lambda i: len(i.tokens) <= max_tokens),
        ("with_core_fe", lambda i: bool(i.target) and any(i.fes.values())),
        ("short_core_fes", lambda i: all(len(t) <= max_fe_tokens for t in i.fes.values())),
        ("links_2_apart", far_enough),
    ]
    kept = items
    for name, keep in steps:
        if name == "links_2_apart":
            counts["core_links"] = sum(core_links(i) for i in kept)
            counts["close_links"] = counts["core_links"] - sum(len(item_links(i, min_distance)) for i in kept)
        kept = [i for i in kept if keep(i)]
        counts[f"{name}_sets"] = len(kept)
        counts[f"{name}_sentences"] = len({i.sentence_id for i in kept})
    counts["links"] = sum(len(item_links(i, min_distance)) for i in kept)
    counts["surviving_sentences"] = counts["links_2_apart_sentences"]
    counts["surviving_sets"] = counts["links_2_apart_sets"]
    return kept, {k: counts[k] for k in COUNT_KEYS}


def links_table(items: list[Item], min_distance: int = MIN_LINK_DISTANCE) -> pd.DataFrame:
    """One row per link: item, sentence_id, doc, text, frame, fe, fe_tokens, target_tokens, distance."""
    rows = []
    for k, item in enumerate(items):
        for name, fe, tgt in item_links(item, min_distance):
            rows.append({"item": k, "sentence_id": item.sentence_id, "doc": item.doc, "text": item.text,
                         "n_tokens": len(item.tokens), "frame": item.frame, "fe": name, "fe_tokens": fe,
                         "target_tokens": tgt, "distance": link_distance(fe, tgt)})
    return pd.DataFrame(rows, columns=["item", "sentence_id", "doc", "text", "n_tokens", "frame", "fe",
                                       "fe_tokens", "target_tokens", "distance"])


# --------------------------------------------------------------------------------------------------
# scores of a model


#: relations.csv source of each direction: A[target, FE] (the paper's, the default) and its transpose.
DIRECTIONS: dict[str, str] = {"target_fe": "framenet", "fe_target": "framenet_fe_target"}


def link_scores(links: pd.DataFrame, tokenizer, model, *, batch_size: int, max_length: int,
                direction: str = "target_fe") -> np.ndarray:
    """Per item and head, the max attention over its links' wordpiece pairs, in one `direction`.

    direction: ``target_fe`` (A[target piece, FE piece]: the target's wordpieces are the queries, the
    paper's reading and relations.csv ``framenet``) or ``fe_target`` (the transpose, ``framenet_fe_target``).
    Returns (N_items, L, H) float64; :func:`link_scores_both` gives both directions from one forward pass.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction is {direction!r}; use one of {list(DIRECTIONS)}")
    return link_scores_both(links, tokenizer, model, batch_size=batch_size, max_length=max_length)[direction]


def link_scores_both(links: pd.DataFrame, tokenizer, model, *, batch_size: int,
                     max_length: int) -> dict[str, np.ndarray]:
    """Per item and head, the max attention over its links' wordpiece pairs, in both directions.

    links: links_table rows. Returns {"target_fe": (N_items, L, H), "fe_target": (N_items, L, H)} float64
    (items in order of their `item` id): max over links and pairs of A[target piece, FE piece], and of
    A[FE piece, target piece]. The sentences go through the model as single segments ([CLS] tokens [SEP])
    split into the FrameNet tokens (is_split_into_words), so every token's wordpieces are known.
    """
    import torch

    from bertology.models.encoding import gives_token_type_ids

    groups = [(k, g) for k, g in links.groupby("item", sort=True)]
    out: dict[str, list[np.ndarray]] = {d: [] for d in DIRECTIONS}
    for start in range(0, len(groups), batch_size):
        batch = groups[start:start + batch_size]
        words = [g["text"].iloc[0].split() for _, g in batch]
        enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length, padding=True,
                        return_tensors="pt", return_token_type_ids=gives_token_type_ids(tokenizer))
        with torch.no_grad():
            att = model(**enc, output_attentions=True).attentions
        att = torch.stack(att, 1).float().numpy()  # (B, L, H, T, T)
        for b, (_, g) in enumerate(batch):
            word_ids = np.array([-1 if w is None else w for w in enc.word_ids(b)])
            n = int(enc["attention_mask"][b].sum())
            scores = item_scores(att[b, :, :, :n, :n], word_ids[:n], g["fe_tokens"], g["target_tokens"])
            for d in DIRECTIONS:
                out[d].append(scores[d])
    return {d: np.stack(v) if v else np.zeros((0, 0, 0)) for d, v in out.items()}


def item_scores(attn: np.ndarray, word_ids: np.ndarray, fe_tokens, target_tokens) -> dict[str, np.ndarray]:
    """Both directions' scores of one item from its attention.

    attn: (L, H, n, n), rows = queries; word_ids: (n,) FrameNet token of each position (-1 for specials);
    fe_tokens, target_tokens: one list of token indices per link. Returns {"target_fe": (L, H) max over
    links and pairs of A[t, f] (t a target piece, f an FE piece), "fe_target": (L, H) max of A[f, t]};
    NaN when no link has a piece on both sides (truncated).
    """
    n = attn.shape[-1]
    word_ids = np.asarray(word_ids)[:n]
    pairs = [(np.flatnonzero(np.isin(word_ids, list(tgt))), np.flatnonzero(np.isin(word_ids, list(fe))))
             for fe, tgt in zip(fe_tokens, target_tokens)]
    mask = rel.span_pair_mask(n, pairs)  # mask[target piece, FE piece]
    return {"target_fe": rel.relation_scores(attn, mask), "fe_target": rel.relation_scores(attn, mask.T)}
