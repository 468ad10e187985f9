"""Throughput of the Kovaleva one-pass reductions against a plain read + decompress of the same store.

    .venv/bin/python bench/bench_kovaleva.py                       # builds a synthetic store (see --help)
    .venv/bin/python bench/bench_kovaleva.py --store results/attention/rte/pretrained.zarr \
        --words results/data/rte/words.parquet

Reports, for each pass, seconds, examples/s, MB/s of decompressed attention and of bytes on disk, and the
ratio to the plain read; writes bench/out/kovaleva.json and the figure bench/out/kovaleva-throughput.png.
Also reports how many sentences of ../shared/data/framenet-sample survive the paper's filters.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def synthetic_store(path: Path, *, examples: int, layers: int, heads: int, max_length: int, chunk: int, seed: int = 0):
    """A store of docs/reference.md#store with softmax maps mixing [CLS]/[SEP] stripes, diagonals and noise, and
    a words table (one word per wordpiece, POS cycling); returns (store path, words path)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, max_length + 1, size=examples).astype(np.int16)
    ids = np.zeros((examples, max_length), np.int32)
    wid = np.full((examples, max_length), -1, np.int16)
    tt = np.zeros((examples, max_length), np.int8)
    words = []
    pos_cycle = ["NOUN", "VERB", "DET", "ADJ", "PRON", "PUNCT"]
    dep_cycle = ["nsubj", "ROOT", "det", "amod", "dobj", "punct"]
    for e, n in enumerate(lengths):
        mid = int(n) // 2
        ids[e, :n] = 1000
        ids[e, 0], ids[e, mid], ids[e, n - 1] = 101, 102, 102
        tt[e, mid + 1:n] = 1
        w = 0
        for p in range(1, n - 1):
            if p != mid:
                wid[e, p] = w
                words.append({"example_idx": e, "word": w, "text": "not" if w % 17 == 5 else f"w{w}",
                              "pos": pos_cycle[w % 6], "dep": dep_cycle[w % 6], "head": max(w - 1, 0),
                              "is_punct": w % 6 == 5})
                w += 1
    from bertology import store as st

    segment = np.where(np.arange(max_length) < np.asarray(lengths)[:, None], tt, -1).astype(np.int8)
    part = st.partial_path(path)
    root = st.create_store(part, example_idx=np.arange(examples, dtype=np.int64), layers=layers, heads=heads,
                           max_length=max_length, chunk_size=chunk,
                           attrs={"model": "synthetic", "variant": "pretrained", "task": "bench", "split": "validation",
                                  "cls_token_id": 101, "sep_token_id": 102, "pad_token_id": 0,
                                  "max_length": max_length, "keepbits": None})
    for start in range(0, examples, chunk):  # through the extraction's writer, one chunk at a time
        stop = min(start + chunk, examples)
        block = np.full((stop - start, layers, heads, max_length, max_length), np.nan, np.float16)
        for i, e in enumerate(range(start, stop)):
            n = int(lengths[e])
            logits = rng.normal(size=(layers, heads, n, n)).astype(np.float32)
            logits[:, ::3, :, 0] += 4.0                     # [CLS] stripes
            idx = np.arange(n)
            logits[:, 1::3, idx[1:], idx[:-1]] += 5.0       # previous token
            a = np.exp(logits - logits.max(-1, keepdims=True))
            block[i, :, :, :n, :n] = a / a.sum(-1, keepdims=True)
        rows = slice(start, stop)
        st.write_chunk(root, start // chunk, {"attention": block, "input_ids": ids[rows], "token_type_ids": tt[rows],
                                              "segment": segment[rows], "word_ids": wid[rows],
                                              "length": lengths[rows]})
    st.finalize(root, part, path)
    words_path = path.with_name("words.parquet")
    pd.DataFrame(words).astype({"word": "int16", "head": "int16"}).to_parquet(words_path)
    return path, words_path


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _touch(block: dict) -> int:
    return int(block["attention"].shape[0])


