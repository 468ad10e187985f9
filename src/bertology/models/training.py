"""Fine-tuning and evaluation of sequence classifiers (Kovaleva et al. 2019, section 4.3 / Table 1).

A plain PyTorch loop, so that every step is under control: AdamW, linear warm-up and decay, gradient
clipping, dynamic padding, length-bucketed shuffled batches, CUDA with bf16/fp16 autocast when there is
a GPU (full precision on the CPU unless asked), and a resumable state.

Resumption: the full training state (model, optimizer, scheduler, RNG, step, history) is written to
``checkpoint_dir/state.pt`` at the end of every epoch, every ``checkpoint_steps`` steps and every
``checkpoint_minutes`` minutes (slow CPU runs), atomically, and when SIGTERM/SIGINT arrive.
The batches of an epoch are drawn from a generator seeded by (seed, epoch), so a resumed run skips the
batches already seen and continues exactly where the interrupted one stopped: on the CPU it reaches the
same final weights as an uninterrupted run. A checkpoint written for other settings (model, init, data,
train config: :func:`resume_key`) is ignored, with a warning. The pipeline keeps the state in
:func:`checkpoint_dir` (``results/checkpoints/{task}/{init}``), outside the model directory that the
train_model rule declares, so that Snakemake's clean-up of a failed job never deletes it.

Progress is reported through one callback, ``on_metrics(values, step)``: ``train_loss`` and
``learning_rate`` after every optimizer step, ``eval_<metric>`` at step = epoch after every epoch.
It is called only once the state of that step is on disk (whenever a checkpoint is due), so a slow or
failing tracker never costs a checkpoint.

Methods (``train.method``): ``full`` updates every weight. ``lora`` (optional package peft) trains low-rank
adapters on ``train.lora.target_modules`` and the whole classification head, every other weight frozen
(:func:`wrap_lora`); the resumable state then holds only the adapters, the head and the optimizer
(:func:`resumable_weights`), the last evaluation is made with the adapters merged, and :func:`train` ends by
merging them into the weights (``merge_and_unload``): the caller's model is again a plain transformers classifier,
saved by :func:`save_model` exactly as a fully fine-tuned one. The history's ``finetuning`` record (method, rank,
alpha, dropout, target modules, trained parameters) goes into the model's training.json.

The settings are ``bertology.pipeline.config.TrainConfig`` (the `train:` section, filled by the schema).

Glossary: E examples, B batch size, T tokens of a padded batch, C classes (1 for regression).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.pipeline.config import ConfigError, LoraConfig, TrainConfig, config_hash
from bertology.models.encoding import encode
from bertology.pipeline.errors import InputError, UserError
from bertology.pipeline.io import write_torch
from bertology.models.metrics import compute_metrics, predictions_from_logits
from bertology.models.loading import forward_inputs
from bertology.pipeline.tasks import TaskSpec

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
HISTORY_FILE = "training.json"
BUCKET_BATCHES = 50  # batches per length bucket: shuffled chunks of 50*B examples are sorted by length


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


# The train settings a checkpoint must share to be resumed (evaluation and checkpoint cadence excluded).
RESUME_SETTINGS = ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "mixed_precision",
                   "seed", "max_grad_norm")


def checkpoint_dir(task: str, init: str, seed_tag: str = "") -> Path:
    """Where the train_model job of (task, init, seed) keeps its resumable state:
    results/checkpoints/{task}/{init}{seedtag} relative to the working directory (seedtag: '' for the first
    seed, -seedN for another), named by :func:`bertology.pipeline.layout.checkpoint`.

    Not a declared output of the rule (Snakemake deletes the outputs of a failed job, and with them the
    work a resumed job would reuse), so the step names it through this function.
    """
    from bertology.pipeline.layout import checkpoint

    return Path(checkpoint(task, init, seed_tag))


def resume_key(cfg: TrainConfig, *, model: str, init: str, task: str, max_length: int, train_df: pd.DataFrame) -> str:
    """The identity of a training run (16 hex): a checkpoint resumes only a run with the same key. A LoRA run's
    key also holds the method and every train.lora setting; a full fine-tuning's holds neither, so that a key
    depends only on the settings the run uses."""
    train = {k: getattr(cfg, k) for k in RESUME_SETTINGS}
    if cfg.method != "full":
        train.update(method=cfg.method, lora=asdict(cfg.lora))
    return config_hash({"model": model, "init": init, "task": task, "max_length": max_length,
                        "train": train, "data": data_fingerprint(train_df)})


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


# --------------------------------------------------------------------------------------------- batches


def eval_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Length-sorted batches of example indices (least padding); (E,) lengths -> list of (<=B,) arrays."""
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def train_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Shuffled, length-bucketed batches of one epoch: every index exactly once.

    The examples are shuffled, cut into buckets of BUCKET_BATCHES * B, sorted by length inside each
    bucket (less padding), cut into batches, and the batches shuffled. Deterministic in (seed, epoch),
    so a resumed run sees the same batches. (E,) lengths -> ceil(E/B) arrays of indices.
    """
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    rng = np.random.default_rng([seed, epoch])
    lengths = np.asarray(lengths)
    perm = rng.permutation(len(lengths))
    bucket = BUCKET_BATCHES * batch_size
    batches: list[np.ndarray] = []
    for start in range(0, len(perm), bucket):
        chunk = perm[start:start + bucket]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def steps_per_epoch(n_examples: int, batch_size: int) -> int:
    return math.ceil(n_examples / batch_size)


def total_steps(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps of a run: ceil(epochs * batches per epoch), at least 1."""
    return max(1, math.ceil(epochs * steps_per_epoch(n_examples, batch_size)))


