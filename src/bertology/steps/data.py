"""Step of rules/data.smk: prepare one split of one task."""

from __future__ import annotations

from bertology.cli import StepContext
from bertology.data import load_split, write_prepared
from bertology.tasks import get_task


def prepare_data(ctx: StepContext) -> None:
    """results/data/{task}/{split}.parquet (idx, text_a, text_b, label) from data.source."""
    task, split = ctx.wildcards["task"], ctx.wildcards["split"]
    spec = get_task(task)
    df = load_split(task, split, ctx.config.data)
    write_prepared(df, ctx.output.table)
    labels = df["label"].describe().to_dict() if spec.is_regression else df["label"].value_counts().to_dict()
    ctx.log.info("%s/%s: %d rows -> %s; labels: %s", task, split, len(df), ctx.output.table, labels)
    metrics = {"rows": len(df)}
    if not spec.is_regression:
        metrics.update({f"label_{spec.label_names[int(k)]}": v for k, v in sorted(labels.items())})
    ctx.tracker.metrics(metrics)
