"""Fine-tuning seeds: which seeds a config trains, and how a seed shows in output paths.

``train.seeds: null`` (the default) trains one model per (task, init), seeded by ``train.seed``;
``train.seeds: [s1, s2, ...]`` trains one per seed (and config validation sets ``train.seed`` to s1).
The first seed keeps the plain paths (``results/models/{task}/{init}``,
``results/scores/{task}/{variant}.json``). Each further seed N adds
the path tag ``-seedN`` (``results/models/{task}/{init}-seed43``), the ``seedtag`` wildcard of the
train_model and score rules (empty for the first seed, whose seed the steps take from ``train.seed``).

Every fine-tuned analysis runs once per seed: the seed is part of the store variant's name
(``finetuned`` for the first seed, ``finetuned-seed43`` for seed 43: ``results/attention/{task}/finetuned-seed43.zarr``,
``results/stats/{task}/finetuned-seed43/...``), and the outputs that carry no variant in their path add the
path tag (``results/stats/{task}/cosine-seed43.csv``, ``results/ablation/{task}/heads-seed43.csv``). The
pretrained variant has no fine-tuning seed and is computed once. Which model directory a variant runs is
:func:`bertology.pipeline.layout.variant_model` (and :func:`bertology.pipeline.layout.syntax_model` for a gold-syntax store).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bertology.pipeline.errors import UserError

SEED_TAG_REGEX = r"(-seed[0-9]+)?"  # the `seedtag` wildcard: empty (first seed) or -seedN
_TAG = re.compile(r"-seed([0-9]+)")
PRETRAINED, FINETUNED = "pretrained", "finetuned"  # the store variants (bertology.pipeline.tasks.STORE_VARIANTS)
#: the `variant` wildcard of a store and its per-variant analyses: pretrained, finetuned, finetuned-seedN
STORE_VARIANT_REGEX = rf"{PRETRAINED}|{FINETUNED}{SEED_TAG_REGEX}"
_VARIANT = re.compile(rf"({PRETRAINED}|{FINETUNED})({SEED_TAG_REGEX})")


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
    """The seed a path tag stands for: '' or None is `first` (train.seed).

    >>> seed_from_tag("-seed43", first=42), seed_from_tag("", first=42)
    (43, 42)
    """
    if not tag:
        return first
    match = _TAG.fullmatch(tag)
    if match is None:
        raise UserError(f"seed tag {tag!r} is neither empty (the first seed, train.seed) nor -seed<N> (e.g. -seed43)")
    return int(match.group(1))


def finetuned_variants(tags: Sequence[str]) -> list[str]:
    """The store variants of the fine-tuned seeds, the first seed's first: ['finetuned', 'finetuned-seed43', ...]."""
    return [f"{FINETUNED}{tag}" for tag in tags]


def store_variants(tags: Sequence[str]) -> list[str]:
    """Every store variant of a run: the pretrained one (no fine-tuning seed) then one per fine-tuned seed."""
    return [PRETRAINED, *finetuned_variants(tags)]


def split_variant(variant: str) -> tuple[str, str]:
    """A store variant -> (its base variant, its seed tag).

    >>> split_variant("finetuned-seed43"), split_variant("finetuned"), split_variant("pretrained")
    (('finetuned', '-seed43'), ('finetuned', ''), ('pretrained', ''))
    """
    match = _VARIANT.fullmatch(variant or "")
    if match is None or (match.group(1) == PRETRAINED and match.group(2)):
        raise UserError(f"unknown variant {variant!r}: attention stores exist for {PRETRAINED}, {FINETUNED} (the "
                        f"first fine-tuning seed) and {FINETUNED}-seed<N> (each further seed of train.seeds)")
    return match.group(1), match.group(2)


#: the `model` wildcard of the gold-syntax stores: pretrained, or {task}-finetuned with the seed tag of its seed
SYNTAX_MODEL_REGEX = rf"{PRETRAINED}|[a-z0-9]+-{FINETUNED}{SEED_TAG_REGEX}"
_SYNTAX_MODEL = re.compile(rf"([a-z0-9]+)-({FINETUNED}{SEED_TAG_REGEX})")


def split_syntax_model(model: str) -> tuple[str | None, str]:
    """A gold-syntax store's model -> (its task, its store variant); 'pretrained' is the config's `model`, no task.

    >>> split_syntax_model("rte-finetuned-seed43"), split_syntax_model("pretrained")
    (('rte', 'finetuned-seed43'), (None, 'pretrained'))
    """
    if model == PRETRAINED:
        return None, PRETRAINED
    match = _SYNTAX_MODEL.fullmatch(model or "")
    if match is None:
        raise UserError(f"unknown model {model!r}: gold syntax stores exist for `pretrained`, `TASK-finetuned` and "
                        f"`TASK-finetuned-seed<N>`")
    return match.group(1), match.group(2)
