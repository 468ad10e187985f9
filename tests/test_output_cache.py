"""Reuse across experiments: `snakemake --cache` with SNAKEMAKE_OUTPUT_CACHE shares fine-tuned models
and attention stores between working directories; what enters the key (here data.max_length) computes afresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders.files import tree_bytes

pytestmark = pytest.mark.slow

STORE = "results/attention/rte/finetuned.zarr"
MODEL = "results/models/rte/pretrained"


def _ran(workdir: Path, rule: str) -> bool:
    """Whether a job of `rule` ran (a job taken from the cache leaves an empty log)."""
    logs = workdir / "results" / "logs" / rule
    return any(f.stat().st_size for f in logs.rglob("*.log")) if logs.exists() else False


def test_two_directories_share_one_cache(tmp_path, config_file, snakemake_run, monkeypatch):
    from bertology.store import expected_attrs, open_store  # noqa: F401 - the checks every analysis runs

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    small = dict(tasks=["rte"], data={"demo": {"train": 24, "validation": 16}},
                 train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8},
                 attention={"examples": 8, "batch_size": 8, "chunk_size": 8})
    first, second, other = (tmp_path / name for name in ("first", "second", "other"))
    for d in (first, second, other):
        d.mkdir()
    config_file(first, **small)
    config_file(second, **small)
    config_file(other, **{**small, "data": {"demo": {"train": 24, "validation": 16}, "max_length": 48}})

    snakemake_run(first, "--cores", "1", "--cache", "--", STORE)
    assert _ran(first, "train_model") and _ran(first, "extract_attention")
    snakemake_run(second, "--cores", "1", "--cache", "--", STORE)
    assert not _ran(second, "train_model") and not _ran(second, "extract_attention")  # nothing trained or extracted
    assert tree_bytes(second / STORE) == tree_bytes(first / STORE)  # bit for bit the first experiment's store
    assert tree_bytes(second / MODEL) == tree_bytes(first / MODEL)
    ds = open_store(second / STORE, check_rows=True)
    assert ds.attention.isel(example=0).values.shape[0] == ds.sizes["layer"]

    snakemake_run(other, "--cores", "1", "--cache", "--", STORE)  # max_length enters the key: computed afresh
    assert _ran(other, "train_model") and _ran(other, "extract_attention")
    assert len([p for p in cache.iterdir() if p.name.endswith(".zarr")]) == 2
