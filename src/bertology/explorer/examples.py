"""The page's examples: a sample of each task's store (those with token views first,
:func:`bertology.explorer.sampling.pick_examples`) with their wordpieces, words and dependency arcs, text and
label, quantised maps of both variants (one store read per example, never the whole store), per-example sieve
scores and token views, within a size budget.

Shapes: E examples in a store, L layers, H heads, R sieve roles, n an example's real length.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.explorer.cells import num
from bertology.pipeline import layout
from bertology.explorer.inputs import PROBE_STORES, Inputs
from bertology.explorer.maps import encode_maps, quantise
from bertology.explorer.sampling import pick_examples
from bertology.explorer.views import attach_views, preferred_groups
from bertology.store import check_block

log = logging.getLogger(__name__)

#: labels of the special tokens when there is no tokenizer: store attribute -> label
SPECIAL_LABELS = (("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"), ("pad_token_id", "[PAD]"))


def tokenizer(src: Inputs, task: str, attrs: dict):
    """A `tokenizers.Tokenizer` to turn input ids into wordpiece strings, or None (labels from words): the
    fine-tuned model's (declared), the store's model's (attribute model_path, as it is or relative to the results
    root's parent) or the embedded model's."""
    candidates = [Path(layout.variant_model(task, "finetuned", root=src.root)) / "tokenizer.json"]
    if attrs.get("model_path"):
        mp = Path(str(attrs["model_path"]))
        candidates += [mp / "tokenizer.json", src.root.parent / mp / "tokenizer.json"]
    try:
        from bertology.models.loading import EMBEDDED_MODELS, resolve_model

        if attrs.get("model") in EMBEDDED_MODELS:
            candidates.append(Path(resolve_model(str(attrs["model"]))) / "tokenizer.json")
    except Exception:  # noqa: BLE001 - the embedded model is only one candidate
        pass
    for c in candidates:
        if src.readable(c):
            from tokenizers import Tokenizer

            return Tokenizer.from_file(str(c))
    return None


def label_text(task: str, label: Any, names: Any = None) -> str:
    """A label as the page shows it: "name (id)" for a class id of a known task (names: the label names the
    prepared data records, for a declared task whose names come from its data), else the raw value."""
    try:
        from bertology.pipeline.tasks import get_task

        names = list(names) if names else get_task(task).label_names
        if names and label is not None and not pd.isna(label) and float(label).is_integer() \
                and 0 <= int(label) < len(names):
            return f"{names[int(label)]} ({int(label)})"
    except Exception:  # noqa: BLE001 - an unknown task shows the raw label
        pass
    return "" if label is None or (isinstance(label, float) and math.isnan(label)) else str(label)


def word_rows(words: pd.DataFrame | None, idx: int) -> list[list]:
    """An example's words [text, pos, dep, head] from the words table, in word order ([] without one)."""
    rows = words[words["example_idx"] == idx].sort_values("word") if words is not None else None
    if rows is None or not len(rows):
        return []
    return [[str(r.text), str(getattr(r, "pos", "")), str(r.dep), int(r.head)] for r in rows.itertuples(index=False)]


def word_labels(ids: np.ndarray, word_ids: np.ndarray, words: list[list], special: dict[int, str]) -> list[str]:
    """Wordpiece labels without a tokenizer: each piece by its word (continuations as ##), special tokens by
    `special` (id -> label). ids, word_ids: (n,); word id < 0 for a special token."""
    labels, prev = [], None
    for i, w in zip(ids, word_ids):
        if w < 0:
            labels.append(special.get(int(i), f"<{int(i)}>"))
        else:
            text = words[w][0] if w < len(words) else f"w{w}"
            labels.append(text if w != prev else "##")
        prev = w
    return labels


def sieve_scores(scores: dict[str, Any], idx: int, roles: list[str], L: int, H: int) -> dict[str, list]:
    """An example's sieve scores per variant, flat (L * H * R,) on the page's roles (None where a role is absent),
    for the variants whose score file holds the example."""
    out = {}
    for v, s in scores.items():
        have = [str(r) for r in s["role"].values]
        hit = np.nonzero(s["example_idx"].values == idx)[0]
        if len(hit):
            vals = s.values[int(hit[0])]  # (L, H, R_npz)
            out[v] = [num(vals[lay, h, have.index(r)]) if r in have else None
                      for lay in range(L) for h in range(H) for r in roles]
    return out


