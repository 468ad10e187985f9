"""Step of rules/report.smk: results/report.html, every table and figure of the run on one page."""

from __future__ import annotations

from bertology.steps.context import StepContext
from bertology.pipeline.config import plain_config
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_text


def report(ctx: StepContext) -> None:
    """The report of the run whose results root holds ``--output report=`` (results/report.html).

    The page shows the files the rule declares as ``--input targets=`` (every target of the run, so the report
    re-runs whenever one of them changes) and nothing else: tables by their registry templates, figures by
    file-name prefix (bertology.report.page.SECTIONS). The config sections handed over are shown as they are.
    """
    from bertology.pipeline.layout import under
    from bertology.report.page import build_report

    out = ctx.output.report
    results = out.parent
    targets = ctx.input.all("targets") if "targets" in ctx.input else []
    missing = [str(p) for p in targets if not p.exists()]
    if missing:
        raise UserError(f"the report needs {len(missing)} missing input(s), e.g. {missing[0]}: run the workflow "
                        f"(snakemake) to produce them first")
    text = build_report(results, plain_config(ctx.config), under(results, targets))
    write_text(text, out)
    ctx.log.info("report: %s (%.1f MB) from %s", out, out.stat().st_size / 1e6, results)
    ctx.tracker.artifact(out)


def explorer(ctx: StepContext) -> None:
    """results/explorer.html: the head explorer of the run whose results root holds ``--output page=``.

    The page shows the files the rule declares as its inputs (every name; bertology.explorer.explorer_inputs
    lists them) and nothing else it finds under the results root."""
    from bertology.explorer import DEFAULT_EXAMPLES, write_explorer
    from bertology.pipeline.layout import under
    from bertology.store import expected_attrs

    out = ctx.output.page
    results = out.parent
    declared = under(results, [p for name in ctx.input for p in ctx.input.all(name)])
    write_explorer(results, list(ctx.config.tasks), out, examples=DEFAULT_EXAMPLES, seed=ctx.config.data.seed,
                   expect=lambda task, variant: expected_attrs(ctx.config, task, variant), inputs=declared)
    ctx.tracker.metric("megabytes", out.stat().st_size / 1e6)
    ctx.tracker.artifact(out)
