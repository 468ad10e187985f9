"""One read of an attention store for every store analysis: the one way an analysis reduces a store.

A store analysis is a *kernel* (:class:`ExampleKernel`, :class:`BatchKernel` or :class:`ChunkKernel`) and nothing
else: what it reads, what one example (a sub-batch, a chunk) adds to its partial result, how partials combine, how
it is built for a job of the workflow (:meth:`Kernel.build` from a :class:`Job`) and what its result becomes
(:meth:`Kernel.outputs`: its tables and metrics, :class:`Outputs`). The registry entries (:mod:`bertology.analyses`)
name the kernel of every store analysis; :func:`reduce_store` runs any number of kernels over one store in ONE read
of it: each Dask task reads one chunk of examples (:func:`bertology.store.map_chunks` with ``crop="examples"``:
every example decoded alone, cropped to its own length, converted to float32 once
(:func:`bertology.store.as_float32`), its rows summed once for the read's check and the kernels),
hands every example, in the chunk's order, to every per-example kernel and, gathered with the examples of similar
length into one block zero-padded to the longest of them, to every batch kernel; then gives the chunk to every
per-chunk kernel; the driver combines the partials in chunk order. Memory is bounded by one chunk per worker
whatever the store's size.

:func:`run_chunks` is the generic wrapper around :func:`bertology.store.map_chunks` that every reduction
uses (this one, and the pair reduction of two aligned stores): open and check the store(s), their example
order, each chunk's small inputs (its words), the map, the empty check.

Glossary: E examples of a chunk, L layers, H heads, Q = K = the chunk's longest length, n real length of one
example.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd

from bertology.store import Crops, SpecialTokens, StoreError, map_chunks, open_store

P = TypeVar("P")


@dataclass(frozen=True)
class StoreInfo:
    """What a kernel may know about the store it reduces (small and picklable, for any Dask scheduler)."""

    path: str
    specials: SpecialTokens
    layers: int
    heads: int
    attrs: Mapping[str, Any]
    example_idx: np.ndarray  # (E,) the store's examples, in store order

    @property
    def causal(self) -> bool:
        """The store's maps are a decoder's (attribute ``causal``; absent: false)."""
        return bool(self.attrs.get("causal", False))


@dataclass
class Example:
    """One example as every per-example kernel sees it.

    attention: (L, H, n, n) float32 cropped to the real length n (no NaN: checked); input_ids, word_ids,
    segment: (>= n,) the example's rows as stored; cls, sep: (n,) bool, the special-token positions;
    example_idx: the example's idx (joins the words table); row_sums: (L, H, n) float64, each attention row summed
    over its n keys, once for the read's check and every kernel. Exact whatever the order of the sum: the values are
    float16 numbers (multiples of 2**-24 below 1), so are their sums in float64. causal: a decoder's maps (row t
    covers keys 0..t; :attr:`StoreInfo.causal`); its classified token is the last real one, n - 1.
    """

    attention: np.ndarray
    n: int
    input_ids: np.ndarray
    word_ids: np.ndarray
    segment: np.ndarray
    cls: np.ndarray
    sep: np.ndarray
    example_idx: int
    row_sums: np.ndarray
    causal: bool = False

    @property
    def classified(self) -> int | None:
        """The position the sequence classifier reads: the first [CLS] of an encoder (None: no [CLS]), the last
        real token of a decoder (transformers' decoder classifiers pool the last non-pad token)."""
        if self.causal:
            return self.n - 1
        return int(np.flatnonzero(self.cls)[0]) if self.cls.any() else None


@dataclass(frozen=True)
class Job:
    """One job of the one read of a store (rule ``store_stats``), as a kernel builds itself from it and turns its
    result into tables: config: the job's typed config (:class:`bertology.pipeline.config.Config`, the sections the store
    analyses declare); task, variant: its wildcards; store: the store's path; ds: the opened store; words: the
    words table beside it (None: none); inputs: the rule's other named inputs (e.g. ``classifier``,
    ``framenet``) -> path, absent when the rule gives none."""

    config: Any
    task: str
    variant: str
    store: str
    ds: Any
    words: pd.DataFrame | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Outputs:
    """What a kernel's result becomes: tables (output name, as its registry entries declare it -> a frame for a
    .csv, a mapping of arrays for an .npz), MLflow metrics ((name -> value, step or None), in order), lines for the
    job's log, and the outputs to record as MLflow artifacts."""

    tables: dict[str, Any]
    metrics: list[tuple[dict[str, float], int | None]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    artifacts: tuple[str, ...] = ()


class Kernel(Generic[P]):
    """What every kernel declares: its name, the store variables it reads, its per-example inputs from the words
    table and how partials combine into its result; and, for the workflow, how it is built for a job
    (:meth:`build`) and what its result becomes (:meth:`outputs`)."""

    name: str = ""
    variables: tuple[str, ...] = ()

    @classmethod
    def build(cls, job: Job) -> Kernel:
        """The kernel for one job of ``store_stats`` (its config, store, words). Default: no settings."""
        return cls()

    def outputs(self, result: Any, job: Job) -> Outputs:
        """The result (:meth:`combine` of every chunk's partial) -> its tables, named as the registry entries of
        its analyses name their outputs (``Table(..., output=name)``), and its metrics."""
        raise NotImplementedError(f"kernel {self.name} has no outputs()")

    def prepare(self, words: pd.DataFrame | None, info: StoreInfo) -> Any:
        """Driver side, once: the kernel's inputs from the words table (None: no words). Default: none."""
        return None

    def select(self, prepared: Any, example_idx: np.ndarray) -> Any:
        """The part of `prepared` a chunk of examples `example_idx` (E,) needs (it travels with the task)."""
        return None

    def combine(self, parts: list[P], info: StoreInfo) -> Any:
        """The result from the partials of every chunk, in chunk order. Default: their sum, left to right."""
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out


class ExampleKernel(Kernel[P]):
    """A reduction built example by example: ``empty`` -> ``add`` each example -> ``finish_chunk``."""

    #: whether ``add`` is called for examples of length < 2 (a lone [CLS]) too
    short_examples: bool = False

    def empty(self, info: StoreInfo) -> P:
        raise NotImplementedError

    def add(self, part: P, ex: Example, words: Any) -> None:
        """Add one example; `words` is this example's entry of the chunk's selection (None if it has none)."""
        raise NotImplementedError

    def finish_chunk(self, part: P, info: StoreInfo) -> P:
        """After the chunk's last example (e.g. a batched classifier over the chunk's maps). Default: as is."""
        return part


class BatchKernel(Kernel[P]):
    """A reduction over sub-batches of a chunk's examples taken in order of length (``batch`` at a time): each
    sub-batch comes as ONE float32 block (B, L, H, m, m), cropped to its longest example m, exact zeros past each
    example's length, converted once with the maps the per-example kernels get.
    ``empty_chunk`` -> ``add_batch`` each sub-batch -> ``finish_chunk``."""

    batch: int = 8

    def empty_chunk(self, block: Mapping[str, np.ndarray], words: Any, info: StoreInfo) -> Any:
        """The chunk's partial before its first sub-batch (block: the chunk's variables, words: its selection)."""
        raise NotImplementedError

    def add_batch(self, part: Any, attention: np.ndarray, rows: np.ndarray, block: Mapping[str, np.ndarray],
                  info: StoreInfo) -> None:
        """Add one sub-batch: attention (B, L, H, m, m) float32 of the examples `rows` (B,) of the block."""
        raise NotImplementedError

    def finish_chunk(self, part: Any, info: StoreInfo) -> P:
        """After the chunk's last sub-batch. Default: as is."""
        return part


class ChunkKernel(Kernel[P]):
    """A reduction of a whole chunk at once (batched arithmetic over examples)."""

    def chunk(self, block: Mapping[str, np.ndarray], words: Any, info: StoreInfo) -> P:
        """block: the chunk's variables (attention (E, L, H, Q, K) float16, NaN past each length)."""
        raise NotImplementedError


def example_groups(example_idx: np.ndarray) -> list[np.ndarray]:
    """Row numbers of a words table grouped by example: one (rows,) int array per example, in order of
    example_idx, each in table order. example_idx: the table's (N,) column."""
    order = np.argsort(example_idx, kind="stable")
    return [g for g in np.split(order, np.flatnonzero(np.diff(example_idx[order])) + 1) if g.size]


# --------------------------------------------------------------------------------------------------
# the generic chunk map


def run_chunks(fn: Callable[..., Any], stores: str | Path | Sequence[str | Path], *,
               variables: Sequence[str] | Sequence[Sequence[str]],
               expect: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
               select: Callable[[np.ndarray], Mapping[str, Any]] | None = None,
               compute_kwargs: Mapping[str, Any] | None = None, opened: Sequence[Any] | None = None,
               crop: bool | str = True, **shared: Any) -> tuple[list[Any], list[Any]]:
    """``fn`` over every example chunk of a store (or of aligned stores): -> (fn's results in chunk order, the
    opened stores).

    Opens every store with :func:`bertology.store.open_store` (expect: the attributes it must have, one mapping
    or one per store), refuses stores that do not hold the same examples in the same order or come from models
    of different shapes, gives each chunk ``select(example_idx of the chunk)`` (its small inputs) besides
    `shared`, and refuses a store without examples. opened: the stores, already opened by the caller; crop: how
    `attention` is read (:func:`bertology.store.read_chunk`).
    """
    paths = [stores] if isinstance(stores, (str, os.PathLike)) else list(stores)
    if opened is None:
        expects = list(expect) if isinstance(expect, (list, tuple)) else [expect] * len(paths)
        opened = [open_store(p, expect=e) for p, e in zip(paths, expects)]
    example_idx = np.asarray(opened[0]["example_idx"].values, dtype=np.int64)  # small: (E,)
    for p, ds in zip(paths[1:], opened[1:]):
        if not np.array_equal(np.asarray(ds["example_idx"].values, dtype=np.int64), example_idx):
            raise StoreError(f"{paths[0]} and {p} do not hold the same examples in the same order; "
                             f"re-extract both with the same attention.examples and seed")
        if (ds.sizes["layer"], ds.sizes["head"]) != (opened[0].sizes["layer"], opened[0].sizes["head"]):
            raise StoreError(f"{paths[0]} and {p} come from models of different shapes (layers x heads); "
                             f"re-extract both from the same model")
    per_chunk = (lambda start, stop: select(example_idx[start:stop])) if select is not None else None
    parts = map_chunks(fn, paths if len(paths) > 1 else paths[0], variables=variables,
                       compute_kwargs=compute_kwargs, per_chunk=per_chunk, crop=crop, **shared)
    if not parts:
        raise StoreError(f"{paths[0]} holds no examples; re-run the extraction")
    return parts, opened


def store_info(path: str | Path, ds) -> StoreInfo:
    """The StoreInfo of an opened store."""
    return StoreInfo(str(path), SpecialTokens.of(ds.attrs, str(path)), int(ds.sizes["layer"]),
                     int(ds.sizes["head"]), dict(ds.attrs), np.asarray(ds["example_idx"].values, dtype=np.int64))


# --------------------------------------------------------------------------------------------------
# the one pass


def reduce_chunk(block: Mapping[str, Any], kernels: Sequence[Kernel], words: Sequence[Any],
                 info: StoreInfo) -> list[Any]:
    """Every kernel's partial of one chunk. block: the union of the kernels' variables (attention as
    :class:`bertology.store.Crops`: each example float32 at its own length, with its row sums; length and
    example_idx (E,), (E, Q) rows); words: each kernel's selection for this chunk, in kernel order.

    The per-example kernels get the examples in the chunk's order, the batch kernels sub-batches in order of length
    built from the same float32 maps, the chunk kernels the NaN-padded block in the stored dtype (:meth:`Crops.padded`)."""
    # No threadpool_limits here: BLAS's thread count is global to the process, and limiting it while another
    # Dask thread runs the sieve's matrix products would change how those sum (float32, ~1e-7 relative),
    # from one run to the next. The per-example kernels' products are too small for BLAS to split.
    crops: Crops = block["attention"]
    out: list[Any] = [None] * len(kernels)
    work = [(i, k, k.empty(info), words[i]) for i, k in enumerate(kernels) if isinstance(k, ExampleKernel)]
    for e, n in enumerate(np.asarray(block["length"]).tolist()):
        todo = [(k, p, w) for _, k, p, w in work if n >= 2 or k.short_examples]
        if todo:
            ex = _example(block, e, crops, info)
            for k, p, w in todo:
                k.add(p, ex, w.get(ex.example_idx) if w is not None else None)
    for i, k, p, _ in work:
        out[i] = k.finish_chunk(p, info)
    batched = [(i, k) for i, k in enumerate(kernels) if isinstance(k, BatchKernel)]
    if batched:
        for i, k, p in _by_length(block, crops, [(i, k, k.empty_chunk(block, words[i], info)) for i, k in batched],
                                  info):
            out[i] = k.finish_chunk(p, info)
    padded = None
    for i, k in enumerate(kernels):
        if isinstance(k, ChunkKernel):
            if padded is None:
                padded = {**block, "attention": crops.padded()}
            out[i] = k.chunk(padded, words[i], info)
    return out


def _example(block: Mapping[str, Any], e: int, crops: Crops, info: StoreInfo) -> Example:
    """Example e of a block: its attention (L, H, n, n) float32 and row sums from `crops`."""
    n = int(block["length"][e])
    cls, sep = info.specials.masks(block["input_ids"][e, :n], n)
    return Example(crops.maps[e], n, block["input_ids"][e], block["word_ids"][e], block["segment"][e], cls, sep,
                   int(block["example_idx"][e]), crops.row_sums[e], info.causal)


def _by_length(block: Mapping[str, Any], crops: Crops, batches: list[tuple[int, BatchKernel, Any]],
               info: StoreInfo) -> list[tuple[int, BatchKernel, Any]]:
    """The chunk's examples to the batch kernels in sub-batches by length: each sub-batch one float32 block
    (B, L, H, m, m), m its longest example, exact zeros past each length, copied from the examples' maps."""
    sizes = {k.batch for _, k, _ in batches}
    if len(sizes) != 1:
        raise ValueError(f"the batch kernels of one pass need the same batch size, not {sorted(sizes)}")
    batch = sizes.pop()
    length = np.asarray(block["length"])
    order = np.argsort(length, kind="stable")
    for lo in range(0, order.size, batch):
        rows = order[lo:lo + batch]
        m = max(int(np.max(length[rows])), 1)
        maps = np.zeros((rows.size,) + crops.maps[rows[0]].shape[:2] + (m, m), dtype=np.float32)
        for i, e in enumerate(rows):
            n = int(length[e])
            maps[i, :, :, :n, :n] = crops.maps[e]
        for _, k, p in batches:
            k.add_batch(p, maps, rows, block, info)
    return batches


def _onepass_task(block: Mapping[str, np.ndarray], *, kernels: Sequence[Kernel], words: Sequence[Any],
                  info: StoreInfo) -> list[Any]:
    """map_chunks function of :func:`reduce_store`: one chunk read -> every kernel's partial."""
    return reduce_chunk(block, kernels, words, info)


#: what the example loop itself reads, whatever the kernels
EXAMPLE_VARS = ("attention", "length", "example_idx", "input_ids", "word_ids", "segment")


def reduce_store(store: str | Path, kernels: Sequence[Kernel], words: pd.DataFrame | None = None, *,
                 expect: Mapping[str, Any] | None = None, compute_kwargs: Mapping[str, Any] | None = None,
                 opened: Any = None) -> dict[str, Any]:
    """ONE read of a store -> {kernel name: its result} for every kernel.

    store: an attention store (checked by :func:`bertology.store.open_store`; expect: the attributes it must
    have, :func:`bertology.store.expected_attrs`); words: the words table beside it (None: no words);
    compute_kwargs: for ``dask.compute`` (:func:`bertology.pipeline.daskutil.compute_kwargs`); opened: the store, already
    opened (and checked) by the caller.
    """
    kernels = list(kernels)
    if len({k.name for k in kernels}) != len(kernels):
        raise ValueError(f"kernels need distinct names: {[k.name for k in kernels]}")
    ds = opened if opened is not None else open_store(store, expect=expect)
    info = store_info(store, ds)
    prepared = [k.prepare(words, info) for k in kernels]
    names: list[str] = []
    for k in kernels:
        for v in (EXAMPLE_VARS if isinstance(k, ExampleKernel) else ()) + tuple(k.variables):
            if v not in names:
                names.append(v)

    def select(idx: np.ndarray) -> dict[str, Any]:
        return {"words": [k.select(p, idx) for k, p in zip(kernels, prepared)]}

    parts, _ = run_chunks(_onepass_task, store, variables=names, select=select, compute_kwargs=compute_kwargs,
                          opened=[ds], crop="examples", kernels=kernels, info=info)
    return {k.name: k.combine([p[i] for p in parts], info) for i, k in enumerate(kernels)}
