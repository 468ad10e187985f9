"""Steps of rules/ablation.smk: disable every head and every layer alone (Kovaleva et al. 4.6), Figs. 8-9."""

from __future__ import annotations

import time
from pathlib import Path

from bertology.steps.context import StepContext
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_json


def _write_json(obj: dict, path: Path) -> None:
    """Write JSON atomically (a killed job never leaves half a file)."""
    write_json(obj, path, default=float, end="")


def _load_finetuned(ctx: StepContext):
    """The fine-tuned classifier of the job's task (``--input model=``) passed through
    :func:`~bertology.ablation.heads.enable_heads`, its tokenizer and the device; checks that its outputs fit
    the task."""
    import torch

    from bertology.ablation.heads import enable_heads
    from bertology.models.loading import load_encoder, load_tokenizer
    from bertology.pipeline.tasks import get_task
    from bertology.models.training import select_device

    task = ctx.wildcards["task"]
    spec = get_task(task)
    torch.set_num_threads(ctx.threads)
    device = select_device(ctx.device)
    if not ctx.progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    model = enable_heads(load_encoder(str(ctx.input.model), classifier=True, device=device))
    if model.config.num_labels != spec.num_labels and (spec.is_regression or spec.label_names):
        raise UserError(f"{ctx.input.model} has {model.config.num_labels} output(s) but {task} needs "
                        f"{spec.num_labels}: give the model fine-tuned on {task} (results/models/{task}/pretrained)")
    return model, load_tokenizer(str(ctx.input.model)), device


def _eval_sample(ctx: StepContext):
    """The seeded validation sample (ablation.examples, ablation.seed) every ablation step evaluates on."""
    from bertology.data import read_prepared, sample_rows

    cfg = ctx.config.ablation
    return sample_rows(read_prepared(ctx.input.validation), cfg.examples, cfg.seed,
                       what=f"{ctx.wildcards['task']}/validation", key="ablation.examples",
                       short_split=ctx.config.data.short_split)


def ablation_sweep(ctx: StepContext) -> None:
    """results/ablation/{task}/heads.csv, layers.csv, summary.csv, summary.json from the fine-tuned model.

    The examples are a seeded sample (ablation.examples, ablation.seed) of the validation split; the model
    is the one fine-tuned from the pretrained encoder (``--input model=``).
    """
    from bertology.ablation.heads import DisablingUnsupported
    from bertology.ablation.ablation_figures import verdict
    from bertology.ablation.significance import COLUMN_DOCS, sweep_tables
    from bertology.ablation.sweep import encode_batches, resolve_sweep, run_sweep
    from bertology.pipeline.io import write_csv

    task, cfg = ctx.wildcards["task"], ctx.config.ablation
    df = _eval_sample(ctx)
    try:
        model, tokenizer, device = _load_finetuned(ctx)
    except DisablingUnsupported as err:
        _write_unsupported(ctx, task, str(err))
        return
    batches = encode_batches(tokenizer, df, ctx.config.data.max_length, cfg.batch_size)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads

    sweep, why = resolve_sweep(model, cfg.sweep)
    if why is not None:
        ctx.log.warning("%s: ablation.sweep is %r but %s: running the naive sweep (same outputs, slower)",
                        task, cfg.sweep, why)
    t0 = time.perf_counter()
    logits = run_sweep(model, batches, len(df), sweep=sweep, config_batch=cfg.config_batch,
                       progress=ctx.progress)
    sweep_s = time.perf_counter() - t0
    ctx.log.info("%s: %d configurations x %d examples in %.1f s (%s sweep, %s, %s disabling)", task,
                 logits.shape[0], len(df), sweep_s, sweep, device, model.bertology_heads)
    tables = sweep_tables(task, df["label"].to_numpy(), logits, n_layers, n_heads, n_boot=cfg.bootstrap,
                          seed=cfg.seed, alpha=cfg.alpha)
    info = {**tables.summary_info, "verdict": verdict(tables.summary_info), "columns": COLUMN_DOCS,
            "sweep": sweep, "disabling": model.bertology_heads}
    write_csv(tables.heads, ctx.output.heads)
    write_csv(tables.layers, ctx.output.layers)
    write_csv(tables.summary, ctx.output.summary)
    _write_json(info, ctx.output.info)
    if ctx.output.get("examples") is not None:
        _write_examples(ctx.output.examples, task, df, logits, n_layers, n_heads)
    ctx.log.info("%s", info["verdict"])

    tracker = ctx.tracker
    tracker.tags({"variant": "finetuned", "device": str(device), "sweep": sweep, "sweep_requested": cfg.sweep,
                  "disabling": model.bertology_heads, "model_type": model.config.model_type})
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


