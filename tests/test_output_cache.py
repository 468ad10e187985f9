"""Reuse across experiments: `snakemake --cache` with SNAKEMAKE_OUTPUT_CACHE shares fine-tuned models
and attention stores between working directories; what enters the key (here data.max_length) computes afresh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STORE = "results/attention/rte/finetuned.zarr"
MODEL = "results/models/rte/pretrained"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under root (links followed), by relative path; Snakemake's timestamp file left out."""
    out = {}
    for dirpath, _, names in os.walk(root, followlinks=True):
        for name in names:
            if name != ".snakemake_timestamp":
                path = Path(dirpath) / name
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


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
    assert _files(second / STORE) == _files(first / STORE)  # bit for bit the first experiment's store
    assert _files(second / MODEL) == _files(first / MODEL)
    ds = open_store(second / STORE, check_rows=True)
    assert ds.attention.isel(example=0).values.shape[0] == ds.sizes["layer"]

    snakemake_run(other, "--cores", "1", "--cache", "--", STORE)  # max_length enters the key: computed afresh
    assert _ran(other, "train_model") and _ran(other, "extract_attention")
    assert len([p for p in cache.iterdir() if p.name.endswith(".zarr")]) == 2
