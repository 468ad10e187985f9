"""The resumable state of a fine-tuning run: what it holds, which run it belongs to, and when the loop writes it.

The state (``state.pt`` in the run's checkpoint directory) holds the trained weights (every one; for LoRA the
adapters and the head only: :func:`resumable_weights`), the optimizer, scheduler and gradient scaler, the RNG,
the step and the history. It is written atomically (:func:`save_state`) when :class:`Checkpoints` says so, and
read back only by a run with the same key (:func:`resume_key`: model, init, task, data and train settings); any
other state is ignored with a warning (:func:`load_state`). The pipeline keeps the directory at
:func:`bertology.pipeline.layout.checkpoint` (``results/checkpoints/{task}/{init}{seedtag}``), outside the model
directory that the train_model rule declares, so that Snakemake's clean-up of a failed job never deletes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from bertology.models.lora import classifier_of
from bertology.pipeline.config import TrainConfig, config_hash
from bertology.pipeline.io import write_torch

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
# The train settings a checkpoint must share to be resumed (evaluation and checkpoint cadence excluded).
RESUME_SETTINGS = ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "mixed_precision",
                   "seed", "max_grad_norm")


def data_fingerprint(df: pd.DataFrame) -> str:
    """Identifies a prepared split's content (16 hex)."""
    h = pd.util.hash_pandas_object(df[["idx", "text_a", "text_b", "label"]], index=False).to_numpy()
    return hashlib.sha256(h.tobytes()).hexdigest()[:16]


def resume_key(cfg: TrainConfig, *, model: str, init: str, task: str, max_length: int, train_df: pd.DataFrame) -> str:
    """The identity of a training run (16 hex): a checkpoint resumes only a run with the same key. A LoRA run's
    key also holds the method and every train.lora setting; a full fine-tuning's holds neither, so that a key
    depends only on the settings the run uses."""
    train = {k: getattr(cfg, k) for k in RESUME_SETTINGS}
    if cfg.method != "full":
        train.update(method=cfg.method, lora=asdict(cfg.lora))
    return config_hash({"model": model, "init": init, "task": task, "max_length": max_length,
                        "train": train, "data": data_fingerprint(train_df)})


def resumable_weights(model) -> dict[str, Any]:
    """The weights the resumable state keeps: every one (full fine-tuning); of a peft model only the adapters and
    the head's trained copy (the frozen rest comes again from the model's files, or its seeded initialiser)."""
    state = model.state_dict()
    if classifier_of(model) is model:
        return state
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in state.items() if k in trained or ".modules_to_save." in k}


def _load_weights(model, weights: dict[str, Any]) -> None:
    """Put :func:`resumable_weights` back into `model`; RuntimeError when LoRA weights do not fit it."""
    if classifier_of(model) is model:
        model.load_state_dict(weights)
        return
    expected = set(resumable_weights(model))
    result = model.load_state_dict(weights, strict=False)
    if result.unexpected_keys or expected - set(weights):
        raise RuntimeError(f"the checkpoint's LoRA weights do not fit the model: unexpected "
                           f"{sorted(result.unexpected_keys)[:5]}, missing {sorted(expected - set(weights))[:5]}")


def _rng_state() -> dict[str, Any]:
    import torch

    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import torch

    # generators take CPU byte tensors; load_state maps the whole state to the training device
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_state(directory: Path, *, model, optimizer, scheduler, scaler, step: int, history, key: str) -> Path:
    """Write the resumable training state atomically to directory/state.pt; history: the run's
    :class:`bertology.models.training.History` (a dataclass, kept as JSON)."""
    state = {
        "key": key, "step": step, "model": resumable_weights(model), "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": _rng_state(), "history": json.dumps(asdict(history)),
    }
    return write_torch(state, directory / STATE_FILE)


def load_state(directory: Path | None, key: str, device) -> dict[str, Any] | None:
    """The saved state if one exists for the same settings (`key`), else None."""
    import torch

    if directory is None or not (directory / STATE_FILE).exists():
        return None
    path = directory / STATE_FILE
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # noqa: BLE001 - a truncated file must not block a fresh start
        log.warning("ignoring unreadable checkpoint %s (%s); training from the start", path, err)
        return None
    if state.get("key") != key:
        log.warning("ignoring checkpoint %s: it was written for other settings (model, init, data or train "
                    "config changed); training from the start", path)
        return None
    return state


def restore_state(state: dict[str, Any], *, model, optimizer, scheduler, scaler) -> tuple[int, dict[str, Any]]:
    """Put a state of :func:`load_state` back: the weights into `model`, the optimizer's, scheduler's and (when
    both have one) scaler's states, and the RNG. Returns (its step, its history as the mapping of the run's
    History)."""
    _load_weights(model, state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    _set_rng_state(state["rng"])
    return int(state["step"]), json.loads(state["history"])


def discard_state(directory: Path) -> None:
    """Delete the state of a finished run: directory/state.pt, and the directory when that leaves it empty."""
    (directory / STATE_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()


class Checkpoints:
    """When the training loop writes its state, and the writing: due every `every_steps` steps (0: never by steps)
    and once `every_minutes` minutes (0: never by time) have passed since the last write; written to `directory`
    (None: never) from the run's model, optimizer, scheduler, scaler and history, under `key`."""

    def __init__(self, directory: Path | None, key: str, *, every_steps: int, every_minutes: float, step: int,
                 model, optimizer, scheduler, scaler, history) -> None:
        self.directory, self.key = directory, key
        self.every_steps, self.every_minutes = every_steps, every_minutes
        self.objects = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler,
                        "history": history}
        #: the step of the state on disk (the one resumed from, before the first write)
        self.written_step = step
        self._written_at = time.perf_counter()

    def due(self, step: int) -> bool:
        """Whether the state after `step` is to be written (by its number or by the time since the last write)."""
        if self.every_steps and step % self.every_steps == 0:
            return True
        return bool(self.every_minutes) and time.perf_counter() - self._written_at >= 60 * self.every_minutes

    def write(self, step: int) -> None:
        """Write the state after `step` (:func:`save_state`); nothing without a directory."""
        if self.directory is None:
            return
        save_state(self.directory, step=step, key=self.key, **self.objects)
        self._written_at, self.written_step = time.perf_counter(), step
