"""MLflow helper: one parent run per invocation, a child per job, nothing lost under parallel jobs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import mlflow
import pytest

from bertology import tracking


@pytest.fixture()
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-1")
    tracking.init_store()
    tracking.parent_run_id("inv-1", params={"model": "m", "train": {"epochs": 3}})
    return uri


def test_job_run_is_child_of_invocation_parent(store):
    with tracking.job_run("train_model", task="rte", variant="finetuned", params={"train": {"lr": 1e-5}}):
        mlflow.log_metric("loss", 0.5, step=1)
        mlflow.log_metric("loss", 0.25, step=2)
    client = mlflow.MlflowClient(store)
    exp = client.get_experiment_by_name("t")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("bertology.kind") == "workflow"]
    children = [r for r in runs if r.data.tags.get("bertology.kind") == "job"]
    assert len(parents) == 1 and len(children) == 1
    child = children[0]
    assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert child.data.tags["rule"] == "train_model" and child.data.tags["task"] == "rte"
    assert child.data.params["train.lr"] == "1e-05"
    assert parents[0].data.params["train.epochs"] == "3"
    assert [m.value for m in client.get_metric_history(child.info.run_id, "loss")] == [0.5, 0.25]
    assert child.info.status == "FINISHED"


def test_failed_job_is_marked_failed(store):
    with pytest.raises(RuntimeError):
        with tracking.job_run("extract_attention", task="rte"):
            raise RuntimeError("boom")
    client = mlflow.MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id],
                              filter_string="tags.rule = 'extract_attention'")
    assert runs[0].info.status == "FAILED"


def test_parallel_jobs_lose_no_run(store, tmp_path):
    script = textwrap.dedent("""
        import sys, mlflow
        from bertology import tracking
        with tracking.job_run("job", task=sys.argv[1], params={"i": sys.argv[1]}):
            for step in range(20):
                mlflow.log_metric("m", step, step=step)
    """)
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", script, f"t{i}"], env=env) for i in range(6)]
    assert all(p.wait(timeout=180) == 0 for p in procs)
    client = mlflow.MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id],
                              filter_string="tags.rule = 'job'")
    assert sorted(r.data.tags["task"] for r in runs) == [f"t{i}" for i in range(6)]
    parent = tracking.parent_run_id("inv-1", create=False)
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent}
    assert all(len(client.get_metric_history(r.info.run_id, "m")) == 20 for r in runs)


def test_end_invocation_sets_status(store):
    tracking.end_invocation("inv-1", "FAILED")
    client = mlflow.MlflowClient(store)
    run = client.get_run(tracking.parent_run_id("inv-1", create=False))
    assert run.info.status == "FAILED"
