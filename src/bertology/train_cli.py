"""Commands of the fine-tuning rules: ``bertology train`` and ``bertology evaluate``.

Both take ``--params`` = JSON ``{"model": <config model>, "max_length": <data.max_length>, "train": {...}}``
(only the config the result depends on, so analysis settings never retrain).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from bertology.tasks import get_task

log = logging.getLogger(__name__)

VARIANT_INIT = {"finetuned": "pretrained", "random-finetuned": "random"}
INIT_VARIANT = {v: k for k, v in VARIANT_INIT.items()}
VARIANTS = ("pretrained", "finetuned", "random-finetuned")


class MetricBuffer:
    """Collects MLflow metrics and writes them in batches (one sqlite transaction per 100)."""

    def __init__(self, run_id: str, size: int = 100):
        import mlflow

        self.client = mlflow.MlflowClient()
        self.run_id, self.size, self.items = run_id, size, []

    def add(self, key: str, value: float, step: int) -> None:
        from mlflow.entities import Metric

        self.items.append(Metric(key, float(value), int(time.time() * 1000), int(step)))
        if len(self.items) >= self.size:
            self.flush()

    def flush(self) -> None:
        if self.items:
            from bertology.tracking import _retry

            _retry(self.client.log_batch, self.run_id, metrics=self.items)
            self.items = []


def _common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--task", required=True)
    ap.add_argument("--params", required=True, help='JSON {"model": ..., "max_length": ..., "train": {...}}')
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of torch (Snakemake's {threads})")
    ap.add_argument("--device", default=None, help="cuda, cpu, ...; default: a GPU if there is one")
    ap.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    ap.add_argument("--debug", action="store_true", help="full traceback on errors")


def _params(text: str) -> dict[str, Any]:
    from bertology.cli import parse_json

    params = parse_json(text)
    missing = [k for k in ("model", "max_length", "train") if k not in params]
    if missing:
        raise ValueError(f"--params lacks {missing}; give JSON with model, max_length and the train section")
    return params


def _setup_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, threads))


def train_cmd(argv: list[str]) -> int:
    """bertology train --task T --init I --train-data P --eval-data P --output DIR --checkpoint-dir DIR"""
    import contextlib

    import mlflow

    from bertology.config import config_hash
    from bertology.data import read_prepared
    from bertology.models import load_classifier, load_tokenizer, resolve_model
    from bertology.tracking import job_run
    from bertology.training import (TrainConfig, data_fingerprint, encode_split, save_model, select_device,
                                    train)

    ap = argparse.ArgumentParser(prog="bertology train")
    _common(ap)
    ap.add_argument("--init", required=True, choices=("pretrained", "random"))
    ap.add_argument("--train-data", required=True, help="results/data/{task}/train.parquet")
    ap.add_argument("--eval-data", default=None, help="results/data/{task}/validation.parquet (per-epoch eval)")
    ap.add_argument("--output", required=True, help="results/models/{task}/{init}")
    ap.add_argument("--checkpoint-dir", required=True, help="results/checkpoints/{task}/{init}")
    ap.add_argument("--keep-checkpoint", action="store_true", help="keep the resumable state after success")
    args = ap.parse_args(argv)

    spec, params = get_task(args.task), _params(args.params)
    cfg = TrainConfig.from_dict(params["train"])
    _setup_threads(args.threads)
    device = select_device(args.device)
    model_path = resolve_model(params["model"])
    tokenizer = load_tokenizer(model_path)
    train_df = read_prepared(args.train_data)
    train_enc = encode_split(tokenizer, train_df, spec, params["max_length"])
    eval_enc = (encode_split(tokenizer, read_prepared(args.eval_data), spec, params["max_length"])
                if args.eval_data else None)
    model = load_classifier(model_path, spec.num_labels, init=args.init, seed=cfg.seed, id2label=spec.id2label,
                            regression=spec.is_regression)
    key = config_hash({"model": params["model"], "init": args.init, "task": spec.name,
                       "max_length": params["max_length"], "train": cfg.resume_key(),
                       "data": data_fingerprint(train_df)})
    output, ckpt = Path(args.output), Path(args.checkpoint_dir)
    variant = INIT_VARIANT[args.init]
    log.info("fine-tuning %s (%s init) on %s: %d train examples, device %s, %d threads",
             params["model"], args.init, spec.name, len(train_enc), device, args.threads)

    run_ctx = (contextlib.nullcontext(None) if args.no_mlflow else
               job_run("train_model", task=spec.name, variant=variant,
                       params={"model": params["model"], "init": args.init, "max_length": params["max_length"],
                               "train": params["train"], "n_train": len(train_enc),
                               "n_eval": len(eval_enc) if eval_enc else 0},
                       tags={"init": args.init, "checkpoint_path": str(output.resolve()),
                             "resume_dir": str(ckpt.resolve()), "device": str(device)}))
    with run_ctx as run:
        buffer = MetricBuffer(run.info.run_id) if run is not None else None

        def on_step(step: int, loss: float, lr: float) -> None:
            if buffer is not None:
                buffer.add("train_loss", loss, step)
                buffer.add("learning_rate", lr, step)

        def on_eval(epoch: int, step: int, metrics: dict[str, float]) -> None:
            if buffer is not None:
                for name, value in metrics.items():
                    buffer.add(f"eval_{name}", value, epoch)
                buffer.flush()

        try:
            history = train(model, tokenizer, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt,
                            resume_key=key, device=device, on_step=on_step, on_eval=on_eval)
        finally:
            if buffer is not None:
                buffer.flush()
        if run is not None and history.resumed_from:
            mlflow.set_tag("resumed_from_step", ",".join(map(str, history.resumed_from)))
        save_model(model.cpu(), tokenizer, output, history,
                   extra={"task": spec.name, "init": args.init, "model": params["model"],
                          "max_length": params["max_length"], "train": params["train"],
                          "device": str(device), "threads": args.threads})
        if run is not None:
            mlflow.log_metric("train_seconds", history.seconds)
            mlflow.log_metric("train_steps", len(history.steps))
        if not args.keep_checkpoint:
            (ckpt / "state.pt").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                ckpt.rmdir()
    log.info("saved %s (%d steps, %.0f s)", output, len(history.steps), history.seconds)
    return 0


def score(task: str, variant: str, params: dict[str, Any], data_path: str | Path, *,
          model_dir: str | Path | None = None, device=None) -> dict[str, Any]:
    """The Table 1 score of one variant on the prepared validation split, as the score JSON.

    pretrained: the config's encoder with a fresh classification head seeded by train.seed;
    finetuned / random-finetuned: the fine-tuned model in `model_dir`.
    """
    from bertology.data import read_prepared
    from bertology.models import load_classifier, load_tokenizer, resolve_model, weights_fingerprint
    from bertology.training import TrainConfig, autocast_dtype, encode_split, evaluate, select_device

    spec = get_task(task)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    cfg = TrainConfig.from_dict(params["train"])
    device = device or select_device()
    if variant == "pretrained":
        path = resolve_model(params["model"])
    else:
        if model_dir is None:
            raise ValueError(f"variant {variant!r} needs --model-dir (results/models/{task}/{VARIANT_INIT[variant]})")
        path = str(model_dir)
        if not (Path(path) / "config.json").exists():
            raise FileNotFoundError(f"{path} holds no fine-tuned model; run the train_model rule first")
    tokenizer = load_tokenizer(path)
    model = load_classifier(path, spec.num_labels, init="pretrained", seed=cfg.seed, id2label=spec.id2label,
                            regression=spec.is_regression).to(device)
    enc = encode_split(tokenizer, read_prepared(data_path), spec, params["max_length"])
    start = time.perf_counter()
    metrics = evaluate(model, tokenizer, enc, spec, batch_size=cfg.eval_batch_size, device=device,
                       amp_dtype=autocast_dtype(cfg.mixed_precision, device), progress=True)
    return {"task": task, "variant": variant, "model": params["model"], "model_path": str(path),
            "weights": weights_fingerprint(path), "split": "validation", "metrics": metrics, "n": len(enc),
            "seconds": round(time.perf_counter() - start, 3)}


def evaluate_cmd(argv: list[str]) -> int:
    """bertology evaluate --task T --variant V --data P [--model-dir DIR] --output scores.json"""
    import contextlib

    import mlflow

    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology evaluate")
    _common(ap)
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--data", required=True, help="results/data/{task}/validation.parquet")
    ap.add_argument("--model-dir", default=None, help="the fine-tuned model (not for variant pretrained)")
    ap.add_argument("--output", required=True, help="results/scores/{task}/{variant}.json")
    args = ap.parse_args(argv)
    params = _params(args.params)
    _setup_threads(args.threads)
    from bertology.training import select_device

    run_ctx = (contextlib.nullcontext(None) if args.no_mlflow else
               job_run("score", task=args.task, variant=args.variant,
                       params={"model": params["model"], "max_length": params["max_length"],
                               "train": params["train"]},
                       tags={"model_dir": str(Path(args.model_dir).resolve()) if args.model_dir else ""}))
    with run_ctx as run:
        result = score(args.task, args.variant, params, args.data, model_dir=args.model_dir,
                       device=select_device(args.device))
        if run is not None:
            mlflow.log_metrics({f"eval_{k}": v for k, v in result["metrics"].items()})
            mlflow.log_metric("eval_n", result["n"])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    log.info("%s %s: %s (n=%d) -> %s", args.task, args.variant,
             ", ".join(f"{k}={v:.4f}" for k, v in result["metrics"].items()), result["n"], out)
    return 0
