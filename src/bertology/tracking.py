"""MLflow helpers: one sqlite store, one parent run per workflow invocation, one child run per job.

The Snakefile sets ``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME`` and ``BERTOLOGY_INVOCATION`` (a
fresh id per ``snakemake`` call) in the environment, and its ``onstart`` handler checks the tracking store
answers, creates the database and the parent run once, before any job runs (a fresh sqlite store races on
schema creation). Each job opens its child run with :func:`job_run`.

Tracking never costs science: every call is bounded (seconds: :func:`bound_http_timeouts`), a failure is
one warning in the job's log and never fails the job, and whatever could not be sent (the run itself, its
params, tags, metrics, artifacts and final status) is kept as one JSON record under ``.bertology/pending/``
of the working directory, replayed by the next workflow run or by ``bertology tracking-replay``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bertology.config import schema_default
from bertology.io import write_json

log = logging.getLogger(__name__)

INVOCATION_ENV = "BERTOLOGY_INVOCATION"
INVOCATION_TAG = "bertology.invocation"
WORKDIR_TAG = "bertology.workdir"  # the Snakemake working directory of a run
PENDING_DIR = Path(".bertology") / "pending"  # relative to the working directory (snakemake --directory)
PROBE_TIMEOUT_S = 3.0  # how long a job waits for a tracking server before it keeps its record for later


class TrackingUnreachable(Exception):
    """The tracking store does not answer (raised only by :func:`check_reachable`)."""


class _CaughtDatabaseErrors(logging.Filter):
    """Drops MLflow's own log record of a database error it re-raises ("SQLAlchemy database error. The following
    exception is caught.", with a 30-line SQLAlchemy traceback, once per try): bertology catches that error
    itself and says it in one line (:func:`reason`), keeping what could not be sent."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


logging.getLogger("mlflow.store.db.utils").addFilter(_CaughtDatabaseErrors())


def reason(err: BaseException, limit: int = 300) -> str:
    """An exception as one short line: its type and the first lines of its message, without SQLAlchemy's
    [SQL: ...] / [parameters: ...] / (Background ...) / autoflush lines (a locked sqlite store says
    "OperationalError: (sqlite3.OperationalError) database is locked")."""
    skip = ("[SQL", "[parameters", "(Background on this error", "(raised as a result of Query-invoked autoflush")
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and not line.strip().startswith(skip)]
    text = " ".join(" ".join(lines).split())
    return f"{type(err).__name__}: {text[:limit]}" if text else type(err).__name__


def _uri(uri: str | None = None) -> str:
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or schema_default("mlflow.tracking_uri")


def _experiment_name(name: str | None = None) -> str:
    return name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or schema_default("mlflow.experiment")


