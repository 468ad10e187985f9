"""A finished (or partly finished) run's measured job times next to bench/project_paper.py's projection of the same
config: the projector is trusted for a rule only where it lands within 2x of the measured time.

Reads every Snakemake benchmark TSV of the run (``results/benchmarks/{rule}/**.tsv`` for the shared and the run's
own rules, ``results/m/{name}/benchmarks/{rule}/**.tsv`` for model `name`'s rules, named ``{name}__{rule}`` in the
DAG: bertology.pipeline.modelset.rule_prefix), the mean of each file's ``s`` column (one row a job unless Snakemake
repeated it). The projection (project_paper.projection: the dry run of the same config, each job scaled to its
model) is matched job by job through the benchmark path the dry run prints, so a run still in progress is compared
on the jobs it has finished. Per rule (the model's prefix kept): jobs, measured seconds, projected seconds, the
ratio projected / measured, and whether it lies within 2x (0.5 to 2); beside them the work alone: the seconds
each job's log reports as its work (bertology.workflow.cli's `STEP: work X s`, the job less its interpreter's
start-up and imports) and the projection less its job_fixed a job, which tells a wrong cost model of the work
from a start-up that the load stretched. Benchmarks with no job in the DAG (a stale
file, another config) and projected jobs not measured yet are counted, not compared.

Writes bench/out/{--name}.md and .json. Every timing is what the run measured, with whatever else ran on the machine
beside it: say the load with the ratios.

    PYTHONPATH=src .venv/bin/python bench/projection_check.py --run /dev/shm/mm --name projection_check_mm
        [--configfile RUN/config.yaml] [--snakefile Snakefile] [--costs bench/out/paper_costs.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import project_paper as pp  # noqa: E402

WITHIN = 2.0


def read_benchmark(path: Path) -> float:
    """The mean of a Snakemake benchmark TSV's `s` column (seconds of wall time)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows or "s" not in rows[0]:
        raise ValueError(f"{path}: not a Snakemake benchmark (no `s` column)")
    return statistics.mean(float(r["s"]) for r in rows)


WORK = re.compile(r"bertology\.workflow\.cli: \S+: work ([0-9.]+) s")


def logged_work(log: Path) -> float | None:
    """The seconds of a job's own work as its log says them (bertology.workflow.cli: `STEP: work X s`, the step's
    time after the interpreter started and imported), or None without such a line."""
    if not log.is_file():
        return None
    found = WORK.findall(log.read_text(errors="replace"))
    return float(found[-1]) if found else None


def measured_jobs(run: Path) -> dict[str, tuple[str, str, float, float | None]]:
    """Benchmark path relative to the run's directory (as the dry run prints it) -> (rule as the DAG names it,
    model, seconds, the work its log reports or None) for every TSV under results/benchmarks/ and
    results/m/{name}/benchmarks/ (the log: the same path under logs/, .log)."""
    from bertology.pipeline.modelset import rule_prefix

    out = {}
    results = run / "results"
    for root, prefix, model in [(results / "benchmarks", "", "")] + [
            (d / "benchmarks", rule_prefix(d.name), d.name) for d in sorted((results / "m").glob("*")) if d.is_dir()]:
        for tsv in sorted(root.glob("*/**/*.tsv")):
            rule = tsv.relative_to(root).parts[0]
            log = root.parent / "logs" / tsv.relative_to(root).with_suffix(".log")
            out[tsv.relative_to(run).as_posix()] = (prefix + rule, model, read_benchmark(tsv), logged_work(log))
    return out


def compare(measured: dict[str, tuple], rows: list[dict], job_fixed: float | None = None) -> dict:
    """The table: per rule (models' prefixes kept) of the jobs both measured and projected, jobs, measured s,
    projected s, ratio projected / measured, within 2x; and, where every job's log reports its work
    (measured_jobs) and `job_fixed` (the projection's fixed cost of a job) is given, the work alone: measured
    work s, projected work s (projected less job_fixed a job), their ratio. Plus the projected jobs (with a
    benchmark) not measured and the benchmarks of no projected job."""
    by_bench = {r["benchmark"]: r for r in rows if r.get("benchmark")}
    table: dict[str, dict] = {}
    for bench, (rule, model, sec, *work) in measured.items():
        row = by_bench.get(bench)
        if row is None:
            continue
        e = table.setdefault(rule, {"rule": rule, "model": row["model"] or model or "(run)", "jobs": 0,
                                    "measured_s": 0.0, "projected_s": 0.0, "work_s": 0.0})
        e["jobs"] += 1
        e["measured_s"] += sec
        e["projected_s"] += row["seconds"]
        e["work_s"] = None if e["work_s"] is None or not work or work[0] is None else e["work_s"] + work[0]
    for e in table.values():
        e["ratio"] = e["projected_s"] / e["measured_s"] if e["measured_s"] > 0 else float("inf")
        e["within_2x"] = 1 / WITHIN <= e["ratio"] <= WITHIN
        if e["work_s"] is not None and job_fixed is not None:
            e["projected_work_s"] = e["projected_s"] - e["jobs"] * job_fixed
            e["work_ratio"] = e["projected_work_s"] / e["work_s"] if e["work_s"] > 0 else float("inf")
    ordered = sorted(table.values(), key=lambda e: (e["model"], -e["measured_s"]))
    return {"rules": ordered,
            "not_measured": sorted(r["rule"] for r in rows if r.get("benchmark")
                                   and r["benchmark"] not in measured),
            "no_job": sorted(b for b in measured if b not in by_bench),
            "total_measured_s": sum(e["measured_s"] for e in ordered),
            "total_projected_s": sum(e["projected_s"] for e in ordered)}


