"""Steps of rules/ablation.smk: disable every head and every layer alone (Kovaleva et al. 4.6), Figs. 8-9."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bertology.cli import StepContext
from bertology.errors import UserError


def _write_json(obj: dict, path: Path) -> None:
    """Write JSON atomically (a killed job never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=float))
    tmp.replace(path)


def ablation_sweep(ctx: StepContext) -> None:
    """results/ablation/{task}/heads.csv, layers.csv, summary.csv, summary.json from the fine-tuned model.

    The examples are a seeded sample (ablation.examples, ablation.seed) of the validation split; the model
    is the one fine-tuned from the pretrained encoder (``--input model=``).
    """
    import torch

    from bertology.ablation.disable import enable_disabling
    from bertology.ablation.figures import verdict
    from bertology.ablation.stats import COLUMN_DOCS, sweep_tables
    from bertology.ablation.sweep import encode_batches, run_sweep
    from bertology.data import read_prepared, sample_rows
    from bertology.io import write_csv
    from bertology.models import load_encoder, load_tokenizer
    from bertology.tasks import get_task
    from bertology.training import select_device

    task, cfg = ctx.wildcards["task"], ctx.config.ablation
    spec = get_task(task)
    torch.set_num_threads(ctx.threads)
    df = sample_rows(read_prepared(ctx.input.validation), cfg.examples, cfg.seed, what=f"{task}/validation",
                     key="ablation.examples", short_split=ctx.config.data.short_split)
    device = select_device(ctx.device)
    if not ctx.progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    model = enable_disabling(load_encoder(str(ctx.input.model), classifier=True, device=device))
    tokenizer = load_tokenizer(str(ctx.input.model))
    if model.config.num_labels != spec.num_labels:
        raise UserError(f"{ctx.input.model} has {model.config.num_labels} output(s) but {task} needs "
                        f"{spec.num_labels}: give the model fine-tuned on {task} (results/models/{task}/pretrained)")
    batches = encode_batches(tokenizer, df, ctx.config.data.max_length, cfg.batch_size)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads

    t0 = time.perf_counter()
    logits = run_sweep(model, batches, len(df), sweep=cfg.sweep, config_batch=cfg.config_batch,
                       progress=ctx.progress)
    sweep_s = time.perf_counter() - t0
    ctx.log.info("%s: %d configurations x %d examples in %.1f s (%s sweep, %s)", task, logits.shape[0], len(df),
                 sweep_s, cfg.sweep, device)
    tables = sweep_tables(task, df["label"].to_numpy(), logits, n_layers, n_heads, n_boot=cfg.bootstrap,
                          seed=cfg.seed, alpha=cfg.alpha)
    info = {**tables.summary_info, "verdict": verdict(tables.summary_info), "columns": COLUMN_DOCS}
    write_csv(tables.heads, ctx.output.heads)
    write_csv(tables.layers, ctx.output.layers)
    write_csv(tables.summary, ctx.output.summary)
    _write_json(info, ctx.output.info)
    ctx.log.info("%s", info["verdict"])

    tracker = ctx.tracker
    tracker.tags({"variant": "finetuned", "device": str(device), "sweep": cfg.sweep})
    tracker.metrics({"sweep_seconds": sweep_s, "n_examples": len(df),
                     **{f"baseline_{m}": v for m, v in info["baseline"].items()}})
    for metric, m in info["metrics"].items():
        tracker.metrics({f"random_head_delta_{metric}": m["random_head"]["delta"],
                         f"surviving_head_gains_{metric}": len(m["heads"]["surviving_gains"]),
                         f"surviving_layer_gains_{metric}": len(m["layers"]["surviving_gains"])})
    # per-head deltas at step = layer * H + head; per-layer deltas at step = layer
    for r in tables.heads.itertuples():
        tracker.metric(f"head_delta_{r.metric}", float(r.delta), step=int(r.layer * n_heads + r.head))
    for r in tables.layers.itertuples():
        tracker.metric(f"layer_delta_{r.metric}", float(r.delta), step=int(r.layer))
    for path in (ctx.output.heads, ctx.output.layers, ctx.output.summary, ctx.output.info):
        tracker.artifact(path)


def ablation_figures(ctx: StepContext) -> None:
    """Kovaleva Figs. 8 (heads heatmap) and 9 (layers bars) of one task from heads.csv and layers.csv."""
    import pandas as pd

    from bertology.ablation.figures import plot_heads, plot_layers

    task = ctx.wildcards["task"]
    heads, layers = pd.read_csv(ctx.input.heads), pd.read_csv(ctx.input.layers)
    ctx.tracker.tags({"variant": "finetuned"})
    for path in (plot_heads(heads, task, ctx.output.heads), plot_layers(layers, task, ctx.output.layers)):
        ctx.tracker.artifact(path, "figures")
