"""Compare every number two pipeline runs wrote: are they identical, bit for bit?

    python bench/compare_runs.py RUN_A/results RUN_B/results

Compares, for every file present in either directory (logs, benchmarks, MLflow, figures and the report
excepted): CSV tables (exact, NaN = NaN), JSON (exact, after dropping timing keys), parquet frames,
npz arrays, Zarr stores (every variable, exactly; attributes other than package version and timings)
and safetensors weights (bytes). Prints one line per file that differs (with the largest absolute
difference) and a summary; exit status 1 if anything differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SKIP_DIRS = {"logs", "benchmarks", "mlartifacts", "figures", "checkpoints", "patterns"}
SKIP_SUFFIXES = {".png", ".html", ".db", ".log", ".tsv", ".md", ".lock"}
TIMING_KEYS = {"seconds", "train_seconds", "eval_seconds", "created", "package_version", "extract_seconds",
               "cpu_seconds", "examples_per_second", "elapsed"}


def _files(root: Path) -> set[str]:
    out = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if SKIP_DIRS & set(rel.parts) or p.suffix in SKIP_SUFFIXES:
            continue
        if p.suffix == ".zarr" and p.is_dir():
            out.add(str(rel))
        elif p.is_file() and not any(part.endswith(".zarr") for part in rel.parts):
            out.add(str(rel))
    return out


def _maxdiff(a: np.ndarray, b: np.ndarray) -> str:
    try:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        both = np.isfinite(a) & np.isfinite(b)
        return f"max |diff| {np.max(np.abs(a[both] - b[both])) if both.any() else 0:.3g}"
    except (TypeError, ValueError):
        return "non-numeric difference"


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def compare_file(a: Path, b: Path) -> str | None:
    """None when equal, else a short description of the difference."""
    if a.suffix == ".csv":
        x, y = pd.read_csv(a), pd.read_csv(b)
        if list(x.columns) != list(y.columns) or x.shape != y.shape:
            return f"shape/columns {x.shape} {list(x.columns)} vs {y.shape} {list(y.columns)}"
        if x.equals(y):
            return None
        bad = [c for c in x.columns if not x[c].equals(y[c])]
        return "columns " + ", ".join(f"{c} ({_maxdiff(x[c].to_numpy(), y[c].to_numpy())})" for c in bad)
    if a.suffix == ".json":
        x, y = _strip(json.loads(a.read_text())), _strip(json.loads(b.read_text()))
        return None if x == y else "JSON differs"
    if a.suffix == ".parquet":
        x, y = pd.read_parquet(a), pd.read_parquet(b)
        return None if x.equals(y) else "frame differs"
    if a.suffix == ".npz":
        x, y = np.load(a, allow_pickle=True), np.load(b, allow_pickle=True)
        if sorted(x.files) != sorted(y.files):
            return f"arrays {sorted(x.files)} vs {sorted(y.files)}"
        bad = [k for k in x.files if not np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f")]
        return None if not bad else "arrays " + ", ".join(f"{k} ({_maxdiff(x[k], y[k])})" for k in bad)
    if a.suffix == ".zarr":
        import xarray as xr

        x, y = xr.open_zarr(a), xr.open_zarr(b)
        bad = []
        for name in sorted(set(x.variables) | set(y.variables)):
            if name not in x.variables or name not in y.variables:
                bad.append(f"{name} missing on one side")
                continue
            u, v = x[name].values, y[name].values
            if u.shape != v.shape or not np.array_equal(u, v, equal_nan=u.dtype.kind == "f"):
                bad.append(f"{name} ({_maxdiff(u, v)})")
        return "variables " + ", ".join(bad) if bad else None
    return None if a.read_bytes() == b.read_bytes() else "bytes differ"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    ra, rb = Path(argv[0]), Path(argv[1])
    fa, fb = _files(ra), _files(rb)
    differ = 0
    for rel in sorted(fa ^ fb):
        print(f"only in {'A' if rel in fa else 'B'}: {rel}")
    for rel in sorted(fa & fb):
        why = compare_file(ra / rel, rb / rel)
        if why:
            differ += 1
            print(f"DIFFERS {rel}: {why}")
    print(f"{len(fa & fb)} files compared, {differ} differ, {len(fa ^ fb)} on one side only")
    return 1 if differ or (fa ^ fb) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
