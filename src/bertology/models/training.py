"""Fine-tuning and evaluation of sequence classifiers (Kovaleva et al. 2019, section 4.3 / Table 1).

A plain PyTorch loop, so that every step is under control: AdamW, linear warm-up and decay, gradient
clipping, dynamic padding, length-bucketed shuffled batches (:mod:`bertology.models.batching`), CUDA with
bf16/fp16 autocast when there is a GPU (full precision on the CPU unless asked), and a resumable state.

Resumption (:mod:`bertology.models.checkpoint`): the full training state (model, optimizer, scheduler, RNG, step,
history) is written to ``checkpoint_dir/state.pt`` at the end of every epoch, every ``checkpoint_steps`` steps and
every ``checkpoint_minutes`` minutes (slow CPU runs), atomically, and when SIGTERM/SIGINT arrive.
The batches of an epoch are drawn from a generator seeded by (seed, epoch), so a resumed run skips the
batches already seen and continues exactly where the interrupted one stopped: on the CPU it reaches the
same final weights as an uninterrupted run. A checkpoint written for other settings (model, init, data,
train config: :func:`~bertology.models.checkpoint.resume_key`) is ignored, with a warning.

Progress is reported through one callback, ``on_metrics(values, step)``: ``train_loss`` and
``learning_rate`` after every optimizer step, ``eval_<metric>`` at step = epoch after every epoch.
It is called only once the state of that step is on disk (whenever a checkpoint is due), so a slow or
failing tracker never costs a checkpoint.

Methods (``train.method``): ``full`` updates every weight. ``lora`` (optional package peft,
:mod:`bertology.models.lora`) trains low-rank adapters on ``train.lora.target_modules`` and the whole
classification head, every other weight frozen; the resumable state then holds only the adapters, the head and the
optimizer, the last evaluation is made with the adapters merged, and :func:`train` ends by merging them into the
weights (``merge_and_unload``): the caller's model is again a plain transformers classifier, saved by
:func:`save_model` exactly as a fully fine-tuned one. The history's ``finetuning`` record (method, rank, alpha,
dropout, target modules, trained parameters) goes into the model's training.json.

The settings are ``bertology.pipeline.config.TrainConfig`` (the `train:` section, filled by the schema).

Glossary: E examples, B batch size, T tokens of a padded batch, C classes (1 for regression).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.models.batching import collate, eval_batches, steps_per_epoch, total_steps, train_batches
from bertology.models.checkpoint import STATE_FILE, Checkpoints, data_fingerprint, load_state, restore_state
from bertology.models.encoding import Encoded
from bertology.models.lora import merge_lora, wrap_lora
from bertology.models.metrics import compute_metrics, predictions_from_logits
from bertology.pipeline.config import ConfigError, TrainConfig
from bertology.pipeline.errors import UserError
from bertology.pipeline.tasks import TaskSpec

log = logging.getLogger(__name__)

HISTORY_FILE = "training.json"


class TrainingDivergedError(UserError, RuntimeError):
    """The loss became NaN or infinite; the message names the step and the learning rate."""


class TrainingInterrupted(UserError, RuntimeError):
    """SIGTERM/SIGINT arrived: the state was saved after the current step; re-running resumes."""


class StopSignals:
    """Within the block, SIGTERM and SIGINT (SLURM's time limit, Ctrl-C, Snakemake cancelling a job) set
    ``self.signal`` instead of killing the process, so that the loop can finish its step and save its
    state. Outside the main thread (where handlers cannot be installed) it does nothing."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        import signal

        if self.signal is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> StopSignals:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)


@dataclass
class History:
    """What happened during training: (step, loss, lr) per step and metrics per epoch."""

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    #: {"epoch", "step", "metrics"} per epoch; the last epoch's also "predictions" (E,) and "seconds", the
    #: evaluation a score of the saved model would compute (:func:`recorded_evaluation`)
    evals: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)
    seconds: float = 0.0
    #: how the weights were trained (:func:`train`): {"method": "full", "trainable_parameters", "parameters"}, or
    #: LoRA's record (:func:`wrap_lora`); save_model writes it as training.json's top-level "finetuning"
    finetuning: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- devices


