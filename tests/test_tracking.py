"""MLflow helper: one parent run per invocation, a child per job recorded through its Tracker, nothing lost
under parallel jobs, and a tracking store that cannot be reached never fails (or stalls) a job."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mlflow
import pytest

from bertology import tracking


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Pending records (.bertology/pending/) go to the test's own directory."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture()
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.setenv(tracking.INVOCATION_ENV, "inv-1")
    tracking.init_store()
    tracking.parent_run_id("inv-1", params={"model": "m", "train": {"epochs": 3}})
    return uri


def test_job_run_is_child_of_invocation_parent(store, tmp_path):
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    with tracking.job_run("train_model", task="rte", variant="finetuned", params={"train": {"lr": 1e-5}}) as tracker:
        assert isinstance(tracker, tracking.Tracker) and tracker.active
        tracker.metric("loss", 0.5, step=1)
        tracker.metrics({"loss": 0.25, "acc": 0.75}, step=2)
        tracker.tags({"device": "cpu"})
        tracker.params({"extra": {"n": 3}})
        tracker.artifact(table, "tables")
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
    assert child.data.params["extra.n"] == "3" and child.data.tags["device"] == "cpu"
    loss = client.get_metric_history(child.info.run_id, "loss")
    assert [(m.step, m.value) for m in loss] == [(1, 0.5), (2, 0.25)]
    assert [(m.step, m.value) for m in client.get_metric_history(child.info.run_id, "acc")] == [(2, 0.75)]
    assert [a.path for a in client.list_artifacts(child.info.run_id, "tables")] == ["tables/table.csv"]
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
        import sys
        from bertology import tracking
        with tracking.job_run("job", task=sys.argv[1], params={"i": sys.argv[1]}) as tracker:
            for step in range(20):
                tracker.metric("m", step, step=step)
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


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_tracking_server_does_not_fail_the_job(tmp_path, monkeypatch, caplog):
    """An http:// tracking URI nobody answers: the job body runs to its end, every tracker call is a no-op
    after one bounded failure, and the whole job takes seconds (not minutes of HTTP retries)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.delenv(tracking.INVOCATION_ENV, raising=False)
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    done = []
    start = time.monotonic()
    with tracking.job_run("sieve", task="rte", variant="finetuned", params={"analysis": {"tau": 3}}) as tracker:
        tracker.params({"x": 1})
        tracker.tags({"k": "v"})
        for step in range(300):
            tracker.metric("m", step, step=step)
        tracker.artifact(table)
        tracker.flush()
        done.append(True)
    elapsed = time.monotonic() - start
    assert done == [True]
    assert not tracker.active and "127.0.0.1" in tracker.failed
    assert elapsed < 30, f"an unreachable tracking server held the job for {elapsed:.0f} s"
    assert any("MLflow tracking is unavailable" in r.getMessage() for r in caplog.records)


def test_failure_mid_job_disables_tracking_once(store, monkeypatch, caplog):
    """A call that fails during the job is one warning; later calls do not reach the server again."""
    calls = []
    with tracking.job_run("score", task="rte") as tracker:
        def broken(*args, **kwargs):
            calls.append(args)
            raise ConnectionError("server went away")

        monkeypatch.setattr(tracker.client, "log_batch", broken)
        tracker.tags({"a": 1})
        tracker.tags({"b": 2})
        tracker.metrics({"m": 1.0})
        tracker.flush()
    assert len(calls) == 1 and not tracker.active and "server went away" in tracker.failed
    assert sum("MLflow tracking failed" in r.getMessage() for r in caplog.records) == 1


def test_disabled_tracker_records_nothing_and_never_raises(tmp_path):
    with tracking.job_run("report", enabled=False) as tracker:
        tracker.params({"a": {"b": 1}})
        tracker.tags({"t": "v"})
        tracker.metrics({"m": 1.0}, step=3)
        tracker.artifact(tmp_path / "missing.png")
    assert not tracker.active


