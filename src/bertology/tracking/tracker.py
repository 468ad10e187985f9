"""A job's MLflow run: :func:`job_run` opens it (a child of the invocation's parent run) and yields the
:class:`Tracker` a step records through."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bertology.tracking.calls import INVOCATION_ENV, INVOCATION_TAG, KIND_TAG, WORKDIR_TAG, param_chunks, reason, retry
from bertology.tracking.parent import parent_run_id
from bertology.tracking.pending import PENDING_DIR, PendingRecord
from bertology.tracking.probe import check_reachable
from bertology.tracking.uri import bound_http_timeouts, experiment_name, init_store, tracking_uri

log = logging.getLogger(__name__)

LIVE_ENV = "BERTOLOGY_TRACKING_LIVE"  # set by the workflow from mlflow.live; unset (a job run by hand): live


class Tracker:
    """The one interface a step uses to record to MLflow: params, metrics (with steps), tags, artifacts.

    Never raises: a tracking failure is a warning in the job's log, and the tracker stops calling the
    server for the rest of the job (so an outage costs one bounded timeout, not one per call). Metrics
    are sent in batches (one transaction per ``batch`` values, and on :meth:`flush`), so a training loop
    can log every step while it runs.

    With a `record` (a :class:`~bertology.tracking.pending.PendingRecord`), everything that could not be
    sent from the failure on is kept in it and written under ``.bertology/pending/`` when the run ends.
    """

    def __init__(self, client=None, run_id: str | None = None, *, batch: int = 100,
                 record: PendingRecord | None = None, queued: Path | None = None):
        self.client, self.run_id, self.batch, self.record = client, run_id, batch, record
        self._pending: list = []
        self.failed: str | None = None if client is not None else "tracking disabled"
        self.parent_id: str | None = None  # the invocation's parent run (job_run sets it)
        # Queued (mlflow.live: false): no client; everything goes into `record`, written to this path at the
        # start (so a killed job's run is still created, then marked FAILED) and again at the end.
        self.queued = queued
        self._parents: list[Tracker] = []  # trackers on the parent run handed out by on_parent (queued)
        if queued is not None:
            self.failed = "queued"

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
            retry(fn, *args, **kwargs)
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
        for chunk in param_chunks(params):
            self._call("log params", {"params": chunk}, lambda c=chunk: self.client.log_batch(
                self.run_id, params=[_entity("Param")(k, v) for k, v in c.items()]))

    def tags(self, tags: Mapping[str, Any]) -> None:
        if self._off:
            return
        chunk = {k: str(v) for k, v in tags.items()}
        self._call("set tags", {"tags": chunk},
                   lambda: self.client.log_batch(self.run_id, tags=[_entity("RunTag")(k, v) for k, v in chunk.items()]))

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
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), 1000):
            chunk = pending[i:i + 1000]
            self._call("log metrics", {"metrics": chunk},
                       lambda c=chunk: self.client.log_batch(self.run_id, metrics=[_entity("Metric")(*m) for m in c]))

    def artifact(self, path: str | Path, folder: str | None = None) -> None:
        """Copy a file (a figure, a table) into the run's artifacts (under `folder`)."""
        if self._off:
            return
        self.flush()
        path = str(Path(path).resolve())
        self._call(f"log artifact {path}", {"artifact": path, "folder": folder},
                   lambda: self.client.log_artifact(self.run_id, path, folder))

    def on_parent(self) -> "Tracker":
        """A tracker recording to the parent run of this job's run (the workflow invocation's), through the same
        client; one that records nothing when there is no parent or tracking is off. Never ended by the job."""
        if self.queued is not None and self.record is not None and self.record.invocation:
            # queued: the parent's part is one more record, sent with the job's (its `kind` workflow: to the
            # invocation's run), written when the job's own run ends
            record = PendingRecord(uri=self.record.uri, experiment=self.record.experiment, run_name="workflow",
                                   tags={}, invocation=self.record.invocation, kind="workflow")
            record.queued = True
            parent = Tracker(record=record, queued=record.path())
            self._parents.append(parent)
            return parent
        if not self.active or not self.parent_id:
            return Tracker()
        return Tracker(self.client, self.parent_id)

    def end(self, status: str) -> None:
        if self._off:
            return
        self.flush()
        self._call("end run", {"end": status, "time": int(time.time() * 1000)},
                   lambda: self.client.set_terminated(self.run_id, status))
        if self.queued:
            for parent in self._parents:  # what the job recorded on the invocation's run (never ended here)
                parent.flush()
                if parent.record.ops:
                    parent.record.save(path=parent.queued)
            self.record.save(path=self.queued)  # the whole run, sent by the workflow when it ends
            return
        if self.record is not None and self.record.ops:
            path = self.record.save()
            log.warning("MLflow: %d record(s) of run %s could not be sent; kept in %s (sent by the next workflow "
                        "run or `bertology tracking-replay`)", len(self.record.ops), self.record.run_name, path)


