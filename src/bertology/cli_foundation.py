"""Foundation commands: config validation and MLflow store creation from the command line."""

from __future__ import annotations

import argparse
import json
import os
import uuid

from bertology import tracking
from bertology.config import load_config


def validate_config_cmd(argv: list[str]) -> int:
    """bertology validate-config CONFIG.yaml: print the resolved config (defaults filled) or the errors."""
    ap = argparse.ArgumentParser(prog="bertology validate-config")
    ap.add_argument("config")
    args = ap.parse_args(argv)
    print(json.dumps(load_config(args.config), indent=2))
    return 0


def init_mlflow_cmd(argv: list[str]) -> int:
    """bertology init-mlflow [--tracking-uri URI] [--experiment NAME]: create the store and a parent run."""
    ap = argparse.ArgumentParser(prog="bertology init-mlflow")
    ap.add_argument("--tracking-uri", default=None)
    ap.add_argument("--experiment", default=None)
    args = ap.parse_args(argv)
    exp = tracking.init_store(args.tracking_uri, args.experiment)
    invocation = os.environ.get(tracking.INVOCATION_ENV) or uuid.uuid4().hex
    run_id = tracking.parent_run_id(invocation, args.tracking_uri, args.experiment)
    print(f"experiment {exp}, parent run {run_id} (invocation {invocation})")
    return 0
