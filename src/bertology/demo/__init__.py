"""The demo data source: small GLUE-shaped tasks generated from the project's own word lists and templates.

Every example is real English built from a *proposition* (subject, verb, object, optional adjectives,
adverb, place and time, tense, negation) and a *wording* (active or passive voice, which synonym of
each word, where the adverb and the time go, contracted or full negation). Tasks are defined by what
they change between the two texts of a pair:

=========  ============================================================================================
task       how text_b relates to text_a, and the label
=========  ============================================================================================
cola       one sentence: grammatical (1) or broken by a swapped word, agreement or verb-form error (0)
sst2       one review sentence: sentiment word (adjective or verb) whose polarity negation flips;
           concessive clauses of the opposite polarity make single words unreliable
mrpc       equivalent (1) = the same proposition closely reworded (voice, adverb and time position,
           contraction, now and then a synonym); not_equivalent (0) = reworded the same way, with one
           visible change: negation flipped, another verb, subject or object, or the two swapped
stsb       score 5 - k (+-0.3) for k of five parts (subject, verb, object, adjective, place) changed
qqp        duplicate (1) = the same intent/verb/noun asked with another template or synonyms
mnli       entailment (simplified premise, hypernyms), neutral (adds a modifier the premise lacks),
           contradiction (polarity flipped)
qnli       a wh-question and a sentence that answers it (entailment, 0) or not (1)
rte        hypothesis restating the premise with fewer modifiers or a hypernym (only reworded under
           negation) (entailment, 0), or restating it with one of mrpc's changes (not_entailment, 1)
=========  ============================================================================================

Determinism: one NumPy stream per (seed, task, split). Train and validation never share a text pair:
each pair is assigned to one split by a hash of its texts, and the other split's pairs are rejected.
Labels are balanced exactly (regression scores: the number of changed parts is balanced).

Modules: `lexicon` (word lists), `grammar` (propositions, wordings, realisation), `sampling` (random
propositions and the transformations between the texts of a pair), `single` (cola, sst2) and `pairs`
(the pair tasks), `trees` (gold UD trees of the grammar's sentences, `trees.gold_treebank`, the default run's
gold syntax). `generate` is the entry point.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Callable

import numpy as np
import pandas as pd

from bertology.demo import pairs, single
from bertology.demo.sampling import Example, Retry, Rng
from bertology.pipeline.tasks import SPLITS, get_task
from bertology.pipeline.config import ConfigError

__all__ = ["generate", "split_of"]

MAKERS: dict[str, Callable[[Rng, int], Example]] = {**single.MAKERS, **pairs.MAKERS}

VALIDATION_SHARE = 5  # one pair in 5 belongs to validation, by a hash of its texts


def split_of(text_a: str, text_b: str | None) -> str:
    """The split a text pair belongs to (a stable hash: a pair can never be in both splits)."""
    digest = hashlib.sha1(f"{text_a}\t{text_b}".encode()).digest()
    return "validation" if int.from_bytes(digest[:4], "big") % VALIDATION_SHARE == 0 else "train"


def _stream(seed: int, task: str, split: str) -> Rng:
    entropy = [int(seed), zlib.crc32(task.encode()), SPLITS.index(split)]
    return Rng(np.random.default_rng(np.random.SeedSequence(entropy)))


def generate(task: str, split: str, n: int, seed: int) -> pd.DataFrame:
    """n examples of a demo task: columns idx (0..n-1), text_a, text_b (None if single), label.

    label: int64 class id in the order of bertology.pipeline.tasks.TASKS[task].label_names; float score 0..5 for
    stsb. Deterministic for (task, split, n, seed); train and validation never share a text pair.
    """
    spec = get_task(task)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    if n < 1:
        raise ConfigError(f"n must be at least 1, got {n}; set data.demo.{split} to a positive size")
    if seed < 0:
        raise ConfigError(f"seed must be >= 0, got {seed}; set data.seed to a non-negative integer")
    r = _stream(seed, task, split)
    classes = 6 if spec.is_regression else spec.num_labels  # stsb: 0..5 changed parts
    wanted = r.gen.permutation(np.resize(np.arange(classes), n))
    make = MAKERS[task]
    rows: list[tuple[int, str, str | None, int | float]] = []
    seen: set[tuple[str, str | None]] = set()
    attempts, budget = 0, 200 * n + 1000
    for target in wanted:
        while True:
            attempts += 1
            if attempts > budget:
                raise ConfigError(f"the demo {task} generator cannot make {n} distinct {split} examples; "
                                 f"ask for fewer (data.demo.{split})")
            try:
                a, b, label = make(r, int(target))
            except Retry:
                continue
            key = (a, b if spec.is_pair else None)
            if key in seen or split_of(*key) != split:
                continue
            seen.add(key)
            rows.append((len(rows), a, key[1], label))
            break
    df = pd.DataFrame(rows, columns=["idx", "text_a", "text_b", "label"])
    df["idx"] = df["idx"].astype("int64")
    df["label"] = df["label"].astype("float64" if spec.is_regression else "int64")
    return df
