"""MLflow helpers: one sqlite store, one parent run per workflow invocation, one child run per job.

The Snakefile sets ``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME`` and ``BERTOLOGY_INVOCATION`` (a
fresh id per ``snakemake`` call) in the environment, and its ``onstart`` handler creates the database and
the parent run once, before any job runs (a fresh sqlite store races on schema creation). Each job opens
its child run with :func:`job_run`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

INVOCATION_ENV = "BERTOLOGY_INVOCATION"
INVOCATION_TAG = "bertology.invocation"
DEFAULT_URI = "sqlite:///results/mlflow.db"
DEFAULT_EXPERIMENT = "bertology"


def _uri(uri: str | None = None) -> str:
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def _experiment_name(name: str | None = None) -> str:
    return name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT


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
                 tags={INVOCATION_TAG: invocation, "bertology.kind": "workflow"})
    if params:
        for key, value in flatten(params).items():
            _retry(client.log_param, run.info.run_id, key, str(value)[:6000])
    return run.info.run_id


def end_invocation(invocation: str, status: str = "FINISHED", uri: str | None = None,
                   experiment: str | None = None) -> None:
    """Mark the parent run FINISHED or FAILED (called from the Snakefile's onsuccess/onerror)."""
    import mlflow

    run_id = parent_run_id(invocation, uri, experiment, create=False)
    if run_id:
        _retry(mlflow.MlflowClient(tracking_uri=_uri(uri)).set_terminated, run_id, status)


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
    """

    def __init__(self, client=None, run_id: str | None = None, *, batch: int = 100):
        self.client, self.run_id, self.batch = client, run_id, batch
        self._pending: list = []
        self.failed: str | None = None if client is not None else "tracking disabled"

    @property
    def active(self) -> bool:
        return self.failed is None

    def _call(self, what: str, fn, *args, **kwargs) -> None:
        if not self.active:
            return
        try:
            _retry(fn, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 - tracking must never fail a job
            self.failed = f"{what}: {type(err).__name__}: {str(err)[:300]}"
            log.warning("MLflow tracking failed (%s); the job goes on without tracking. The results on disk are "
                        "complete; re-run the rule with --forcerun to record it.", self.failed)

    def params(self, params: Mapping[str, Any]) -> None:
        """Nested params, flattened to dotted keys ({'a': {'b': 1}} -> a.b = 1)."""
        if not self.active:
            return
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):
            self._call("log params", self.client.log_batch, self.run_id, params=items[i:i + 100])

    def tags(self, tags: Mapping[str, Any]) -> None:
        if not self.active:
            return
        from mlflow.entities import RunTag

        self._call("set tags", self.client.log_batch, self.run_id,
                   tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def metric(self, key: str, value: float, step: int | None = None) -> None:
        self.metrics({key: value}, step=step)

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Queue metrics (at `step`, default 0); sent when `batch` are queued and on flush()."""
        if not self.active:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending.extend(Metric(k, float(v), now, int(step or 0)) for k, v in values.items())
        if len(self._pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), 1000):
            self._call("log metrics", self.client.log_batch, self.run_id, metrics=pending[i:i + 1000])

    def artifact(self, path: str | Path, folder: str | None = None) -> None:
        """Copy a file (a figure, a table) into the run's artifacts (under `folder`)."""
        if not self.active:
            return
        self.flush()
        self._call(f"log artifact {path}", self.client.log_artifact, self.run_id, str(path), folder)

    def end(self, status: str) -> None:
        if not self.active:
            return
        self.flush()
        self._call("end run", self.client.set_terminated, self.run_id, status)


NULL_TRACKER = Tracker()


def _bound_http_timeouts() -> None:
    """Seconds, not minutes, for a tracking server that does not answer (unless the user set them)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


@contextlib.contextmanager
def job_run(rule: str, *, task: str | None = None, variant: str | None = None,
            params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
            enabled: bool = True) -> Iterator[Tracker]:
    """Open the MLflow child run of one Snakemake job and yield its :class:`Tracker`.

    Tagged with rule/task/variant, a child of the invocation's parent run (when BERTOLOGY_INVOCATION is
    set), with `params` flattened into MLflow params. The run ends FINISHED, or FAILED if the job
    raises. If the tracking store cannot be reached the job still runs (with a warning) and yields a
    tracker that records nothing.
    """
    if not enabled:
        yield NULL_TRACKER
        return
    _bound_http_timeouts()
    all_tags = {"rule": rule, "bertology.kind": "job"}
    if task:
        all_tags["task"] = task
    if variant:
        all_tags["variant"] = variant
    invocation = os.environ.get(INVOCATION_ENV)
    if invocation:
        all_tags[INVOCATION_TAG] = invocation
    all_tags.update(tags or {})
    name = ":".join(x for x in (rule, task, variant) if x)
    try:
        import mlflow
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        uri = _uri()
        client = mlflow.MlflowClient(tracking_uri=uri)
        exp_id = init_store(uri)
        parent = parent_run_id(invocation, uri) if invocation else None
        if parent:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent
        all_tags[MLFLOW_RUN_NAME] = name
        run = _retry(client.create_run, exp_id, run_name=name, tags=all_tags)
        tracker = Tracker(client, run.info.run_id)
    except Exception as err:  # noqa: BLE001 - tracking must never fail a job
        log.warning("MLflow tracking is unavailable (%s: %s); the job runs without it", type(err).__name__,
                    str(err)[:300])
        tracker = Tracker()
        tracker.failed = str(err)
    if params:
        tracker.params(params)
    try:
        yield tracker
    except BaseException:
        tracker.end("FAILED")
        raise
    else:
        tracker.end("FINISHED")