def _write_examples(path: Path, task: str, df, logits, n_layers: int, n_heads: int) -> None:
    """examples.npz of the sweep: each configuration's prediction of each example, what the seed statistics
    resample. predictions (C, E) in the order of sweep_configurations (baseline, every head, every layer),
    layer and head (C,) (-1 where none), labels and example_idx (E,)."""
    import numpy as np

    from bertology.ablation.sweep import sweep_configurations
    from bertology.pipeline.io import write_npz
    from bertology.models.metrics import predictions_from_logits
    from bertology.pipeline.tasks import get_task

    configs = sweep_configurations(n_layers, n_heads)
    write_npz({"predictions": predictions_from_logits(logits, get_task(task).is_regression),
               "labels": df["label"].to_numpy(), "example_idx": df["idx"].to_numpy(),
               "layer": np.asarray([-1 if c.layer is None else c.layer for c in configs]),
               "head": np.asarray([-1 if c.head is None else c.head for c in configs])}, path)


def _write_unsupported(ctx: StepContext, task: str, reason: str) -> None:
    """The sweep's outputs when the model's heads cannot be disabled: empty tables and the reason."""
    import pandas as pd

    from bertology.ablation.significance import COLUMN_DOCS, TABLE_COLUMNS
    from bertology.pipeline.io import write_csv

    ctx.log.warning("%s: disabling heads is not possible: %s; writing empty tables that say so", task, reason)
    write_csv(pd.DataFrame(columns=TABLE_COLUMNS), ctx.output.heads)
    write_csv(pd.DataFrame(columns=[c for c in TABLE_COLUMNS if c != "head"]), ctx.output.layers)
    write_csv(pd.DataFrame({"task": [task], "not_computed": [reason]}), ctx.output.summary)
    _write_json({"task": task, "unsupported": reason, "verdict": f"not computed: {reason}", "columns": COLUMN_DOCS},
                ctx.output.info)
    if ctx.output.get("examples") is not None:  # no configuration was run: empty arrays
        import numpy as np

        from bertology.pipeline.io import write_npz

        write_npz({k: np.zeros((0,) * (2 if k == "predictions" else 1)) for k in
                   ("predictions", "labels", "example_idx", "layer", "head")}, ctx.output.examples)
    ctx.tracker.tags({"variant": "finetuned", "sweep": "none", "unsupported": reason})


def ablation_figures(ctx: StepContext) -> None:
    """Kovaleva Figs. 8 (heads heatmap) and 9 (layers bars) of one task from heads.csv and layers.csv."""
    import pandas as pd

    from bertology.ablation.ablation_figures import plot_heads, plot_layers, plot_unavailable

    task = ctx.wildcards["task"]
    heads, layers = pd.read_csv(ctx.input.heads), pd.read_csv(ctx.input.layers)
    ctx.tracker.tags({"variant": "finetuned"})
    if heads.empty:  # the sweep could not disable this model's heads; its summary.csv says why
        summary = pd.read_csv(ctx.input.summary)
        reason = str(summary["not_computed"].iloc[0]) if "not_computed" in summary else "no heads in heads.csv"
        paths = (plot_unavailable(f"Disabling heads - {task}", reason, ctx.output.heads),
                 plot_unavailable(f"Disabling layers - {task}", reason, ctx.output.layers))
    else:
        paths = (plot_heads(heads, task, ctx.output.heads), plot_layers(layers, task, ctx.output.layers))
    for path in paths:
        ctx.tracker.artifact(path, "figures")


