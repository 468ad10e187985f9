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


@contextlib.contextmanager
def job_run(rule: str, *, task: str | None = None, variant: str | None = None,
            params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None) -> Iterator[Any]:
    """Open the MLflow child run of one Snakemake job.

    Tagged with rule/task/variant, a child of the invocation's parent run (when BERTOLOGY_INVOCATION is
    set), with `params` flattened into MLflow params. Yields the active ``mlflow.ActiveRun``; use the
    ``mlflow`` fluent API (log_metric with step=..., log_artifact) inside. The run is marked FAILED if the
    job raises.
    """
    import mlflow

    uri = _uri()
    mlflow.set_tracking_uri(uri)
    exp_id = init_store(uri)
    invocation = os.environ.get(INVOCATION_ENV)
    parent = parent_run_id(invocation, uri) if invocation else None
    all_tags = {"rule": rule, "bertology.kind": "job"}
    if task:
        all_tags["task"] = task
    if variant:
        all_tags["variant"] = variant
    if invocation:
        all_tags[INVOCATION_TAG] = invocation
    all_tags.update(tags or {})
    name = ":".join(x for x in (rule, task, variant) if x)
    run = _retry(mlflow.start_run, experiment_id=exp_id, run_name=name, parent_run_id=parent, tags=all_tags)
    try:
        if params:
            _retry(mlflow.log_params, {k: str(v)[:6000] for k, v in flatten(params).items()})
        yield run
    except BaseException:
        _retry(mlflow.end_run, status="FAILED")
        raise
    else:
        _retry(mlflow.end_run, status="FINISHED")
