"""The one in-process step runner of the tests: a step's command line built as its rule builds it
(``rules/steps.smk``), run through :func:`bertology.workflow.cli.main` in this process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def step_argv(name: str, config: Mapping | str, wildcards: Mapping[str, str] | None = None,
              inputs: Mapping[str, Path | str | Sequence] | None = None,
              outputs: Mapping[str, Path | str | Sequence] | None = None, *,
              options: Sequence[str] = ("--no-mlflow", "--no-progress")) -> list[str]:
    """``[step, -w k=v..., --input name=path..., --output name=path..., --config JSON, *options]``.

    config: a validated config (its sections the step declares are handed over, as a rule does) or the
    --config JSON itself; a list value of inputs/outputs gives the name once per path.
    """
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.configjson import sections_json

    text = config if isinstance(config, str) else sections_json(dict(config), STEPS[name].config)
    argv = [name.replace("_", "-")]
    for flag, items in (("-w", wildcards), ("--input", inputs), ("--output", outputs)):
        for key, value in (items or {}).items():
            for v in value if isinstance(value, (list, tuple)) else [value]:
                argv += [flag, f"{key}={v}"]
    return [*argv, "--config", text, *options]


def run_step(name: str, config: Mapping | str, wildcards: Mapping[str, str] | None = None,
             inputs: Mapping | None = None, outputs: Mapping | None = None, *,
             options: Sequence[str] = ("--no-mlflow", "--no-progress")) -> int:
    """Run step `name` in this process (:func:`step_argv`); its exit status."""
    from bertology.workflow.cli import main

    return main(step_argv(name, config, wildcards=wildcards, inputs=inputs, outputs=outputs, options=options))
