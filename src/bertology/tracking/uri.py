"""Which tracking store and experiment, and setting them up: the URI and experiment a process uses (the
environment the workflow sets, else the schema's defaults), bounded HTTP timeouts, the store's database
and experiment created once."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

from bertology.pipeline.config import schema_default
from bertology.tracking.calls import retry


def tracking_uri(uri: str | None = None) -> str:
    """`uri`, else ``MLFLOW_TRACKING_URI``, else the schema's ``mlflow.tracking_uri``."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or schema_default("mlflow.tracking_uri")


def experiment_name(name: str | None = None) -> str:
    """`name`, else ``MLFLOW_EXPERIMENT_NAME``, else the schema's ``mlflow.experiment``."""
    return name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or schema_default("mlflow.experiment")


def artifact_root(uri: str) -> str | None:
    """results/mlartifacts beside a sqlite database (as a file URI); None for other backends."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return (db.resolve().parent / "mlartifacts").as_uri()
    return None


def bound_http_timeouts() -> None:
    """Seconds, not minutes, for a tracking server that does not answer (unless the user set them): a
    request waits 5 s and is tried 3 times (about 18 s in all for a server that hangs, once per job)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0.5")


# What MLflow's schema migration says when another process creates the same sqlite store at the same moment.
CREATION_RACE = ("duplicate column", "online migration expected", "already exists", "alembic_version")
STORE_LOCK_TIMEOUT_S = 600.0  # how long a workflow waits for another one creating the same sqlite store


class StoreCreationError(Exception):
    """Creating a sqlite tracking store failed because another process was creating it at the same time
    (MLflow's schema migration raced), even after waiting for its lock and trying again."""


def is_creation_race(err: BaseException) -> bool:
    """Whether `err` is MLflow's schema migration tripping over another process's ("duplicate column name:
    step", "Online migration expected to match one row", "table ... already exists")."""
    text = str(err).lower()
    return any(marker in text for marker in CREATION_RACE)


def store_lock_path(uri: str) -> Path | None:
    """The lock file beside a sqlite tracking database (``mlflow.db.lock``); None for other backends."""
    if not uri.startswith("sqlite:///"):
        return None
    db = Path(uri[len("sqlite:///"):])
    return db.with_name(db.name + ".lock")


def init_store(uri: str | None = None, experiment: str | None = None, *, tries: int = 3) -> str:
    """Create the tracking database and the experiment once; return the experiment id. Idempotent, and safe
    when several processes (two workflows started at once on one sqlite file) create the same store: a file
    lock beside a sqlite database (:func:`store_lock_path`) lets one create it while the others wait, and a
    migration race with a process that does not take the lock (an older bertology, MLflow's own UI) is tried
    again (`tries`); if it still fails, :class:`StoreCreationError` says so."""
    uri, experiment = tracking_uri(uri), experiment_name(experiment)
    lock = store_lock_path(uri)
    if lock is None:
        return _init_store(uri, experiment)
    lock.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    for attempt in range(tries):
        try:
            with FileLock(str(lock), timeout=STORE_LOCK_TIMEOUT_S):
                return _init_store(uri, experiment)
        except Exception as err:  # noqa: BLE001 - MLflow wraps the migration's sqlite errors in several types
            if not is_creation_race(err):
                raise
            if attempt == tries - 1:
                from bertology.tracking.calls import reason

                raise StoreCreationError(
                    f"the MLflow tracking store {uri} was being created by another process at the same moment and "
                    f"its schema migration failed ({reason(err, 160)}); run the workflow again (the store is "
                    f"complete once either process finishes), or create it first with `bertology init-mlflow "
                    f"--config {shlex.quote(json.dumps({'mlflow': {'tracking_uri': uri, 'experiment': experiment}}))}`"
                ) from None
            time.sleep(1.0 + attempt)
    raise AssertionError("unreachable")


def _init_store(uri: str, experiment: str) -> str:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = retry(client.get_experiment_by_name, experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return retry(client.create_experiment, experiment, artifact_location=artifact_root(uri))
    except Exception:  # created meanwhile by another process
        return client.get_experiment_by_name(experiment).experiment_id