def markdown(res: dict, title: str, notes: list[str]) -> str:
    md = [f"# {title} (bench/projection_check.py)", "", *(f"- {n}" for n in notes), "",
          "| rule | model | jobs | measured s | projected s | projected / measured | within 2x | "
          "logged work s | projected work s | work ratio |",
          "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]

    def num(e, key, fmt):
        return format(e[key], fmt) if e.get(key) is not None else ""
    for e in res["rules"]:
        md.append(f"| {e['rule']} | {e['model']} | {e['jobs']} | {e['measured_s']:.1f} | {e['projected_s']:.1f} | "
                  f"{e['ratio']:.2f} | {'yes' if e['within_2x'] else 'no'} | {num(e, 'work_s', '.1f')} | "
                  f"{num(e, 'projected_work_s', '.1f')} | {num(e, 'work_ratio', '.2f')} |")
    tm, tp = res["total_measured_s"], res["total_projected_s"]
    md.append(f"| **total** | | {sum(e['jobs'] for e in res['rules'])} | {tm:.1f} | {tp:.1f} | "
              f"{tp / tm if tm else float('nan'):.2f} | | | | |")
    inside = sum(e["within_2x"] for e in res["rules"])
    md += ["", f"Within 2x: {inside} of {len(res['rules'])} rules. Projected jobs not measured (yet): "
           f"{len(res['not_measured'])}. Benchmarks of no job in the dry run: {len(res['no_job'])}"
           + (f" ({', '.join(res['no_job'][:5])}{', ...' if len(res['no_job']) > 5 else ''})" if res["no_job"]
              else "") + "."]
    return "\n".join(md) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="the run's directory (holding results/)")
    ap.add_argument("--configfile", help="the run's config (default RUN/config.yaml)")
    ap.add_argument("--snakefile", default=str(REPO / "Snakefile"),
                    help="the Snakefile the run used (its src/ on the PYTHONPATH of the dry run)")
    ap.add_argument("--costs", default=str(pp.OUT / "paper_costs.json"))
    ap.add_argument("--name", default="projection_check", help="bench/out/NAME.md and .json")
    args = ap.parse_args()
    run = Path(args.run)
    configfile = Path(args.configfile or run / "config.yaml")
    try:
        proj = pp.projection(configfile, [args.costs], Path(args.snakefile))
    except pp.ProjectionError as e:
        raise SystemExit(str(e)) from None
    label, meta, rows = proj["projections"][0]
    res = compare(measured_jobs(run), rows, meta["costs"]["job_fixed"])
    sizes = {name or "(shared, run)": {"layers": s.layers, "heads": s.heads, "hidden": s.hidden,
                                       "params": s.params, "max_length": s.max_length}
             for name, s in proj["models"].values()}
    notes = [f"run {run}, config {configfile}, Snakefile {args.snakefile}",
             f"costs {args.costs}: measured at BERT-base size on {meta.get('machine')}, {meta.get('date')}, load "
             f"average {meta.get('load_before')} before, {meta.get('load_after')} after",
             f"load average now {tuple(round(x, 2) for x in os.getloadavg())}: the run's jobs and the units were "
             "timed with other work on the machine",
             "models: " + "; ".join(f"{n} {v['layers']}x{v['heads']}, hidden {v['hidden']}, "
                                    f"{v['params'] / 1e6:.2f} M params outside the embeddings, {v['max_length']} tokens"
                                    for n, v in sizes.items())]
    md = markdown(res, f"{configfile}: measured next to projected", notes)
    pp.OUT.mkdir(parents=True, exist_ok=True)
    (pp.OUT / f"{args.name}.md").write_text(md)
    (pp.OUT / f"{args.name}.json").write_text(json.dumps(
        {"run": str(run), "configfile": str(configfile), "costs": args.costs, "notes": notes, "models": sizes,
         **res}, indent=2) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
