"""Tiny random BERT sequence classifiers and padded random examples for the ablation, importance and pruning
tests (peaked attention, so disabling a head changes the logits)."""

from __future__ import annotations

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification

from bertology.ablation.heads import ATTN_IMPLEMENTATION, enable_heads
from bertology.ablation.sweep import make_batches

L, H, D = 3, 4, 32


def tiny_classifier(num_labels: int = 3, seed: int = 0, attn: str = ATTN_IMPLEMENTATION):
    """A BERT classifier, L layers x H heads, random weights; passed through enable_heads, or set to `attn`."""
    cfg = BertConfig(vocab_size=50, hidden_size=D, num_hidden_layers=L, num_attention_heads=H, intermediate_size=48,
                     max_position_embeddings=32, num_labels=num_labels, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, initializer_range=0.3)  # peaked attention
    torch.manual_seed(seed)
    model = BertForSequenceClassification(cfg).eval()
    if attn == ATTN_IMPLEMENTATION:
        enable_heads(model)
    else:
        model.set_attn_implementation(attn)
    return model


def random_examples(n: int, seed: int = 1, low: int = 3, high: int = 14):
    """n seeded examples [CLS] w... [SEP] of lengths in [low, high): (input_ids, token_type_ids) lists."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high, (n,), generator=g).tolist()
    ids = [[2] + torch.randint(5, 50, (k - 2,), generator=g).tolist() + [3] for k in lengths]
    tts = [[0] * (k // 2) + [1] * (k - k // 2) for k in lengths]
    return ids, tts


def padded(ids, tts):
    """The examples as one padded batch in their own order: (input_ids, token_type_ids, attention_mask) (N, T)."""
    (batch,) = make_batches(ids, tts, 0, len(ids))
    order = np.argsort(batch.rows)
    return (batch.input_ids[order], batch.token_type_ids[order], batch.attention_mask[order])
