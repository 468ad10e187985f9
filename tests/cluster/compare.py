"""Checks of tests/cluster/run.sh: cluster outputs equal the local ones; the runs are in MLflow.

  python compare.py outputs LOCAL_DIR CLUSTER_DIR
      every results/stats/**.csv, results/ablation/**.csv, results/scores/**.json and
      results/tables/table1.csv of the two workflow directories are equal (bench/compare_runs.py: exact,
      NaN = NaN; JSON without wall-clock fields)
  python compare.py mlflow --local LOCAL_DIR --uri URI --experiment NAME [--invocations N] [--dask ADDRESS]
      the tracking server holds N workflow runs, all FINISHED, each with one FINISHED child run per job: the
      same jobs (rule:task:variant) as the local run's sqlite store, and the same Table 1 metrics
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from compare_runs import TIMING_KEYS, compare_file  # noqa: E402  (exact: CSV NaN = NaN, JSON without timings)

PATTERNS = ["results/stats/**/*.csv", "results/ablation/**/*.csv", "results/scores/**/*.json",
            "results/tables/table1.csv"]


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for pattern in PATTERNS for p in root.glob(pattern)}


def compare_outputs(local: Path, cluster: Path) -> int:
    a, b = _files(local), _files(cluster)
    problems = [f"only in the local run: {x}" for x in sorted(a - b)]
    problems += [f"only in the cluster run: {x}" for x in sorted(b - a)]
    same = 0
    for rel in sorted(a & b):
        why = compare_file(local / rel, cluster / rel)
        if why:
            problems.append(f"{rel}: {why}")
        else:
            same += 1
    print(f"outputs: {same} of {len(a | b)} files identical "
          f"({sum(r.endswith('.csv') for r in a)} CSV, {sum(r.endswith('.json') for r in a)} JSON; "
          f"JSON compared without the wall-clock fields {sorted(TIMING_KEYS)})")
    for p in problems:
        print(f"  DIFFERENT {p}")
    return 1 if problems or not same else 0


def _runs(client, experiment: str):
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], max_results=5000)


def _jobs(runs) -> dict[str, list]:
    """Workflow run id -> its child runs."""
    children: dict[str, list] = {}
    for run in runs:
        parent = run.data.tags.get("mlflow.parentRunId")
        if run.data.tags.get("bertology.kind") == "job" and parent:
            children.setdefault(parent, []).append(run)
    return children


def compare_mlflow(local: Path, uri: str, experiment: str, invocations: int, dask: str | None) -> int:
    import mlflow

    problems = []
    ref_client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{local / 'results' / 'mlflow.db'}")
    ref_runs = _runs(ref_client, "bertology")
    ref_jobs = sorted(r.info.run_name for r in ref_runs if r.data.tags.get("bertology.kind") == "job")
    ref_table = next((r.data.metrics for r in ref_runs if r.data.tags.get("rule") == "table1"), {})

    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = _runs(client, experiment)
    workflows = sorted((r for r in runs if r.data.tags.get("bertology.kind") == "workflow"),
                       key=lambda r: r.info.start_time)
    children = _jobs(runs)
    if len(workflows) != invocations:
        problems.append(f"{len(workflows)} workflow runs in {uri}, expected {invocations}")
    for i, wf in enumerate(workflows):
        kids = children.get(wf.info.run_id, [])
        names = sorted(r.info.run_name for r in kids)
        unfinished = [r.info.run_name for r in kids if r.info.status != "FINISHED"]
        print(f"mlflow: workflow run {wf.info.run_name!r} {wf.info.status}, {len(kids)} job runs "
              f"({len(set(r.data.tags.get('rule') for r in kids))} rules)")
        if wf.info.status != "FINISHED":
            problems.append(f"workflow run {wf.info.run_id} is {wf.info.status}")
        if unfinished:
            problems.append(f"job runs not FINISHED: {unfinished}")
        if i == 0:
            if names != ref_jobs:
                problems.append(f"job runs differ from the local run's: missing {sorted(set(ref_jobs) - set(names))}, "
                                f"extra {sorted(set(names) - set(ref_jobs))}")
            table = next((r.data.metrics for r in kids if r.data.tags.get("rule") == "table1"), {})
            if not table or table != ref_table:
                problems.append(f"Table 1 metrics differ: local {ref_table}, cluster {table}")
            else:
                print(f"mlflow: {len(ref_jobs)} job runs as in the local run; Table 1 metrics identical "
                      f"({len(table)} values)")
        if dask and i == len(workflows) - 1 and i > 0:
            used = sorted(r.info.run_name for r in kids
                          if r.data.params.get("dask.scheduler") == dask or
                          r.data.params.get("analysis.dask.scheduler") == dask)
            print(f"mlflow: {len(used)} job runs of the last workflow ran their reductions on {dask}: {used}")
            if not used:
                problems.append(f"no job run of the last workflow records dask.scheduler={dask}")
    for p in problems:
        print(f"  PROBLEM {p}")
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    out = sub.add_parser("outputs")
    out.add_argument("local", type=Path)
    out.add_argument("cluster", type=Path)
    ml = sub.add_parser("mlflow")
    ml.add_argument("--local", type=Path, required=True)
    ml.add_argument("--uri", required=True)
    ml.add_argument("--experiment", required=True)
    ml.add_argument("--invocations", type=int, default=1)
    ml.add_argument("--dask")
    args = parser.parse_args(argv)
    if args.cmd == "outputs":
        return compare_outputs(args.local, args.cluster)
    return compare_mlflow(args.local, args.uri, args.experiment, args.invocations, args.dask)


if __name__ == "__main__":
    sys.exit(main())