@dataclass
class Encoded:
    """A tokenised task split: unpadded token lists and labels (E,)."""

    features: list[dict[str, list[int]]]
    labels: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(f["input_ids"]) for f in self.features])

    def __len__(self) -> int:
        return len(self.features)


def encode_split(tokenizer, df: pd.DataFrame, spec: TaskSpec, max_length: int) -> Encoded:
    """Tokenise a prepared frame (idx, text_a, text_b, label) for the task's classifier."""
    if len(df) == 0:
        raise InputError(f"{spec.name}: the data split is empty; check data.max_*_examples and the source")
    enc = encode(tokenizer, df, max_length)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    features = [{k: enc[k][i] for k in keys} for i in range(len(df))]
    return Encoded(features, split_labels(df, spec))


def split_labels(df: pd.DataFrame, spec: TaskSpec) -> np.ndarray:
    """The gold labels of a prepared frame as the classifier reads them: (E,) int64, float32 for regression."""
    return df["label"].to_numpy(np.float32 if spec.is_regression else np.int64)


def collate(tokenizer, enc: Encoded, idx: np.ndarray, device, regression: bool) -> dict[str, Any]:
    """Pad the examples `idx` to their longest (dynamic padding) -> tensors (B, T) and labels (B,)."""
    import torch

    batch = tokenizer.pad([enc.features[i] for i in idx], padding=True, return_tensors="pt")
    batch = {k: v.to(device) for k, v in batch.items()}
    labels = torch.as_tensor(enc.labels[idx], dtype=torch.float32 if regression else torch.long)
    batch["labels"] = labels.to(device)
    return batch


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
                logits = model(**forward_inputs(classifier_of(model), batch)).logits
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


# ------------------------------------------------------------------------------------------------- LoRA

#: where peft has no default for the architecture, the attention's query and value projections by name: the first
#: pair of which the model has both, else the first fused query-key-value projection it has
QUERY_VALUE_NAMES = (("query", "value"), ("q_proj", "v_proj"), ("q_lin", "v_lin"), ("query_proj", "value_proj"),
                     ("q", "v"))
FUSED_QKV_NAMES = ("Wqkv", "qkv_proj", "query_key_value", "c_attn", "qkv", "in_proj")
PEFT_INSTALL = "pip install -c constraints.txt -e '.[decoders]' (or: make install-decoders)"


class LoraUnavailableError(UserError, ImportError):
    """train.method is lora but the optional package peft is not installed; the message says how to install it."""


def require_peft() -> None:
    """Raise :class:`LoraUnavailableError` (one line, how to install it) when peft is not installed."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise LoraUnavailableError(f"train.method: lora needs the optional package peft, which is not installed: "
                                   f"{PEFT_INSTALL}")


def classifier_of(model):
    """The transformers classifier of `model`: itself, or the one a peft wrapper holds (whose forward signature
    says which inputs it takes, :func:`bertology.models.loading.forward_inputs`; the wrapper's own does not list
    ``token_type_ids``, which it hands on all the same)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def head_modules(model) -> list[str]:
    """The classification head of a sequence classifier: the names of its child modules with parameters outside
    its base model (``base_model_prefix``): ``classifier`` (BERT, RoBERTa, ELECTRA), ``pre_classifier`` and
    ``classifier`` (DistilBERT), ``score`` (decoders). The pooler of BERT is part of its base model."""
    prefix = getattr(model, "base_model_prefix", "")
    return [name for name, child in model.named_children()
            if name != prefix and next(child.parameters(), None) is not None]


