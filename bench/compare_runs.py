"""Compare every number two pipeline runs wrote: are they identical, bit for bit (or equal within a tolerance)?

    python bench/compare_runs.py RUN_A/results RUN_B/results
    python bench/compare_runs.py --rtol 1e-6 --atol 1e-9 RUN_A/results RUN_B/results
    python bench/compare_runs.py --moved 'attention/*/sample.parquet=data/*/sample.parquet' RUN_A/results RUN_B/results

Compares, for every file present in either directory (logs, benchmarks, MLflow, figures and the report
excepted): CSV tables (exact, NaN = NaN), JSON (exact, after dropping timing keys; a model's or store's
bertology-digest.json without the hashes of its JSON files, which hold timings and are compared themselves), parquet frames,
npz arrays, Zarr stores (every variable, exactly; attributes other than package version and timings)
and safetensors weights (bytes). Prints one line per file that differs (with the largest absolute
difference) and a summary; exit status 1 if anything differs.

Tolerance mode (--rtol and/or --atol; the one not given is 0): floating-point values a, b are equal when
|a - b| <= atol or |a - b| <= rtol max(|a|, |b|) (NaN = NaN, inf = inf of the same sign); everything else
stays exact: integers (counts), strings (labels, roles, verdicts), booleans, and float columns, keys or
variables whose name says they are a count, a rank, a label or a verdict (EXACT_NAMES: names containing
"rank" or "count", "n", "n_*", "*_n", "examples", "examples_*", "verdict*", "label*", "role*"). Weights (safetensors) are then compared tensor by tensor, as floats. A file equal within the
tolerance but not bit for bit is listed as "within tolerance" with its largest difference.

Moved files (--moved OLD=NEW, repeatable): run B's file at NEW is compared with run A's at OLD. OLD and NEW are
paths relative to the results directories, a file or a folder (then everything under it moves); a `*` path
component matches one component of any name and NEW's `*`s take OLD's matches in order
(`attention/*/words.parquet=data/*/words.parquet`, `stats/framenet=data/framenet`). The first rule that matches a
path of run A moves it; a moved pair that differs is listed under its new path with "(was OLD)".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

SKIP_DIRS = {"logs", "benchmarks", "mlartifacts", "figures", "checkpoints", "patterns"}
SKIP_SUFFIXES = {".png", ".html", ".db", ".log", ".tsv", ".md", ".lock"}
TIMING_KEYS = {"seconds", "train_seconds", "eval_seconds", "created", "package_version", "extract_seconds",
               "cpu_seconds", "examples_per_second", "elapsed"}
# float columns / keys / variables compared exactly even in tolerance mode: counts and ranks
EXACT_NAMES = re.compile(r"rank|count|^n$|^n_|_n$|^examples$|^n?examples_|^verdict|^label|^role", re.IGNORECASE)


@dataclass(frozen=True)
class Tolerance:
    """Float equality |a - b| <= atol or <= rtol max(|a|, |b|); rtol = atol = 0 is bit for bit."""

    rtol: float = 0.0
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def close(self, a, b, name: str = "") -> bool:
        """Arrays of one shape: every element equal (exact on non-floats and on EXACT_NAMES)."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        floats = a.dtype.kind in "fc" or b.dtype.kind in "fc"
        if self.exact or not floats or (name and EXACT_NAMES.search(name)):
            try:
                return bool(np.array_equal(a, b, equal_nan=floats))
            except TypeError:
                return bool(np.array_equal(a, b))
        if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
            return False
        a, b = a.astype(np.float64), b.astype(np.float64)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - b)
            near = (diff <= self.atol) | (diff <= self.rtol * np.maximum(np.abs(a), np.abs(b)))
        ok = same | (near & np.isfinite(a) & np.isfinite(b))
        return bool(ok.all())

    def json_equal(self, x, y, key: str = "") -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(self.json_equal(x[k], y[k], k) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(self.json_equal(u, v, key) for u, v in zip(x, y))
        if isinstance(x, float) or isinstance(y, float):
            if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, int | float) \
                    or not isinstance(y, int | float):
                return False
            return self.close(np.float64(x), np.float64(y), key)
        return type(x) is type(y) and x == y


EXACT = Tolerance()


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


def move_rule(spec: str) -> tuple[re.Pattern, str]:
    """`OLD=NEW` -> (a pattern matching OLD and what lies under it, NEW); a `*` is one whole path component."""
    old, sep, new = spec.partition("=")
    old, new = old.strip().strip("/"), new.strip().strip("/")
    if not sep or not old or not new:
        raise ValueError(f"--moved {spec!r}: expected OLD=NEW")
    for side in (old, new):
        if any("*" in part and part != "*" for part in side.split("/")):
            raise ValueError(f"--moved {spec!r}: a '*' stands for one whole path component")
    if old.split("/").count("*") != new.split("/").count("*"):
        raise ValueError(f"--moved {spec!r}: OLD and NEW need as many '*'")
    parts = ("([^/]+)" if part == "*" else re.escape(part) for part in old.split("/"))
    return re.compile("^" + "/".join(parts) + "(/.*)?$"), new


def moved(rel: str, rules: list[tuple[re.Pattern, str]]) -> str:
    """`rel` (a path of run A) where run B has it: the first rule that matches, else unchanged."""
    for pattern, new in rules:
        m = pattern.match(rel)
        if m:
            *stars, rest = m.groups()
            it = iter(stars)
            return "/".join(next(it) if part == "*" else part for part in new.split("/")) + (rest or "")
    return rel