def select_device(prefer: str | None = None):
    """CUDA when available (or `prefer` given), the CPU otherwise."""
    import torch

    if prefer:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast_dtype(mode: str, device) -> Any:
    """The autocast dtype of `train.mixed_precision` on `device`; None = full precision.

    auto: bf16 on a GPU that supports it, fp16 on older GPUs, none on the CPU. fp16 needs a GPU.
    """
    import torch

    if mode == "no":
        return None
    if mode == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if mode == "bf16":
        return torch.bfloat16
    if mode == "fp16":
        if device.type != "cuda":
            raise ConfigError("train.mixed_precision: fp16 needs a CUDA GPU; on the CPU use 'no' or 'bf16'")
        return torch.float16
    raise ConfigError(f"train.mixed_precision must be one of auto, no, fp16, bf16; got {mode!r}")


# ------------------------------------------------------------------------------------------ evaluation


def predict(model, tokenizer, enc: Encoded, *, batch_size: int, device, amp_dtype=None,
            progress: bool = False) -> np.ndarray:
    """Logits of every example, in the split's order: (E, C), float32."""
    import torch
    from tqdm.auto import tqdm

    model.eval()
    out: list[np.ndarray | None] = [None] * len(enc)
    batches = eval_batches(enc.lengths, batch_size)
    with torch.inference_mode():
        for idx in tqdm(batches, desc="evaluate", disable=not progress, mininterval=5):
            batch = collate(tokenizer, enc, idx, device, regression=False)
            batch.pop("labels")
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                logits = model(**batch).logits
            logits = logits.float().cpu().numpy()
            for j, i in enumerate(idx):
                out[i] = logits[j]
    return np.stack(out)


def evaluate_predictions(model, tokenizer, enc: Encoded, spec: TaskSpec, *, batch_size: int, device,
                         amp_dtype=None, progress: bool = False) -> tuple[dict[str, float], np.ndarray]:
    """The task's metrics (fractions) of `model` on an encoded split and the (E,) predictions they are computed
    from, in the split's order: class ids, or float64 scores for regression
    (:func:`bertology.models.metrics.predictions_from_logits` of the same logits)."""
    logits = predict(model, tokenizer, enc, batch_size=batch_size, device=device, amp_dtype=amp_dtype,
                     progress=progress)
    return compute_metrics(spec.name, logits, enc.labels), predictions_from_logits(logits, spec.is_regression)


def evaluate(model, tokenizer, enc: Encoded, spec: TaskSpec, *, batch_size: int, device,
             amp_dtype=None, progress: bool = False) -> dict[str, float]:
    """The task's metrics (fractions) of `model` on an encoded split."""
    return evaluate_predictions(model, tokenizer, enc, spec, batch_size=batch_size, device=device,
                                amp_dtype=amp_dtype, progress=progress)[0]


def evaluation_settings(validation: pd.DataFrame, *, max_length: int, batch_size: int, device,
                        amp_dtype=None) -> dict[str, Any]:
    """What fixes an evaluation's predictions besides the weights: the split's content and size, the truncation,
    the batch size (batches are padded to their longest), the device and the autocast dtype. train_model records
    it beside the saved model; a score job with equal settings reuses the training's last evaluation."""
    return {"validation": data_fingerprint(validation), "n": len(validation), "max_length": int(max_length),
            "eval_batch_size": int(batch_size), "device": str(device), "amp": str(amp_dtype)}


