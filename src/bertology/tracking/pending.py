"""What is not sent yet: one JSON record per run under ``.bertology/pending/`` of the working directory (the run,
its params, tags, metrics, artifacts and final status, in order), kept while the tracking store was down or queued
by a job for its workflow's end (``mlflow.live: false``), sent later by :func:`replay_pending` (the workflow's end,
the next workflow run, or ``bertology tracking-replay``)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertology.pipeline.io import write_json
from bertology.tracking.calls import INVOCATION_TAG, KIND_TAG, WORKDIR_TAG, flatten, reason, retry
from bertology.tracking.parent import parent_run_id
from bertology.tracking.probe import check_reachable
from bertology.tracking.uri import bound_http_timeouts, experiment_name, init_store, tracking_uri

log = logging.getLogger(__name__)

PENDING_DIR = Path(".bertology") / "pending"  # relative to the working directory (snakemake --directory)


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
        self.queued = False  # a queued job's run (mlflow.live: false), not one kept during an outage
        self.start_time = int(time.time() * 1000)  # ms, the run's start when it is created later

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "experiment": self.experiment, "run_name": self.run_name, "tags": self.tags,
                "run_id": self.run_id, "invocation": self.invocation, "kind": self.kind, "params": self.params,
                "ops": self.ops, "queued": self.queued, "start_time": self.start_time}

    def path(self, directory: str | Path | None = None) -> Path:
        """A new file name for the record: ``<directory>/<time>-<name>-<random>.json`` (sorts in the order
        made)."""
        directory = Path(directory or PENDING_DIR)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.run_name)[:80]
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}.{time.time_ns() % 10**9:09d}"
        return directory / f"{stamp}-{safe}-{uuid.uuid4().hex[:8]}.json"

    def save(self, directory: str | Path | None = None, *, path: Path | None = None) -> Path:
        """Write the record atomically as :meth:`path` (or `path`, replacing what is there)."""
        path = Path(path) if path is not None else self.path(directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_json(self.to_json(), path, indent=None, default=str, end="")


def pending_records(directory: str | Path | None = None) -> list[Path]:
    """The kept records, oldest first."""
    directory = Path(directory or PENDING_DIR)
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def pending_summary(paths: list[Path]) -> str:
    """What the kept records `paths` are, in words: job runs queued for a workflow's end that did not send them
    (the workflow was cut short, killed before its end handler ran, or tracking was down when it ended), records
    kept while tracking was down, and files that are no record."""
    queued = kept = unreadable = 0
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            unreadable += 1
        elif data.get("queued"):
            queued += 1
        else:
            kept += 1
    parts = [f"{queued} job run(s) queued for a workflow's end that did not send them (the workflow was cut short, "
             f"or tracking was down at its end)" if queued else "",
             f"{kept} kept while tracking was down" if kept else "",
             f"{unreadable} unreadable" if unreadable else ""]
    return ", ".join(filter(None, parts))


def keep_parent(invocation: str, params: Mapping[str, Any] | None, ops: list[dict[str, Any]]) -> Path:
    """Keep the workflow (parent) run of `invocation` as a pending record, with `params` and `ops`."""
    record = PendingRecord(uri=tracking_uri(), experiment=experiment_name(), run_name="workflow",
                           tags={INVOCATION_TAG: invocation, KIND_TAG: "workflow", WORKDIR_TAG: str(Path.cwd())},
                           invocation=invocation, kind="workflow",
                           params={k: str(v)[:6000] for k, v in flatten(params or {}).items()})
    record.ops.extend(ops)
    return record.save()


def kept_parent(invocation: str) -> bool:
    """Whether the workflow run of `invocation` waits under PENDING_DIR (its start could not be sent)."""
    for path in pending_records():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("kind") == "workflow" and data.get("invocation") == invocation:
            return True
    return False


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
        if not data.get("queued"):
            tags["bertology.replayed"] = "true"
        run_id = retry(client.create_run, exp_id, run_name=data["run_name"], tags=tags,
                       start_time=data.get("start_time")).info.run_id
    for op in data["ops"]:
        if "params" in op:
            retry(client.log_batch, run_id, params=[Param(k, v) for k, v in op["params"].items()])
        elif "tags" in op:
            retry(client.log_batch, run_id, tags=[RunTag(k, v) for k, v in op["tags"].items()])
        elif "metrics" in op:
            retry(client.log_batch, run_id, metrics=[Metric(*m) for m in op["metrics"]])
        elif "artifact" in op:
            if Path(op["artifact"]).exists():
                retry(client.log_artifact, run_id, op["artifact"], op.get("folder"))
            else:
                log.warning("MLflow: artifact %s of run %s no longer exists; not sent", op["artifact"],
                            data["run_name"])
        elif "end" in op:
            retry(client.set_terminated, run_id, op["end"], end_time=op.get("time"))
