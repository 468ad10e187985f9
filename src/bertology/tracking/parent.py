"""The parent run of one workflow invocation (one per ``snakemake`` call, its jobs' runs are its children),
found or created by the invocation's id, and the runs an interrupted workflow left RUNNING."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertology.tracking.calls import INVOCATION_TAG, KIND_TAG, WORKDIR_TAG, param_chunks, retry
from bertology.tracking.uri import experiment_name, init_store, tracking_uri


def parent_run_id(invocation: str, uri: str | None = None, experiment: str | None = None,
                  *, create: bool = True, params: Mapping[str, Any] | None = None) -> str | None:
    """The id of the parent run of one workflow invocation (created, with `params`, if missing and `create`)."""
    import mlflow
    from mlflow.entities import Param

    uri = tracking_uri(uri)
    exp_id = init_store(uri, experiment)
    client = mlflow.MlflowClient(tracking_uri=uri)
    found = retry(client.search_runs, [exp_id], filter_string=(f"tags.`{INVOCATION_TAG}` = '{invocation}' "
                                                               f"and tags.`{KIND_TAG}` = 'workflow'"),
                  max_results=1)
    if found:
        return found[0].info.run_id
    if not create:
        return None
    run = retry(client.create_run, exp_id, run_name=f"workflow {time.strftime('%Y-%m-%d %H:%M:%S')}",
                tags={INVOCATION_TAG: invocation, KIND_TAG: "workflow", WORKDIR_TAG: str(Path.cwd())})
    for chunk in param_chunks(params or {}):  # one request per 100 params
        retry(client.log_batch, run.info.run_id, params=[Param(k, v) for k, v in chunk.items()])
    return run.info.run_id


def _running(client, experiment_id: str, filter_string: str) -> list:
    return retry(client.search_runs, [experiment_id],
                 filter_string=f"{filter_string} and attributes.status = 'RUNNING'", max_results=5000)


def fail_killed_jobs(invocation: str, uri: str | None = None, experiment: str | None = None) -> int:
    """Mark FAILED every job run of `invocation` still RUNNING (a job killed before it could end its run).
    Returns how many."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(uri))
    exp = retry(client.get_experiment_by_name, experiment_name(experiment))
    if exp is None:
        return 0
    stale = [run for run in _running(client, exp.experiment_id, f"tags.`{INVOCATION_TAG}` = '{invocation}'")
             if run.data.tags.get(KIND_TAG) == "job"]
    for run in stale:
        retry(client.set_terminated, run.info.run_id, "FAILED")
    return len(stale)


def fail_stale_runs(invocation: str, uri: str | None = None, experiment: str | None = None) -> int:
    """Mark FAILED the runs of earlier invocations in this working directory still RUNNING (a workflow
    interrupted before its end handler ran; Snakemake's lock means none of them is still going). Returns
    how many."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(uri))
    exp = retry(client.get_experiment_by_name, experiment_name(experiment))
    if exp is None:
        return 0
    workdir = str(Path.cwd()).replace("'", "\\'")
    stale = [run for run in _running(client, exp.experiment_id, f"tags.`{WORKDIR_TAG}` = '{workdir}'")
             if run.data.tags.get(INVOCATION_TAG) != invocation]
    for run in stale:
        retry(client.set_terminated, run.info.run_id, "FAILED")
    return len(stale)