def recorded_evaluation(model_dir: str | Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The last evaluation of training, as :func:`train` recorded it in the saved model's training.json, when it
    was made with exactly `settings` (:func:`evaluation_settings`) on the weights saved there: the dict with
    "metrics", "predictions" (E,) and "seconds". None when the model holds no such record (trained without an
    evaluation split, by an older version, with other settings, or a history that does not end at its last
    evaluation): the score job then evaluates."""
    try:
        info = json.loads((Path(model_dir) / HISTORY_FILE).read_text())
    except (OSError, ValueError):
        return None
    history = info.get("history") or {}
    evals, steps = history.get("evals") or [], history.get("steps") or []
    if info.get("evaluation") != settings or not evals or not steps:
        return None
    last = evals[-1]
    if last.get("step") != steps[-1] or len(last.get("predictions") or ()) != settings["n"]:
        return None
    return last


def prediction_record(idx: np.ndarray, labels: np.ndarray, predictions: np.ndarray) -> dict[str, list]:
    """A score record's ``predictions`` (docs/reference.md#columns): per example of the split, in its order, the
    prepared data's ``idx``, the gold ``label`` and the model's ``prediction`` (class ids as ints, regression
    labels and scores as floats, each value exactly the one the metrics were computed from).

    idx, labels, predictions: (E,) each -> {"idx": [E], "label": [E], "prediction": [E]}.
    """
    idx, labels, predictions = np.asarray(idx), np.asarray(labels), np.asarray(predictions)
    if not idx.shape == labels.shape == predictions.shape or idx.ndim != 1:
        raise ValueError(f"idx, labels and predictions must be (E,) each, got {idx.shape}, {labels.shape}, "
                         f"{predictions.shape}")
    return {"idx": idx.tolist(), "label": labels.tolist(), "prediction": predictions.tolist()}


# --------------------------------------------------------------------------------------------- training


MetricsCallback = Callable[[dict[str, float], int], None]  # (values, step), e.g. Tracker.metrics


def train(model, tokenizer, train_enc: Encoded, spec: TaskSpec, cfg: TrainConfig, *,
          eval_enc: Encoded | None = None, checkpoint_dir: Path | None = None, resume_key: str = "",
          device=None, on_metrics: MetricsCallback | None = None, progress: bool = True) -> History:
    """Fine-tune `model` in place on an encoded train split; return its history.

    cfg.method lora: `model` gets LoRA adapters (:func:`~bertology.models.lora.wrap_lora`), trained with the head
    while every other weight is frozen; the last evaluation is made with the adapters merged, and on return they are
    merged into `model`'s weights (:func:`~bertology.models.lora.merge_lora`), which is again a plain transformers
    classifier.

    Resumes from checkpoint_dir/state.pt when it holds a state for `resume_key`. Evaluates on
    `eval_enc` after every full epoch. Calls ``on_metrics({"train_loss", "learning_rate"}, step)`` after
    every step and ``on_metrics({"eval_<metric>": ...}, epoch)`` after every epoch, each time after the
    checkpoint of that step (if one is due) is written. Raises TrainingDivergedError on a NaN/inf loss.
    """
    import torch
    from tqdm.auto import tqdm

    device = device or select_device()
    amp_dtype = autocast_dtype(cfg.mixed_precision, device)
    model.to(device)
    plain = model  # the transformers classifier; LoRA is merged back into it
    model, finetuning = _for_method(model, cfg)
    n_steps = total_steps(len(train_enc), cfg.batch_size, cfg.epochs)
    per_epoch = steps_per_epoch(len(train_enc), cfg.batch_size)
    optimizer, scheduler = _optimizer(model, cfg, n_steps)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None

    history, step = History(), 0
    state = load_state(checkpoint_dir, resume_key, device)
    if state is not None:
        step, saved = restore_state(state, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler)
        history = History(**saved)
        history.resumed_from.append(step)
        log.info("resuming from %s at step %d of %d", checkpoint_dir / STATE_FILE, step, n_steps)
        del state
    else:
        torch.manual_seed(cfg.seed)  # dropout stream
    history.finetuning = finetuning
    checkpoints = Checkpoints(checkpoint_dir, resume_key, every_steps=cfg.checkpoint_steps,
                              every_minutes=cfg.checkpoint_minutes, step=step, model=model, optimizer=optimizer,
                              scheduler=scheduler, scaler=scaler, history=history)
    emit = on_metrics or _no_metrics

    started = time.perf_counter() - history.seconds
    with StopSignals() as stop:
        bar = tqdm(total=n_steps, initial=step, desc=f"train {spec.name}", disable=not progress, mininterval=10)
        for epoch in range(step // per_epoch, math.ceil(cfg.epochs)):
            batches = train_batches(train_enc.lengths, cfg.batch_size, cfg.seed, epoch)
            model.train()
            last_values: dict[str, float] | None = None  # the epoch's last step, sent after its checkpoint
            for idx in batches[step - epoch * per_epoch:]:
                if step >= n_steps:
                    break
                batch = collate(tokenizer, train_enc, idx, device, spec.is_regression)
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss = model(**batch).loss
                lr = scheduler.get_last_lr()[0]
                if not torch.isfinite(loss):
                    raise TrainingDivergedError(
                        f"{spec.name}: the training loss is {loss.item()} at step {step + 1} of {n_steps} "
                        f"(epoch {epoch + 1}, learning rate {lr:.3g}). Lower train.learning_rate, or set "
                        f"train.mixed_precision: 'no' (full precision), and check the labels of the data.")
                _update(model, loss, optimizer, scheduler, scaler, cfg.max_grad_norm)
                step += 1
                value = float(loss.item())
                history.steps.append(step)
                history.losses.append(value)
                history.lrs.append(lr)
                bar.update(1)
                bar.set_postfix(loss=f"{value:.4f}", refresh=False)
                history.seconds = time.perf_counter() - started
                values = {"train_loss": value, "learning_rate": lr}
                if step % per_epoch == 0 or step == n_steps:  # the epoch end below checkpoints and emits
                    last_values = values
                    continue
                if checkpoints.due(step):
                    checkpoints.write(step)
                emit(values, step)
                if stop.signal is not None:
                    if checkpoints.written_step != step:
                        checkpoints.write(step)
                    raise TrainingInterrupted(
                        f"{spec.name}: stopped by {stop.signal} after step {step} of {n_steps}"
                        + (f"; the state is saved in {checkpoint_dir}, run the same command again to resume"
                           if checkpoint_dir is not None else ""))
            if step % per_epoch == 0 or step == n_steps:  # a completed (possibly last, partial) epoch
                metrics = None
                if eval_enc is not None and not any(e["step"] == step for e in history.evals):
                    entry = _evaluate_epoch(model, tokenizer, eval_enc, spec, epoch=epoch, step=step,
                                            final=step >= n_steps, merge=model is not plain,
                                            batch_size=cfg.eval_batch_size, device=device, amp_dtype=amp_dtype)
                    history.evals.append(entry)
                    metrics = entry["metrics"]
                history.seconds = time.perf_counter() - started
                checkpoints.write(step)
                if last_values is not None:
                    emit(last_values, step)
                if metrics is not None:
                    emit({f"eval_{k}": v for k, v in metrics.items()}, epoch + 1)
                if stop.signal is not None and step < n_steps:
                    raise TrainingInterrupted(
                        f"{spec.name}: stopped by {stop.signal} after step {step} of {n_steps} (end of epoch "
                        f"{epoch + 1}); run the same command again to resume")
            if step >= n_steps:
                break
    bar.close()
    if model is not plain:
        merged = merge_lora(model)
        if merged is not plain:  # peft merged into a copy: the caller's model would keep its weights
            raise RuntimeError("peft's merge_and_unload returned another model than the one it wrapped")
    history.seconds = time.perf_counter() - started
    return history


def _no_metrics(values: dict[str, float], step: int) -> None:
    """The metrics callback of a run that reports none."""


def _for_method(model, cfg: TrainConfig):
    """`model` as cfg.method trains it and the record of :attr:`History.finetuning`: ``full``, the model itself
    (every weight trained); ``lora``, the peft model of :func:`~bertology.models.lora.wrap_lora`."""
    if cfg.method == "lora":
        model, finetuning = wrap_lora(model, cfg.lora, seed=cfg.seed)
        log.info("LoRA rank %d on %d modules (%s): %d of %d parameters trained", cfg.lora.rank,
                 finetuning["adapted_modules"], ", ".join(finetuning["target_modules"]),
                 finetuning["trainable_parameters"], finetuning["parameters"])
        return model, finetuning
    if cfg.method == "full":
        finetuning = {"method": "full", "parameters": sum(p.numel() for p in model.parameters())}
        finetuning["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return model, finetuning
    raise ConfigError(f"train.method must be full or lora, got {cfg.method!r}")


def _optimizer(model, cfg: TrainConfig, n_steps: int):
    """AdamW over the trained weights (biases and LayerNorm weights not decayed: :func:`_no_decay`) and its linear
    schedule: warm-up over train.warmup_ratio of the `n_steps` steps, then decay to 0. Returns (optimizer,
    scheduler)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    decay = [p for n, p in model.named_parameters() if p.requires_grad and not _no_decay(n)]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and _no_decay(n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=cfg.learning_rate)
    return optimizer, get_linear_schedule_with_warmup(optimizer, round(cfg.warmup_ratio * n_steps), n_steps)


def _no_decay(name: str) -> bool:
    """Biases and LayerNorm weights are not decayed (BERT's recipe)."""
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def _update(model, loss, optimizer, scheduler, scaler, max_grad_norm: float) -> None:
    """One optimizer step from a batch's loss: backward (through the fp16 gradient scaler when there is one),
    gradients clipped to `max_grad_norm`, optimizer and schedule stepped, gradients cleared."""
    import torch

    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def _evaluate_epoch(model, tokenizer, eval_enc: Encoded, spec: TaskSpec, *, epoch: int, step: int, final: bool,
                    merge: bool, batch_size: int, device, amp_dtype) -> dict[str, Any]:
    """The evaluation after an epoch, as :attr:`History.evals` records it: {"epoch", "step", "metrics"}; the final
    one (the saved model's own, which a score job reuses) with "predictions" (E,) and "seconds" too, made with a
    LoRA model's adapters merged (`merge`). Leaves `model` in training mode."""
    if merge and final:
        model.merge_adapter()
    began = time.perf_counter()
    metrics, predictions = evaluate_predictions(model, tokenizer, eval_enc, spec, batch_size=batch_size,
                                                device=device, amp_dtype=amp_dtype)
    entry = {"epoch": epoch + 1, "step": step, "metrics": metrics}
    if final:
        entry.update(predictions=predictions.tolist(), seconds=round(time.perf_counter() - began, 3))
    log.info("%s epoch %d (step %d): %s", spec.name, epoch + 1, step,
             ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    model.train()
    return entry


# ------------------------------------------------------------------------------------ saving the model


def _json_value(value: Any) -> Any:
    """A value json cannot write: a config section (dataclass) as its mapping, anything else as its str."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def save_model(model, tokenizer, output_dir: Path, history: History | None = None,
               extra: dict[str, Any] | None = None) -> Path:
    """Write the fine-tuned model (safetensors, config with the label map, tokenizer) to `output_dir`, with
    training.json: `extra`, the history and, top level, the history's ``finetuning`` record (method, and for LoRA
    rank, alpha, dropout, target modules, trained parameters).

    Written to a temporary sibling first and moved into place, so `output_dir` is never half-written; its digest
    (:func:`bertology.pipeline.outputcache.record_digest`) is written last.
    """
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_dir.parent / f".{output_dir.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if history is not None or extra:
        info = dict(extra or {})
        if history is not None:
            info["history"] = asdict(history)
            if info["history"].get("finetuning"):
                info["finetuning"] = info["history"].pop("finetuning")
        (tmp / HISTORY_FILE).write_text(json.dumps(info, indent=1, default=_json_value))
    from bertology.pipeline.outputcache import record_digest

    record_digest(tmp)  # checked by every later load (bertology.pipeline.outputcache): the model as it entered the cache
    if output_dir.exists():
        shutil.rmtree(output_dir)
    os.replace(tmp, output_dir)
    return output_dir
