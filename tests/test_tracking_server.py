"""Tracking against a REAL `mlflow server` (sqlite backend, a free localhost port), started and stopped here:
an outage mid-job or for a whole workflow never fails a job nor loses a record, an unreachable server stops
a workflow that requires it in one line, and no run stays RUNNING."""

from __future__ import annotations

import time

import mlflow
import pytest

from bertology import tracking
from bertology.workflow.cli import main
from tests.builders.mlflow_server import Server

pytestmark = pytest.mark.slow  # a real server, frozen for seconds at a time; a workflow run against it


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("mlflow-server"))
    yield srv
    srv.close()


def _runs(uri: str, experiment: str):
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client, ([] if exp is None else client.search_runs([exp.experiment_id], max_results=1000))


def test_server_stopped_mid_job_keeps_everything_and_replays(server, tmp_path, monkeypatch):
    """The server freezes in the middle of a job: the job finishes in bounded time without raising, its
    output stays, the unsent metrics, artifact and end are kept and `bertology tracking-replay` sends them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "midjob")
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-midjob")
    table = tmp_path / "table.csv"
    table.write_text("a\n1\n")
    try:
        with tracking.job_run("extract_attention", task="rte", variant="finetuned", params={"k": 1}) as tracker:
            tracker.metrics({"before": 1.0}, step=0)
            tracker.flush()
            server.stop()
            start = time.monotonic()
            for step in range(1, 4):
                tracker.metric("after", float(step), step=step)
            tracker.flush()
            tracker.artifact(table, "tables")
            tracker.metric("last", 7.0)
        elapsed = time.monotonic() - start
    finally:
        server.resume()
    assert not tracker.active
    assert elapsed < 40, f"a frozen tracking server held the job {elapsed:.0f} s"
    kept = tracking.pending_records()
    assert len(kept) == 1
    assert main(["tracking-replay"]) == 0
    assert tracking.pending_records() == []
    client, runs = _runs(server.uri, "midjob")
    (run,) = [r for r in runs if r.data.tags.get("rule") == "extract_attention"]
    assert run.info.status == "FINISHED" and run.data.params["k"] == "1"
    history = {k: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, k)]
               for k in ("before", "after", "last")}
    assert history == {"before": [(0, 1.0)], "after": [(1, 1.0), (2, 2.0), (3, 3.0)], "last": [(0, 7.0)]}
    assert [a.path for a in client.list_artifacts(run.info.run_id, "tables")] == ["tables/table.csv"]


def test_workflow_with_server_down(server, tmp_path, config_file, snakemake_run):
    """Server frozen for a whole workflow: with mlflow.required (the default) the run stops at once in one
    line naming the URI; with required: false every job runs, nothing is deleted, and the next run (server
    back) sends every kept record: all runs FINISHED, none RUNNING, nothing pending."""
    # mlflow.live: each job talks to the server itself (the path whose kept records are replayed; the default queue
    # of job runs is tested in test_tracking.py)
    config_file(tmp_path, tasks=["rte"], mlflow={"tracking_uri": server.uri, "experiment": "outage", "live": True})
    target = "results/data/rte/validation.parquet"
    server.stop()
    try:
        start = time.monotonic()
        proc = snakemake_run(tmp_path, "--cores", "1", target, check=False)
        refused_s = time.monotonic() - start
        assert proc.returncode != 0
        lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        assert lines == [f"bertology: error: the MLflow tracking server {server.uri} does not answer (ReadTimeout "
                         f"within 3 s). Start the server, fix mlflow.tracking_uri, or set mlflow.required: false "
                         f"to run without tracking (what is not sent is kept under .bertology/pending/ for "
                         f"`bertology tracking-replay`)."], proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and not (tmp_path / target).exists()
        assert refused_s < 120

        config_file(tmp_path, tasks=["rte"], mlflow={"tracking_uri": server.uri, "experiment": "outage",
                                                     "required": False, "live": True})
        snakemake_run(tmp_path, "--cores", "2", target, "results/data/rte/train.parquet")
        assert (tmp_path / target).is_file() and (tmp_path / "results/data/rte/train.parquet").is_file()
        kept = sorted(p.name for p in (tmp_path / ".bertology/pending").glob("*.json"))
        assert len(kept) == 4, kept  # the workflow's start and end, two jobs
    finally:
        server.resume()
    proc = snakemake_run(tmp_path, "-n", target)  # nothing to do: no hooks run, one line says what waits
    assert "bertology: 4 MLflow record(s) wait under .bertology/pending/: 4 kept while tracking was down;" in proc.stderr
    snakemake_run(tmp_path, "--forcerun", "prepare_data", "--cores", "1", target)  # its onstart sends them
    assert list((tmp_path / ".bertology/pending").glob("*.json")) == []
    _, runs = _runs(server.uri, "outage")
    jobs = [r for r in runs if r.data.tags.get("bertology.kind") == "job"]
    parents = [r for r in runs if r.data.tags.get("bertology.kind") == "workflow"]
    assert sorted(r.data.tags["rule"] + ":" + r.data.tags["variant"] for r in jobs) == [
        "prepare_data:train", "prepare_data:validation", "prepare_data:validation"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert len(parents) == 2  # the outage run (created on replay) and the one that sent it
    replayed = [r for r in jobs if r.data.tags.get("bertology.replayed")]
    assert len(replayed) == 2 and len({r.data.tags["mlflow.parentRunId"] for r in replayed}) == 1
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {p.info.run_id for p in parents}
    assert all(r.data.metrics["rows"] > 0 for r in jobs)
