"""Running on a Slurm cluster, one job per module:

- :mod:`~bertology.cluster.fit`: does every job fit a node (``sinfo`` against the jobs' requests);
- :mod:`~bertology.cluster.tracking_warning`: jobs on many nodes must not share a sqlite MLflow store;
- :mod:`~bertology.cluster.onstart`: both, at the workflow's start on Slurm (:func:`check_workflow`);
- :mod:`~bertology.cluster.dask_launcher`: a Dask scheduler with workers as Slurm jobs.

From a shell (steps of the one CLI, :data:`bertology.workflow.cli.STEPS`): ``bertology cluster-check`` dry-runs the
workflow with a profile and checks the jobs it would submit; ``bertology cluster-dask`` starts the Dask
cluster (``bertology.steps.cluster``).
"""

from bertology.cluster.fit import (
    PROFILE_HINT, SINFO_COMMAND, DryRunFailed, Node, Request, check, describe, dry_run_requests, gres_gpus, parse_sinfo,
    parse_time_limit, read_sinfo, request_from_resources, requests_from_dryrun, requests_from_jobs,
)
from bertology.cluster.onstart import check_workflow
from bertology.cluster.tracking_warning import tracking_warnings

__all__ = [
    "PROFILE_HINT", "SINFO_COMMAND", "DryRunFailed", "Node", "Request", "check", "check_workflow", "describe", "dry_run_requests",
    "gres_gpus", "parse_sinfo", "parse_time_limit", "read_sinfo", "request_from_resources", "requests_from_dryrun",
    "requests_from_jobs", "tracking_warnings",
]