NULL_TRACKER = Tracker()


def _entity(name: str):
    """An mlflow.entities class, imported when a call is sent (a queued job never imports mlflow)."""
    import mlflow.entities

    return getattr(mlflow.entities, name)


def tracking_live() -> bool:
    """Whether jobs send their runs as they go (``mlflow.live: true``, exported by the workflow as
    BERTOLOGY_TRACKING_LIVE=1), rather than queue them for the workflow to send when it ends."""
    return os.environ.get(LIVE_ENV, "1") not in ("0", "false", "no")


@contextlib.contextmanager
def job_run(rule: str, *, task: str | None = None, variant: str | None = None,
            params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
            enabled: bool = True, model: str | None = None) -> Iterator[Tracker]:
    """Open the MLflow child run of one Snakemake job and yield its :class:`Tracker`.

    Tagged with rule/task/variant and the `model`'s short name (also a param `model_name`; the run's name starts with
    it), a child of the invocation's parent run (when BERTOLOGY_INVOCATION is set), with `params`
    flattened into MLflow params. The run ends FINISHED, or FAILED if the job
    raises. If the tracking store cannot be reached (a quick probe first, so a server that is down costs
    seconds) the job still runs, with one warning, and what it would have recorded is kept as a pending
    record (see :func:`bertology.tracking.pending.replay_pending`).
    """
    if not enabled:
        yield NULL_TRACKER
        return
    bound_http_timeouts()
    all_tags = {"rule": rule, KIND_TAG: "job", WORKDIR_TAG: str(Path.cwd())}
    if task:
        all_tags["task"] = task
    if variant:
        all_tags["variant"] = variant
    if model:
        all_tags["model"] = model
        params = {"model_name": model, **(params or {})}
    invocation = os.environ.get(INVOCATION_ENV)
    if invocation:
        all_tags[INVOCATION_TAG] = invocation
    all_tags.update(tags or {})
    name = ":".join(x for x in (model, rule, task, variant) if x)
    uri = tracking_uri()
    record = PendingRecord(uri=uri, experiment=experiment_name(), run_name=name, tags=all_tags,
                           invocation=invocation)
    if invocation and not tracking_live():
        # Queued: the run is one JSON record under .bertology/pending/, sent by the workflow's end handler
        # (bertology.tracking.invocation.end_invocation) in one process; this job imports no mlflow.
        record.queued = True
        tracker = Tracker(record=record, queued=record.path())
    else:
        tracker = _live_tracker(uri, name, all_tags, invocation, record)
    if params:
        tracker.params(params)
    if tracker.queued:
        record.save(path=tracker.queued)  # a job killed before its end still gets its run (marked FAILED)
    try:
        yield tracker
    except BaseException:
        tracker.end("FAILED")
        raise
    else:
        tracker.end("FINISHED")


def _live_tracker(uri: str, name: str, all_tags: dict[str, str], invocation: str | None,
                  record: PendingRecord) -> Tracker:
    """A tracker whose run is created in the store now (and whose calls are sent as they come)."""
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
        run = retry(client.create_run, exp_id, run_name=name, tags=run_tags)
        record.run_id = run.info.run_id
        tracker = Tracker(client, run.info.run_id, record=record)
        tracker.parent_id = parent
    except Exception as err:  # noqa: BLE001 - tracking must never fail a job
        log.warning("MLflow tracking is unavailable (%s); the job runs without it and keeps what it would "
                    "record under %s/ (sent by the next workflow run or `bertology tracking-replay`)",
                    reason(err), PENDING_DIR)
        tracker = Tracker(record=record)
        tracker.failed = reason(err)
    return tracker
