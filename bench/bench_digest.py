"""What the between-workflow cache's digest costs (bertology.pipeline.outputcache) on the embedded MiniLM model.

Copies the model directory to a temporary directory (default /dev/shm), records its digest once
(:func:`bertology.pipeline.outputcache.record_digest`, what the train step does after saving), then checks it
(:func:`~bertology.pipeline.outputcache.verify_digest`, what every job loading the model does) `--repeats` times from
scratch, and once more as a check already made in the same process.

    PYTHONPATH=src .venv/bin/python bench/bench_digest.py [--repeats 5] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bertology.pipeline import outputcache
from bertology.models.loading import resolve_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to copy the model (default: the system's temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        model = Path(d) / "model"
        shutil.copytree(resolve_model("minilm-l6"), model)
        size = sum(p.stat().st_size for p in model.rglob("*") if p.is_file())
        t = time.perf_counter()
        outputcache.record_digest(model)
        record = time.perf_counter() - t
        checks = []
        for _ in range(args.repeats):
            outputcache._VERIFIED.clear()  # a fresh process: nothing checked yet
            t = time.perf_counter()
            outputcache.verify_digest(model)
            checks.append(time.perf_counter() - t)
        t = time.perf_counter()
        outputcache.verify_digest(model)
        again = time.perf_counter() - t
    print(f"{size / 1e6:.1f} MB: record {record:.3f} s; check min {min(checks):.3f} s, median "
          f"{statistics.median(checks):.3f} s over {args.repeats}; a check already made {again * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
