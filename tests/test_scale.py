"""Scale-out: the reductions run unchanged on a dask.distributed cluster and on fsspec URLs."""

from __future__ import annotations

import fsspec
import numpy as np
import pytest
import xarray as xr

from bertology.pipeline.config import ConfigError, DaskConfig
from bertology.pipeline.daskutil import compute_kwargs
from bertology.sieve.reduce import compute_scores
from tests.builders.sieve import write_store

ROLES = ["local", "cls", "sep", "delimiter", "block", "nsubj", "syntactic"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "pretrained.zarr"
    words = write_store(path, "pretrained", 0.9, chunk=4)
    return path, words


def test_sieve_on_a_distributed_local_cluster_equals_threads(store):
    distributed = pytest.importorskip("dask.distributed")
    path, words = store
    local = compute_scores(path, words, roles=ROLES, window=2, compute_kwargs=compute_kwargs(DaskConfig(None)))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        kw = compute_kwargs(DaskConfig(cluster.scheduler_address), threads=2)
        client = kw["scheduler"]
        try:
            assert isinstance(client, distributed.Client) and kw == {"scheduler": client}
            remote = compute_scores(path, words, roles=ROLES, window=2, compute_kwargs=kw)
            assert len(client.scheduler_info()["workers"]) == 2
        finally:
            client.close()
    np.testing.assert_allclose(remote.values, local.values, equal_nan=True)
    assert np.isfinite(local.values).any()


def test_scheduler_choice():
    assert compute_kwargs(DaskConfig(None)) == {"scheduler": "threads"}
    assert compute_kwargs(DaskConfig("threads"), threads=3) == {"scheduler": "threads", "num_workers": 3}
    assert compute_kwargs(DaskConfig("synchronous"), threads=3) == {"scheduler": "synchronous"}
    assert compute_kwargs(DaskConfig("processes"), threads=2) == {"scheduler": "processes", "num_workers": 2}
    with pytest.raises(ConfigError, match="tcp://host:8786"):
        compute_kwargs(DaskConfig("fast"))


def test_unreachable_scheduler_is_a_clear_error(monkeypatch):
    from bertology.pipeline import daskutil

    monkeypatch.setattr(daskutil, "CONNECT_TIMEOUT_S", 1)  # nothing listens on port 9: 1 s says so as well as 20
    with pytest.raises(ConfigError, match="analysis.dask.scheduler"):
        compute_kwargs(DaskConfig("tcp://127.0.0.1:9"))


def test_store_on_an_fsspec_url(store):
    path, words = store
    ds = xr.open_zarr(path)
    url = "memory://bertology-test/rte/pretrained.zarr"
    fsspec.filesystem("memory").put(str(path), url, recursive=True)  # the store's files, copied
    remote = xr.open_zarr(url)
    assert remote.attention.dims == ds.attention.dims
    np.testing.assert_allclose(compute_scores(url, words, roles=ROLES, window=2).values,
                               compute_scores(path, words, roles=ROLES, window=2).values, equal_nan=True)