def ablation_pruning(ctx: StepContext) -> None:
    """results/ablation/{task}/importance.csv and pruning.csv (Michel et al. 2019) from the fine-tuned model.

    Importance: mean |dL/d gate| per head over a seeded sample (ablation.pruning.importance_examples) of
    ablation.pruning.importance_split (``--input importance_data=``; the paper: training data), normalised
    per layer (l2). Pruning: the validation sample of the disabling sweep (ablation.examples, ablation.seed)
    scored with 0, step, ..., 100% of the heads removed (ablation.pruning.mode), least important first and
    in ablation.pruning.random_orders random orders.
    """
    from bertology.ablation.heads import DisablingUnsupported
    from bertology.ablation.importance import head_importance
    from bertology.ablation.pruning import pruned_logits, pruning_fractions, pruning_plan, pruning_table
    from bertology.ablation.significance import curve_summary
    from bertology.ablation.sweep import encode_batches, resolve_sweep
    from bertology.data import read_prepared, sample_rows
    from bertology.pipeline.io import write_csv
    from bertology.pipeline.tasks import get_task

    task, cfg = ctx.wildcards["task"], ctx.config.ablation
    pcfg, spec = cfg.pruning, get_task(task)
    split = pcfg.importance_split
    imp_df = sample_rows(read_prepared(ctx.input.importance_data), pcfg.importance_examples, cfg.seed,
                         what=f"{task}/{split}", key="ablation.pruning.importance_examples",
                         short_split="all")  # a cap, not a sample size: a smaller split is used whole
    df = _eval_sample(ctx)
    try:
        model, tokenizer, device = _load_finetuned(ctx)
    except DisablingUnsupported as err:
        _write_pruning_unsupported(ctx, task, split, str(err))
        return
    method, why = resolve_sweep(model, cfg.sweep)
    if why is not None:
        ctx.log.warning("%s: ablation.sweep is %r but %s: pruning with the naive method (same outputs, slower)",
                        task, cfg.sweep, why)
    max_length = ctx.config.data.max_length
    t0 = time.perf_counter()
    importance = head_importance(model, encode_batches(tokenizer, imp_df, max_length, cfg.batch_size),
                                 imp_df["label"].to_numpy(), progress=ctx.progress)
    importance_s = time.perf_counter() - t0
    write_csv(importance.frame(split), ctx.output.importance)
    ctx.log.info("%s: head importance over %d %s examples in %.1f s", task, importance.n, split, importance_s)

    labels = df["label"].to_numpy()
    seeds = [cfg.seed + i + 1 for i in range(pcfg.random_orders)]
    plan, masks = pruning_plan(importance.importance, pruning_fractions(pcfg.step), seeds)
    t0 = time.perf_counter()
    logits = pruned_logits(model, encode_batches(tokenizer, df, max_length, cfg.batch_size), masks, len(df),
                           mode=pcfg.mode, method=method, config_batch=cfg.config_batch, progress=ctx.progress)
    pruning_s = time.perf_counter() - t0
    table = pruning_table(plan, logits, labels, spec.metrics, spec.is_regression, pcfg.mode)
    write_csv(table, ctx.output.pruning)
    ctx.log.info("%s: %d pruned configurations x %d validation examples in %.1f s (%s, %s removal)", task,
                 len(masks), len(df), pruning_s, method, pcfg.mode)

    tracker = ctx.tracker
    n_heads = model.config.num_attention_heads
    tracker.tags({"variant": "finetuned", "device": str(device), "sweep": method, "sweep_requested": cfg.sweep,
                  "pruning_mode": pcfg.mode, "importance_split": split})
    tracker.metrics({"importance_seconds": importance_s, "pruning_seconds": pruning_s,
                     "importance_examples": importance.n, "n_examples": len(df)})
    # normalised importance per head at step = layer * H + head
    for r in importance.frame(split).itertuples():
        tracker.metric("head_importance", float(r.importance), step=int(r.layer * n_heads + r.head))
    # the curves at step = percent of heads pruned
    for r in curve_summary(table).itertuples():
        step = int(round(100 * r.fraction))
        tracker.metric(f"pruned_{r.metric}_importance_order", float(r.importance), step=step)
        if r.random_n:
            tracker.metric(f"pruned_{r.metric}_random_mean", float(r.random_mean), step=step)
    for path in (ctx.output.importance, ctx.output.pruning):
        tracker.artifact(path)


def _write_pruning_unsupported(ctx: StepContext, task: str, split: str, reason: str) -> None:
    """importance.csv / pruning.csv when the model's heads cannot be gated: empty, the reason in the log and MLflow."""
    import pandas as pd

    from bertology.pipeline.io import write_csv

    ctx.log.warning("%s: head importance and pruning are not possible: %s; writing empty tables", task, reason)
    write_csv(pd.DataFrame(columns=["layer", "head", "importance", "raw", "n", "split"]), ctx.output.importance)
    write_csv(pd.DataFrame(columns=["order", "seed", "fraction", "n_pruned", "metric", "value", "mode"]),
              ctx.output.pruning)
    ctx.tracker.tags({"variant": "finetuned", "sweep": "none", "unsupported": reason})


def pruning_figures(ctx: StepContext) -> None:
    """The importance map (layer x head) and the pruning curves of one task from importance.csv, pruning.csv."""
    import pandas as pd

    from bertology.ablation.ablation_figures import plot_importance, plot_pruning, plot_unavailable

    task = ctx.wildcards["task"]
    ctx.tracker.tags({"variant": "finetuned"})
    importance, pruning = pd.read_csv(ctx.input.importance), pd.read_csv(ctx.input.pruning)
    if importance.empty:  # the model's heads cannot be gated (ablation_pruning's log says why)
        reason = "this model's heads cannot be gated (see results/logs/ablation_pruning)"
        paths = (plot_unavailable(f"Head importance - {task}", reason, ctx.output.importance),
                 plot_unavailable(f"Pruning heads - {task}", reason, ctx.output.pruning))
    else:
        paths = (plot_importance(importance, task, ctx.output.importance),
                 plot_pruning(pruning, task, ctx.output.pruning))
    for path in paths:
        ctx.tracker.artifact(path, "figures")
