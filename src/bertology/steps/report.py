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
    from bertology.report.page import build_report

    write_page(ctx, "report", lambda results, targets: build_report(results, plain_config(ctx.config), targets))


def write_page(ctx: StepContext, name: str, build) -> None:
    """Write the page of ``--output report=`` from the files declared as ``--input targets=`` (every one must exist:
    a missing one is an error naming it), `build(results, targets)` giving its HTML from the results root and the
    targets relative to it; log its size and keep it as the job's artifact."""
    from bertology.pipeline.layout import under

    out = ctx.output.report
    results = out.parent
    targets = ctx.input.all("targets") if "targets" in ctx.input else []
    missing = [str(p) for p in targets if not p.exists()]
    if missing:
        raise UserError(f"the report needs {len(missing)} missing input(s), e.g. {missing[0]}: run the workflow "
                        f"(snakemake) to produce them first")
    write_text(build(results, under(results, targets)), out)
    ctx.log.info("%s: %s (%.1f MB) from %s", name, out, out.stat().st_size / 1e6, results)
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
