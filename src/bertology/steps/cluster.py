"""Tool steps for a Slurm cluster (no rule runs them; not tracked): ``bertology cluster-check`` (does every
job the workflow would submit fit a node?) and ``bertology cluster-dask`` (a Dask scheduler here with
workers as Slurm jobs, for ``analysis.dask.scheduler``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bertology.steps.context import StepContext
from bertology.cluster.dask_launcher import DaskSlurm, serve
from bertology.cluster.fit import (
    PROFILE_HINT, SINFO_COMMAND, DryRunFailed, check, describe, dry_run_requests, parse_sinfo, read_sinfo,
)
from bertology.pipeline.errors import UserError


def check_options(ap: Any) -> None:
    """cluster-check's options, added to its parser (an argparse group)."""
    ap.add_argument("--profile", default="profiles/slurm", help="the Slurm profile to check (default: %(default)s)")
    ap.add_argument("--sinfo-file", type=Path, help="captured output of: " + " ".join(SINFO_COMMAND).replace("%", "%%")
                    + " (default: run sinfo here)")


def cluster_check(ctx: StepContext) -> None:
    """``bertology cluster-check [--profile DIR] [--sinfo-file FILE] [-- SNAKEMAKE ARGS]``: dry-run the
    workflow with the profile (and the snakemake arguments after ``--``, e.g. ``--configfile``), compare
    every job's request with the nodes sinfo lists; print what is offered and one ERROR line per rule whose
    jobs no node can run (then fail)."""
    sinfo = ctx.options["sinfo_file"]
    if sinfo is not None and not sinfo.is_file():
        raise UserError(f"--sinfo-file {sinfo} does not exist (capture it with: {' '.join(SINFO_COMMAND)})")
    nodes = parse_sinfo(sinfo.read_text()) if sinfo is not None else read_sinfo()
    try:
        requests = dry_run_requests(ctx.options["profile"], ctx.rest)
    except DryRunFailed as err:
        sys.stderr.write(err.output + "\n")
        raise
    problems = check(requests, nodes)
    offered = sorted({f"{n.partition}{'*' if n.default else ''}: {describe(n.cpus, n.mem_mb, n.gpus)}"
                      for n in nodes})
    print(f"sinfo: {'; '.join(offered) or 'no nodes'}")
    print(f"{len(requests)} jobs to submit, {len(set(requests))} distinct requests")
    for message in problems:
        print(f"ERROR: {message}")
    if problems:
        raise UserError(f"{len(problems)} rule(s) ask for more than any node offers (ERROR lines above): "
                        f"{PROFILE_HINT}")
    print("every job fits a node")


def dask_options(ap: Any) -> None:
    """cluster-dask's options, added to its parser (an argparse group)."""
    ap.add_argument("--workers", type=int, default=1, help="worker jobs (default: %(default)s)")
    ap.add_argument("--cores", type=int, default=1, help="CPUs per worker job (default: %(default)s)")
    ap.add_argument("--memory", default="4GB", help="memory per worker job (default: %(default)s)")
    ap.add_argument("--walltime", default="04:00:00", help="wall time of a worker job (default: %(default)s)")
    ap.add_argument("--partition")
    ap.add_argument("--account")
    ap.add_argument("--host", help="address the scheduler listens on (default: this host's)")
    ap.add_argument("--interface", help="network interface the scheduler listens on (e.g. ib0)")
    ap.add_argument("--port", type=int, default=0, help="scheduler port (default: any free one)")
    ap.add_argument("--address-file", type=Path, help="write the scheduler address here once the workers are up")
    ap.add_argument("--log-directory", help="where the worker jobs write their Slurm logs")
    ap.add_argument("--prologue", action="append", default=[], help="shell line run before each worker starts")
    ap.add_argument("--wait", type=float, default=600, help="seconds to wait for the workers (default: %(default)s)")
    ap.add_argument("--print-job-script", action="store_true", help="print the worker jobs' sbatch script")


def cluster_dask(ctx: StepContext) -> None:
    """``bertology cluster-dask --workers N --cores C --memory 16GB [--address-file F] ...``: a Dask scheduler
    here (the login node) with workers as Slurm jobs; writes its address for ``analysis.dask.scheduler`` and
    serves until interrupted. Start it from the workflow's directory."""
    opts = ctx.options
    spec = DaskSlurm(workers=opts["workers"], cores=opts["cores"], memory=opts["memory"], walltime=opts["walltime"],
                     partition=opts["partition"], account=opts["account"], host=opts["host"],
                     interface=opts["interface"], port=opts["port"], log_directory=opts["log_directory"],
                     prologue=tuple(opts["prologue"]))
    serve(spec, wait_s=opts["wait"], address_file=opts["address_file"], print_job_script=opts["print_job_script"])
