"""Helpers of the steps that read per-head tables of several variants or tasks (kovaleva, sieve).

A rule gives such tables as list inputs, expanded in the order of ``bertology.pipeline.tasks.STORE_VARIANTS`` (one path
per variant) or of the config's ``tasks`` (one path per task, the step declaring the section ``tasks``);
these helpers pair the paths with their variant or task and check that the counts agree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bertology.steps.context import StepContext
from bertology.pipeline.errors import UserError
from bertology.pipeline.tasks import STORE_VARIANTS
from bertology.pipeline.errors import MissingInputError, snakemake_command


def read_table(path: Path) -> pd.DataFrame:
    """A CSV (or ``.parquet``) input of a step, with the fix when it is missing."""
    if not Path(path).exists():
        raise MissingInputError(f"{path} does not exist; run `{snakemake_command(path)}` first")
    return pd.read_parquet(path) if Path(path).suffix == ".parquet" else pd.read_csv(path)


def by_variant(ctx: StepContext, name: str) -> dict[str, Path]:
    """The list input `name`, one path per store variant of the run, in the order of STORE_VARIANTS (the pretrained
    model's alone in a run that fine-tunes nothing, train.inits: []) -> variant -> path."""
    paths = ctx.input.all(name)
    if not 1 <= len(paths) <= len(STORE_VARIANTS):
        raise UserError(f"step {ctx.step}: --input {name} needs one path per variant ({', '.join(STORE_VARIANTS)}), "
                        f"in that order; got {len(paths)}")
    return dict(zip(STORE_VARIANTS, paths))


def by_task(ctx: StepContext, name: str) -> dict[str, Path]:
    """The list input `name`, one path per task of the config's `tasks` (in that order) -> task -> path."""
    tasks, paths = ctx.config.tasks, ctx.input.all(name)
    if len(paths) != len(tasks):
        raise UserError(f"step {ctx.step}: --input {name} needs one path per task of the config's tasks "
                        f"({', '.join(tasks)}), in that order; got {len(paths)}")
    return dict(zip(tasks, paths))
