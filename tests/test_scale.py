"""Scale-out: the reductions run unchanged on a dask.distributed cluster and on fsspec URLs."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bertology.daskutil import get_scheduler
from bertology.sieve.reduce import compute_scores
from tests.test_sieve_pipeline import write_store

ROLES = ["local", "cls", "sep", "delimiter", "block", "nsubj", "syntactic"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "pretrained.zarr"
    words = write_store(path, "pretrained", 0.9, chunk=4)
    return path, words


def test_sieve_on_a_distributed_local_cluster_equals_threads(store):
    distributed = pytest.importorskip("dask.distributed")
    path, words = store
    ds = xr.open_zarr(path)
    local = compute_scores(ds, words, roles=ROLES, compute_kwargs=get_scheduler(None))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        kw = get_scheduler({"analysis": {"dask": {"scheduler": cluster.scheduler_address}}})
        client = kw["scheduler"]
        try:
            assert isinstance(client, distributed.Client)
            remote = compute_scores(ds, words, roles=ROLES, compute_kwargs=kw)
            assert len(client.scheduler_info()["workers"]) == 2
        finally:
            client.close()
    np.testing.assert_allclose(remote.values, local.values, equal_nan=True)
    assert np.isfinite(local.values).any()


def test_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(RuntimeError, match="analysis.dask.scheduler"):
        get_scheduler({"dask": {"scheduler": "tcp://127.0.0.1:9"}})


def test_store_on_an_fsspec_url(store):
    path, words = store
    ds = xr.open_zarr(path)
    url = "memory://bertology-test/rte/pretrained.zarr"
    ds.chunk({"example": 4}).to_zarr(url, mode="w")
    remote = xr.open_zarr(url)
    assert remote.attention.dims == ds.attention.dims
    np.testing.assert_allclose(compute_scores(remote, words, roles=ROLES).values,
                               compute_scores(ds, words, roles=ROLES).values, equal_nan=True)