def test_end_invocation_fails_job_runs_left_running(store):
    """A job killed before it could end its run (SIGKILL): the workflow's end marks it FAILED, so no run of
    the invocation stays RUNNING; runs of other invocations are left alone."""
    client = mlflow.MlflowClient(store)
    exp = client.get_experiment_by_name("t").experiment_id
    killed = client.create_run(exp, tags={"bertology.kind": "job", tracking.INVOCATION_TAG: "inv-1"})
    other = client.create_run(exp, tags={"bertology.kind": "job", tracking.INVOCATION_TAG: "inv-2"})
    tracking.end_invocation("inv-1", "FAILED")
    assert client.get_run(killed.info.run_id).info.status == "FAILED"
    assert client.get_run(other.info.run_id).info.status == "RUNNING"
    assert client.get_run(tracking.parent_run_id("inv-1", create=False)).info.status == "FAILED"


def test_unsent_records_are_kept_and_replayed(store, tmp_path, monkeypatch):
    """The store goes away after the run is created: params, tags, metrics, artifact and end are kept in one
    pending record, and replay_pending sends them to the same run."""
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    def down(*args, **kwargs):
        raise ConnectionError("down")

    with tracking.job_run("sieve", task="rte") as tracker:
        tracker.metric("sent", 1.0)
        tracker.flush()
        with monkeypatch.context() as patch:
            patch.setattr(tracker.client, "log_batch", down)
            patch.setattr(tracker.client, "set_terminated", down)
            tracker.params({"p": {"q": 2}})
            tracker.tags({"t": "v"})
            tracker.metric("kept", 3.0, step=5)
            tracker.artifact(table, "tables")
            tracker.end("FINISHED")
            tracker.end = lambda status: None  # ended above, while the store was down
    (record,) = tracking.pending_records()
    ops = json.loads(record.read_text())["ops"]
    assert [next(iter(op)) for op in ops] == ["params", "tags", "metrics", "artifact", "end"]
    assert tracking.replay_pending() == (1, 0) and tracking.pending_records() == []
    client = mlflow.MlflowClient(store)
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and run.data.params["p.q"] == "2" and run.data.tags["t"] == "v"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "kept")] == [(5, 3.0)]
    assert run.data.metrics["sent"] == 1.0
    assert [a.path for a in client.list_artifacts(run.info.run_id, "tables")] == ["tables/t.csv"]


def test_start_fails_runs_an_interrupted_workflow_left_running(store, tmp_path):
    """Ctrl-C before the end handler: the next start in the same directory marks that workflow's runs FAILED,
    and leaves other directories' runs alone."""
    client = mlflow.MlflowClient(store)
    exp = client.get_experiment_by_name("t").experiment_id
    here = client.create_run(exp, tags={"bertology.kind": "job", tracking.INVOCATION_TAG: "inv-old",
                                        tracking.WORKDIR_TAG: str(tmp_path)})
    elsewhere = client.create_run(exp, tags={"bertology.kind": "job", tracking.INVOCATION_TAG: "inv-old",
                                             tracking.WORKDIR_TAG: "/some/other/dir"})
    tracking.start_invocation("inv-new", params={"a": 1}, required=True)
    assert client.get_run(here.info.run_id).info.status == "FAILED"
    assert client.get_run(elsewhere.info.run_id).info.status == "RUNNING"
    assert client.get_run(tracking.parent_run_id("inv-new", create=False)).info.status == "RUNNING"


