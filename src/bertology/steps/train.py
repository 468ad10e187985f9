"""Steps of rules/train.smk: fine-tune a task (resumable), score a variant, Kovaleva et al.'s Table 1."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from bertology.pipeline import layout
from bertology.steps.context import StepContext
from bertology.pipeline.config import Undeclared
from bertology.pipeline.errors import UserError, snakemake_command
from bertology.pipeline.io import write_json, write_text
from bertology.pipeline.seedtags import seed_from_tag
from bertology.pipeline.tasks import INIT_VARIANT, SCORE_VARIANTS, get_task, with_labels


def _threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))


def _say_head_replaced(ctx: StepContext, model_path: str, spec) -> None:
    """One log line and the MLflow param ``head_replaced`` when the model's saved classification head does not
    fit the task (another number of labels, regression vs classification): its encoder is kept, the head is
    fresh (models.head_mismatch)."""
    from bertology.models.loading import head_mismatch

    why = head_mismatch(model_path, spec.num_labels, regression=spec.is_regression)
    if why is None:
        return
    ctx.log.warning("model %s: %s: its encoder is kept and %s gets a fresh classification head", ctx.config.model,
                    why, spec.name)
    ctx.tracker.params({"head_replaced": why})


def train_model(ctx: StepContext) -> None:
    """results/models/{task}/{init}{seedtag} from the task's train split (per-epoch scores on validation).

    The seed is train.seed for an empty (or absent) ``seedtag`` wildcard, N for ``-seedN``
    (bertology.pipeline.seedtags). The resumable state (bertology.models.checkpoint) lives in
    ``layout.checkpoint(task, init, seedtag)`` (results/checkpoints/{task}/{init}{seedtag}), outside the declared
    output; it is deleted once the model is saved.
    """
    from bertology.data import read_prepared
    from bertology.models.loading import check_max_length, load_classifier, load_tokenizer, resolve_model
    from bertology.pipeline.outputcache import check_cache_writable
    from bertology.models.checkpoint import discard_state, resume_key
    from bertology.models.encoding import encode_split
    from bertology.models.training import autocast_dtype, evaluation_settings, save_model, select_device, train

    check_cache_writable()  # under --cache, before training: Snakemake finds out only after, and deletes the model
    task, init, tag = ctx.wildcards["task"], ctx.wildcards["init"], ctx.wildcards.get("seedtag", "")
    if init not in INIT_VARIANT:
        raise UserError(f"unknown init {init!r}; use one of {', '.join(INIT_VARIANT)}")
    spec, cfg = get_task(task), ctx.config.train
    cfg = dataclasses.replace(cfg, seed=seed_from_tag(tag, cfg.seed))
    max_length = ctx.config.data.max_length
    _threads(ctx.threads)
    device = select_device(ctx.device)
    model_path = resolve_model(ctx.config.model)
    check_max_length(model_path, max_length, ctx.config.model)
    tokenizer = load_tokenizer(model_path)
    train_df = read_prepared(ctx.input.train)
    spec = with_labels(spec, train_df.attrs.get("label_names"))  # a declared task's names from its data
    train_enc = encode_split(tokenizer, train_df, spec, max_length)
    validation = read_prepared(ctx.input.validation)
    eval_enc = encode_split(tokenizer, validation, spec, max_length)
    if init == "pretrained":
        _say_head_replaced(ctx, model_path, spec)
    model = load_classifier(model_path, spec.num_labels, init=init, seed=cfg.seed, id2label=spec.id2label,
                            regression=spec.is_regression)
    key = resume_key(cfg, model=ctx.config.model, init=init, task=task, max_length=max_length, train_df=train_df)
    # the resumable state lives under the same results root as the model it becomes (a model's own root in a run
    # of several models): results/models/{task}/{init}{seedtag} -> results/checkpoints/{task}/{init}{seedtag}
    output = ctx.output.model
    ckpt = Path(layout.checkpoint(task, init, tag, root=output.parent.parent.parent))
    ctx.log.info("fine-tuning %s (%s init, seed %d) on %s: %d train examples, device %s, %d threads",
                 ctx.config.model, init, cfg.seed, task, len(train_enc), device, ctx.threads)
    ctx.tracker.params({"init": init, "seed": cfg.seed, "n_train": len(train_enc), "n_eval": len(eval_enc)})
    ctx.tracker.tags({"variant": INIT_VARIANT[init], "init": init, "checkpoint_path": str(output.resolve()),
                      "resume_dir": str(ckpt.resolve()), "device": str(device)})

    history = train(model, tokenizer, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt,
                    resume_key=key, device=device, on_metrics=ctx.tracker.metrics, progress=ctx.progress)
    if history.resumed_from:
        ctx.tracker.tags({"resumed_from_step": ",".join(map(str, history.resumed_from))})
    settings = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
                if not isinstance(getattr(cfg, f.name), Undeclared)}  # the declared train keys
    save_model(model.cpu(), tokenizer, output, history,
               extra={"task": task, "init": init, "model": ctx.config.model, "max_length": max_length,
                      "train": settings, "device": str(device), "threads": ctx.threads,
                      "evaluation": evaluation_settings(validation, max_length=max_length,
                                                        batch_size=cfg.eval_batch_size, device=device,
                                                        amp_dtype=autocast_dtype(cfg.mixed_precision, device))})
    ctx.tracker.metrics({"train_seconds": history.seconds, "train_steps": len(history.steps)})
    discard_state(ckpt)
    ctx.log.info("saved %s (%d steps, %.0f s)", output, len(history.steps), history.seconds)


def score(ctx: StepContext) -> None:
    """results/scores/{task}/{variant}{seedtag}.json: the Table 1 score of one variant and seed on the
    validation split, with each example's gold label and prediction (``predictions``: what the Table 1 claims
    resample, bertology.claims.paired).

    pretrained: the config's encoder with a fresh classification head seeded by the job's seed (train.seed,
    or N for ``seedtag`` -seedN; no model input); finetuned / random-finetuned: the fine-tuned model of
    that seed given as ``--input model=``, as saved. A fine-tuned model whose training evaluated it last on
    this split with these settings (training.recorded_evaluation: same data, max_length, eval_batch_size,
    device and autocast) is not evaluated again: its recorded metrics and predictions are the score.
    """
    import numpy as np

    from bertology.data import read_prepared
    from bertology.models.loading import load_classifier, load_encoder, load_tokenizer, resolve_model, weights_fingerprint
    from bertology.models.encoding import encode_split, split_labels
    from bertology.models.training import (autocast_dtype, evaluate_predictions, evaluation_settings, prediction_record,
                                           recorded_evaluation, select_device)

    task, variant, tag = ctx.wildcards["task"], ctx.variant, ctx.wildcards.get("seedtag", "")
    spec, cfg = get_task(task), ctx.config.train
    seed = seed_from_tag(tag, cfg.seed)
    if variant not in SCORE_VARIANTS:
        raise UserError(f"unknown variant {variant!r}; use one of {', '.join(SCORE_VARIANTS)}")
    model_dir = ctx.input.get("model")
    if variant == "pretrained":
        if model_dir is not None:
            raise UserError("variant 'pretrained' scores the config's model with an untrained head; "
                            "it takes no --input model")
    else:
        wanted = layout.model_dir(task, variant, tag)
        if model_dir is None:
            raise UserError(f"variant {variant!r} needs --input model={wanted} (the train_model rule's output)")
        if not (model_dir / "config.json").exists():
            raise UserError(f"{model_dir} holds no fine-tuned model; run the train_model rule first "
                            f"(`{snakemake_command(wanted)}`)")
    _threads(ctx.threads)
    device = select_device(ctx.device)
    validation = read_prepared(ctx.input.validation)
    spec = with_labels(spec, validation.attrs.get("label_names"))  # a declared task's names from its data
    amp_dtype = autocast_dtype(cfg.mixed_precision, device)
    max_length = ctx.config.data.max_length
    recorded = None
    if variant != "pretrained":  # the fine-tuned model's training evaluated it last with these settings?
        from bertology.pipeline.outputcache import verify_digest

        verify_digest(model_dir)  # as loading it would: a damaged or edited model is refused, not scored
        recorded = recorded_evaluation(model_dir, evaluation_settings(validation, max_length=max_length,
                                                                      batch_size=cfg.eval_batch_size,
                                                                      device=device, amp_dtype=amp_dtype))
    if recorded is not None:
        path = str(model_dir)
        metrics, predictions, seconds = recorded["metrics"], np.asarray(recorded["predictions"]), recorded["seconds"]
        labels = split_labels(validation, spec)
        ctx.log.info("%s: the evaluation of its last training epoch, made with these settings on these weights "
                     "(training.json), reused", path)
        ctx.tracker.tags({"evaluation": "reused from training"})
    else:
        if variant == "pretrained":
            path = resolve_model(ctx.config.model)
            tokenizer = load_tokenizer(path)
            _say_head_replaced(ctx, path, spec)
            model = load_classifier(path, spec.num_labels, init="pretrained", seed=seed, id2label=spec.id2label,
                                    regression=spec.is_regression).to(device)
        else:
            path = str(model_dir)
            tokenizer = load_tokenizer(path)
            model = load_encoder(path, classifier=True, device=device)
        enc = encode_split(tokenizer, validation, spec, max_length)
        start = time.perf_counter()
        metrics, predictions = evaluate_predictions(model, tokenizer, enc, spec, batch_size=cfg.eval_batch_size,
                                                    device=device, amp_dtype=amp_dtype, progress=ctx.progress)
        seconds, labels = round(time.perf_counter() - start, 3), enc.labels
    result = {"task": task, "variant": variant, "seed": seed, "model": ctx.config.model, "model_path": path,
              "weights": weights_fingerprint(path), "split": "validation", "metrics": metrics, "n": len(labels),
              "seconds": seconds,
              "predictions": prediction_record(validation["idx"].to_numpy(), labels, predictions)}
    if unseen := list(validation.attrs.get("unseen_labels") or []):  # unseen_labels: allow (the ledger notes it)
        result["unseen_labels"] = unseen
    out = write_json(result, ctx.output.score)
    if model_dir is not None:
        ctx.tracker.tags({"model_dir": str(model_dir.resolve())})
    ctx.tracker.metrics({**{f"eval_{k}": v for k, v in metrics.items()}, "eval_n": len(labels)})
    ctx.log.info("%s %s seed %d: %s (n=%d) -> %s", task, variant, seed,
                 ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()), len(labels), out)


def table1(ctx: StepContext) -> None:
    """results/tables/table1.{csv,md}, table1_tests.csv and results/figures/table1.png from every score
    JSON (every variant and fine-tuning seed): mean, std and n over seeds per cell, Welch's t-tests
    between variants at train.alpha.

    The train sizes come from the ``train`` inputs, results/data/{task}/train.parquet (the task is the
    name of the file's folder, as the path contract fixes it); the validation classes never trained on (noted
    under the table) from the ``validation`` inputs' metadata.
    """
    import pyarrow.parquet as pq

    from bertology.data import read_unseen_labels
    from bertology.pipeline.io import write_csv
    from bertology.models.table1 import aggregate_seeds, plot_table1, scores_frame, table1_markdown, variant_tests

    records = []
    for path in ctx.input.all("scores"):
        try:
            records.append(json.loads(Path(path).read_text()))
        except json.JSONDecodeError as err:
            raise UserError(f"{path} is not valid JSON ({err}); delete it and re-run the score rule") from None
    per_seed = scores_frame(records)
    df = aggregate_seeds(per_seed)
    alpha = ctx.config.train.alpha
    tests = variant_tests(per_seed, alpha)
    sizes = {}
    for path in ctx.input.all("train"):
        fields = layout.parse("data", path, split="train")
        if fields is None:
            raise UserError(f"--input train={path} is not a prepared train split ({layout.path('data', split='train')})")
        sizes[fields["task"]] = pq.read_metadata(path).num_rows
    unseen = {}
    for path in ctx.input["validation"] if "validation" in ctx.input else []:  # classes never trained on
        fields = layout.parse("data", path, split="validation")
        if fields is not None and (classes := read_unseen_labels(path)):
            unseen[fields["task"]] = classes
    md = table1_markdown(df, sizes, tests, alpha=alpha, unseen=unseen)
    write_csv(df, ctx.output.csv)
    write_csv(tests, ctx.output.tests)
    write_text(md, ctx.output.md)
    plot_table1(df, ctx.output.figure, title=f"Table 1 ({ctx.config.model})")
    ctx.log.info("Table 1:\n%s", md)
    for path in (ctx.output.csv, ctx.output.md, ctx.output.tests, ctx.output.figure):
        ctx.tracker.artifact(path)
    ctx.tracker.metrics({f"{row.task}.{row.variant}.{row.metric}": row.value for row in df.itertuples()})
    ctx.tracker.metrics({f"{row.task}.{row.variant}.{row.metric}.std": row.std for row in df.itertuples()
                         if row.n_seeds > 1})
    ctx.tracker.params({"n_seeds": int(df["n_seeds"].max()) if len(df) else 0})
