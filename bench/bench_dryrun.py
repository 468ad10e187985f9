"""Benchmark: `snakemake -n` (and `--lint`) on the default config against a one-rule Snakefile.

In one run, interleaved round by round (each a fresh `snakemake` process; its wall time, and its CPU time, user
plus system, which other work on the machine disturbs less):
  one-rule   a Snakefile with one rule and no imports: the floor (Snakemake's own start-up and parse), in a new
             working directory each round
  fresh      this checkout's Snakefile on its default config (config.yaml) in a new working directory each round,
             the user cache warm (the model's capabilities decided by an earlier run, in another directory)
  seen       the same in one working directory that every round reuses (its .snakemake/ kept)
  first      the very first decision on a machine: a new working directory and an empty user cache
             ($BERTOLOGY_CACHE emptied every round), reported apart
  ref-fresh, ref-seen
             (--ref DIR) another checkout's Snakefile, e.g. a git worktree of main, with its own src/ on
             PYTHONPATH, in a new and in a reused working directory: the reference checkout's code in the same run

Every variant of this checkout reads a user cache of the benchmark's own ($BERTOLOGY_CACHE in a temporary folder,
filled by one warm-up run), never the user's. Python's compiled bytecode is kept as an installed package keeps it,
in a temporary folder (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset), written by the warm-up; `--as-is` keeps
the environment's own setting instead (with PYTHONDONTWRITEBYTECODE=1 every run compiles bertology's sources). Also lists the heavy modules (torch, transformers, scipy, pandas,
numpy, ...) imported while reading the Snakefile (`python -X importtime`), for each variant and for the one-rule
Snakefile (Snakemake's own).

    .venv/bin/python bench/bench_dryrun.py --repeats 5
    git worktree add /tmp/main-ref main && .venv/bin/python bench/bench_dryrun.py --ref /tmp/main-ref

Goal: fresh and seen within 1.5x one-rule for `-n`, neither importing torch or scipy. Writes
bench/out/bench_dryrun.json (bench/performance.py copies it to docs/measurements/ and renders it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
HEAVY = ("torch", "transformers", "scipy", "mlflow", "xarray", "zarr", "dask", "pandas", "numpy", "sklearn",
         "matplotlib", "spacy", "statsmodels")
ONE_RULE = """rule all:
    output: "x.txt"
    shell: "echo > {output}"
