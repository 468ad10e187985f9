"""MLflow tracking: one store, one parent run per workflow invocation, one child run per job.

The Snakefile sets ``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME`` and ``BERTOLOGY_INVOCATION`` (a
fresh id per ``snakemake`` call) in the environment, and its ``onstart`` handler checks the tracking store
answers, creates the database and the parent run once, before any job runs (a fresh sqlite store races on
schema creation). Each job opens its child run with :func:`job_run`.

Tracking never costs science: every call is bounded (seconds: :func:`bound_http_timeouts`), a failure is
one warning in the job's log and never fails the job, and whatever could not be sent (the run itself, its
params, tags, metrics, artifacts and final status) is kept as one JSON record under ``.bertology/pending/``
of the working directory, replayed by the next workflow run or by ``bertology tracking-replay``.

One job per module, each importing only those above it:

- :mod:`~bertology.tracking.calls`: tag names, bounded retries, errors as one line, flat params;
- :mod:`~bertology.tracking.uri`: which store and experiment, HTTP timeouts, creating the store;
- :mod:`~bertology.tracking.probe`: does the store answer (:func:`check_reachable`);
- :mod:`~bertology.tracking.parent`: the invocation's parent run, runs left RUNNING;
- :mod:`~bertology.tracking.pending`: records kept while the store was down, and their replay;
- :mod:`~bertology.tracking.tracker`: a job's run and its :class:`Tracker`;
- :mod:`~bertology.tracking.invocation`: the workflow's start and end handlers.
"""

from bertology.tracking.calls import INVOCATION_ENV, INVOCATION_TAG, KIND_TAG, WORKDIR_TAG, flatten, reason, retry
from bertology.tracking.invocation import end_invocation, start_invocation
from bertology.tracking.parent import fail_killed_jobs, fail_stale_runs, parent_run_id
from bertology.tracking.pending import PENDING_DIR, PendingRecord, keep_parent, pending_records, replay_pending
from bertology.tracking.probe import PROBE_TIMEOUT_S, TrackingUnreachable, check_reachable
from bertology.tracking.tracker import NULL_TRACKER, Tracker, job_run
from bertology.tracking.uri import (StoreCreationError, artifact_root, bound_http_timeouts, experiment_name, init_store,
                                   store_lock_path, tracking_uri)

__all__ = [
    "INVOCATION_ENV", "INVOCATION_TAG", "KIND_TAG", "NULL_TRACKER", "PENDING_DIR", "PROBE_TIMEOUT_S", "WORKDIR_TAG",
    "PendingRecord", "StoreCreationError", "Tracker", "TrackingUnreachable", "artifact_root", "bound_http_timeouts",
    "check_reachable", "end_invocation", "experiment_name", "fail_killed_jobs", "fail_stale_runs", "flatten", "init_store", "job_run",
    "keep_parent", "parent_run_id", "pending_records", "reason", "replay_pending", "retry", "start_invocation",
    "store_lock_path", "tracking_uri",
]