def artifact_root(uri: str) -> str | None:
    """results/mlartifacts beside a sqlite database (as a file URI); None for other backends."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return (db.resolve().parent / "mlartifacts").as_uri()
    return None


def _retry(fn, *args, tries: int = 8, **kwargs):
    """Run an MLflow call, retrying on sqlite lock contention between parallel jobs."""
    for attempt in range(tries):
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - MLflow wraps sqlite errors in several types
            if attempt == tries - 1 or "locked" not in str(err).lower():
                raise
            time.sleep(0.2 * 2 ** attempt)
    return None


def init_store(uri: str | None = None, experiment: str | None = None) -> str:
    """Create the tracking database and the experiment once; return the experiment id. Idempotent."""
    import mlflow

    uri, experiment = _uri(uri), _experiment_name(experiment)
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = _retry(client.get_experiment_by_name, experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return _retry(client.create_experiment, experiment, artifact_location=artifact_root(uri))
    except Exception:  # created meanwhile by another process
        return client.get_experiment_by_name(experiment).experiment_id


def parent_run_id(invocation: str, uri: str | None = None, experiment: str | None = None,
                  *, create: bool = True, params: Mapping[str, Any] | None = None) -> str | None:
    """The id of the parent run of one workflow invocation (created if missing and `create`)."""
    import mlflow

    uri = _uri(uri)
    exp_id = init_store(uri, experiment)
    client = mlflow.MlflowClient(tracking_uri=uri)
    found = _retry(client.search_runs, [exp_id], filter_string=(f"tags.`{INVOCATION_TAG}` = '{invocation}' "
                                                    f"and tags.`bertology.kind` = 'workflow'"),
                   max_results=1)
    if found:
        return found[0].info.run_id
    if not create:
        return None
    run = _retry(client.create_run, exp_id, run_name=f"workflow {time.strftime('%Y-%m-%d %H:%M:%S')}",
                 tags={INVOCATION_TAG: invocation, "bertology.kind": "workflow",
                       WORKDIR_TAG: str(Path.cwd())})
    if params:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):  # one request per 100 params
            _retry(client.log_batch, run.info.run_id, params=items[i:i + 100])
    return run.info.run_id


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}: nested config as MLflow params."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class Tracker:
    """The one interface a step uses to record to MLflow: params, metrics (with steps), tags, artifacts.

    Never raises: a tracking failure is a warning in the job's log, and the tracker stops calling the
    server for the rest of the job (so an outage costs one bounded timeout, not one per call). Metrics
    are sent in batches (one transaction per ``batch`` values, and on :meth:`flush`), so a training loop
    can log every step while it runs.

    With a `record` (a :class:`PendingRecord`), everything that could not be sent from the failure on is
    kept in it and written under ``.bertology/pending/`` when the run ends, for :func:`replay_pending`.
    """

    def __init__(self, client=None, run_id: str | None = None, *, batch: int = 100,
                 record: "PendingRecord | None" = None):
        self.client, self.run_id, self.batch, self.record = client, run_id, batch, record
        self._pending: list = []
        self.failed: str | None = None if client is not None else "tracking disabled"

    @property
    def active(self) -> bool:
        return self.failed is None

    @property
    def _off(self) -> bool:
        """Neither sending nor keeping (tracking disabled)."""
        return self.failed is not None and self.record is None

    def _keep(self, op: dict[str, Any]) -> None:
        if self.record is not None:
            self.record.ops.append(op)

    def _call(self, what: str, op: dict[str, Any], fn, *args, **kwargs) -> None:
        if not self.active:
            self._keep(op)
            return
        try:
            _retry(fn, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 - tracking must never fail a job
            self.failed = f"{what}: {reason(err)}"
            self._keep(op)
            kept = (f"what was not sent is kept under {PENDING_DIR}/ and sent by the next workflow run or "
                    f"`bertology tracking-replay`" if self.record is not None else "nothing more is recorded")
            log.warning("MLflow tracking failed (%s); the job goes on without tracking, its results on disk are "
                        "complete; %s.", self.failed, kept)

    def params(self, params: Mapping[str, Any]) -> None:
        """Nested params, flattened to dotted keys ({'a': {'b': 1}} -> a.b = 1)."""
        if self._off:
            return
        from mlflow.entities import Param

        flat = {k: str(v)[:6000] for k, v in flatten(params).items()}
        items = list(flat.items())
        for i in range(0, len(items), 100):
            chunk = dict(items[i:i + 100])
            self._call("log params", {"params": chunk}, lambda c=chunk: self.client.log_batch(
                self.run_id, params=[Param(k, v) for k, v in c.items()]))

    def tags(self, tags: Mapping[str, Any]) -> None:
        if self._off:
            return
        from mlflow.entities import RunTag

        chunk = {k: str(v) for k, v in tags.items()}
        self._call("set tags", {"tags": chunk},
                   lambda: self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in chunk.items()]))

    def metric(self, key: str, value: float, step: int | None = None) -> None:
        self.metrics({key: value}, step=step)

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Queue metrics (at `step`, default 0); sent when `batch` are queued and on flush()."""
        if self._off:
            return
        now = int(time.time() * 1000)
        self._pending.extend((k, float(v), now, int(step or 0)) for k, v in values.items())
        if len(self._pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self._off or not self._pending:
            return
        from mlflow.entities import Metric

        pending, self._pending = self._pending, []
        for i in range(0, len(pending), 1000):
            chunk = pending[i:i + 1000]
            self._call("log metrics", {"metrics": chunk},
                       lambda c=chunk: self.client.log_batch(self.run_id, metrics=[Metric(*m) for m in c]))

    def artifact(self, path: str | Path, folder: str | None = None) -> None:
        """Copy a file (a figure, a table) into the run's artifacts (under `folder`)."""
        if self._off:
            return
        self.flush()
        path = str(Path(path).resolve())
        self._call(f"log artifact {path}", {"artifact": path, "folder": folder},
                   lambda: self.client.log_artifact(self.run_id, path, folder))

    def end(self, status: str) -> None:
        if self._off:
            return
        self.flush()
        self._call("end run", {"end": status}, lambda: self.client.set_terminated(self.run_id, status))
        if self.record is not None and self.record.ops:
            path = self.record.save()
            log.warning("MLflow: %d record(s) of run %s could not be sent; kept in %s (sent by the next workflow "
                        "run or `bertology tracking-replay`)", len(self.record.ops), self.record.run_name, path)


class PendingRecord:
    """What one run could not send: enough to create the run later (uri, experiment, name, tags, the
    invocation's parent) and the operations in their order (params, tags, metrics, artifacts, end)."""

    def __init__(self, *, uri: str, experiment: str, run_name: str, tags: Mapping[str, str],
                 run_id: str | None = None, invocation: str | None = None, kind: str = "job",
                 params: Mapping[str, Any] | None = None):
        self.uri, self.experiment, self.run_name = uri, experiment, run_name
        self.tags, self.run_id, self.invocation, self.kind = dict(tags), run_id, invocation, kind
        self.params = dict(params or {})  # the workflow run's params, sent when it is created
        self.ops: list[dict[str, Any]] = []

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "experiment": self.experiment, "run_name": self.run_name, "tags": self.tags,
                "run_id": self.run_id, "invocation": self.invocation, "kind": self.kind, "params": self.params,
                "ops": self.ops}

    def save(self, directory: str | Path | None = None) -> Path:
        """Write the record atomically as ``<directory>/<time>-<name>-<random>.json``."""
        directory = Path(directory or PENDING_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.run_name)[:80]
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}.{time.time_ns() % 10**9:09d}"  # sorts in the order written
        path = directory / f"{stamp}-{safe}-{uuid.uuid4().hex[:8]}.json"
        return write_json(self.to_json(), path, indent=None, default=str, end="")


