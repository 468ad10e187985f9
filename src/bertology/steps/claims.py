"""Step of rules/claims.smk: results/claims.csv and claims.md, the papers' claims checked on this run, their forest
plot results/figures/claims.png, and, with two or more fine-tuning seeds, each task's
stats/{task}/seeds/findings.csv (a view of the ledger)."""

from __future__ import annotations

import math

from bertology.steps.context import StepContext
from bertology.pipeline.io import write_csv, write_text


def off_keys(config) -> set[str]:
    """The config keys gating claim inputs that are off in this run: analysis.norms.enabled (off, or a model whose
    value norms bertology cannot compute), train.inits (without the random initialisation) and
    analysis.syntax.conllu (no gold trees: none given and data.source is not demo, as rules/claims.smk). The
    model's capabilities are the workflow's own decision (bertology.analyses.capability: remembered when the Snakefile
    was read, so this job builds no model to tell)."""
    from bertology.analyses.capability import model_capabilities

    off = set()
    if not config.analysis.norms.enabled or model_capabilities(config.model)["norms"] is not None:
        off.add("analysis.norms.enabled")
    if "random" not in config.train.inits:
        off.add("train.inits")
    if not config.analysis.syntax.conllu and config.data.source != "demo":
        off.add("analysis.syntax.conllu")
    return off


def claims(ctx: StepContext) -> None:
    """--output ledger=results/claims.csv, markdown=results/claims.md [, forest=results/figures/claims.png]
    [, findings=stats/{task}/seeds/findings.csv per task]; --input tables=... every table the claims read
    (bertology.claims.ledger.required_inputs)."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import build_ledger, findings_view, to_markdown
    from bertology.claims.bootstrap import Boot
    from bertology.pipeline.layout import match, under
    from bertology.pipeline.seedtags import configured_seeds

    cfg = ctx.config
    out = ctx.output.ledger
    results = out.parent
    declared = set(under(results, ctx.input.all("tables"))) if "tables" in ctx.input else set()
    # the fine-tuning seeds: none when nothing is fine-tuned (train.inits: [])
    seeds = configured_seeds({"seed": cfg.train.seed, "seeds": cfg.train.seeds}) if cfg.train.inits else []
    boot = Boot(resamples=cfg.analysis.claims.bootstrap, confidence=cfg.analysis.claims.confidence,
                seed=int(cfg.data.seed))
    from bertology.analyses.capability import model_capabilities

    from bertology.pipeline.modelset import model_name

    kind = model_capabilities(cfg.model)["kind"]
    ledger = build_ledger(results, REGISTRY.claims(kind), list(cfg.tasks), seeds, boot,
                          order=[s.key for s in REGISTRY.report_sections()], declared=declared, off=off_keys(cfg),
                          model=model_name({"model": cfg.model, "model_name": cfg.model_name}))
    write_csv(ledger, out)
    write_text(to_markdown(ledger, boot.confidence), ctx.output.markdown)
    if "forest" in ctx.output:
        from bertology.claims.forest import write_forest

        write_forest(ledger, ctx.output.forest, boot.confidence)
    findings = ctx.output.all("findings") if "findings" in ctx.output else []
    for path in findings:
        task = (match("seed_stat", str(path.relative_to(results))) or {}).get("task")
        write_csv(findings_view(ledger, task), path)
    counts = ledger["verdict"].value_counts().to_dict()
    ctx.log.info("claims: %s -> %s", ", ".join(f"{v} {k}" for k, v in counts.items()), out)
    _track(ctx, ledger, out, ctx.output.markdown, model=cfg.model_name)


def _track(ctx: StepContext, ledger, *paths, model: str | None = None) -> None:
    """The parent run (the workflow invocation's): metric claims.{claim}.{task} = effect, tag claim.{claim}.{task} =
    verdict, the ledger as artifacts; the job's own run gets the same and the count of each verdict. With a
    `model` name set (``model_name``: each model of a run of several, whose ledgers share the parent run), the keys
    are claims.{model}.{claim}.{task} and claim.{model}.{claim}.{task} and the parent's artifacts go under
    models/{model}/."""
    at = f"{model}." if model else ""
    metrics = {f"claims.{at}{r.claim}.{r.task}": float(r.effect) for r in ledger.itertuples()
               if isinstance(r.effect, float) and math.isfinite(r.effect)}
    tags = {f"claim.{at}{r.claim}.{r.task}": r.verdict for r in ledger.itertuples()}
    parent = ctx.tracker.on_parent()
    for tracker in (ctx.tracker, parent):
        tracker.metrics(metrics)
        tracker.tags(tags)
        for path in paths:
            tracker.artifact(path, f"models/{model}" if model and tracker is parent else None)
    counts = ledger["verdict"].value_counts()
    ctx.tracker.metrics({f"claims.count.{k.replace(' ', '_')}": float(v) for k, v in counts.items()})
