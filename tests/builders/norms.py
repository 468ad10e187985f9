"""Tiny random classifiers of every architecture for the norm analyses (bertology.norms), and a batch."""

from __future__ import annotations

import torch

from tests.builders.encoders import model_config, tokenizer_for

_MODELS: dict[str, tuple] = {}


def tiny(arch: str):
    """(classifier, tokenizer) of a tiny random `arch` (eager attention, eval mode), cached per process."""
    if arch not in _MODELS:
        from transformers import AutoModelForSequenceClassification

        tok = tokenizer_for(arch)
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(model_config(arch, tok), attn_implementation="eager")
        _MODELS[arch] = (model.eval(), tok)
    return _MODELS[arch]


def batch(tok):
    """(forward inputs: the tokenizer's own output, real lengths) of two sentences of different lengths, padded."""
    texts = ["the cat sat on the mat , and the dog barked at it .", "a short one ."]
    enc = tok(texts, padding=True, return_tensors="pt")
    return dict(enc), enc["attention_mask"].sum(1)
