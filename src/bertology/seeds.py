"""Fine-tuning seeds: which seeds a config trains, and how a seed shows in output paths.

``train.seeds`` = k trains every (task, init) k times, with seeds ``train.seed, train.seed + 1, ...``.
The first seed (``train.seed``) keeps the plain paths (``results/models/{task}/{init}``,
``results/scores/{task}/{variant}.json``): it is the model every analysis reads. Each further seed N
adds the path tag ``-seedN`` (``results/models/{task}/{init}-seed43``), the ``seedtag`` wildcard of the
train_model and score rules (empty for the first seed).
"""

from __future__ import annotations

import re

from bertology.errors import UserError

SEED_TAG_REGEX = r"(-seed[0-9]+)?"  # the `seedtag` wildcard: empty (first seed) or -seedN
_TAG = re.compile(r"-seed([0-9]+)")


def seed_list(first: int, count: int) -> list[int]:
    """The seeds of ``train.seed`` = first and ``train.seeds`` = count: [first, first + 1, ...]."""
    if count < 1:
        raise UserError(f"train.seeds must be at least 1, got {count}")
    return [first + i for i in range(count)]


def seed_tag(seed: int, first: int) -> str:
    """'' for the first seed (its paths stay the plain ones), '-seed{seed}' for any other."""
    return "" if seed == first else f"-seed{seed}"


def seed_tags(first: int, count: int) -> list[str]:
    """The path tags of every configured seed, the first ('') first."""
    return [seed_tag(s, first) for s in seed_list(first, count)]


def seed_from_tag(tag: str | None, first: int) -> int:
    """The seed a path tag stands for: '' or None -> first; '-seed43' -> 43."""
    if not tag:
        return first
    match = _TAG.fullmatch(tag)
    if match is None:
        raise UserError(f"seed tag {tag!r} is neither empty (the first seed, train.seed) nor -seed<N> (e.g. -seed43)")
    return int(match.group(1))
