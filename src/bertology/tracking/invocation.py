"""The workflow's own run, from the Snakefile's handlers (through :mod:`bertology.workflow.snakefile`): at the start,
check the store answers, send what earlier runs kept and create the parent run; at the end, mark it
FINISHED or FAILED. A store that fails keeps the parent run as a pending record instead."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertology.tracking.calls import reason, retry
from bertology.tracking.parent import fail_killed_jobs, fail_stale_runs, parent_run_id
from bertology.tracking.pending import PENDING_DIR, keep_parent, kept_parent, replay_pending
from bertology.tracking.probe import TrackingUnreachable, check_reachable
from bertology.tracking.uri import StoreCreationError, bound_http_timeouts, init_store, tracking_uri

log = logging.getLogger(__name__)


def start_invocation(invocation: str, params: Mapping[str, Any] | None = None, *, required: bool) -> None:
    """The Snakefile's ``onstart``: check the tracking store answers, send what earlier runs kept, create
    this invocation's parent run.

    An unreachable store raises :class:`TrackingUnreachable` (one line naming the URI) when `required`;
    otherwise it is one warning, and the parent run is kept as a pending record.
    """
    bound_http_timeouts()
    uri = tracking_uri()
    try:
        check_reachable(uri)
    except TrackingUnreachable as err:
        if required:
            raise
        log.warning("%s; the workflow runs without tracking (mlflow.required is false) and keeps every run "
                    "under %s/ to send later with `bertology tracking-replay`", err, PENDING_DIR)
        keep_parent(invocation, params, [])
        return
    try:
        init_store(uri)  # first: under its lock, however many workflows start at once on a fresh store
        sent, kept = replay_pending()
        if sent:
            log.info("MLflow: sent %d record(s) kept by earlier runs (%d still pending)", sent, kept)
        stale = fail_stale_runs(invocation)
        if stale:
            log.info("MLflow: %d run(s) of earlier invocations in %s were still RUNNING (interrupted): marked FAILED",
                     stale, Path.cwd())
        parent_run_id(invocation, uri, params=params)
    except Exception as err:  # noqa: BLE001 - the store answered the probe but failed: never lose the run
        if required and isinstance(err, StoreCreationError):
            raise  # its own message: another process created the store at the same moment
        if required:
            raise TrackingUnreachable(f"the MLflow tracking store {uri} failed: {reason(err)}") from None
        log.warning("MLflow tracking store %s failed (%s); the workflow runs without tracking", uri, reason(err))
        keep_parent(invocation, params, [])


def end_invocation(invocation: str, status: str = "FINISHED", uri: str | None = None,
                   experiment: str | None = None) -> None:
    """Mark the parent run FINISHED or FAILED (the Snakefile's onsuccess/onerror), and FAILED every job run
    of the invocation still RUNNING (a job killed before it could end its run). Never raises: if the
    store does not answer, the end is kept as a pending record."""
    bound_http_timeouts()
    try:
        check_reachable(uri)
        sent, kept = replay_pending()  # the jobs' queued runs (mlflow.live: false), in the order they started
        if sent or kept:
            log.info("MLflow: sent %d job run(s) (%d still pending)", sent, kept)
        fail_killed_jobs(invocation, uri, experiment)
        run_id = parent_run_id(invocation, uri, experiment, create=False)
        if run_id:
            import mlflow

            retry(mlflow.MlflowClient(tracking_uri=tracking_uri(uri)).set_terminated, run_id, status)
        elif kept_parent(invocation):  # the store failed at the start: the run's end goes where its start is
            keep_parent(invocation, None, [{"end": status}])
    except Exception as err:  # noqa: BLE001 - the workflow's outcome does not depend on tracking
        path = keep_parent(invocation, None, [{"end": status}])
        log.warning("MLflow: could not end the workflow run (%s); kept in %s", reason(err), path)
