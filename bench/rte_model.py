"""The model the ablation benchmarks time: a fine-tuned RTE classifier directory, or the embedded MiniLM with a
seeded, untrained classification head (the timing is the same; the scores are chance-level)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch


def load_rte_classifier(model_arg: str | None, device: torch.device, enable: Callable):
    """(enable(model), tokenizer, what was loaded): `model_arg` if it is a directory, else MiniLM + a seeded head.

    enable: the mechanism the benchmark exercises (bertology.ablation.heads.enable_heads).
    """
    from bertology.models.loading import load_classifier, load_encoder, load_tokenizer, resolve_model

    if model_arg and Path(model_arg).is_dir():
        return enable(load_encoder(model_arg, classifier=True, device=device)), load_tokenizer(model_arg), \
            f"fine-tuned {model_arg}"
    path = resolve_model("minilm-l6")
    model = load_classifier(path, 2, init="pretrained", seed=0, id2label={0: "entailment", 1: "not_entailment"})
    return enable(model.to(device).eval()), load_tokenizer(path), "minilm-l6 + seeded untrained head"
