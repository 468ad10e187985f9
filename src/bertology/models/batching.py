"""Batches of a fine-tuning run: which examples go together (length-sorted for evaluation, shuffled length buckets for
training, seeded by (seed, epoch) so that a resumed run sees the same batches) and how many optimizer steps a run
has; :func:`collate` pads one batch with the tokenizer (dynamic padding).

Glossary: E examples, B batch size, T tokens of a padded batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bertology.models.encoding import Encoded

BUCKET_BATCHES = 50  # batches per length bucket: shuffled chunks of 50*B examples are sorted by length


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
    """Batches of one epoch: ceil(E / B)."""
    return math.ceil(n_examples / batch_size)


def total_steps(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps of a run: ceil(epochs * batches per epoch), at least 1."""
    return max(1, math.ceil(epochs * steps_per_epoch(n_examples, batch_size)))


def collate(tokenizer, enc: Encoded, idx: np.ndarray, device, regression: bool) -> dict[str, Any]:
    """Pad the examples `idx` to their longest with the tokenizer (its pad token and padding side; dynamic padding)
    -> tensors (B, T) (input_ids, token_type_ids where the model is given them (``enc.token_type_ids`` not None:
    :func:`bertology.models.encoding.gives_token_type_ids`), and attention_mask where the tokenizer makes one) and
    labels (B,): the model's keyword inputs."""
    import torch

    features = [{"input_ids": enc.input_ids[i].tolist()} if enc.token_type_ids is None else
                {"input_ids": enc.input_ids[i].tolist(), "token_type_ids": enc.token_type_ids[i].tolist()}
                for i in idx]
    batch = tokenizer.pad(features, padding=True, return_tensors="pt")
    batch = {k: v.to(device) for k, v in batch.items()}
    labels = torch.as_tensor(enc.labels[idx], dtype=torch.float32 if regression else torch.long)
    batch["labels"] = labels.to(device)
    return batch
