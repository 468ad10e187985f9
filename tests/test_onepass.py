"""The one read of a store (bertology.attention.onepass) and the registry of analyses (bertology.registry, bertology.analyses)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import pandas as pd

from bertology.pipeline import layout
from bertology.analyses import REGISTRY
from bertology.clark.reduce import ClarkKernel
from bertology.kovaleva.reduce import KovalevaKernel
from bertology.attention.onepass import ChunkKernel, ExampleKernel, Job, reduce_store, run_chunks
from bertology.registry import CONDITIONS, check_outputs
from bertology.sieve.reduce import SieveKernel
from bertology.store import StoreError, open_store
from tests.builders import kovaleva as kb

SYNC = {"scheduler": "synchronous"}
EXAMPLES = [kb.pair_example(), kb.single_example(), kb.long_example(5, 4), kb.pair_example(), kb.single_example()]


def same(a, b) -> bool:
    """Equal bit for bit (NaN = NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("onepass") / "s.zarr"
    return kb.write_store(kb.build_store(EXAMPLES, kb.maps), path, chunk=2)  # chunks of 2, 2, 1 examples


@dataclass(frozen=True)
class RowSums(ExampleKernel):
    """Per example: its idx, its length and the sum of its attention per head (= n: every row sums to 1)."""

    name: str = "rows"

    def empty(self, info):
        return []

    def add(self, part, ex, words):
        assert ex.attention.dtype == np.float32 and ex.attention.shape[-2:] == (ex.n, ex.n)
        assert ex.row_sums.tobytes() == ex.attention.sum(axis=-1, dtype=np.float64).tobytes()  # summed once, checked
        part.append((ex.example_idx, ex.n, ex.attention.sum(axis=(-2, -1), dtype=np.float64), words))

    def combine(self, parts, info):
        return [x for p in parts for x in p]


@dataclass(frozen=True)
class ChunkSizes(ChunkKernel):
    """Per chunk: how many examples it holds, and the shape of the attention it was given."""

    name: str = "chunks"
    variables: tuple[str, ...] = ("attention",)

    def chunk(self, block, words, info):
        return [block["attention"].shape]

    def combine(self, parts, info):
        return [s for p in parts for s in p]


def test_a_kernel_gets_every_example_cropped_and_every_chunk(store):
    res = reduce_store(store, [RowSums(), ChunkSizes()], kb.words_table(EXAMPLES), compute_kwargs=SYNC)
    rows = res["rows"]
    assert [r[0] for r in rows] == list(range(100, 100 + len(EXAMPLES)))  # store order
    for (_, n, sums, words), ex in zip(rows, EXAMPLES):
        assert n == ex.n and sums.shape == (2, 3)
        assert np.allclose(sums, n, rtol=2e-3)  # every real row sums to 1, float16 in the store
        assert words is None  # the kernel prepared no words
    # chunks of 2, 2 and 1 examples, each cropped to its longest example
    assert [s[0] for s in res["chunks"]] == [2, 2, 1]
    assert res["chunks"][0][-1] == max(EXAMPLES[0].n, EXAMPLES[1].n)


def _job(store, typed_config, words) -> Job:
    """A job of store_stats on the test store: the default config (schema defaults), task rte (a pair task)."""
    return Job(typed_config(), "rte", "pretrained", str(store), open_store(store), words, {})


def _same_tables(a: dict, b: dict) -> bool:
    """Tables (frames, or mappings of arrays) equal bit for bit."""
    if list(a) != list(b):
        return False
    for name, x in a.items():
        y = b[name]
        if isinstance(x, pd.DataFrame):
            if list(x.columns) != list(y.columns) or not all(
                    same(x[c].to_numpy(), y[c].to_numpy()) if x[c].dtype.kind in "biuf" else x[c].equals(y[c])
                    for c in x):
                return False
        elif list(x) != list(y) or not all(same(x[k], y[k]) for k in x):
            return False
    return True


def test_every_store_analysis_in_one_read_equals_each_run_alone(store, monkeypatch, typed_config):
    """Every kernel of the registry (built from the default config as store_stats builds it) in one read of the
    store: the same tables, bit for bit, as each kernel alone, with the columns the registry declares; and the
    store's chunks are each read once."""
    import bertology.store.mapping as mapping

    words = kb.words_table(EXAMPLES)
    job = _job(store, typed_config, words)
    kernels = [cls.build(job) for cls in REGISTRY.store_kernels()]
    assert {"kovaleva", "clark", "sieve"} <= {k.name for k in kernels}
    reads = []
    real = mapping.read_chunk

    def counting(path, start, stop, variables, *a, **k):
        reads.append((start, stop))
        return real(path, start, stop, variables, *a, **k)

    monkeypatch.setattr(mapping, "read_chunk", counting)  # what map_chunks' tasks call
    together = reduce_store(store, kernels, words, compute_kwargs=SYNC)
    assert sorted(reads) == [(0, 2), (2, 4), (4, 5)]  # one read of each chunk for every analysis
    for k in kernels:
        alone = reduce_store(store, [k], words, compute_kwargs=SYNC)[k.name]
        a, b = k.outputs(together[k.name], job).tables, k.outputs(alone, job).tables
        check_outputs(k, a, REGISTRY.kernel_tables(type(k)))  # what store_stats checks before it writes
        assert _same_tables(a, b), k.name


def test_store_stats_refuses_tables_other_than_the_declared_ones():
    """The run-time check of store_stats: a table missing, or a column other than the declared ones, is a bug."""
    declared = REGISTRY.kernel_tables(ClarkKernel)
    frames = {name: pd.DataFrame(columns=list(t.columns)) for name, t in declared.items()}
    check_outputs(ClarkKernel(), frames, declared)
    with pytest.raises(RuntimeError, match="declare"):
        check_outputs(ClarkKernel(), {k: v for k, v in list(frames.items())[:-1]}, declared)
    with pytest.raises(RuntimeError, match="has the columns"):
        check_outputs(ClarkKernel(), {**frames, "entropy": frames["entropy"].rename(columns={"mean": "avg"})},
                      declared)


def test_kernels_need_distinct_names(store):
    with pytest.raises(ValueError, match="distinct names"):
        reduce_store(store, [ClarkKernel(), ClarkKernel(entropy=False)], None, compute_kwargs=SYNC)


def test_stores_of_other_examples_are_refused(store, tmp_path):
    other = kb.write_store(kb.build_store(EXAMPLES[:3], kb.maps), tmp_path / "o.zarr", chunk=2)
    with pytest.raises(StoreError, match="do not hold the same examples"):
        run_chunks(lambda a, b: 0, [store, other], variables=["length"], compute_kwargs=SYNC)


# --------------------------------------------------------------------------------------------------
# the registry


def test_the_registry_declares_every_analysis_once():
    names = [a.name for a in REGISTRY]
    assert len(names) == len(set(names))
    keys = [s.key for s in REGISTRY.report_sections()]
    assert len(keys) == len(set(keys)) and keys[0] == "table1" and keys[-1] == "seeds"  # the order of declaration
    ids = [s.id for s in REGISTRY.statistics()]
    assert len(ids) == len(set(ids))
    paths = [t.path for a in REGISTRY for t in a.tables]
    assert len(paths) == len(set(paths))
    assert all(t.when in ("", *CONDITIONS) for a in REGISTRY for t in a.tables)
    first_seed = {path.replace("{seedtag}", ""): columns for path, columns in REGISTRY.tables().items()}
    # the per-head tables over fine-tuning seeds (seedstats.seed_moments: the keys, mean, std, n, then seed{N} per seed)
    for name, table in REGISTRY.seed_tables().items():
        assert {*table.seeds.keys, table.seeds.value} <= set(table.columns), name
        first_seed[layout.rel("seed_stat", name=name)] = (*table.seeds.keys, "mean", "std", "n")
    # a statistic reads a table the registry declares (the first seed's), and its columns
    for st in REGISTRY.statistics():
        table = first_seed.get(st.table)
        assert table is not None, st
        assert {c for c in (st.column, *st.key, st.mark, st.count, st.ref, st.notna, st.top, *(st.ci or ()))
                if c} <= set(table), st


def test_the_store_rule_and_step_come_from_the_registry():
    from bertology.workflow.cli import STEPS

    outputs = REGISTRY.store_outputs()
    assert {"patterns", "features", "cls", "relations", "entropy", "parser", "sieve", "sieve_scores"} <= set(outputs)
    assert outputs["sieve_scores"] == "results/stats/{task}/{variant}/sieve_scores.npz"
    kernels = REGISTRY.store_kernels()
    assert {KovalevaKernel, ClarkKernel, SieveKernel} <= set(kernels)
    # every output belongs to exactly one kernel, which names it in its outputs()
    assert sorted(o for k in kernels for o in REGISTRY.kernel_tables(k)) == sorted(outputs)
    assert len(REGISTRY.store_targets(["rte"], ["pretrained", "finetuned"])) == 2 * len(outputs)
    sections = STEPS["store_stats"].config
    assert set(REGISTRY.store_sections()) <= set(sections) and "analysis.dask" in sections


def test_importing_bertology_lets_openblas_threads_sleep_unless_the_user_said_otherwise():
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when numpy loads: bertology sets it (2**4 cycles of spinning instead of
    2**28 after every product), so that the sieve's BLAS threads do not hold a core between products
    (docs/reference.md#performance); a value already set is kept."""
    import os
    import subprocess
    import sys

    code = "import bertology, os, numpy; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "4"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OPENBLAS_THREAD_TIMEOUT": "12"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "12"


def test_a_reduction_gives_freed_memory_back_to_the_system():
    """glibc (this machine's C library) takes the reductions' malloc settings, once per process."""
    import subprocess
    import sys

    code = ("from bertology.store import mapping; print(mapping.release_freed_memory(), "
            "mapping.release_freed_memory.cache_info().misses)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "1"]