NULL_TRACKER = Tracker()


def bound_http_timeouts() -> None:
    """Seconds, not minutes, for a tracking server that does not answer (unless the user set them): a
    request waits 5 s and is tried 3 times (about 18 s in all for a server that hangs, once per job)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0.5")


def check_reachable(uri: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`TrackingUnreachable` (one line naming the URI) unless the tracking store answers within
    `timeout` seconds: an http(s) server's /health, or a sqlite database's directory being writable."""
    uri = _uri(uri)
    if uri.startswith(("http://", "https://")):
        import requests

        try:
            response = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
        except requests.RequestException as err:
            reason = type(err).__name__
            raise TrackingUnreachable(f"the MLflow tracking server {uri} does not answer ({reason} within "
                                      f"{timeout:g} s)") from None
        if response.status_code >= 500:
            raise TrackingUnreachable(f"the MLflow tracking server {uri} answers HTTP {response.status_code}")
    elif uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///"):]).resolve().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise TrackingUnreachable(f"the MLflow tracking store {uri} cannot be created: {reason(err)}") from None
        if not os.access(folder, os.W_OK):
            raise TrackingUnreachable(f"the MLflow tracking store {uri}: {folder} is not writable")


@contextlib.contextmanager
def job_run(rule: str, *, task: str | None = None, variant: str | None = None,
            params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
            enabled: bool = True) -> Iterator[Tracker]:
    """Open the MLflow child run of one Snakemake job and yield its :class:`Tracker`.

    Tagged with rule/task/variant, a child of the invocation's parent run (when BERTOLOGY_INVOCATION is
    set), with `params` flattened into MLflow params. The run ends FINISHED, or FAILED if the job
    raises. If the tracking store cannot be reached (a quick probe first, so a server that is down costs
    seconds) the job still runs, with one warning, and what it would have recorded is kept as a pending
    record (see :func:`replay_pending`).
    """
    if not enabled:
        yield NULL_TRACKER
        return
    bound_http_timeouts()
    all_tags = {"rule": rule, "bertology.kind": "job", WORKDIR_TAG: str(Path.cwd())}
    if task:
        all_tags["task"] = task
    if variant:
        all_tags["variant"] = variant
    invocation = os.environ.get(INVOCATION_ENV)
    if invocation:
        all_tags[INVOCATION_TAG] = invocation
    all_tags.update(tags or {})
    name = ":".join(x for x in (rule, task, variant) if x)
    uri = _uri()
    record = PendingRecord(uri=uri, experiment=_experiment_name(), run_name=name, tags=all_tags,
                           invocation=invocation)
    try:
        check_reachable(uri)
        import mlflow
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        client = mlflow.MlflowClient(tracking_uri=uri)
        exp_id = init_store(uri)
        run_tags = dict(all_tags)
        parent = parent_run_id(invocation, uri) if invocation else None
        if parent:
            run_tags[MLFLOW_PARENT_RUN_ID] = parent
        run_tags[MLFLOW_RUN_NAME] = name
        run = _retry(client.create_run, exp_id, run_name=name, tags=run_tags)
        record.run_id = run.info.run_id
        tracker = Tracker(client, run.info.run_id, record=record)
    except Exception as err:  # noqa: BLE001 - tracking must never fail a job
        log.warning("MLflow tracking is unavailable (%s); the job runs without it and keeps what it would "
                    "record under %s/ (sent by the next workflow run or `bertology tracking-replay`)",
                    reason(err), PENDING_DIR)
        tracker = Tracker(record=record)
        tracker.failed = reason(err)
    if params:
        tracker.params(params)
    try:
        yield tracker
    except BaseException:
        tracker.end("FAILED")
        raise
    else:
        tracker.end("FINISHED")


