"""Dask scheduler selection from ``analysis.dask.scheduler`` (shared by the store reductions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LOCAL_SCHEDULERS = ("threads", "synchronous", "processes", "single-threaded", "sync")


def scheduler_name(cfg: Mapping[str, Any] | None) -> str | None:
    """The configured scheduler: accepts the whole config, its `analysis` section, or `analysis.dask`."""
    cfg = dict(cfg or {})
    if "analysis" in cfg:
        cfg = dict(cfg["analysis"] or {})
    if "dask" in cfg:
        cfg = dict(cfg["dask"] or {})
    return cfg.get("scheduler")


def get_scheduler(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for ``dask.compute(..., **kw)``.

    null / "threads" -> local threads (the default); "synchronous" / "processes" -> that local
    scheduler; anything else is taken as a distributed scheduler address (``tcp://host:8786``) and a
    ``dask.distributed.Client`` is connected to it.
    """
    name = scheduler_name(cfg)
    if name in (None, "", "threads"):
        return {"scheduler": "threads"}
    if name in LOCAL_SCHEDULERS:
        return {"scheduler": "synchronous" if name in ("sync", "single-threaded") else name}
    if "://" not in name and ":" not in name:
        raise ValueError(f"analysis.dask.scheduler is {name!r}: use null/threads, synchronous, processes, "
                         f"or the address of a dask.distributed scheduler such as tcp://host:8786")
    from dask.distributed import Client

    try:
        client = Client(name, timeout="20s")
    except OSError as err:
        raise RuntimeError(f"cannot reach the dask scheduler at {name!r} (analysis.dask.scheduler): {err}. "
                           f"Start one with `dask scheduler` or set analysis.dask.scheduler to null") from None
    return {"scheduler": client}


def compute_kwargs(dask_cfg: Mapping[str, Any] | None, threads: int | None = None) -> dict[str, Any]:
    """get_scheduler(...) for the `analysis.dask` section, with the local pools sized to the job's threads."""
    kw = dict(get_scheduler({"dask": dict(dask_cfg or {})}))
    if threads and kw.get("scheduler") in ("threads", "processes"):
        kw["num_workers"] = int(threads)
    return kw
