"""Kovaleva et al. 4.2 on FrameNet: filtered sentences, frame-element -> target links, and link scores.

A FrameNet release directory holds ``fulltext/*.xml`` (sentences with one annotation set per evoked
frame: a Target layer and an FE layer of character spans) and ``frame/*.xml`` (each frame element's
``coreType``). One *item* is one (sentence, frame annotation set). The paper's filters, in order:

1. the sentence has at most 12 tokens (FrameNet's whitespace tokens);
2. the annotation set has a target and at least one core frame element (coreType Core or
   Core-Unexpressed) with an overt span;
3. every core frame element of the set spans at most 3 tokens (the paper: "sentences with frame
   elements of 3 tokens or less");
4. links (every token of a core FE -> the target's tokens) whose FE and target are less than 2 tokens
   apart (min |i - j| < 2, i.e. adjacent or overlapping) are dropped, and the item is kept when at
   least one link is left.

:func:`filter_counts` reports how many sentences and items survive each step. Link scores of a model:
per item and head, max over the item's links and every wordpiece pair of A[FE piece, target piece]
(the direction of DESIGN section 6: source = frame element, target = frame-evoking word).
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


def item_links(item: Item, min_distance: int = MIN_LINK_DISTANCE) -> list[tuple[str, list[int], list[int]]]:
    """(FE name, FE tokens, target tokens) of the FEs at least `min_distance` tokens from the target."""
    out = []
    for name, toks in item.fes.items():
        if toks and item.target:
            dist = min(abs(i - j) for i in toks for j in item.target)
            if dist >= min_distance:
                out.append((name, toks, item.target))
    return out


def filter_items(items: list[Item], *, max_tokens: int = MAX_SENTENCE_TOKENS, max_fe_tokens: int = MAX_FE_TOKENS,
                 min_distance: int = MIN_LINK_DISTANCE) -> tuple[list[Item], dict[str, int]]:
    """The paper's filters; returns the surviving items and the counts after each step."""
    counts = {"sentences": len({i.sentence_id for i in items}), "annotation_sets": len(items)}
    steps = [
        ("short_sentences", lambda i: len(i.tokens) <= max_tokens),
        ("with_core_fe", lambda i: bool(i.target) and any(i.fes.values())),
        ("short_core_fes", lambda i: all(len(t) <= max_fe_tokens for t in i.fes.values())),
        ("links_2_apart", lambda i: bool(item_links(i, min_distance))),
    ]
    kept = items
    for name, keep in steps:
        kept = [i for i in kept if keep(i)]
        counts[f"{name}_sets"] = len(kept)
        counts[f"{name}_sentences"] = len({i.sentence_id for i in kept})
    counts["surviving_sentences"] = counts["links_2_apart_sentences"]
    counts["surviving_sets"] = counts["links_2_apart_sets"]
    return kept, counts


def links_table(items: list[Item], min_distance: int = MIN_LINK_DISTANCE) -> pd.DataFrame:
    """One row per link: item, sentence_id, doc, text, frame, fe, fe_tokens, target_tokens, distance."""
    rows = []
    for k, item in enumerate(items):
        for name, fe, tgt in item_links(item, min_distance):
            rows.append({"item": k, "sentence_id": item.sentence_id, "doc": item.doc, "text": item.text,
                         "n_tokens": len(item.tokens), "frame": item.frame, "fe": name, "fe_tokens": fe,
                         "target_tokens": tgt, "distance": min(abs(i - j) for i in fe for j in tgt)})
    return pd.DataFrame(rows, columns=["item", "sentence_id", "doc", "text", "n_tokens", "frame", "fe",
                                       "fe_tokens", "target_tokens", "distance"])


# --------------------------------------------------------------------------------------------------
# scores of a model


def link_scores(links: pd.DataFrame, tokenizer, model, *, batch_size: int = 32, max_length: int = 128) -> np.ndarray:
    """Per item and head, the max attention over its links' wordpiece pairs.

    links: links_table rows. Returns (N_items, L, H) float64 (items in order of their `item` id).
    The sentences go through the model as single segments ([CLS] tokens [SEP]) split into the
    FrameNet tokens (is_split_into_words), so every token's wordpieces are known.
    """
    import torch

    groups = [(k, g) for k, g in links.groupby("item", sort=True)]
    out: list[np.ndarray] = []
    for start in range(0, len(groups), batch_size):
        batch = groups[start:start + batch_size]
        words = [g["text"].iloc[0].split() for _, g in batch]
        enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length, padding=True,
                        return_tensors="pt")
        with torch.no_grad():
            att = model(**enc, output_attentions=True).attentions
        att = torch.stack(att, 1).float().numpy()  # (B, L, H, T, T)
        for b, (_, g) in enumerate(batch):
            word_ids = np.array([-1 if w is None else w for w in enc.word_ids(b)])
            n = int(enc["attention_mask"][b].sum())
            pairs = [(np.flatnonzero(np.isin(word_ids[:n], fe)), np.flatnonzero(np.isin(word_ids[:n], tgt)))
                     for fe, tgt in zip(g["fe_tokens"], g["target_tokens"])]
            mask = rel.span_pair_mask(n, pairs)
            out.append(rel.relation_scores(att[b, :, :, :n, :n], mask))
    return np.stack(out) if out else np.zeros((0, 0, 0))
