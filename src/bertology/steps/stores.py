"""The one read of an attention store: ``store_stats`` runs every store analysis of the registry.

``store_stats``: one store (results/attention/{task}/{variant}.zarr) and its words table -> every table of every
store analysis (:meth:`bertology.registry.Registry.store_analyses`), from ONE read of the store
(:func:`bertology.attention.onepass.reduce_store`). Each kernel builds itself for the job
(:meth:`bertology.attention.onepass.Kernel.build`) and turns its result into its tables
(:meth:`bertology.attention.onepass.Kernel.outputs`); this step checks them against the registry's declaration (names and
columns) and writes them, one writer per file type.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bertology.analyses import REGISTRY
from bertology.pipeline.daskutil import compute_kwargs
from bertology.pipeline.io import write_csv, write_json, write_npz, write_parquet
from bertology.pipeline.tasks import annotated_only
from bertology.attention.onepass import Job, reduce_store
from bertology.registry import check_outputs
from bertology.steps.context import StepContext
from bertology.store import expected_attrs, open_store, read_words

#: the inputs of store_stats that are not the store and its words: the kernels' own (Job.inputs)
STORE_INPUTS = ("store", "words")


def write_table(value: Any, path: Path) -> None:
    """One declared table, by its file type: a frame as .csv or .parquet, arrays as .npz, a mapping as .json."""
    suffix = Path(path).suffix
    writers = {".csv": write_csv, ".parquet": write_parquet, ".npz": write_npz, ".json": write_json}
    if suffix not in writers:
        raise ValueError(f"no writer for {path}: a store table is .csv, .parquet, .npz or .json")
    writers[suffix](value, path)


def store_stats(ctx: StepContext) -> None:
    """One read of a store -> the outputs of every store analysis
    (:meth:`bertology.registry.Registry.store_outputs`)."""
    words = read_words(ctx.input.words)
    ds = open_store(ctx.input.store, expect=expected_attrs(ctx.config, ctx.task, ctx.variant))
    job = Job(ctx.config, ctx.task, ctx.variant, str(ctx.input.store), ds, words,
              {name: ctx.input.get(name) for name in ctx.input if name not in STORE_INPUTS})
    kernels = [cls.build(job) for cls in REGISTRY.store_kernels()]
    t0 = time.perf_counter()
    results = reduce_store(ctx.input.store, kernels, words, opened=ds,
                           compute_kwargs=compute_kwargs(ctx.config.analysis.dask, ctx.threads))
    seconds = time.perf_counter() - t0
    for kernel in kernels:
        out = kernel.outputs(results[kernel.name], job)
        check_outputs(kernel, out.tables, REGISTRY.kernel_tables(type(kernel)))
        for name, value in out.tables.items():  # a task without annotated words: those analyses left out
            write_table(annotated_only(ctx.task, name, value), getattr(ctx.output, name))
        for line in out.log:
            ctx.log.info("%s", line)
        for metrics, step in out.metrics:
            ctx.tracker.metrics(metrics, step=step)
        for name in out.artifacts:
            ctx.tracker.artifact(getattr(ctx.output, name))
    ctx.tracker.metrics({"examples": int(ds.sizes["example"]), "seconds": seconds})
    ctx.log.info("%s: %d examples, %d x %d heads, %s in one read in %.1f s", ctx.input.store, ds.sizes["example"],
                 ds.sizes["layer"], ds.sizes["head"], ", ".join(k.name for k in kernels), seconds)
