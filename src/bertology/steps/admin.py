"""Tool steps (no rule runs them; not tracked): check a config file, create the MLflow store."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from bertology.steps.context import StepContext
from bertology.pipeline.errors import UserError


def validate_config(ctx: StepContext) -> None:
    """``bertology validate-config --input config=CONFIG.yaml``: print the resolved config (defaults filled)
    as JSON on stdout, or fail with every problem named (key and allowed values)."""
    from bertology.pipeline.config import load_config

    path = ctx.input.config
    if not path.is_file():
        raise UserError(f"config file {path} does not exist (relative to {Path.cwd()})")
    print(json.dumps(load_config(path), indent=2))


def init_mlflow(ctx: StepContext) -> None:
    """``bertology init-mlflow --config '{"mlflow": {...}}'``: create the tracking store, the experiment and
    the parent run of this invocation (BERTOLOGY_INVOCATION, or a fresh id); print their ids.

    Without the mlflow section the store named by MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME is used
    (the Snakefile exports them from the config), as every job does.
    """
    from bertology import tracking
    from bertology.pipeline.config import Undeclared

    section = ctx.config.mlflow
    uri, experiment = (None, None) if isinstance(section, Undeclared) else (section.tracking_uri, section.experiment)
    exp = tracking.init_store(uri, experiment)
    invocation = os.environ.get(tracking.INVOCATION_ENV) or uuid.uuid4().hex
    run_id = tracking.parent_run_id(invocation, uri, experiment)
    print(f"experiment {exp}, parent run {run_id} (invocation {invocation})")


def tracking_replay(ctx: StepContext) -> None:
    """``bertology tracking-replay [--input pending=DIR]``: send every record kept under .bertology/pending/ (of
    the working directory) while the tracking store was down, oldest first, each to the tracking URI and
    experiment it was meant for; a record is deleted once sent. Fails (one line) when some stay pending.
    The next workflow run does the same at its start."""
    from bertology import tracking

    directory = ctx.input.get("pending") or tracking.PENDING_DIR
    total = len(tracking.pending_records(directory))
    sent, kept = tracking.replay_pending(directory)
    print(f"MLflow: sent {sent} of {total} pending record(s) from {directory}")
    if kept:
        raise UserError(f"{kept} record(s) stay pending in {directory}: the tracking store does not answer (see "
                        f"the warning above); run `bertology tracking-replay` again once it is up")