def _maxdiff(a: np.ndarray, b: np.ndarray) -> str:
    try:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        both = np.isfinite(a) & np.isfinite(b)
        return f"max |diff| {np.max(np.abs(a[both] - b[both])) if both.any() else 0:.3g}"
    except (TypeError, ValueError):
        return "non-numeric difference"


#: a model's or store's digest (bertology.pipeline.outputcache): the hash of every file it holds
DIGEST = "bertology-digest.json"


def _digest_without_json(digest):
    """A digest without the hashes of its JSON files: those hold timings (training.json's seconds) and are compared
    on their own, without them; every other file's hash (weights, tokenizer) stays."""
    files = digest.get("files", {}) if isinstance(digest, dict) else {}
    return {**digest, "files": {k: v for k, v in files.items() if not k.endswith(".json") or k == "config.json"}}


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _frames(x: pd.DataFrame, y: pd.DataFrame, tol: Tolerance) -> str | None:
    if list(x.columns) != list(y.columns) or x.shape != y.shape:
        return f"shape/columns {x.shape} {list(x.columns)} vs {y.shape} {list(y.columns)}"
    if x.equals(y):
        return None
    bad = [c for c in x.columns if not x[c].equals(y[c])
           and (tol.exact or not tol.close(x[c].to_numpy(), y[c].to_numpy(), str(c)))]
    if not bad:
        return None
    return "columns " + ", ".join(f"{c} ({_maxdiff(x[c].to_numpy(), y[c].to_numpy())})" for c in bad)


def _safetensors(a: Path, b: Path, tol: Tolerance) -> str | None:
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    if x.keys() != y.keys():
        return f"tensors {sorted(x)} vs {sorted(y)}"
    bad = [k for k in x if x[k].shape != y[k].shape or not tol.close(x[k].float().numpy(), y[k].float().numpy())]
    return "tensors " + ", ".join(bad) if bad else None


def compare_file(a: Path, b: Path, tol: Tolerance = EXACT) -> str | None:
    """None when equal (bit for bit, or within `tol`), else a short description of the difference."""
    if a.suffix == ".csv":
        return _frames(pd.read_csv(a), pd.read_csv(b), tol)
    if a.suffix == ".json":
        x, y = _strip(json.loads(a.read_text())), _strip(json.loads(b.read_text()))
        if a.name == DIGEST:
            x, y = _digest_without_json(x), _digest_without_json(y)
        return None if x == y or (not tol.exact and tol.json_equal(x, y)) else "JSON differs"
    if a.suffix == ".parquet":
        x, y = pd.read_parquet(a), pd.read_parquet(b)
        if tol.exact:
            return None if x.equals(y) else "frame differs"
        return _frames(x, y, tol)
    if a.suffix == ".npz":
        x, y = np.load(a, allow_pickle=True), np.load(b, allow_pickle=True)
        if sorted(x.files) != sorted(y.files):
            return f"arrays {sorted(x.files)} vs {sorted(y.files)}"
        bad = [k for k in x.files if not tol.close(x[k], y[k], k)]
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
            if not tol.close(u, v, str(name)):
                bad.append(f"{name} ({_maxdiff(u, v)})")
        return "variables " + ", ".join(bad) if bad else None
    if a.read_bytes() == b.read_bytes():
        return None
    if a.suffix == ".safetensors" and not tol.exact:
        return _safetensors(a, b, tol)
    return "bytes differ"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--rtol", type=float, default=0.0, help="relative tolerance on floats (default 0: exact)")
    ap.add_argument("--atol", type=float, default=0.0, help="absolute tolerance on floats (default 0: exact)")
    ap.add_argument("--moved", action="append", default=[], metavar="OLD=NEW",
                    help="run A's file or folder OLD is run B's NEW ('*' = one path component); repeatable")
    args = ap.parse_args(argv)
    if args.rtol < 0 or args.atol < 0:
        ap.error("--rtol and --atol must be >= 0")
    try:
        rules = [move_rule(spec) for spec in args.moved]
    except ValueError as e:
        ap.error(str(e))
    tol = Tolerance(args.rtol, args.atol)
    ra, rb = args.run_a, args.run_b
    old = {}                                            # run A's files by the path run B has them at
    for rel in sorted(_files(ra)):
        new = moved(rel, rules)
        if new in old:
            ap.error(f"--moved: run A's {old[new]} and {rel} both move to {new}")
        old[new] = rel
    fa, fb = set(old), _files(rb)
    differ = within = 0
    for rel in sorted(fa ^ fb):
        print(f"only in {'A' if rel in fa else 'B'}: {old.get(rel, rel)}")
    for rel in sorted(fa & fb):
        a, b, was = ra / old[rel], rb / rel, f" (was {old[rel]})" if old[rel] != rel else ""
        why = compare_file(a, b, tol)
        if why:
            differ += 1
            print(f"DIFFERS {rel}{was}: {why}")
        elif not tol.exact and compare_file(a, b):
            within += 1
            print(f"within tolerance {rel}{was}")
    n_moved = sum(old[rel] != rel for rel in fa & fb)
    extra = f", {within} equal within rtol {tol.rtol:g} / atol {tol.atol:g} only" if not tol.exact else ""
    moves = f" ({n_moved} moved)" if rules else ""
    print(f"{len(fa & fb)} files compared{moves}, {differ} differ{extra}, {len(fa ^ fb)} on one side only")
    return 1 if differ or (fa ^ fb) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
