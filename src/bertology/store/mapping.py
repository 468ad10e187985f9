"""Chunked reductions: the one way an analysis reads a whole store (:func:`map_chunks`, one Dask task per chunk).

Imports bertology.store.files and bertology.store.chunks.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bertology.store.chunks import read_chunk
from bertology.store.files import array_of, file_examples, open_group


class _Opaque:
    """Holds a task's arguments so that Dask neither walks nor hashes them (a chunk's words are thousands of
    small objects: walking them cost a tenth of a reduction)."""

    def __init__(self, value: Any):
        self.value = value


#: glibc's mallopt parameters (malloc.h) and what the reductions set them to: freed memory above 64 KiB at the top of
#: a heap goes back to the system (dask.distributed sets the same for its workers, MALLOC_TRIM_THRESHOLD_), and blocks
#: of 32 MiB or more are mapped apart (glibc's own ceiling; left dynamic, its threshold rose to that anyway)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MALLOC_SETTINGS = {M_TRIM_THRESHOLD: 64 * 1024, M_MMAP_THRESHOLD: 32 * 1024 * 1024}


@functools.cache
def release_freed_memory() -> bool:
    """Once per process: glibc gives the memory a chunk's arrays held back to the system when they are freed
    (:data:`MALLOC_SETTINGS`); by default it kept freed blocks below 32 MiB in its heaps, and a reduction's resident
    memory grew chunk after chunk. False (nothing changed) with another C library. Values and speed are unchanged
    (docs/reference.md#performance)."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in MALLOC_SETTINGS.items())


def _chunk_task(fn: Callable[..., Any], paths: list[str], variables: list[tuple[str, ...]], start: int, stop: int,
                kwargs: _Opaque, crop: bool | str = True) -> Any:
    release_freed_memory()
    blocks = [read_chunk(p, start, stop, names, crop=crop) for p, names in zip(paths, variables)]
    return fn(*blocks, **kwargs.value)


def map_chunks(fn: Callable[..., Any], stores: str | Path | Sequence[str | Path], *,
               variables: Sequence[str] | Sequence[Sequence[str]], compute_kwargs: Mapping[str, Any] | None = None,
               per_chunk: Callable[[int, int], Mapping[str, Any]] | None = None, crop: bool | str = True,
               **shared: Any) -> list[Any]:
    """``fn`` over every example chunk of one store, or of several aligned stores: one Dask task per chunk.

    stores: a store (path or fsspec URL) or a sequence of stores holding the same examples in the same order
    (the chunks are the first store's own). variables: the variables read, one sequence of names for every
    store or one sequence per store. A task carries paths, not data: it opens the store(s), reads examples
    [start, stop) as numpy arrays and returns ``fn(*blocks, **shared, **per_chunk(start, stop))`` (blocks:
    one dict name -> array per store; per_chunk gives small inputs of that chunk, e.g. its words). crop
    (default): `attention` is (e, L, H, m, m), cropped to the chunk's longest example m (:func:`read_chunk`),
    NaN past each example's length; fn must then index a map only within its example's length;
    crop="examples": `attention` is a :class:`bertology.store.Crops`, each example alone at its own length. A chunk
    is freed as soon as fn returns, and given back to the system (:func:`release_freed_memory`): memory holds at most
    one chunk per worker, whatever the store's size.
    fn must be picklable (a module-level function) for the process and distributed schedulers.
    compute_kwargs: for ``dask.compute`` (:func:`bertology.pipeline.daskutil.compute_kwargs`).

    Returns fn's results in chunk order; the caller combines them.
    """

    import dask

    paths = [os.fspath(stores)] if isinstance(stores, (str, os.PathLike)) else [os.fspath(s) for s in stores]
    if variables and all(isinstance(v, str) for v in variables):
        names = [tuple(variables)] * len(paths)
    else:
        names = [tuple(v) for v in variables]
    if len(names) != len(paths):
        raise ValueError(f"map_chunks: {len(paths)} stores but {len(names)} variable lists")
    att = array_of(open_group(paths[0]), "attention", paths[0])
    size, E = file_examples(att), int(att.shape[0])
    bounds = [(start, min(start + size, E)) for start in range(0, E, size)]
    tasks = [dask.delayed(_chunk_task, pure=False)(
        fn, paths, names, start, stop, _Opaque({**shared, **(dict(per_chunk(start, stop)) if per_chunk else {})}),
        crop) for start, stop in bounds]
    return list(dask.compute(*tasks, **dict(compute_kwargs or {}))) if tasks else []
