"""Step of rules/seeds.smk: every per-head statistic of one task compared across fine-tuning seeds.

``seed_stats``: list inputs one path per fine-tuned seed, in the order of ``train.seeds`` (the rule expands
``bertology.pipeline.seedtags.finetuned_variants``): one per table the registry compares across seeds, named as its seed table
(:meth:`bertology.registry.Registry.seed_inputs`), and the examples and scores of the Multi-Bootstrap;
``pretrained_scores`` is the one pretrained store's sieve scores. The findings over seeds are the claims ledger's
view (``bertology.steps.claims``).
Writes results/stats/{task}/seeds/*.csv (bertology.stats.across_seeds) and the two figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bertology.analyses import REGISTRY
from bertology.steps.context import StepContext
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_csv
from bertology.pipeline.seedtags import configured_seeds
from bertology.stats.across_seeds import (MULTIBOOTSTRAP_COLUMNS, disabling_values, faithfulness_table, head_grid_labels, multibootstrap_table,
                                 plot_role_agreement, plot_stability, role_tables, seed_moments)
from bertology.sieve.scores_io import read_scores
from bertology.steps.tables import read_table
from bertology.pipeline.tasks import get_task


def _per_seed(ctx: StepContext, name: str, n: int) -> list[Path]:
    paths = ctx.input.all(name)
    if len(paths) != n:
        raise UserError(f"step {ctx.step}: --input {name} needs one path per fine-tuning seed of train.seeds ({n}), "
                        f"in that order; got {len(paths)}")
    return paths


def _aligned(ctx: StepContext, arrays: list[np.ndarray], idx: list[np.ndarray], what: str) -> np.ndarray:
    """Stack per-seed (N, ...) arrays after checking that every seed holds the same examples in the same order."""
    for i in idx[1:]:
        if not np.array_equal(i, idx[0]):
            raise UserError(f"{ctx.task}: the seeds' {what} do not hold the same examples in the same order; delete "
                            f"them and re-run snakemake (every seed must use the same attention/ablation sample)")
    return np.stack(arrays)


def seed_stats(ctx: StepContext) -> None:
    """results/stats/{task}/seeds/*.csv, results/figures/seeds-{stability,roles}-{task}.png."""
    seeds = configured_seeds({"seed": ctx.config.train.seed, "seeds": ctx.config.train.seeds})
    if len(seeds) < 2:
        raise UserError("the seed statistics need two or more train.seeds (train.seeds: [42, 43, ...])")
    cfg, S = ctx.config.analysis.seeds, len(seeds)
    boot = {"resamples": cfg.bootstrap, "seed": int(ctx.config.data.seed), "confidence": cfg.confidence}
    per_head = REGISTRY.seed_tables()  # name -> the declared table with its keys and value (registry.AcrossSeeds)
    tables = {name: [read_table(p) for p in _per_seed(ctx, name, S)]
              for name in per_head if ctx.input.get(name) is not None}
    moments = {}
    for name, frames in tables.items():
        across = per_head[name].seeds
        moments[name] = seed_moments(frames, seeds, across.keys, across.value)
        write_csv(moments[name], getattr(ctx.output, name))

    roles, agreement = role_tables(tables["sieve"], seeds)
    write_csv(roles, ctx.output.roles)
    write_csv(agreement, ctx.output.role_agreement)

    # Multi-Bootstrap of the fine-tuned - pretrained differences: seeds and examples resampled together
    parts = []
    cos = [np.load(p) for p in _per_seed(ctx, "cosine_examples", S)]
    values = _aligned(ctx, [z["cosine"] for z in cos], [z["example_idx"] for z in cos], "cosine examples")
    L, H = values.shape[2:4]
    parts.append(multibootstrap_table(values.reshape(S, values.shape[1], -1), head_grid_labels(L, H),
                                      quantity="cosine", **boot))
    pre = read_scores(ctx.input.pretrained_scores)
    fine = [read_scores(p) for p in _per_seed(ctx, "sieve_scores", S)]
    diff = _aligned(ctx, [f.values - pre.values for f in fine],
                    [f["example_idx"].values for f in fine], "sieve scores")
    _aligned(ctx, [pre.values, fine[0].values], [pre["example_idx"].values, fine[0]["example_idx"].values],
             "sieve scores (pretrained and fine-tuned)")
    labels = head_grid_labels(pre.sizes["layer"], pre.sizes["head"], role=[str(r) for r in pre["role"].values])
    parts.append(multibootstrap_table(diff.reshape(S, diff.shape[1], -1), labels, quantity="sieve_bias", **boot))
    sweeps = [np.load(p) for p in _per_seed(ctx, "ablation_examples", S)]
    if all(z["predictions"].size for z in sweeps):
        regression = get_task(ctx.task).is_regression
        per = [disabling_values(z["predictions"], z["labels"], z["layer"], z["head"], regression) for z in sweeps]
        values = _aligned(ctx, [v for v, _, _ in per], [z["example_idx"] for z in sweeps], "disabling examples")  # (S, E, K)
        table = multibootstrap_table(values, per[0][1], quantity="disabling_delta", **boot)
        table.insert(1, "metric", per[0][2])
        parts.append(table)
    else:
        ctx.log.warning("%s: the disabling sweep was not computed for every seed; no Multi-Bootstrap of its delta",
                        ctx.task)
    if ctx.input.get("faithfulness_examples") is not None:     # the token views' faithfulness (norm analyses)
        parts.append(faithfulness_table([read_table(p) for p in _per_seed(ctx, "faithfulness_examples", S)], **boot))
    mb = pd.concat(parts, ignore_index=True).reindex(columns=list(MULTIBOOTSTRAP_COLUMNS))
    write_csv(mb, ctx.output.multibootstrap)


    headline = moments["disabling"]
    headline = headline[headline["metric"] == headline["metric"].iloc[0]] if len(headline) else headline
    plot_stability({"cosine": moments["cosine"], "importance": moments["importance"],
                    f"disabling delta ({headline['metric'].iloc[0] if len(headline) else 'none'})": headline},
                   ctx.output.stability, task=ctx.task)
    plot_role_agreement(agreement, ctx.output.role_figure, task=ctx.task)
    _track(ctx, moments, agreement, mb)


def _track(ctx: StepContext, moments, agreement: pd.DataFrame, mb: pd.DataFrame) -> None:
    """MLflow: per-layer mean std over seeds, role agreement (all heads, and by layer as steps); the findings over
    seeds are the claims ledger's (bertology.steps.claims)."""
    tracker = ctx.tracker
    for name in ("cosine", "importance"):
        for layer, value in moments[name].groupby("layer")["std"].mean().items():
            if np.isfinite(value):
                tracker.metric(f"seeds.{name}_std_by_layer", float(value), step=int(layer))
    overall = agreement[agreement["layer"].isna()]
    tracker.metrics({f"seeds.{what}.{r.role}": float(getattr(r, what)) for r in overall.itertuples()
                     for what in ("fleiss_kappa", "jaccard") if np.isfinite(getattr(r, what))})
    for r in agreement[agreement["layer"].notna()].itertuples():
        if np.isfinite(r.fleiss_kappa):
            tracker.metric(f"seeds.fleiss_kappa_by_layer.{r.role}", float(r.fleiss_kappa), step=int(r.layer))
    for quantity, sub in mb.groupby("quantity"):
        excludes_zero = ((sub["ci_low"] > 0) | (sub["ci_high"] < 0)).mean()
        tracker.metric(f"seeds.multibootstrap.{quantity}.share_excluding_zero", float(excludes_zero))
    tracker.metric("seeds.n_seeds", float(len(ctx.config.train.seeds or [])))
    for path in (ctx.output.role_agreement, ctx.output.multibootstrap):
        tracker.artifact(path)
    for path in (ctx.output.stability, ctx.output.role_figure):
        tracker.artifact(path, "figures")