def linear_modules(model) -> list[str]:
    """Full names of the linear modules of a sequence classifier outside its head (torch ``Linear`` and
    transformers' ``Conv1D`` of GPT-2): what LoRA can adapt."""
    import torch
    from transformers.pytorch_utils import Conv1D

    head = set(head_modules(model))
    return [name for name, module in model.named_modules()
            if isinstance(module, (torch.nn.Linear, Conv1D)) and name.split(".", 1)[0] not in head]


def _named(name: str, target: str) -> bool:
    """peft's rule for a target name given as a string: the module's full name, or its last dotted part(s)."""
    return name == target or name.endswith("." + target)


def lora_targets(model, target_modules: Sequence[str] | None) -> list[str]:
    """The names LoRA adapts in `model` (a sequence classifier, possibly on the meta device) for
    ``train.lora.target_modules``: those names, each of which must name a linear module of the model; for None,
    peft's default for the model type where it has one (every name of it found), else the attention's query and
    value projections found by name (:data:`QUERY_VALUE_NAMES`, then :data:`FUSED_QKV_NAMES`).

    Raises ConfigError, one line naming the missing names and the linear modules the model has."""
    names = linear_modules(model)
    model_type = getattr(model.config, "model_type", type(model).__name__)
    have = ", ".join(sorted({n.rsplit(".", 1)[-1] for n in names})) or "none"

    def found(target: str) -> bool:
        return any(_named(n, target) for n in names)

    if target_modules is not None:
        missing = [t for t in target_modules if not found(t)]
        if missing:
            raise ConfigError(
                f"train.lora.target_modules: the model ({model_type}) has no linear module named "
                f"{', '.join(missing)}; its linear modules are: {have}. Name some of those, or set "
                f"train.lora.target_modules: null for its attention's query and value projections")
        return list(target_modules)
    require_peft()
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    default = PEFT_DEFAULTS.get(model_type)
    if isinstance(default, (list, tuple)) and default and all(found(t) for t in default):
        return list(default)
    for pair in QUERY_VALUE_NAMES:
        if all(found(t) for t in pair):
            return list(pair)
    for fused in FUSED_QKV_NAMES:
        if found(fused):
            return [fused]
    raise ConfigError(f"train.lora.target_modules is null, but peft has no default for model type {model_type} and "
                      f"no query and value projection was found by name; its linear modules are: {have}. Set "
                      f"train.lora.target_modules to some of those")


def check_lora(model: str, lora: dict[str, Any]) -> None:
    """Before any job (the workflow's onstart, when train.method is lora): peft is installed, and `model` (a config
    ``model:`` value or a resolved one) has the linear modules ``lora["target_modules"]`` names (or, for None,
    some the default finds). Built on the meta device, no weight read; a model that cannot be built yet (a hub
    name not cached) is left to its training job, which checks the same. Raises a UserError, one line."""
    from bertology.models.loading import meta_classifier

    require_peft()
    classifier = meta_classifier(model)
    if classifier is not None:
        lora_targets(classifier, lora.get("target_modules"))


def wrap_lora(model, settings: LoraConfig, *, seed: int):
    """`model` (a transformers sequence classifier) with LoRA adapters: peft's ``get_peft_model`` with
    ``LoraConfig(task_type=SEQ_CLS)`` of rank, alpha, dropout and the modules of :func:`lora_targets`; the head
    (:func:`head_modules`) is one of peft's ``modules_to_save``, so it is trained whole (a copy, which merging puts
    in its place); every other weight is frozen. peft changes `model` in place (it holds the wrapped layers until
    ``merge_and_unload``). The adapters' initialisation is seeded with `seed`.

    Returns (the peft model, the record of :attr:`History.finetuning`: method, rank, alpha, dropout,
    target_modules, adapted_modules (how many layers got adapters), head, trainable_parameters, parameters)."""
    require_peft()
    import torch
    from peft import LoraConfig as PeftLoraConfig
    from peft import TaskType, get_peft_model
    from transformers.pytorch_utils import Conv1D

    targets = lora_targets(model, settings.target_modules)
    head = head_modules(model)
    parameters = sum(p.numel() for p in model.parameters())
    adapted = [n for n in linear_modules(model) if any(_named(n, t) for t in targets)]
    conv1d = any(isinstance(model.get_submodule(n), Conv1D) for n in adapted)  # GPT-2 stores its weights in x out
    config = PeftLoraConfig(task_type=TaskType.SEQ_CLS, r=settings.rank, lora_alpha=settings.alpha,
                            lora_dropout=settings.dropout, target_modules=list(targets), modules_to_save=list(head),
                            fan_in_fan_out=conv1d)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # peft asks transformers a deprecated question
        wrapped = get_peft_model(model, config)
    record = {"method": "lora", "rank": settings.rank, "alpha": settings.alpha, "dropout": settings.dropout,
              "target_modules": list(targets), "adapted_modules": len(adapted), "head": head,
              "trainable_parameters": sum(p.numel() for p in wrapped.parameters() if p.requires_grad),
              "parameters": parameters}
    return wrapped, record