def plain_read(store: Path, scheduler: dict) -> int:
    """Read and decompress every attention chunk (no computation beyond touching it), as the reductions read."""
    from bertology.store import map_chunks

    return sum(map_chunks(_touch, store, variables=("attention",), compute_kwargs=scheduler))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=None, help="an existing store (default: build a synthetic one)")
    ap.add_argument("--words", type=Path, default=None)
    ap.add_argument("--finetuned", type=Path, default=None, help="second store for the cosine pass")
    ap.add_argument("--examples", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/bertology-bench-kovaleva"))
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = ap.parse_args(argv)

    from bertology.kovaleva import reduce as red

    scheduler = {"scheduler": "threads", "num_workers": args.workers}
    if args.store is None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        store, words = synthetic_store(args.workdir / "pretrained.zarr", examples=args.examples, layers=args.layers,
                                       heads=args.heads, max_length=args.max_length, chunk=args.chunk)
        print(f"built {store} in {time.perf_counter() - t:.1f} s")
    else:
        store, words = args.store, args.words
    finetuned = args.finetuned or store
    import xarray as xr

    ds = xr.open_zarr(store)
    n_examples = ds.sizes["example"]
    raw_mb = ds["attention"].size * 2 / 1e6
    disk_mb = dir_bytes(store) / 1e6
    results = {"store": str(store), "examples": n_examples, "shape": list(ds["attention"].shape),
               "chunks_along_example": len(ds["attention"].data.chunks[0]), "attention_mb_decompressed": raw_mb,
               "store_mb_on_disk": disk_mb, "workers": args.workers, "passes": {}}

    def timed(name, fn, stores=1):
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        results["passes"][name] = {"seconds": best, "examples_per_s": n_examples / best,
                                   "mb_per_s_decompressed": stores * raw_mb / best,
                                   "mb_per_s_disk": stores * disk_mb / best}
        print(f"{name:<28} {best:7.2f} s  {n_examples / best:8.1f} ex/s  {stores * raw_mb / best:8.1f} MB/s")

    import pandas as pd

    words_df = pd.read_parquet(words)
    timed("read + decompress", lambda: plain_read(store, scheduler))
    timed("one-pass stats (4.1/4.2/4.4/4.5)", lambda: red.store_stats(store, words_df, compute_kwargs=scheduler, classifier="rule", negation="paper"))
    timed("cosine + feature diffs (2 stores)",
          lambda: red.store_pair(store, finetuned, words_df, compute_kwargs=scheduler, negation="paper"), stores=2)
    # peak memory of the one-pass statistics in a fresh process (bounded by chunks, not by the store)
    import subprocess

    code = ("import resource, sys; sys.path.insert(0, %r); import pandas as pd; "
            "from bertology.kovaleva import reduce as red; "
            "red.store_stats(%r, pd.read_parquet(%r), compute_kwargs={'scheduler': 'threads', 'num_workers': %d}, classifier='rule', negation='paper'); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)") % (str(REPO / "src"), str(store), str(words),
                                                                            args.workers)
    rss = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1]
    chunk_mb = raw_mb / results["chunks_along_example"]
    results["stats_peak_rss_mb"] = int(rss) / 1024
    results["chunk_mb_decompressed"] = chunk_mb
    print(f"one-pass stats peak RSS {int(rss) / 1024:.0f} MB (store {raw_mb:.0f} MB decompressed, chunk {chunk_mb:.0f} MB)")
    base = results["passes"]["read + decompress"]["seconds"]
    for p in results["passes"].values():
        p["ratio_to_read"] = p["seconds"] / base

    sample = REPO.parent / "shared" / "data" / "framenet-sample"
    if sample.is_dir():
        from bertology.kovaleva import framenet as fn
        from bertology.steps.kovaleva import read_release

        kept, counts = fn.filter_items(read_release(sample))
        counts["links"] = int(len(fn.links_table(kept)))
        results["framenet_sample"] = counts
        print("FrameNet sample:", counts)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kovaleva.json").write_text(json.dumps(results, indent=2) + "\n")
    from bertology.pipeline import plotting

    names = list(results["passes"])
    fig, axes = plotting.new_figure(11, 3.8, ncols=2)
    axes[0].barh(names, [results["passes"][k]["mb_per_s_decompressed"] for k in names], color="#4c72b0")
    axes[0].set_xlabel("MB/s of decompressed float16 attention")
    axes[0].set_title("throughput", fontsize=9)
    axes[1].barh(names, [results["passes"][k]["ratio_to_read"] for k in names], color="#dd8452")
    axes[1].axvline(1.0, color="k", lw=0.8)
    axes[1].set_xlabel("time / time of a plain read + decompress")
    axes[1].set_title("cost relative to reading the store", fontsize=9)
    axes[1].set_yticks([])
    fig.suptitle(f"Kovaleva reductions: {n_examples} examples x {ds.sizes['layer']} layers x {ds.sizes['head']} heads, "
                 f"max length {ds.sizes['query']}, {args.workers} threads")
    plotting.save_figure(fig, args.out / "kovaleva-throughput.png")
    print(f"wrote {args.out / 'kovaleva.json'} and {args.out / 'kovaleva-throughput.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
