"""Step of rules/data.smk: prepare one split of one task."""

from __future__ import annotations

from bertology.steps.context import StepContext
from bertology.data import load_split_rows, skipped_frame, write_prepared
from bertology.pipeline.tasks import get_task, with_labels


def prepare_data(ctx: StepContext) -> None:
    """results/data/{task}/{split}.parquet (idx, text_a, text_b, label) from data.source, and (output
    `skipped`) the table of malformed source rows (GLUE files; a declared task's unusable rows: blank texts, bad labels)
    dropped under data.bad_rows: skip (file, line, fields,
    expected, problem: `fields` or `blank <column>` for an empty or whitespace-only text; empty when none), also
    counted in the MLflow run (`rows_skipped`; `rows_blank`: those with a blank text) and logged there as an
    artifact."""
    from bertology.pipeline.io import write_csv

    task, split = ctx.wildcards["task"], ctx.wildcards["split"]
    spec = get_task(task)
    df, skipped = load_split_rows(task, split, ctx.config.data)
    spec = with_labels(spec, df.attrs.get("label_names"))  # a declared task's names, recorded in the parquet
    write_prepared(df, ctx.output.table)
    skipped_path = ctx.output.get("skipped")
    if skipped_path is not None:
        write_csv(skipped_frame(skipped), skipped_path)
    if skipped:
        lines = ", ".join(f"{s.file}:{s.line} ({s.problem})" for s in skipped)
        ctx.log.warning("%s/%s: skipped %d malformed row(s) (data.bad_rows: skip): %s", task, split, len(skipped),
                        lines)
    labels = df["label"].describe().to_dict() if spec.is_regression else df["label"].value_counts().to_dict()
    ctx.log.info("%s/%s: %d rows -> %s; labels: %s", task, split, len(df), ctx.output.table, labels)
    metrics = {"rows": len(df), "rows_skipped": len(skipped),
               "rows_blank": sum(s.problem.startswith("blank ") for s in skipped)}
    if not spec.is_regression:
        metrics.update({f"label_{spec.label_names[int(k)]}": v for k, v in sorted(labels.items())})
    ctx.tracker.metrics(metrics)
    if skipped and skipped_path is not None:
        ctx.tracker.artifact(skipped_path)
