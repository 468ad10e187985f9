"""The one read of an attention store: ``store_stats`` runs every store analysis of the registry.

``store_stats``: one store (results/attention/{task}/{variant}.zarr) and its words table -> every table of every
store analysis (:func:`bertology.registry.store_analyses`: Kovaleva's patterns, features, [CLS] and relations,
Clark's entropy and parser, Pande's sieve), from ONE read of the store (:func:`bertology.onepass.reduce_store`).
Each analysis's kernel is built for the job, and its outputs written, by the step functions its registry entry
names.
"""

from __future__ import annotations

import time

from bertology import registry
from bertology.cli import StepContext
from bertology.daskutil import compute_kwargs
from bertology.onepass import reduce_store
from bertology.store import expected_attrs, open_store, read_words


def store_stats(ctx: StepContext) -> None:
    """One read of a store -> the outputs of every store analysis (:func:`bertology.registry.store_outputs`)."""
    words = read_words(ctx.input.words)
    ds = open_store(ctx.input.store, expect=expected_attrs(ctx.config, ctx.task, ctx.variant))
    specs = registry.store_kernels()
    kernels = [spec.load("make")(ctx, ds) for spec in specs]
    t0 = time.perf_counter()
    results = reduce_store(ctx.input.store, kernels, words, opened=ds,
                           compute_kwargs=compute_kwargs(ctx.config.analysis.dask, ctx.threads))
    seconds = time.perf_counter() - t0
    for spec, kernel in zip(specs, kernels):
        spec.load("write")(ctx, results[kernel.name], ds)
    ctx.tracker.metrics({"examples": int(ds.sizes["example"]), "seconds": seconds})
    ctx.log.info("%s: %d examples, %d x %d heads, %s in one read in %.1f s", ctx.input.store, ds.sizes["example"],
                 ds.sizes["layer"], ds.sizes["head"], ", ".join(k.name for k in kernels), seconds)
