"""How much a tracking outage costs a pipeline: a small DAG (one demo task: data, attention sample, spaCy
words, the pretrained attention store, its sieve: 5 jobs) run three ways against a real `mlflow server`:

- up:       the server answers throughout (the reference);
- down:     the server is frozen (SIGSTOP: connections hang, the worst case) for the whole run, with
            mlflow.required: false;
- mid-run:  the server freezes as soon as the first job's output appears.

Each run starts in a fresh directory; the figure is the wall time of `snakemake --cores 1` and its
difference to the mean of two `up` runs, the first and the last (target: at most a minute more; on a shared
machine the load moves, so compare within one run of this script). Afterwards the server is thawed and the kept records
sent (`bertology tracking-replay`), and the bench checks that no run is left RUNNING.

    PYTHONPATH=src .venv/bin/python bench/bench_tracking_outage.py [--out bench/out/tracking_outage.csv]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.builders.mlflow_server import Server  # noqa: E402

TARGET = "results/stats/rte/pretrained/sieve.csv"


def config(workdir: Path, uri: str, experiment: str) -> Path:
    cfg = {"model": "minilm-l6", "tasks": ["rte"],
           "data": {"source": "demo", "seed": 1, "max_length": 64, "demo": {"train": 20, "validation": 24}},
           "attention": {"examples": 16, "batch_size": 8, "chunk_size": 8},
           "mlflow": {"tracking_uri": uri, "experiment": experiment, "required": False}}
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run(workdir: Path, server: Server | None = None, freeze_after: str | None = None) -> float:
    """Wall seconds of one snakemake run; with freeze_after, the server freezes once that file exists."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "1", TARGET]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = threading.Event()

    def freeze() -> None:
        while not done.is_set():
            if (workdir / freeze_after).exists():
                server.stop()
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=freeze, daemon=True) if freeze_after else None
    start = time.monotonic()
    if watcher:
        watcher.start()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    seconds = time.monotonic() - start
    done.set()
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed in {workdir}:\n{proc.stderr[-4000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "tracking_outage.csv")
    args = ap.parse_args()
    import mlflow

    root = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    server = Server(root)
    rows = []
    try:
        for name, mode in (("up", None), ("down", "all"), ("mid-run", "results/data/rte/validation.parquet"),
                           ("up-again", None)):
            workdir = root / name
            workdir.mkdir()
            config(workdir, server.uri, f"bench-{name}")
            if mode == "all":
                server.stop()
            seconds = run(workdir, server, freeze_after=None if mode in (None, "all") else mode)
            server.resume()
            pending = len(list((workdir / ".bertology" / "pending").glob("*.json")))
            replay = subprocess.run([sys.executable, "-m", "bertology", "tracking-replay"], cwd=workdir,
                                    capture_output=True, text=True)
            client = mlflow.MlflowClient(server.uri)
            exp = client.get_experiment_by_name(f"bench-{name}")
            runs = client.search_runs([exp.experiment_id]) if exp else []
            statuses = sorted({r.info.status for r in runs})
            rows.append({"scenario": name, "seconds": round(seconds, 1), "pending_records": pending,
                         "replay_rc": replay.returncode, "runs": len(runs), "statuses": "/".join(statuses)})
            print(rows[-1], flush=True)
    finally:
        server.close()
    up = (rows[0]["seconds"] + rows[-1]["seconds"]) / 2  # the reference: mean of the first and the last run
    for row in rows:
        row["extra_seconds_vs_up"] = round(row["seconds"] - up, 1)
    import pandas as pd

    df = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