def merge_lora(model):
    """The transformers classifier of a peft model with its adapters merged into the weights and the head's trained
    copy in place of the original (peft's ``merge_and_unload``): the object :func:`wrap_lora` was given."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All adapters are already merged")  # merged for the last evaluation
        return model.merge_and_unload()


def resumable_weights(model) -> dict[str, Any]:
    """The weights the resumable state keeps: every one (full fine-tuning); of a peft model only the adapters and
    the head's trained copy (the frozen rest comes again from the model's files, or its seeded initialiser)."""
    state = model.state_dict()
    if classifier_of(model) is model:
        return state
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in state.items() if k in trained or ".modules_to_save." in k}


def _load_weights(model, weights: dict[str, Any]) -> None:
    if classifier_of(model) is model:
        model.load_state_dict(weights)
        return
    expected = set(resumable_weights(model))
    result = model.load_state_dict(weights, strict=False)
    if result.unexpected_keys or expected - set(weights):
        raise RuntimeError(f"the checkpoint's LoRA weights do not fit the model: unexpected "
                           f"{sorted(result.unexpected_keys)[:5]}, missing {sorted(expected - set(weights))[:5]}")


# --------------------------------------------------------------------------------------------- training


def data_fingerprint(df: pd.DataFrame) -> str:
    """Identifies a prepared split's content (16 hex)."""
    h = pd.util.hash_pandas_object(df[["idx", "text_a", "text_b", "label"]], index=False).to_numpy()
    return hashlib.sha256(h.tobytes()).hexdigest()[:16]


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


def save_state(checkpoint_dir: Path, *, model, optimizer, scheduler, scaler, step: int, history: History,
               key: str) -> Path:
    """Write the resumable training state atomically to checkpoint_dir/state.pt."""
    state = {
        "key": key, "step": step, "model": resumable_weights(model), "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": _rng_state(), "history": json.dumps(asdict(history)),
    }
    return write_torch(state, checkpoint_dir / STATE_FILE)


def load_state(checkpoint_dir: Path | None, key: str, device) -> dict[str, Any] | None:
    """The saved state if one exists for the same settings (`key`), else None."""
    import torch

    if checkpoint_dir is None or not (checkpoint_dir / STATE_FILE).exists():
        return None
    path = checkpoint_dir / STATE_FILE
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


MetricsCallback = Callable[[dict[str, float], int], None]  # (values, step), e.g. Tracker.metrics


