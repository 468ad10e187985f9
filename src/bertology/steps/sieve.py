"""Steps of rules/sieve.smk (Pande et al. 2021, the heads hypothesis).

- ``sieve_figures``: Figs. 3-5 of one task from both variants' tables and the fine-tuned scores;
- ``sieve_delta``: Fig. 6 and sieve_delta.csv, fine-tuned minus pretrained bias per task, role, layer group;
- ``sieve_summary``: sieve_summary.csv, role shares, overlaps and Spearman correlations per task and variant.

The cross-task steps take list inputs named by variant (``pretrained``, ``finetuned``; the scores as
``pretrained_scores``, ``finetuned_scores``), one path per task of the config's ``tasks``, in that order.
"""

from __future__ import annotations

import pandas as pd

from bertology.steps.context import StepContext
from bertology.pipeline.io import write_csv
from bertology.sieve.sieve_figures import plot_delta, plot_overlap, plot_roles, plot_scores
from bertology.sieve.scores_io import read_scores
from bertology.sieve.summary import sieve_delta as delta_table
from bertology.sieve.summary import summarize
from bertology.steps.tables import by_task, read_table
from bertology.pipeline.tasks import STORE_VARIANTS

#: the variant of Figs. 3 (score distributions) and 4 (role overlaps), as in the paper: the fine-tuned model (the
#: pretrained one in a run that fine-tunes nothing)
FIGURE_VARIANT = "finetuned"
SUMMARY_METRICS = ("share_delimiter", "share_no_role", "overlap_syntactic_local", "jaccard_syntactic_local",
                   "spearman_rho", "spearman_rho_examples")


def sieve_figures(ctx: StepContext) -> None:
    """Figs. 3-5 of one task: inputs `pretrained`, `finetuned` (sieve.csv; `pretrained` alone in a run that
    fine-tunes nothing) and `scores` (FIGURE_VARIANT's, else the pretrained model's)."""
    cfg = ctx.config.analysis.sieve
    tables = {v: read_table(getattr(ctx.input, v)) for v in STORE_VARIANTS if v in ctx.input}
    shown = FIGURE_VARIANT if FIGURE_VARIANT in tables else "pretrained"
    scores = read_scores(ctx.input.scores)
    paths = [plot_scores(scores, tables, ctx.output.scores, task=ctx.task, tau=float(cfg.tau), alpha=float(cfg.alpha)),
             plot_overlap(tables[shown], ctx.output.overlap, task=ctx.task, variant=shown),
             plot_roles(tables, ctx.output.roles, task=ctx.task)]
    for p in paths:
        ctx.tracker.artifact(p, "figures")


def sieve_delta(ctx: StepContext) -> None:
    """results/stats/sieve_delta.csv and Fig. 6 from every task's pretrained and fine-tuned sieve tables."""
    pretrained, finetuned = by_task(ctx, "pretrained"), by_task(ctx, "finetuned")
    delta = pd.concat([delta_table(read_table(pretrained[t]), read_table(finetuned[t]), t) for t in ctx.config.tasks],
                      ignore_index=True)
    write_csv(delta, ctx.output.table)
    plot_delta(delta, ctx.output.figure)
    ctx.tracker.metrics({f"delta.{row.task}.{row.role}.{row.layer_group}": float(row.delta)
                         for row in delta.itertuples()})
    ctx.tracker.artifact(ctx.output.table)
    ctx.tracker.artifact(ctx.output.figure, "figures")


def sieve_summary(ctx: StepContext) -> None:
    """results/stats/sieve_summary.csv: role shares, overlaps and Spearman correlations per task and variant (the
    variants the rule gives: `pretrained` alone in a run that fine-tunes nothing)."""
    variants = [v for v in STORE_VARIANTS if v in ctx.input]
    tables = {v: by_task(ctx, v) for v in variants}
    scores = {v: by_task(ctx, f"{v}_scores") for v in variants}
    rows = [summarize(read_table(tables[v][t]), read_scores(scores[v][t]), task=t, variant=v)
            for t in ctx.config.tasks for v in variants]
    write_csv(pd.DataFrame(rows), ctx.output.table)
    ctx.tracker.metrics({f"{row['task']}.{row['variant']}.{key}": float(row[key])
                         for row in rows for key in SUMMARY_METRICS if row[key] == row[key]})  # NaN left out
    ctx.tracker.artifact(ctx.output.table)