# ------------------------------------------------------------------------ the workflow's parent run


def start_invocation(invocation: str, params: Mapping[str, Any] | None = None, *, required: bool) -> None:
    """The Snakefile's ``onstart``: check the tracking store answers, send what earlier runs kept, create
    this invocation's parent run.

    An unreachable store raises :class:`TrackingUnreachable` (one line naming the URI) when `required`;
    otherwise it is one warning, and the parent run is kept as a pending record.
    """
    bound_http_timeouts()
    uri = _uri()
    try:
        check_reachable(uri)
    except TrackingUnreachable as err:
        if required:
            raise
        log.warning("%s; the workflow runs without tracking (mlflow.required is false) and keeps every run "
                    "under %s/ to send later with `bertology tracking-replay`", err, PENDING_DIR)
        _keep_parent(invocation, params, [])
        return
    try:
        sent, kept = replay_pending()
        if sent:
            log.info("MLflow: sent %d record(s) kept by earlier runs (%d still pending)", sent, kept)
        init_store(uri)
        stale = fail_stale_runs(invocation)
        if stale:
            log.info("MLflow: %d run(s) of earlier invocations in %s were still RUNNING (interrupted): marked FAILED",
                     stale, Path.cwd())
        parent_run_id(invocation, uri, params=params)
    except Exception as err:  # noqa: BLE001 - the store answered the probe but failed: never lose the run
        if required:
            raise TrackingUnreachable(f"the MLflow tracking store {uri} failed: {reason(err)}") from None
        log.warning("MLflow tracking store %s failed (%s); the workflow runs without tracking", uri, reason(err))
        _keep_parent(invocation, params, [])


def _keep_parent(invocation: str, params: Mapping[str, Any] | None, ops: list[dict[str, Any]]) -> Path:
    record = PendingRecord(uri=_uri(), experiment=_experiment_name(), run_name="workflow",
                           tags={INVOCATION_TAG: invocation, "bertology.kind": "workflow",
                                 WORKDIR_TAG: str(Path.cwd())},
                           invocation=invocation, kind="workflow",
                           params={k: str(v)[:6000] for k, v in flatten(params or {}).items()})
    record.ops.extend(ops)
    return record.save()


def end_invocation(invocation: str, status: str = "FINISHED", uri: str | None = None,
                   experiment: str | None = None) -> None:
    """Mark the parent run FINISHED or FAILED (the Snakefile's onsuccess/onerror), and FAILED every job run
    of the invocation still RUNNING (a job killed before it could end its run). Never raises: if the
    store does not answer, the end is kept as a pending record."""
    import mlflow

    bound_http_timeouts()
    try:
        check_reachable(uri)
        client = mlflow.MlflowClient(tracking_uri=_uri(uri))
        exp = _retry(client.get_experiment_by_name, _experiment_name(experiment))
        if exp is not None:
            stale = _retry(client.search_runs, [exp.experiment_id],
                           filter_string=(f"tags.`{INVOCATION_TAG}` = '{invocation}' and "
                                          f"attributes.status = 'RUNNING'"), max_results=5000)
            for run in stale:
                if run.data.tags.get("bertology.kind") == "job":
                    _retry(client.set_terminated, run.info.run_id, "FAILED")
        run_id = parent_run_id(invocation, uri, experiment, create=False)
        if run_id:
            _retry(client.set_terminated, run_id, status)
        elif _kept_parent(invocation):  # the store failed at the start: the run's end goes where its start is
            _keep_parent(invocation, None, [{"end": status}])
    except Exception as err:  # noqa: BLE001 - the workflow's outcome does not depend on tracking
        path = _keep_parent(invocation, None, [{"end": status}])
        log.warning("MLflow: could not end the workflow run (%s); kept in %s", reason(err), path)


