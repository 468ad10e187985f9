"""Benchmark: the fixed cost of a job (its wall time minus the work it reports), and what tracking costs of it.

A job is one `bertology <step>` process, run exactly as its rule runs it (rules/steps.smk: STEP) on small,
real inputs (the demo task's data), with the invocation's parent run made beforehand in a sqlite store as the
workflow's onstart does. The step's own time is the `<step>: work X s` line bertology.workflow.cli logs; the fixed cost
is the wall time minus that (interpreter start, imports, config, tracking). In one run, interleaved:

  python -c pass        the floor: an interpreter that does nothing
  this tracked          this checkout, tracking as the workflow sets it (mlflow.live: false: the run queued)
  this untracked        this checkout, --no-mlflow
  this live             this checkout, BERTOLOGY_TRACKING_LIVE=1 (each job imports mlflow and sends its run)
  ref tracked           (--ref DIR) another checkout (e.g. a worktree of main), its own default tracking
  ref untracked         (--ref DIR) the same, --no-mlflow

Tracking's share = median(tracked) - median(untracked). A reference that does not log its work is given this
checkout's median work for the same step (the same science code). Goal: fixed cost median <= 1 s,
tracking <= 0.3 s. Snakemake's own per-job cost (spawning the shell, the benchmark file) is not included.

    .venv/bin/python bench/bench_jobcost.py --repeats 5
    git worktree add /tmp/main-ref main && .venv/bin/python bench/bench_jobcost.py --ref /tmp/main-ref

Writes bench/out/bench_jobcost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
WORK = re.compile(r": work ([0-9.]+) s")


def step_config(src: Path, sections: tuple[str, ...]) -> str:
    code = ("import json, sys, yaml; from bertology.pipeline.config import validate_config; "
            "from bertology.pipeline.configjson import sections_json; "
            f"c = yaml.safe_load(open({str(REPO / 'config.yaml')!r})); validate_config(c); "
            f"print(sections_json(c, {sections!r}))")
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(src)),
                          capture_output=True, text=True, check=True).stdout.strip()


def jobs(src: Path, d: Path) -> dict[str, list[str]]:
    """The command lines of the benchmarked steps (bertology <step> ...), inputs made by the ones before."""
    data = d / "results/data/rte/validation.parquet"
    return {
        "prepare_data": ["prepare_data", "-w", "task=rte", "-w", "split=validation",
                         "--output", f"table={data}", "--output", f"skipped={d}/results/data/rte/validation_skipped.csv",
                         "--config", step_config(src, ("data",))],
        "attention_sample": ["attention_sample", "-w", "task=rte", "--input", f"data={data}",
                             "--output", f"sample={d}/results/data/rte/sample.parquet",
                             "--config", step_config(src, ("attention.split", "attention.examples", "data.seed",
                                                           "data.short_split"))],
    }


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} failed:\n{proc.stderr[-3000:]}")
    found = WORK.findall(proc.stderr)
    return wall, (float(found[-1]) if found else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ref", type=Path, help="another checkout (e.g. a worktree of main) to time in the same run")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_jobcost_"))
    checkouts = {"this": REPO / "src"}
    if args.ref is not None:
        checkouts["ref"] = args.ref.resolve() / "src"
    variants: dict[str, tuple[str, Path, dict[str, str], list[str]]] = {}
    invocation = uuid.uuid4().hex
    for who, src in checkouts.items():
        d = tmp / who
        d.mkdir()
        env = dict(os.environ, PYTHONPATH=str(src), MLFLOW_TRACKING_URI=f"sqlite:///{d}/results/mlflow.db",
                   MLFLOW_EXPERIMENT_NAME="bench", BERTOLOGY_INVOCATION=invocation, HF_HUB_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false")
        env.pop("BERTOLOGY_TRACKING_LIVE", None)
        subprocess.run([sys.executable, "-c", "from bertology import tracking; tracking.init_store(); "
                        f"tracking.parent_run_id({invocation!r})"], cwd=d, env=env, check=True, capture_output=True)
        if who == "this":
            variants["this tracked"] = (who, d, dict(env, BERTOLOGY_TRACKING_LIVE="0"), [])
            variants["this untracked"] = (who, d, env, ["--no-mlflow"])
            variants["this live"] = (who, d, dict(env, BERTOLOGY_TRACKING_LIVE="1"), [])
        else:
            variants[f"{who} tracked"] = (who, d, env, [])
            variants[f"{who} untracked"] = (who, d, env, ["--no-mlflow"])
    exe = [sys.executable, "-m", "bertology"]
    walls: dict[str, dict[str, list[float]]] = {}
    works: dict[str, dict[str, list[float]]] = {}
    floor: list[float] = []
    try:
        for name, (who, d, env, extra) in variants.items():  # warm-up: the inputs, the disk cache
            for step, argv in jobs(checkouts[who], d).items():
                run(exe + argv + extra, d, env)
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor.append(time.perf_counter() - t0)
            for name, (who, d, env, extra) in variants.items():
                for step, argv in jobs(checkouts[who], d).items():
                    wall, work = run(exe + argv + extra, d, env)
                    walls.setdefault(name, {}).setdefault(step, []).append(wall)
                    if work is not None:
                        works.setdefault(name, {}).setdefault(step, []).append(work)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    this_work = {step: statistics.median(w) for step, w in works.get("this untracked", {}).items()}
    result: dict = {"repeats": args.repeats, "load_average": os.getloadavg(),
                    "python_c_pass_s": statistics.median(floor), "variants": {}}
    print(f"python -c pass: {statistics.median(floor):.3f} s (median of {args.repeats})")
    for name, steps in walls.items():
        rows = {}
        for step, w in steps.items():
            work = statistics.median(works[name][step]) if step in works.get(name, {}) else this_work[step]
            rows[step] = {"wall_s": statistics.median(w), "work_s": work, "fixed_s": statistics.median(w) - work}
        rows["median_fixed_s"] = statistics.median(r["fixed_s"] for r in rows.values())
        result["variants"][name] = rows
        print(f"{name:16s} " + "  ".join(f"{s}: wall {r['wall_s']:.2f} work {r['work_s']:.2f} fixed {r['fixed_s']:.2f}"
                                         for s, r in rows.items() if isinstance(r, dict))
              + f"  | median fixed {rows['median_fixed_s']:.2f} s")
    for who in checkouts:
        if f"{who} tracked" in result["variants"]:
            cost = result["variants"][f"{who} tracked"]["median_fixed_s"] - \
                result["variants"][f"{who} untracked"]["median_fixed_s"]
            result[f"{who}_tracking_s"] = cost
            print(f"{who}: tracking costs {cost:.2f} s of a job")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_jobcost.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
