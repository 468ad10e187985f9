"""Sieve stores whose heads have known roles (used by test_sieve_pipeline and test_scale)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bertology.store.words import WORD_COLUMNS, WORD_DTYPES
from tests.builders import identity_attrs
from tests.builders import store as store_builder

CLS, SEP, PAD = 101, 102, 0
E, L, H, T = 24, 3, 4, 16
# (layer, head) of the heads built with a known role; every other head attends uniformly
CLS_HEAD, PREV_HEAD, SYN_HEAD, UNIFORM_HEAD, BLOCK_HEAD, SEP_HEAD = (0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (2, 3)


def make_examples():
    """Pair examples of 12-15 tokens with multi-wordpiece words and four dependency relations."""
    ids = np.full((E, T), PAD, dtype=np.int32)
    tt = np.zeros((E, T), dtype=np.int8)
    wid = np.full((E, T), -1, dtype=np.int16)
    length = np.zeros(E, dtype=np.int16)
    rows = []
    for e in range(E):
        a = [1, 2, 1, 1] + [1] * (e % 3)
        b = [1, 1, 2] + [1] * (e % 2)
        toks, segs, wids = [CLS], [0], [-1]
        w = 0
        for seg, sizes in ((0, a), (1, b)):
            for size in sizes:
                toks += [1000 + 10 * w + k for k in range(size)]
                segs += [seg] * size
                wids += [w] * size
                w += 1
            toks.append(SEP)
            segs.append(seg)
            wids.append(-1)
        n = len(toks)
        ids[e, :n], tt[e, :n], wid[e, :n], length[e] = toks, segs, wids, n
        k = len(a)
        deps = ["nsubj", "ROOT", "amod", "obj"] + ["det"] * (len(a) - 4) + ["advmod", "ROOT", "amod"] + \
            ["punct"] * (len(b) - 3)
        heads = [1, 1, 3, 1] + [1] * (len(a) - 4) + [k + 1, k + 1, k + 1] + [k + 1] * (len(b) - 3)
        rows += [(1000 + e, i, int(i >= k), deps[i], heads[i]) for i in range(w)]
    words = pd.DataFrame(rows, columns=["example_idx", "word", "segment", "dep", "head"])
    words["word"] = words["word"].astype(np.int16)
    words["head"] = words["head"].astype(np.int16)
    return ids, tt, wid, length, words


def make_attention(ids, wid, length, words, cls_mass):
    att = np.full((E, L, H, T, T), np.nan, dtype=np.float64)
    for e in range(E):
        n = int(length[e])
        real = np.arange(n)
        q = [t for t in real if t != 0 and ids[e, t] != SEP]
        seps = [t for t in real if ids[e, t] == SEP]
        att[e, :, :, :n, :n] = 1.0 / n
        c = att[(e, *CLS_HEAD)]
        c[:n, :n] = (1 - cls_mass) / (n - 1)
        c[:n, 0] = cls_mass
        p = att[(e, *PREV_HEAD)]
        for i, t in enumerate(q):
            p[t, :n] = 0
            p[t, q[max(i - 1, 0)]] = 1
        s = att[(e, *SYN_HEAD)]
        wex = words[words["example_idx"] == 1000 + e]
        dep_of = dict(zip(wex["word"], zip(wex["dep"], wex["head"])))
        for t in q:
            dep, head = dep_of[int(wid[e, t])]
            if dep in ("nsubj", "obj", "amod", "advmod"):
                targets = np.flatnonzero(wid[e, :n] == head)
                s[t, :n] = 0
                s[t, targets] = 1 / len(targets)
        b = att[(e, *BLOCK_HEAD)]
        seg = np.asarray([0 if t < seps[0] else 1 for t in range(n)])
        for t in q:
            same = [u for u in q if seg[u] == seg[t]]
            b[t, :n] = 0
            b[t, same] = 1 / len(same)
        sp = att[(e, *SEP_HEAD)]
        for t in q:
            sp[t, :n] = 0
            sp[t, seps] = 1 / len(seps)
    return att.astype(np.float16)


#: the config the stores are "extracted" under (what the analyses expect of them)
STORE_CONFIG = {"model": "synthetic", "data": {"seed": 1, "max_length": T}, "attention": {"examples": E}}


def write_store(path, variant, cls_mass, chunk=5):
    ids, tt, wid, length, words = make_examples()
    att = make_attention(ids, wid, length, words, cls_mass)
    ds = xr.Dataset(
        {"attention": (("example", "layer", "head", "query", "key"), att),
         "input_ids": (("example", "query"), ids), "token_type_ids": (("example", "query"), tt),
         "segment": (("example", "query"), np.where(np.arange(T) < length[:, None], tt, -1).astype(np.int8)),
         "word_ids": (("example", "query"), wid), "length": (("example",), length),
         "example_idx": (("example",), np.arange(1000, 1000 + E, dtype=np.int64))},
        coords={"layer": np.arange(L), "head": np.arange(H)},
        attrs={**identity_attrs("rte", variant, **STORE_CONFIG), "cls_token_id": CLS, "sep_token_id": SEP,
               "pad_token_id": PAD, "complete": True})
    store_builder.write_store(path, ds, chunk_size=chunk)  # through the extraction's writer
    return words


def full_words(words: pd.DataFrame) -> pd.DataFrame:
    """A words table with every column of words.parquet (those `words` lacks filled with placeholders)."""
    out = words.copy()
    fill = {"segment": 0, "text": "w", "lemma": "w", "pos": "X", "tag": "X", "dep": "dep", "is_punct": False,
            "start_char": 0, "end_char": 1}
    for col in WORD_COLUMNS:
        if col not in out:
            out[col] = fill[col]
    return out[WORD_COLUMNS].astype(WORD_DTYPES)
