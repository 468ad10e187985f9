"""The Dask scheduler of the store reductions, from ``analysis.dask`` (the one way to get it)."""

from __future__ import annotations

from typing import Any

from bertology.pipeline.config import ConfigError, DaskConfig

LOCAL_SCHEDULERS = ("threads", "synchronous", "processes", "single-threaded", "sync")
CONNECT_TIMEOUT_S = 20  # how long connecting to a distributed scheduler may take before it is an error


def compute_kwargs(dask: DaskConfig | None, threads: int | None = None) -> dict[str, Any]:
    """Keyword arguments for ``dask.compute(..., **kw)`` (and :func:`bertology.store.map_chunks`).

    dask.scheduler: null / "threads" -> local threads (the default); "synchronous" / "processes" -> that local
    scheduler; anything else is the address of a distributed scheduler (``tcp://host:8786``), to which a
    ``dask.distributed.Client`` is connected. threads: the job's threads, the size of a local pool.
    """
    name = dask.scheduler if dask is not None else None
    if name in (None, "", "threads"):
        kw: dict[str, Any] = {"scheduler": "threads"}
    elif name in LOCAL_SCHEDULERS:
        kw = {"scheduler": "synchronous" if name in ("sync", "single-threaded") else name}
    elif "://" not in name and ":" not in name:
        raise ConfigError(f"analysis.dask.scheduler is {name!r}: use null/threads, synchronous, processes, "
                          f"or the address of a dask.distributed scheduler such as tcp://host:8786")
    else:
        from dask.distributed import Client

        try:
            client = Client(name, timeout=f"{CONNECT_TIMEOUT_S}s")
        except OSError as err:
            raise ConfigError(f"cannot reach the dask scheduler at {name!r} (analysis.dask.scheduler): {err}. "
                              f"Start one with `dask scheduler` or set analysis.dask.scheduler to null") from None
        return {"scheduler": client}
    if threads and kw["scheduler"] in ("threads", "processes"):
        kw["num_workers"] = int(threads)
    return kw