def _kept_parent(invocation: str) -> bool:
    """Whether the workflow run of `invocation` waits under PENDING_DIR (its start could not be sent)."""
    for path in pending_records():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("kind") == "workflow" and data.get("invocation") == invocation:
            return True
    return False


def fail_stale_runs(invocation: str, uri: str | None = None, experiment: str | None = None) -> int:
    """Mark FAILED the runs of earlier invocations in this working directory still RUNNING (a workflow
    interrupted before its end handler ran; Snakemake's lock means none of them is still going). Returns
    how many."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=_uri(uri))
    exp = _retry(client.get_experiment_by_name, _experiment_name(experiment))
    if exp is None:
        return 0
    workdir = str(Path.cwd()).replace("'", "\\'")
    runs = _retry(client.search_runs, [exp.experiment_id],
                  filter_string=f"tags.`{WORKDIR_TAG}` = '{workdir}' and attributes.status = 'RUNNING'",
                  max_results=5000)
    stale = [r for r in runs if r.data.tags.get(INVOCATION_TAG) != invocation]
    for run in stale:
        _retry(client.set_terminated, run.info.run_id, "FAILED")
    return len(stale)


# ------------------------------------------------------------------------------- pending records


def pending_records(directory: str | Path | None = None) -> list[Path]:
    """The kept records, oldest first."""
    directory = Path(directory or PENDING_DIR)
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def replay_pending(directory: str | Path | None = None, uri: str | None = None) -> tuple[int, int]:
    """Send every kept record (oldest first) to its tracking store (or `uri`), deleting each once sent.

    A run that was never created is created (a job's under its invocation's parent run, made if need be);
    a run that exists gets the rest of its records. Stops at the first failure (the store is down again)
    and returns (records sent, records still pending).
    """
    bound_http_timeouts()
    paths = pending_records(directory)
    sent = 0
    for i, path in enumerate(paths):
        try:
            data = json.loads(path.read_text())
            _replay_one(data, uri or data["uri"])
        except json.JSONDecodeError:
            log.warning("MLflow: %s is not a pending record (unreadable JSON); left as it is", path)
            continue
        except Exception as err:  # noqa: BLE001 - the store is down again: keep the rest for later
            log.warning("MLflow: could not send %s (%s); %d record(s) stay pending", path, reason(err),
                        len(paths) - i)
            return sent, len(paths) - i
        path.unlink()
        sent += 1
    return sent, 0


def _replay_one(data: Mapping[str, Any], uri: str) -> None:
    import mlflow
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

    check_reachable(uri)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp_id = init_store(uri, data["experiment"])
    run_id = data.get("run_id")
    if data.get("kind") == "workflow":
        run_id = parent_run_id(data["invocation"], uri, data["experiment"], params=data.get("params") or None)
    elif not run_id:
        tags = dict(data["tags"])
        if data.get("invocation"):
            tags[MLFLOW_PARENT_RUN_ID] = parent_run_id(data["invocation"], uri, data["experiment"])
        tags[MLFLOW_RUN_NAME] = data["run_name"]
        tags["bertology.replayed"] = "true"
        run_id = _retry(client.create_run, exp_id, run_name=data["run_name"], tags=tags).info.run_id
    for op in data["ops"]:
        if "params" in op:
            _retry(client.log_batch, run_id, params=[Param(k, v) for k, v in op["params"].items()])
        elif "tags" in op:
            _retry(client.log_batch, run_id, tags=[RunTag(k, v) for k, v in op["tags"].items()])
        elif "metrics" in op:
            _retry(client.log_batch, run_id, metrics=[Metric(*m) for m in op["metrics"]])
        elif "artifact" in op:
            if Path(op["artifact"]).exists():
                _retry(client.log_artifact, run_id, op["artifact"], op.get("folder"))
            else:
                log.warning("MLflow: artifact %s of run %s no longer exists; not sent", op["artifact"],
                            data["run_name"])
        elif "end" in op:
            _retry(client.set_terminated, run_id, op["end"])