def test_tracking_modules_import_one_way():
    """bertology.tracking is one job per module, each importing only the modules above it in this order (no
    cycle, no module reaching back into the package's __init__)."""
    import ast

    order = ["calls", "uri", "probe", "parent", "pending", "tracker", "invocation"]
    root = Path(tracking.__file__).parent
    assert sorted(p.stem for p in root.glob("*.py") if p.stem != "__init__") == sorted(order)
    back = []
    for i, name in enumerate(order):
        tree = ast.parse((root / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertology.tracking"):
                other = node.module.removeprefix("bertology.tracking").lstrip(".")
                if other not in order[:i]:
                    back.append(f"{name} imports bertology.tracking{'.' + other if other else ''}")
    assert not back, back


QUEUED_JOB = textwrap.dedent("""
    import sys
    from bertology import tracking
    with tracking.job_run("sieve", task="rte", params={"analysis": {"tau": 3.0}}) as tracker:
        tracker.metric("loss", 0.5, step=1)
        tracker.metrics({"loss": 0.25, "acc": 0.75}, step=2)
        tracker.tags({"device": "cpu"})
        tracker.artifact(sys.argv[1], "tables")
        tracker.on_parent().metrics({"ledger_claims": 4.0})  # what a step records on the invocation's run
        if sys.argv[2] == "kill":
            import os
            os._exit(9)  # killed before its end: nothing after this runs
    print(sorted(m for m in ("mlflow", "torch", "transformers") if m in sys.modules))
""")


@pytest.mark.parametrize("fate", ["ends", "kill"])
def test_a_queued_job_imports_no_mlflow_and_the_workflow_end_sends_its_run(store, tmp_path, fate):
    """mlflow.live: false: the job writes its run as one record (no mlflow imported); end_invocation sends it
    as a child of the parent run with its params, tags, metrics (steps), artifact, start and end times. A job
    killed before its end still gets its run, marked FAILED."""
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    env = dict(os.environ, BERTOLOGY_TRACKING_LIVE="0")
    t0 = int(time.time() * 1000)
    proc = subprocess.run([sys.executable, "-c", QUEUED_JOB, str(table), fate], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    if fate == "ends":
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "[]"  # neither mlflow nor torch/transformers in the job
    records = [json.loads(p.read_text()) for p in tracking.pending_records()]
    assert [r["kind"] for r in records] == (["job", "workflow"] if fate == "ends" else ["job"])
    assert all(r["queued"] is True for r in records)
    client = mlflow.MlflowClient(store)
    exp = client.get_experiment_by_name("t").experiment_id
    assert client.search_runs([exp], filter_string="tags.rule = 'sieve'") == []  # nothing sent by the job
    tracking.end_invocation("inv-1", "FINISHED")
    assert tracking.pending_records() == []
    (run,) = client.search_runs([exp], filter_string="tags.rule = 'sieve'")
    assert run.data.tags["mlflow.parentRunId"] == tracking.parent_run_id("inv-1", create=False)
    assert "bertology.replayed" not in run.data.tags and run.data.params["analysis.tau"] == "3.0"
    assert run.info.start_time >= t0 and run.info.start_time <= int(time.time() * 1000)
    if fate == "ends":
        parent = client.get_run(tracking.parent_run_id("inv-1", create=False))
        assert parent.data.metrics["ledger_claims"] == 4.0 and parent.info.status == "FINISHED"
        assert run.info.status == "FINISHED" and run.data.tags["device"] == "cpu"
        assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss")] == [(1, 0.5), (2, 0.25)]
        assert [a.path for a in client.list_artifacts(run.info.run_id, "tables")] == ["tables/table.csv"]
    else:
        assert run.info.status == "FAILED"


def test_what_waits_is_said_as_what_it_is(store, tmp_path, capsys):
    """A job killed with its workflow leaves its queued run (tracking never was down): the workflow's next start
    says that, apart from what an outage kept."""
    from bertology.workflow.snakefile import _pending_hint

    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    env = dict(os.environ, BERTOLOGY_TRACKING_LIVE="0")
    subprocess.run([sys.executable, "-c", QUEUED_JOB, str(table), "kill"], env=env, cwd=tmp_path, check=False)
    _pending_hint()
    assert capsys.readouterr().err == (
        "bertology: 1 MLflow record(s) wait under .bertology/pending/: 1 job run(s) queued for a workflow's end that "
        "did not send them (the workflow was cut short, or tracking was down at its end); the next run with jobs "
        "sends them, or now: bertology tracking-replay\n")
    tracking.keep_parent("inv-0", None, [{"end": "FAILED"}])  # what a workflow keeps when the store is down
    (tmp_path / ".bertology/pending/not-a-record.json").write_text("[")
    _pending_hint()
    assert ": 1 job run(s) queued for a workflow's end that did not send them (the workflow was cut short, or " \
           "tracking was down at its end), 1 kept while tracking was down, 1 unreadable; " in capsys.readouterr().err