"""


def snakemake_args(snakefile: Path, mode: str) -> list[str]:
    return ["-s", str(snakefile), "--cores", "1"] + (["-n", "-q"] if mode == "dry" else ["--lint"])


def environment(src: Path | None, cache: Path, pycache: Path | None) -> dict[str, str]:
    """The environment of one run: `src` on PYTHONPATH, `cache` as the user cache, bytecode kept under `pycache`
    (None: the environment's own setting)."""
    env = dict(os.environ, BERTOLOGY_CACHE=str(cache))
    if src is not None:
        env["PYTHONPATH"] = str(src)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one `snakemake` process and the processes it waited for."""
    exe = Path(sys.executable).parent / "snakemake"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([str(exe), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 and "--lint" not in args:  # --lint exits 1 when it has advice
        sys.exit(f"snakemake {' '.join(args)} failed in {cwd}:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(args: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """The top-level packages of HEAVY that one `snakemake` run imports."""
    code = f"import sys; from snakemake.cli import main; sys.argv = ['snakemake', *{args!r}]; main()"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            top = line.rsplit("|", 1)[1].strip().split(".")[0]
            if top in HEAVY:
                found.add(top)
    return sorted(found)


def commit_of(checkout: Path | None) -> str | None:
    """The short commit of a git checkout (a worktree), None when there is none."""
    if checkout is None:
        return None
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return proc.stdout.strip() or None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ref", type=Path, help="another checkout (e.g. a worktree of main) to time in the same run")
    ap.add_argument("--modes", default="dry", help="dry, lint or dry,lint")
    ap.add_argument("--note", default="", help="what else ran on the machine meanwhile (kept in the JSON)")
    ap.add_argument("--as-is", action="store_true", help="keep the environment's bytecode setting")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_dryrun_"))
    (tmp / "one.smk").write_text(ONE_RULE)
    warm, cold = tmp / "cache-warm", tmp / "cache-cold"
    pycache = None if args.as_is else tmp / "pycache"
    this = (REPO / "Snakefile", REPO / "src")
    # name -> (snakefile, src on PYTHONPATH, user cache, working directory reused across rounds)
    variants = {"one-rule": (tmp / "one.smk", None, warm, False), "fresh": (*this, warm, False),
                "seen": (*this, warm, True), "first": (*this, cold, False)}
    if args.ref is not None:
        ref = (args.ref.resolve() / "Snakefile", args.ref.resolve() / "src")
        variants |= {"ref-fresh": (*ref, warm, False), "ref-seen": (*ref, warm, True)}
    modes = args.modes.split(",")
    times: dict[str, dict[str, list[float]]] = {m: {v: [] for v in variants} for m in modes}
    cpu: dict[str, dict[str, list[float]]] = {m: {v: [] for v in variants} for m in modes}
    count = 0

    def workdir(name: str, reused: bool) -> Path:
        nonlocal count
        count += 1
        path = tmp / (f"seen-{name}" if reused else f"new-{count}")
        path.mkdir(exist_ok=True)
        return path

    load_before = os.getloadavg()
    try:
        for name, (snakefile, src, cache, reused) in variants.items():  # warm-up: disk cache, the warm user cache
            timed(snakemake_args(snakefile, "dry"), workdir(name, reused), environment(src, cache, pycache))
        for _ in range(args.repeats):
            for mode in modes:
                for name, (snakefile, src, cache, reused) in variants.items():
                    if cache == cold:
                        shutil.rmtree(cold, ignore_errors=True)
                    wall, used = timed(snakemake_args(snakefile, mode), workdir(name, reused),
                                       environment(src, cache, pycache))
                    times[mode][name].append(wall)
                    cpu[mode][name].append(used)
        shutil.rmtree(cold, ignore_errors=True)
        heavy = {name: heavy_imports(snakemake_args(sf, "dry"), workdir(name, reused), environment(src, cache, pycache))
                 for name, (sf, src, cache, reused) in variants.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    result = {"repeats": args.repeats, "load_before": load_before, "load_after": os.getloadavg(),
              "note": args.note, "ref": str(args.ref) if args.ref else None, "ref_commit": commit_of(args.ref),
              "bytecode": ("as the environment sets it (PYTHONDONTWRITEBYTECODE="
                           f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})" if args.as_is
                           else "kept in a temporary PYTHONPYCACHEPREFIX, written by the warm-up"),
              "modes": {}, "heavy_imports": heavy,
              **provenance()}
    for mode in modes:
        med = {v: statistics.median(t) for v, t in times[mode].items()}
        med_cpu = {v: statistics.median(t) for v, t in cpu[mode].items()}
        result["modes"][mode] = {"median_s": med, "all_s": times[mode],
                                 "ratio_to_one_rule": {v: med[v] / med["one-rule"] for v in med},
                                 "cpu_median_s": med_cpu, "cpu_all_s": cpu[mode],
                                 "cpu_ratio_to_one_rule": {v: med_cpu[v] / med_cpu["one-rule"] for v in med_cpu}}
        print(f"{mode:5s} wall " + "  ".join(f"{v} {med[v]:.2f}s ({med[v] / med['one-rule']:.2f}x)" for v in med))
        print(f"{mode:5s} cpu  " + "  ".join(f"{v} {med_cpu[v]:.2f}s ({med_cpu[v] / med_cpu['one-rule']:.2f}x)"
                                             for v in med_cpu))
    print("heavy modules imported while reading the Snakefile:", heavy)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_dryrun.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
