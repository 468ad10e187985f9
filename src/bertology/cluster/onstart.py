"""The workflow's start-up check on Slurm (``onstart`` in rules/handlers.smk): every job fits a node, and a
warning for sqlite tracking."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from bertology.cluster.fit import Node, check, read_sinfo, requests_from_jobs
from bertology.cluster.tracking_warning import tracking_warnings


def check_workflow(workflow: Any, *, nodes: Sequence[Node] | None = None) -> list[str]:
    """Check a Snakemake workflow about to submit jobs to Slurm (call it from ``onstart``).

    Does nothing unless the executor is ``slurm``. Logs a warning for sqlite tracking and raises
    ``WorkflowError`` listing every rule whose jobs no node can run; returns the warnings otherwise.
    """
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or getattr(plugin, "name", "") != "slurm":
        return []
    warnings = tracking_warnings(workflow.config["mlflow"]["tracking_uri"])
    for message in warnings:
        print(f"WARNING: {message}", file=sys.stderr)
    problems = check(requests_from_jobs(workflow.dag.needrun_jobs()), read_sinfo() if nodes is None else nodes)
    if problems:
        from snakemake_interface_common.exceptions import WorkflowError

        raise WorkflowError("Jobs that no node of the cluster can run (sinfo):\n- " + "\n- ".join(problems))
    return warnings
