"""The Snakefile's side of a run of several models (rules/models.smk): the models every words table is cut for, and
the check that the rules the shared module runs are exactly those whose outputs no model decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bertology.pipeline import layout


def word_models(configs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """attention.word_models of a run of several models: each model with its data.max_length.

    >>> word_models([{"model": "a", "data": {"max_length": 128}}, {"model": "b", "data": {"max_length": 64}}])
    [{'model': 'a', 'max_length': 128}, {'model': 'b', 'max_length': 64}]
    """
    return [{"model": str(c["model"]), "max_length": int(c["data"]["max_length"])} for c in configs]


def shared_rules(registry) -> list[str]:
    """The rules whose every declared output lies under results/data/ (layout.SHARED_DIR), in the registry's order."""
    out = []
    for output in registry.declared_outputs():
        if output.rule not in out:
            out.append(output.rule)
    shared = []
    for name in out:
        paths = list(registry.outputs(name).values())
        if paths and all(str(p).split("/")[1] == layout.SHARED_DIR for p in paths):
            shared.append(name)
    return shared


def check_shared_rules(named: Sequence[str], registry) -> None:
    """Stop the workflow when the rules rules/models.smk shares differ from :func:`shared_rules` (a rule added under
    results/data/, or one moved out of it), naming both lists."""
    from bertology.workflow.snakefile import fail

    wanted = shared_rules(registry)
    if sorted(named) != sorted(wanted):
        fail(f"rules/models.smk shares the rules {', '.join(named)}, but the rules whose outputs all lie under "
             f"results/{layout.SHARED_DIR}/ are {', '.join(wanted)}: name these in its SHARED_RULES and `use rule` lines")


def compare_tables(targets: Mapping[str, Sequence[str]]) -> list[str]:
    """The files the comparisons read (bertology.analyses.compare.SOURCES: each source's path, in the store
    variants it reads) among each model's outputs (short name -> its targets, under results/m/{name}/): what the
    compare rule waits for."""
    from bertology.analyses.compare import SOURCES

    sources = [(layout.pattern(text), variants) for text, variants in SOURCES.values()]
    out = []
    for name, files in targets.items():
        root = layout.model_root(name)
        for file in files:
            relative = str(file)[len(root) + 1:] if str(file).startswith(root + "/") else None
            if relative is None:
                continue
            for rx, variants in sources:
                found = rx.fullmatch(relative)
                if found is not None and (not variants or found.group("variant") in variants):
                    out.append(str(file))
                    break
    return out
