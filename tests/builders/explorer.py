"""A small results/ directory for the explorer and report tests: real attention stores written through the
store's writer (2 layers x 3 heads, random post-softmax maps), a words table with dependency arcs, sieve.csv
and sieve_scores.npz from the real sieve code, and the per-head CSVs in their docs/reference.md#columns columns.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from tests.builders.store import write_store

L, H, Q, E = 2, 3, 16, 10
CLS, SEP, PAD = 101, 102, 0
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "home", "never", "saw", "big", "red", "ball"]


# --------------------------------------------------------------------------------------------------
# a small results/ directory


def tokenizer():
    from tokenizers import Tokenizer

    from bertology.models.loading import resolve_model

    return Tokenizer.from_file(str(Path(resolve_model("minilm-l6")) / "tokenizer.json"))


def _example(rng, tok, idx: int, pair: bool):
    """(input_ids, word_ids, token_type_ids, words rows, text_a, text_b) of one synthetic example."""
    segs = [list(rng.choice(WORDS, size=int(rng.integers(3, 6))))]
    if pair:
        segs.append(list(rng.choice(WORDS, size=int(rng.integers(2, 4)))))
    ids, wids, tts, rows = [CLS], [-1], [0], []
    w = 0
    for s_i, ws in enumerate(segs):
        first = w
        for k, word in enumerate(ws):
            pieces = [tok.token_to_id(word)]
            if k == 1:  # one word in two wordpieces ("cat" + "##s"): word_ids repeat
                pieces.append(tok.token_to_id("##s"))
            for p in pieces:
                ids.append(p)
                wids.append(w)
                tts.append(s_i)
            # a dependency tree: the first word of the segment is the root, the others hang on it or on
            # their left neighbour
            head = first if k == 0 or k % 2 == 1 else w - 1
            dep = ["ROOT", "nsubj", "amod", "dobj", "advmod"][min(k, 4)] if k else "ROOT"
            rows.append({"example_idx": idx, "word": w, "segment": s_i, "text": word, "lemma": word, "pos": "NOUN",
                         "tag": "NN", "dep": dep, "head": head, "is_punct": False, "start_char": 0, "end_char": 1})
            w += 1
        ids.append(SEP)
        wids.append(-1)
        tts.append(s_i)
    return (ids, wids, tts, rows, " ".join(segs[0]), " ".join(segs[1]) if pair else None)


def _write_store(path: Path, task: str, variant: str, examples: list, seed: int) -> None:
    rng = np.random.default_rng(seed)
    example_idx = np.array([e["idx"] for e in examples], dtype=np.int64)
    attrs = {"model": "tiny", "variant": variant, "task": task, "split": "validation", "examples": E, "seed": 1,
             "max_length": Q, "keepbits": None, "cls_token_id": CLS, "sep_token_id": SEP,
             "pad_token_id": PAD, "layers": L, "heads": H, "n_examples": len(examples)}
    n_ex = len(examples)
    att = np.full((n_ex, L, H, Q, Q), np.nan, np.float32)
    arrays = {k: np.zeros((n_ex, Q), np.int64) for k in ("input_ids", "token_type_ids")}
    arrays["word_ids"] = np.full((n_ex, Q), -1, np.int64)
    arrays["segment"] = np.full((n_ex, Q), -1, np.int64)
    arrays["length"] = np.zeros(n_ex, np.int64)
    for i, ex in enumerate(examples):
        n = len(ex["ids"])
        logits = rng.normal(0, 2.0, size=(L, H, n, n))
        logits[:, 0] += 3 * np.eye(n)  # some structure: head 0 diagonal-ish, head 1 to [CLS]
        logits[:, 1, :, 0] += 3
        a = np.exp(logits - logits.max(-1, keepdims=True))
        att[i, :, :, :n, :n] = a / a.sum(-1, keepdims=True)
        arrays["input_ids"][i, :n] = ex["ids"]
        arrays["token_type_ids"][i, :n] = ex["tts"]
        arrays["segment"][i, :n] = ex["tts"]
        arrays["word_ids"][i, :n] = ex["wids"]
        arrays["length"][i] = n
    write_store(path, dict(arrays, attention=att.astype(np.float16), example_idx=example_idx), chunk_size=4,
                attrs=attrs)


def _per_head(rng, extra: dict, *, layers=range(L)) -> pd.DataFrame:
    rows = []
    for lay in layers:
        for hd in range(H):
            for key, values in extra.items():
                for v in values:
                    rows.append({"layer": lay, "head": hd, key: v, "mean": float(rng.random()),
                                 "std": float(rng.random() / 10), "n": E})
    return pd.DataFrame(rows)


def build_results(root: Path, *, with_extras: bool = True) -> Path:
    """results/ for tasks rte (everything) and sst2 (stores and sieve only: the rest absent)."""
    from bertology.sieve.reduce import run_sieve
    from bertology.sieve.scores_io import write_scores
    from bertology.store import read_words

    results = root / "results"
    rng = np.random.default_rng(0)
    tok = tokenizer()
    for task, pair in (("rte", True), ("sst2", False)):
        exs, words, data = [], [], []
        for k in range(E):
            idx = 3 * k + 1
            ids, wids, tts, rows, ta, tb = _example(rng, tok, idx, pair)
            exs.append({"idx": idx, "ids": ids, "wids": wids, "tts": tts})
            words += rows
            data.append({"idx": idx, "text_a": ta, "text_b": tb, "label": k % 2})
        (results / "attention" / task).mkdir(parents=True)
        (results / "data" / task).mkdir(parents=True)
        pd.DataFrame(words).astype({"word": "int16", "head": "int16", "segment": "int8"}).to_parquet(
            results / "data" / task / "words.parquet")
        pd.DataFrame(data).to_parquet(results / "data" / task / "validation.parquet")
        model = results / "models" / task / "pretrained"
        model.mkdir(parents=True)
        from bertology.models.loading import resolve_model

        shutil.copy(Path(resolve_model("minilm-l6")) / "tokenizer.json", model / "tokenizer.json")
        for v_i, variant in enumerate(("pretrained", "finetuned")):
            store = results / "attention" / task / f"{variant}.zarr"
            _write_store(store, task, variant, exs, seed=10 * v_i + (task == "rte"))
            table, scores = run_sieve(store, read_words(results / "data" / task / "words.parquet"), task=task,
                                      tau=1.5, alpha=0.05, window=2, correction="none",
                                      compute_kwargs={"scheduler": "synchronous"})
            out = results / "stats" / task / variant
            out.mkdir(parents=True)
            table.to_csv(out / "sieve.csv", index=False)
            write_scores(out / "sieve_scores.npz", scores, **scores.attrs)
            if task == "rte" and with_extras:
                pats = ["block", "diagonal", "heterogeneous", "vertical", "vertical+diagonal"]
                p = _per_head(rng, {"class": pats}).rename(columns={"mean": "fraction"})[["layer", "head", "class", "fraction", "n"]]
                p.to_csv(out / "patterns.csv", index=False)
                _per_head(rng, {"feature": ["cls", "sep", "noun", "negation"]}).to_csv(out / "features.csv", index=False)
                _per_head(rng, {"feature": ["cls", "sep"]}, layers=[L - 1]).to_csv(out / "cls.csv", index=False)
                r = _per_head(rng, {"source": ["framenet", "dependency"]})
                r["flagged"] = rng.random(len(r)) > 0.8
                r.to_csv(out / "relations.csv", index=False)
        if task == "rte" and with_extras:
            cos = pd.DataFrame([{"layer": a, "head": b, "mean": float(rng.uniform(0.8, 1)), "std": 0.01, "n": E}
                                for a in range(L) for b in range(H)])
            cos.to_csv(results / "stats" / task / "cosine.csv", index=False)
            abl = []
            for a in range(L):
                for b in range(H):
                    d = float(rng.normal(0, 0.05))
                    abl.append({"layer": a, "head": b, "metric": "accuracy", "value": 0.6 + d, "baseline": 0.6,
                                "delta": d, "ci_low": d - 0.03, "ci_high": d + 0.03, "p_value": 0.5, "p_adj": 0.5,
                                "significant": abs(d) > 0.06, "test": "mcnemar_exact", "n": 40})
            (results / "ablation" / task).mkdir(parents=True)
            pd.DataFrame(abl).to_csv(results / "ablation" / task / "heads.csv", index=False)
            pd.DataFrame([{"layer": a, "head": b, "importance": float(rng.random())} for a in range(L) for b in range(H)]
                         ).to_csv(results / "ablation" / task / "importance.csv", index=False)
    # report inputs: Table 1 as Markdown and a wide CSV (the report must stay within the window)
    (results / "tables").mkdir(parents=True)
    (results / "tables" / "table1.md").write_text(
        "| Dataset | Pre-trained | Fine-tuned, initialized with normal distr. | Fine-tuned, initialized with pre-trained "
        "| Metric | Size | Eval n |\n|---|---|---|---|---|---|---|\n| RTE | 50.0 | 52.1 | 61.3 | Acc | 96 | 48 |\n\n"
        "Scores on the validation split, in percent. " + "A long note that must wrap. " * 20 + "\n")
    pd.DataFrame([{"task": "rte", "variant": "finetuned", "metric": "accuracy", "value": 0.613, "n": 48}]).to_csv(
        results / "tables" / "table1.csv", index=False)
    pd.DataFrame([{f"a_rather_long_column_name_{i}": 0.123456 * i for i in range(40)}]).to_csv(
        results / "stats" / "sieve_summary.csv", index=False)
    return results


# hostile strings (tests/test_untrusted.py): the explorer and the report must show them as text

HOSTILE = [
    "<!--<script> the row that blanked the explorer",
    "<!--",
    "<script>document.body.dataset.pwned = 'script'</script>",
    "</script><script>document.body.dataset.pwned = 'end'</script>",
    "</SCRIPT ><img src=x onerror=\"document.body.dataset.pwned='img'\">",
    "]]> <![CDATA[ x ]]>",
    "line\u2028separator and paragraph\u2029separator",
    "&amp; &lt;b&gt; & &#x3c; {{DATA}} {{JS}} ${x} `tick` \"quote\" 'apostrophe' \\u003c",
    "x" * 3000,  # a very long token
    "<style>body{display:none}</style> -->",
]


def _prepared_hostile_rows(root: Path, typed_config):
    """The hostile corpus through data preparation: a GLUE RTE dev.tsv -> the data rule's frame."""
    from bertology.data import load_split

    path = root / "RTE" / "dev.tsv"
    path.parent.mkdir(parents=True)
    rows = ["index\tsentence1\tsentence2\tlabel"]
    rows += [f"{i}\t{HOSTILE[i % len(HOSTILE)]}\t{HOSTILE[(i + 3) % len(HOSTILE)]}\tentailment" for i in range(10)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    df = load_split("rte", "validation", typed_config({"data": {"source": str(root)}}).data)
    assert df["text_a"].tolist() == [HOSTILE[i % len(HOSTILE)] for i in range(10)]  # every string intact
    return df


def build_hostile_results(root: Path) -> Path:
    """build_results' results/ (real stores) with the hostile corpus as the RTE texts, words and token labels."""
    import pandas as pd

    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_from_json

    typed = lambda o: sections_from_json(json.dumps(validate_config(dict(o))))  # noqa: E731
    prepared = _prepared_hostile_rows(root / "glue", typed)
    results = build_results(root / "run")
    data_path = results / "data" / "rte" / "validation.parquet"
    data = pd.read_parquet(data_path)
    data["text_a"] = prepared["text_a"].to_numpy()[: len(data)]
    data["text_b"] = prepared["text_b"].to_numpy()[: len(data)]
    data.to_parquet(data_path)
    words_path = results / "data" / "rte" / "words.parquet"
    words = pd.read_parquet(words_path)
    words["text"] = [HOSTILE[i % len(HOSTILE)] for i in range(len(words))]
    words.to_parquet(words_path)
    (results / "models" / "rte" / "pretrained" / "tokenizer.json").unlink()  # token labels from the words
    return results
