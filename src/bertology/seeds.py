"""Fine-tuning seeds: which seeds a config trains, and how a seed shows in output paths.

``train.seeds: null`` (the default) trains one model per (task, init), seeded by ``train.seed``;
``train.seeds: [s1, s2, ...]`` trains one per seed (and config validation sets ``train.seed`` to s1).
The first seed keeps the plain paths (``results/models/{task}/{init}``,
``results/scores/{task}/{variant}.json``): it is the model every analysis reads. Each further seed N adds
the path tag ``-seedN`` (``results/models/{task}/{init}-seed43``), the ``seedtag`` wildcard of the
train_model and score rules (empty for the first seed, whose seed the steps take from ``train.seed``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bertology.errors import UserError

SEED_TAG_REGEX = r"(-seed[0-9]+)?"  # the `seedtag` wildcard: empty (first seed) or -seedN
_TAG = re.compile(r"-seed([0-9]+)")


def configured_seeds(train: Mapping[str, Any]) -> list[int]:
    """The seeds of a validated `train:` section: train.seeds, or [train.seed] when that is null."""
    seeds = train.get("seeds")
    return [int(s) for s in seeds] if seeds else [int(train["seed"])]


def seed_tag(seed: int, first: int) -> str:
    """'' for the first seed (its paths stay the plain ones), '-seed{seed}' for any other."""
    return "" if seed == first else f"-seed{seed}"


def seed_tags(seeds: Sequence[int]) -> list[str]:
    """The path tags of `seeds`, the first ('') first."""
    return [seed_tag(s, seeds[0]) for s in seeds]


def seed_from_tag(tag: str | None, first: int) -> int:
    """The seed a path tag stands for: '' or None -> first (train.seed); '-seed43' -> 43."""
    if not tag:
        return first
    match = _TAG.fullmatch(tag)
    if match is None:
        raise UserError(f"seed tag {tag!r} is neither empty (the first seed, train.seed) nor -seed<N> (e.g. -seed43)")
    return int(match.group(1))