def sampled_examples(src: Inputs, task: str, stores: dict[str, Any], words: pd.DataFrame | None, scores: dict,
                     sieve_roles: list[str], examples: int, seed: int, budget: int,
                     views: dict[str, Any] | None = None) -> tuple[list[dict], int]:
    """(the page's examples, how many sampled examples the budget left out).

    stores: {variant: opened store}; scores: {variant: sieve scores DataArray}; views: the token views' lookups
    (:func:`bertology.explorer.views.token_views`). The sample takes the examples with token scores first, so the
    token views of the page are never of examples it left out; budget: bytes of encoded maps (the first example
    always stays)."""
    ref = next(iter(stores.values()))
    L, H = int(ref.sizes["layer"]), int(ref.sizes["head"])
    look = views or {"scores": {}, "importance": {}, "rho": {}}
    pos = pick_examples(ref["example_idx"].values, preferred_groups(look), examples, seed)
    tok = tokenizer(src, task, dict(ref.attrs))
    texts_path = src.path("data", task=task, split=str(ref.attrs.get("split", "validation")))
    texts = pd.read_parquet(texts_path).set_index("idx") if src.readable(texts_path) else None
    special = {int(ref.attrs.get(k)): name for k, name in SPECIAL_LABELS if ref.attrs.get(k) is not None}
    out: list[dict] = []
    used = 0
    dropped = 0
    for p in pos:
        p = int(p)
        n = int(ref["length"][p].values)
        ids = ref["input_ids"][p, :n].values.astype(np.int64)
        wid = ref["word_ids"][p, :n].values.astype(np.int64)
        idx = int(ref["example_idx"][p].values)
        seg = ref["segment"][p, :n].values.astype(int).tolist() if "segment" in ref else \
            ref["token_type_ids"][p, :n].values.astype(int).tolist()
        ex: dict[str, Any] = {"pos": p, "idx": idx, "n": n, "word_ids": wid.tolist(), "segment": seg,
                              "words": word_rows(words, idx), "tokenized": tok is not None}
        if tok is not None:
            ex["tokens"] = [tok.id_to_token(int(i)) or f"<{i}>" for i in ids]
        else:
            ex["tokens"] = word_labels(ids, wid, ex["words"], special)
        if texts is not None and idx in texts.index:
            row = texts.loc[idx]
            ex["text_a"] = str(row.get("text_a", ""))
            tb = row.get("text_b")
            ex["text_b"] = None if tb is None or (isinstance(tb, float) and math.isnan(tb)) else str(tb)
            ex["label"] = label_text(task, row.get("label"), texts.attrs.get("label_names"))
        ex["maps"] = {}
        for v, ds in stores.items():
            a = ds["attention"][p, :, :, :n, :n].values  # (L, H, n, n): one example, never the store
            path = src.path("store", task=task, variant=v)
            check_block(a[None], np.array([n]), ds.attrs, where=f"{path} example {p}", padding=False,
                        example_idx=np.array([idx]), store=path)
            ex["maps"][v] = encode_maps(quantise(a))
        ex["sieve"] = sieve_scores(scores, idx, sieve_roles, L, H)
        attach_views(ex, look)
        del ex["tokenized"]  # only for that check
        size = sum(len(m) for m in ex["maps"].values())
        if out and used + size > budget:
            dropped += 1
            continue
        used += size
        out.append(ex)
    if dropped:
        log.warning("explorer: %s: %d of %d sampled examples left out to keep the page under its size budget",
                    task, dropped, len(pos))
    return out, dropped


#: how many of the decoder probe's sequences the page shows beside the task's examples
PROBE_EXAMPLES = 1


def probe_examples(src: Inputs, task: str, stores: dict[str, Any]) -> list[dict]:
    """The decoder probe's first sequences (a BOS token and random tokens repeated twice) as examples of the page,
    after the task's: their tokens and the maps of each variant's probe store (attention/{task}/probe-*.zarr,
    :func:`bertology.attention.extract.write_probe_store`). stores: {page variant: opened probe store}; an empty list
    without one. idx -1, -2, ...: no example of the task."""
    if not stores:
        return []
    ref = next(iter(stores.values()))
    tok = tokenizer(src, task, dict(ref.attrs))
    special = {int(ref.attrs.get(k)): name for k, name in SPECIAL_LABELS if ref.attrs.get(k) is not None}
    out = []
    for p in range(min(PROBE_EXAMPLES, int(ref.sizes["example"]))):
        n = int(ref["length"][p].values)
        ids = ref["input_ids"][p, :n].values.astype(np.int64)
        tokens = ([tok.id_to_token(int(i)) or f"<{i}>" for i in ids] if tok is not None
                  else [special.get(int(i), f"<{int(i)}>") for i in ids])
        half = (n - 1) // 2
        ex: dict[str, Any] = {"pos": p, "idx": -1 - p, "n": n, "word_ids": [-1] * n, "segment": [0] * n, "words": [],
                              "tokens": tokens, "probe": True,
                              "text_a": f"decoder probe, sequence {p + 1}: a BOS token and {half} random tokens "
                                        f"repeated twice (an induction head attends from each token of the second "
                                        f"half to the token after its first occurrence)",
                              "maps": {}, "sieve": {}}
        for v, ds in stores.items():
            a = ds["attention"][p, :, :, :n, :n].values
            path = src.path("store", task=task, variant=PROBE_STORES[v])
            check_block(a[None], np.array([n]), ds.attrs, where=f"{path} example {p}", padding=False,
                        example_idx=np.array([p]), store=path)
            ex["maps"][v] = encode_maps(quantise(a))
        out.append(ex)
    return out
