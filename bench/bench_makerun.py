"""Benchmark: `make run` (install excluded) of this checkout against a reference checkout, then every table,
score and store compared bit for bit (bench/compare_runs.py).

Each run is the default pipeline (`snakemake --cores 2` on the embedded config.yaml, as `make run` does after
install) in a fresh clone of its checkout (`git clone`, so nothing ignored or untracked comes along), with the
shared virtualenv and each clone's own src/ on PYTHONPATH, one after the other (`--order` says which first).
Reports the wall time of each and their ratio, and how many of this checkout's jobs the job server ran
(bertology.workflow.jobserver). About 25 minutes a run on a quiet 2-core machine: run it there, once.

    .venv/bin/python bench/bench_makerun.py --ref c47b489                 # c47b489 (views on 4 to 16 examples) vs HEAD
    .venv/bin/python bench/bench_makerun.py --ref c47b489 --keep /tmp/runs  # keep both clones and their results/

Writes bench/out/bench_makerun.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import provenance

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"


def clone(ref: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", ref], check=True)
    return dest


LAUNCH = """import sys

from bertology.workflow.cli import main

if __name__ == "__main__":
    sys.exit(main())
"""


def entry_point(checkout: Path) -> None:
    """The shared virtualenv's `bertology` script runs `bertology.workflow.launch:main`; a checkout from before that module
    gets one that calls its own `bertology.workflow.cli:main`, as its script did (an untracked file; results unaffected)."""
    launch = checkout / "src" / "bertology" / "launch.py"
    if not launch.exists():
        launch.write_text(LAUNCH)


def served_jobs(checkout: Path) -> int:
    """How many jobs of the run in `checkout` the job server forked (0 without one)."""
    log = checkout / ".bertology" / "jobserver.log"
    return sum(" job " in line for line in log.read_text().splitlines()) if log.exists() else 0


def run(checkout: Path, cores: int) -> float:
    venv_bin = Path(sys.executable).parent
    entry_point(checkout)
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"), PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    proc = subprocess.run([str(venv_bin / "snakemake"), "--cores", str(cores)], cwd=checkout, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake failed in {checkout}:\n{proc.stderr[-4000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main", help="the reference commit or branch")
    ap.add_argument("--this", default="HEAD", help="the commit to measure")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--order", choices=("ref-first", "this-first"), default="ref-first")
    ap.add_argument("--keep", type=Path, help="keep the clones here")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_makerun_"))
    root.mkdir(parents=True, exist_ok=True)
    this_commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", args.this], capture_output=True, text=True,
                                 check=True).stdout.strip()
    checkouts = {"ref": clone(args.ref, root / "ref"), "this": clone(this_commit, root / "this")}
    order = ["ref", "this"] if args.order == "ref-first" else ["this", "ref"]
    walls = {}
    try:
        for name in order:
            walls[name] = run(checkouts[name], args.cores)
            print(f"{name}: {walls[name]:.0f} s", flush=True)
        cmp = subprocess.run([sys.executable, str(REPO / "bench" / "compare_runs.py"),
                              str(checkouts["ref"] / "results"), str(checkouts["this"] / "results")],
                             capture_output=True, text=True)
        print(cmp.stdout[-4000:])
        served = {name: served_jobs(checkout) for name, checkout in checkouts.items()}
        print(f"jobs run by the job server: {served}")
        result = {"ref": args.ref, "this": this_commit, "wall_s": walls, "ratio": walls["this"] / walls["ref"],
                  "served_jobs": served,
                  "identical": cmp.returncode == 0, "compare_tail": cmp.stdout[-2000:],
                  "load_average": os.getloadavg(), **provenance()}
        print(f"this / ref = {result['ratio']:.2f}; every number identical: {result['identical']}")
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "bench_makerun.json").write_text(json.dumps(result, indent=1))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