def train(model, tokenizer, train_enc: Encoded, spec: TaskSpec, cfg: TrainConfig, *,
          eval_enc: Encoded | None = None, checkpoint_dir: Path | None = None, resume_key: str = "",
          device=None, on_metrics: MetricsCallback | None = None, progress: bool = True) -> History:
    """Fine-tune `model` in place on an encoded train split; return its history.

    cfg.method lora: `model` gets LoRA adapters (:func:`wrap_lora`), trained with the head while every other weight
    is frozen; the last evaluation is made with the adapters merged, and on return they are merged into `model`'s
    weights (:func:`merge_lora`), which is again a plain transformers classifier.

    Resumes from checkpoint_dir/state.pt when it holds a state for `resume_key`. Evaluates on
    `eval_enc` after every full epoch. Calls ``on_metrics({"train_loss", "learning_rate"}, step)`` after
    every step and ``on_metrics({"eval_<metric>": ...}, epoch)`` after every epoch, each time after the
    checkpoint of that step (if one is due) is written. Raises TrainingDivergedError on a NaN/inf loss.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    device = device or select_device()
    amp_dtype = autocast_dtype(cfg.mixed_precision, device)
    model.to(device)
    plain = model  # the transformers classifier: forward_inputs reads its signature; LoRA is merged back into it
    if cfg.method == "lora":
        model, finetuning = wrap_lora(model, cfg.lora, seed=cfg.seed)
        log.info("LoRA rank %d on %d modules (%s): %d of %d parameters trained", cfg.lora.rank,
                 finetuning["adapted_modules"], ", ".join(finetuning["target_modules"]),
                 finetuning["trainable_parameters"], finetuning["parameters"])
    elif cfg.method == "full":
        finetuning = {"method": "full", "parameters": sum(p.numel() for p in model.parameters())}
        finetuning["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    else:
        raise ConfigError(f"train.method must be full or lora, got {cfg.method!r}")
    n_steps = total_steps(len(train_enc), cfg.batch_size, cfg.epochs)
    per_epoch = steps_per_epoch(len(train_enc), cfg.batch_size)
    decay = [p for n, p in model.named_parameters() if p.requires_grad and not _no_decay(n)]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and _no_decay(n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=cfg.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, round(cfg.warmup_ratio * n_steps), n_steps)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None

    history, step = History(), 0
    state = load_state(checkpoint_dir, resume_key, device)
    if state is not None:
        _load_weights(model, state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        _set_rng_state(state["rng"])
        history = History(**json.loads(state["history"]))
        step = int(state["step"])
        history.resumed_from.append(step)
        log.info("resuming from %s at step %d of %d", checkpoint_dir / STATE_FILE, step, n_steps)
        del state
    else:
        torch.manual_seed(cfg.seed)  # dropout stream
    history.finetuning = finetuning

    last_save, saved_step = time.perf_counter(), step

    def checkpoint() -> None:
        nonlocal last_save, saved_step
        if checkpoint_dir is not None:
            save_state(checkpoint_dir, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                       step=step, history=history, key=resume_key)
            last_save, saved_step = time.perf_counter(), step

    def emit(values: dict[str, float], at: int) -> None:
        if on_metrics is not None:
            on_metrics(values, at)

    def checkpoint_due() -> bool:
        if cfg.checkpoint_steps and step % cfg.checkpoint_steps == 0:
            return True
        return bool(cfg.checkpoint_minutes) and time.perf_counter() - last_save >= 60 * cfg.checkpoint_minutes

    started = time.perf_counter() - history.seconds
    with StopSignals() as stop:
        bar = tqdm(total=n_steps, initial=step, desc=f"train {spec.name}", disable=not progress, mininterval=10)
        for epoch in range(step // per_epoch, math.ceil(cfg.epochs)):
            batches = train_batches(train_enc.lengths, cfg.batch_size, cfg.seed, epoch)
            skip = step - epoch * per_epoch
            model.train()
            last_values: dict[str, float] | None = None  # the epoch's last step, sent after its checkpoint
            for idx in batches[skip:]:
                if step >= n_steps:
                    break
                batch = collate(tokenizer, train_enc, idx, device, spec.is_regression)
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss = model(**forward_inputs(plain, batch)).loss
                lr = scheduler.get_last_lr()[0]
                if not torch.isfinite(loss):
                    raise TrainingDivergedError(
                        f"{spec.name}: the training loss is {loss.item()} at step {step + 1} of {n_steps} "
                        f"(epoch {epoch + 1}, learning rate {lr:.3g}). Lower train.learning_rate, or set "
                        f"train.mixed_precision: 'no' (full precision), and check the labels of the data.")
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
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
                if checkpoint_due():
                    checkpoint()
                emit(values, step)
                if stop.signal is not None:
                    if saved_step != step:
                        checkpoint()
                    raise TrainingInterrupted(
                        f"{spec.name}: stopped by {stop.signal} after step {step} of {n_steps}"
                        + (f"; the state is saved in {checkpoint_dir}, run the same command again to resume"
                           if checkpoint_dir is not None else ""))
            if step % per_epoch == 0 or step == n_steps:  # a completed (possibly last, partial) epoch
                metrics = None
                if eval_enc is not None and not any(e["step"] == step for e in history.evals):
                    if model is not plain and step >= n_steps:  # the saved model's evaluation: adapters merged
                        model.merge_adapter()
                    began = time.perf_counter()
                    metrics, predictions = evaluate_predictions(model, tokenizer, eval_enc, spec,
                                                                batch_size=cfg.eval_batch_size, device=device,
                                                                amp_dtype=amp_dtype)
                    entry = {"epoch": epoch + 1, "step": step, "metrics": metrics}
                    if step >= n_steps:  # the saved model's own evaluation: a score job reuses it
                        entry.update(predictions=predictions.tolist(),
                                     seconds=round(time.perf_counter() - began, 3))
                    history.evals.append(entry)
                    log.info("%s epoch %d (step %d): %s", spec.name, epoch + 1, step,
                             ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
                    model.train()
                history.seconds = time.perf_counter() - started
                checkpoint()
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


def _no_decay(name: str) -> bool:
    """Biases and LayerNorm weights are not decayed (BERT's recipe)."""
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


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
