"""A Dask cluster for the reductions over the stores: a scheduler here (the login node) with workers as
Slurm jobs (dask-jobqueue's ``SLURMCluster``), serving until interrupted. Start it from the workflow's
directory: the workers run where they were submitted from, and the reductions open the stores by the
workflow's relative paths."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_text


@dataclass(frozen=True)
class DaskSlurm:
    """The worker jobs (one Dask worker process each) and where the scheduler listens."""

    workers: int
    cores: int  # CPUs per worker job
    memory: str  # memory per worker job, "4GB"
    walltime: str  # "HH:MM:SS"
    partition: str | None = None
    account: str | None = None
    host: str | None = None  # address the scheduler listens on (None: this host's)
    interface: str | None = None  # network interface the scheduler listens on (e.g. ib0)
    port: int = 0  # 0: any free port
    log_directory: str | None = None  # where the worker jobs write their Slurm logs
    prologue: tuple[str, ...] = field(default_factory=tuple)  # shell lines run before each worker starts

    def cluster_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of dask-jobqueue's ``SLURMCluster``."""
        kwargs: dict[str, Any] = {
            "cores": self.cores, "processes": 1, "memory": self.memory, "walltime": self.walltime,
            "job_name": "bertology-dask", "log_directory": self.log_directory,
            "scheduler_options": {k: v for k, v in (("host", self.host), ("port", self.port),
                                                     ("interface", self.interface)) if v},
            "job_script_prologue": list(self.prologue),
        }
        if self.partition:
            kwargs["queue"] = self.partition
        if self.account:
            kwargs["account"] = self.account
        return kwargs


def serve(spec: DaskSlurm, *, wait_s: float, address_file: Path | None = None,
          print_job_script: bool = False) -> None:
    """Start the scheduler and `spec.workers` worker jobs, wait up to `wait_s` seconds for them, write the
    scheduler's address to `address_file` (for ``analysis.dask.scheduler``), then serve until SIGTERM or
    Ctrl-C (which cancel the worker jobs)."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise UserError("a Dask cluster on Slurm needs dask-jobqueue: pip install -e '.[cluster]'") from None
    from dask.distributed import Client

    def stop(signum, frame):  # noqa: ARG001 - signal handler signature
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    with SLURMCluster(**spec.cluster_kwargs()) as cluster, Client(cluster) as client:
        cluster.scale(spec.workers)
        print(f"dask scheduler {cluster.scheduler_address}; waiting for {spec.workers} worker(s)", flush=True)
        client.wait_for_workers(spec.workers, timeout=wait_s)
        if address_file:
            write_text(cluster.scheduler_address + "\n", address_file)
        print(f"ready: set analysis.dask.scheduler to {cluster.scheduler_address}", flush=True)
        if print_job_script:
            print(cluster.job_script(), flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
