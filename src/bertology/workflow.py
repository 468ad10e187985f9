"""Set-up the Snakefile runs once per invocation (kept out of the rules so they stay thin)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

INVOCATION_ENV = "BERTOLOGY_INVOCATION"


def setup_environment(config: dict) -> str:
    """Export what every job needs; return this invocation's id.

    - PATH starts with the directory of the interpreter running Snakemake, so `bertology` (the CLI the
      rules call) is the one installed beside it (a conda env, if used, still comes first in its job).
    - MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME from the `mlflow:` section.
    - BERTOLOGY_INVOCATION: one id per `snakemake` call, kept if already set (cluster jobs inherit it), so
      that every job's MLflow run hangs under the same parent run.
    """
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if not path.startswith(bindir + os.pathsep):
        os.environ["PATH"] = f"{bindir}{os.pathsep}{path}"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ["MLFLOW_TRACKING_URI"] = config["mlflow"]["tracking_uri"]
    os.environ["MLFLOW_EXPERIMENT_NAME"] = config["mlflow"]["experiment"]
    return os.environ.setdefault(INVOCATION_ENV, uuid.uuid4().hex)


def capability_notes(config: dict) -> list[str]:
    """One line per analysis that cannot run on the config's model (said before any job runs)."""
    from bertology.ablation.disable import disabling_unsupported

    why = disabling_unsupported(str(config["model"]))
    if why is None:
        return []
    return [f"bertology: disabling heads (Kovaleva 4.6) is not possible on model {config['model']!r}: {why}; "
            f"results/ablation/* and its figures say so, every other output and the report are produced"]
