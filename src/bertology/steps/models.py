"""Steps over the models of a run of several models (rules/models.smk): the run's ledger, its report and its
explorer, at the run's results root, from every model's own (results/m/{name}/).

``bertology models_ledger --input ledgers=results/m/a/claims.csv --input ledgers=results/m/b/claims.csv
--output ledger=results/claims.csv --output markdown=results/claims.md --output forest=results/figures/claims.png
--output counts=results/compare/claims.csv``: one ``ledgers`` input per model, in the models' order, each model
named by its folder (results/m/{name}/).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_csv, write_text
from bertology.steps.context import StepContext


def models_of(files: list[Path]) -> dict[str, Path]:
    """Each file by the short name of the model whose results root holds it (results/m/{name}/...), in order; a
    file outside a model's root, or two of one model, is an error."""
    from bertology.pipeline.layout import model_of

    out: dict[str, Path] = {}
    for file in files:
        name = model_of(file)
        if name is None:
            raise UserError(f"{file} is not under a model's results root (results/m/{{name}}/)")
        if name in out:
            raise UserError(f"two inputs of model {name!r}: {out[name]} and {file}")
        out[name] = Path(file)
    return out


def models_ledger(ctx: StepContext) -> None:
    """--input ledgers=results/m/{name}/claims.csv per model; --output ledger=results/claims.csv,
    markdown=results/claims.md [, forest=results/figures/claims.png] [, counts=results/compare/claims.csv]."""
    from bertology.claims.forest import write_forest
    from bertology.claims.models import merge_ledgers, to_markdown, verdict_counts

    files = models_of(ctx.input.all("ledgers") if "ledgers" in ctx.input else [])
    if not files:
        raise UserError("models_ledger needs one --input ledgers=results/m/{name}/claims.csv per model")
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise UserError(f"no such ledger: {', '.join(missing)}: run the workflow (snakemake) to write it")
    ledger = merge_ledgers({m: pd.read_csv(p) for m, p in files.items()})
    confidence = ctx.config.analysis.claims.confidence
    write_csv(ledger, ctx.output.ledger)
    write_text(to_markdown(ledger, confidence), ctx.output.markdown)
    if "forest" in ctx.output:
        write_forest(ledger, ctx.output.forest, confidence)
    written = [ctx.output.ledger, ctx.output.markdown]
    if "counts" in ctx.output:
        counts = verdict_counts(ledger, list(files))
        write_csv(counts, ctx.output.counts)
        written.append(ctx.output.counts)
        ctx.tracker.metrics({f"models.holds.{r.claim}.{r.task}": float(r.holds) for r in counts.itertuples()})
    tally = ledger.groupby(["model", "verdict"]).size()
    ctx.log.info("models_ledger: %s -> %s", "; ".join(f"{m} {v} {n}" for (m, v), n in tally.items()),
                 ctx.output.ledger)
    for path in written:
        ctx.tracker.artifact(path)


def models_report(ctx: StepContext) -> None:
    """--output report=results/report.html of a run of several models; --input targets=... the files it shows
    (results/claims.csv, compare/claims.csv, figures/claims.png, compare/{sinks,induction,patterns,roles,depth}.csv
    and .png, m/{name}/report.html and explorer.html, explorer.html), as the one-model report's ``targets``."""
    from bertology.pipeline.config import plain_config
    from bertology.report.models import build_models_report
    from bertology.steps.report import write_page

    write_page(ctx, "models_report", lambda results, targets: build_models_report(
        results, plain_config(ctx.config), targets, ctx.config.analysis.claims.confidence))


def models_explorer(ctx: StepContext) -> None:
    """--output page=results/explorer.html: every model's explorer, one beside another; --input
    explorers=results/m/{name}/explorer.html per model (in the models' order) [, --input
    reports=results/m/{name}/report.html]."""
    import os

    from bertology.explorer.models import models_explorer_html

    out = ctx.output.page
    results = out.parent

    def relative(files: dict[str, Path]) -> dict[str, str]:
        return {m: Path(os.path.relpath(p, results)).as_posix() for m, p in files.items()}

    explorers = models_of(ctx.input.all("explorers") if "explorers" in ctx.input else [])
    if not explorers:
        raise UserError("models_explorer needs one --input explorers=results/m/{name}/explorer.html per model")
    reports = models_of(ctx.input.all("reports")) if "reports" in ctx.input else {}
    write_text(models_explorer_html(relative(explorers), relative(reports)), out)
    ctx.log.info("models_explorer: %s switches between %s", out, ", ".join(explorers))
    ctx.tracker.artifact(out)
