"""LoRA (``train.method: lora``, optional package peft): which linear modules get low-rank adapters, wrapping a
sequence classifier with them (the classification head trained whole, every other weight frozen) and merging them
back into its weights (Hu et al. 2021; the settings: docs/reference.md, ``train.method`` and ``train.lora``).

The training loop is :func:`bertology.models.training.train`; the resumable state of a wrapped model holds only the
adapters and the head (:func:`bertology.models.checkpoint.resumable_weights`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from bertology.pipeline.config import ConfigError, LoraConfig
from bertology.pipeline.errors import UserError

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
    """The transformers classifier of `model`: itself, or the one a peft wrapper holds."""
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

    Returns (the peft model, the record of :attr:`bertology.models.training.History.finetuning`: method, rank,
    alpha, dropout, target_modules, adapted_modules (how many layers got adapters), head, trainable_parameters,
    parameters)."""
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


