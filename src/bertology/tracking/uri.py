"""Which tracking store and experiment, and setting them up: the URI and experiment a process uses (the
environment the workflow sets, else the schema's defaults), bounded HTTP timeouts, the store's database
and experiment created once."""

from __future__ import annotations

import os
from pathlib import Path

from bertology.config import schema_default
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


def init_store(uri: str | None = None, experiment: str | None = None) -> str:
    """Create the tracking database and the experiment once; return the experiment id. Idempotent."""
    import mlflow

    uri, experiment = tracking_uri(uri), experiment_name(experiment)
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = retry(client.get_experiment_by_name, experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return retry(client.create_experiment, experiment, artifact_location=artifact_root(uri))
    except Exception:  # created meanwhile by another process
        return client.get_experiment_by_name(experiment).experiment_id
