"""Everything the explorer page shows, read from a results/ directory into one plain dict (nothing recomputed):
the statistics of the registry's catalogue, the sieve block, the token views and a sample of examples with
their maps, per task (:mod:`bertology.explorer` says what the page shows).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from bertology import __version__
from bertology.explorer.catalogue import catalogue, statistic_tables
from bertology.explorer.claims import claims_block
from bertology.explorer.examples import probe_examples, sampled_examples
from bertology.explorer.inputs import PROBE_STORES, VARIANTS, Inputs
from bertology.explorer.maps import QUANT
from bertology.explorer.sieve import sieve_block
from bertology.explorer.tables import task_tables
from bertology.explorer.views import token_views
from bertology.analyses import REGISTRY

log = logging.getLogger(__name__)

DEFAULT_EXAMPLES = 16  # sampled examples per task shown on the page
DEFAULT_BUDGET_BYTES = 8_000_000  # embedded attention maps, all tasks together (the page stays under 10 MB)


def load_explorer_data(results: Path, tasks: list[str], *, examples: int, seed: int,
                       budget_bytes: int = DEFAULT_BUDGET_BYTES,
                       expect: Callable[[str, str], Mapping[str, Any]] | None = None,
                       inputs: Collection[str] | None = None) -> dict:
    """Everything the explorer page shows, read from a run's results root (nothing recomputed).

    results: the results root (results/); tasks: the tasks to include (those without attention stores are
    skipped with a note). examples: examples per task whose maps are embedded (the same store positions for both
    variants: those with token scores first, then a seeded sample;
    :func:`bertology.explorer.sampling.pick_examples`); seed: the sample's seed. budget_bytes: cap on the
    embedded (compressed) maps over all tasks; examples past it are left out and the page says so.
    Reads each store lazily through :func:`bertology.store.open_store`, one sampled example at a time;
    expect(task, variant): the attributes each store must have (:func:`bertology.store.expected_attrs`).
    inputs: the files the page may read, as paths under `results` (the explorer rule's declared inputs,
    :func:`bertology.explorer.inputs.explorer_inputs`); a file not among them is not read, even when it is there.
    None: every file under `results` (notebooks, tests).
    """
    from bertology.store import open_store
    from bertology.pipeline.tasks import get_task

    src = Inputs.of(results, inputs)
    tasks = list(tasks)
    out: dict[str, Any] = {"format": 1, "bertology_version": __version__,
                           "generated": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
                           "results": str(src.root), "examples": int(examples), "seed": int(seed),
                           "quant": QUANT, "tasks": [], "skipped": []}
    share = max(1, int(budget_bytes) // max(1, len(tasks)))
    for task in tasks:
        notes: list[str] = []
        stores = {}
        for v in VARIANTS:
            path = src.path("store", task=task, variant=v)
            if src.readable(path):
                stores[v] = open_store(path, expect=expect(task, v) if expect else None)
            elif src.expected(path):
                notes.append(src.absent(path))
        if not stores:
            out["skipped"].append({"task": task, "why": "; ".join(notes)})
            log.warning("explorer: %s has no attention store; skipped", task)
            continue
        ref = next(iter(stores.values()))
        L, H = int(ref.sizes["layer"]), int(ref.sizes["head"])
        out.setdefault("model", str(ref.attrs.get("model", "?")))
        wpath = src.path("words", task=task)
        words = pd.read_parquet(wpath, columns=None) if src.readable(wpath) else None
        if words is None:
            notes.append(f"{src.absent(wpath)}: no dependency arcs")
        read: dict[str, dict[str, pd.DataFrame]] = {}  # tables read, by registry template: the sieve's read once
        sieve_tables = statistic_tables(src, task, REGISTRY.analysis("sieve").statistics[0], notes, read)
        sieve, scores = sieve_block(src, task, L, H, sieve_tables, notes)
        metrics = catalogue(src, task, L, H, notes, read)
        views, look = token_views(src, task, list(stores))
        exs, dropped = sampled_examples(src, task, stores, words, scores, sieve["roles"] if sieve else [],
                                        examples, seed, share, look)
        probes = {v: open_store(path) for v, path in ((v, src.path("store", task=task, variant=p))
                                                      for v, p in PROBE_STORES.items()) if src.readable(path)}
        exs += probe_examples(src, task, probes)
        try:
            spec = get_task(task)
            display, pair = spec.display, spec.is_pair
        except Exception:  # noqa: BLE001 - a task the project does not know: its name, pairs told by the sieve roles
            display, pair = task, bool(sieve and "block" in sieve["roles"])
        out["tasks"].append({
            "task": task, "display": display, "pair": pair, "layers": L, "heads": H,
            "causal": bool(ref.attrs.get("causal", False)),
            "split": str(ref.attrs.get("split", "")), "store_examples": int(ref.sizes["example"]),
            "variants": list(stores), "stores": {v: src.name(src.path("store", task=task, variant=v)) for v in stores},
            "metrics": metrics, "sieve": sieve, "examples": exs, "dropped": dropped, "notes": notes,
            "token_views": views, "claims": claims_block(src, task, notes), "tables": task_tables(src, task, notes),
        })
    return out
