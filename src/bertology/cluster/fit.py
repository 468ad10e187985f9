"""Does every job fit a node? A Slurm job that asks for more CPUs, memory, GPUs or time than any node of
its partition offers is accepted by ``sbatch`` and then pends forever (reason ``PartitionConfig``,
``Resources`` or ``PartitionTimeLimit``); Snakemake waits with it, and nothing says why. :func:`check`
compares what the jobs ask for (:class:`Request`, read from a Snakemake DAG or a dry run's text) with what
``sinfo`` reports (:class:`Node`) and returns one message per rule that cannot run anywhere.

What a job asks for is its step's declaration (:class:`bertology.registry.Step`: threads, mem_mb, runtime, gpu)
with the profile's overrides (``set-threads``, ``set-resources``, ``default-resources``, ``max-threads``) over it,
as Snakemake resolves them: both the DAG and the dry run hold the resolved numbers, so nothing here repeats a
number or Snakemake's rules of precedence."""

from __future__ import annotations

import logging
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bertology.pipeline.errors import UserError

log = logging.getLogger(__name__)

# One line per node and partition: partition (default marked *), CPUs, memory (MB), GRES, time limit.
SINFO_COMMAND = ["sinfo", "--noheader", "--Node", "--format", "%P %c %m %G %l"]
PROFILE_HINT = ("lower the request in the Slurm profile (profiles/slurm/config.yaml: max-threads or set-threads for "
                "CPUs, set-resources for mem_mb/runtime, the &gpu line for GPUs) or pick a partition that has such "
                "nodes (slurm_partition)")


@dataclass(frozen=True)
class Node:
    """What one node offers in one partition (a line of :data:`SINFO_COMMAND`)."""

    partition: str
    cpus: int
    mem_mb: int
    gpus: int
    time_limit_min: float  # math.inf when the partition has no limit
    default: bool = False


@dataclass(frozen=True)
class Request:
    """What the jobs of one rule ask Slurm for (as the slurm executor plugin turns them into sbatch flags)."""

    rule: str
    cpus: int = 1
    mem_mb: int = 0
    gpus: int = 0
    runtime_min: float = 0
    partitions: tuple[str, ...] = ()  # empty: the cluster's default partition


def parse_time_limit(text: str) -> float:
    """Slurm time ('infinite', 'MM', 'MM:SS', 'HH:MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS') in minutes."""
    text = text.strip().lower()
    if text in ("infinite", "unlimited", "n/a", "", "(null)"):
        return math.inf
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
        parts = [int(p) for p in text.split(":")]
        hours, minutes, seconds = (parts + [0, 0, 0])[:3]
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, minutes, seconds = 0, parts[0], parts[1]
        else:
            hours, minutes, seconds = parts[-3:]
    return days * 1440 + hours * 60 + minutes + seconds / 60


def gres_gpus(gres: str) -> int:
    """GPUs in a GRES string: 'gpu:4', 'gpu:a100:4(S:0-1)', 'gpu:a100:2,gpu:v100:2', '(null)' -> 0."""
    total = 0
    for item in re.split(r",(?![^()]*\))", gres or ""):
        item = re.sub(r"\(.*?\)", "", item).strip()
        fields = item.split(":")
        if fields[0] != "gpu":
            continue
        count = fields[-1] if len(fields) > 1 else "1"
        match = re.match(r"\d+", count)
        total += int(match.group()) if match else 1
    return total


def _int(text: str) -> int:
    match = re.match(r"\d+", text.strip())
    return int(match.group()) if match else 0


def parse_sinfo(text: str) -> list[Node]:
    """Parse the output of :data:`SINFO_COMMAND` (``sinfo -h -N -o "%P %c %m %G %l"``).

    Also accepts lines without the node flag (grouped output, where a trailing '+' marks a lower bound)
    and without the time limit column.
    """
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        partition, cpus, mem, gres = fields[:4]
        limit = parse_time_limit(fields[4]) if len(fields) > 4 else math.inf
        default = partition.endswith("*")
        nodes.append(Node(partition.rstrip("*"), _int(cpus), _int(mem), gres_gpus(gres), limit, default))
    return nodes


def read_sinfo() -> list[Node]:
    """The nodes of the cluster ``sinfo`` talks to."""
    if shutil.which("sinfo") is None:
        raise UserError("sinfo not found: run this on the cluster's login node (or give a captured sinfo output)")
    out = subprocess.run(SINFO_COMMAND, check=True, capture_output=True, text=True).stdout
    return parse_sinfo(out)


def describe(cpus: int, mem_mb: int, gpus: int, minutes: float | None = None) -> str:
    text = f"{cpus} CPUs, {mem_mb} MB, {gpus} GPUs"
    if minutes is not None:
        text += ", " + ("no time limit" if math.isinf(minutes) else f"{minutes:g} min")
    return text


def _fits(req: Request, node: Node) -> bool:
    return (req.cpus <= node.cpus and req.mem_mb <= node.mem_mb and req.gpus <= node.gpus
            and req.runtime_min <= node.time_limit_min)


def check(requests: Iterable[Request], nodes: Sequence[Node]) -> list[str]:
    """One message per distinct request that no node of its partition(s) can ever run; [] when all fit."""
    messages: list[str] = []
    by_partition: dict[str, list[Node]] = {}
    for node in nodes:
        by_partition.setdefault(node.partition, []).append(node)
    defaults = sorted({n.partition for n in nodes if n.default})
    counts: dict[Request, int] = {}
    for req in requests:
        counts[req] = counts.get(req, 0) + 1
    for req, count in counts.items():
        jobs = f"rule {req.rule} ({count} job{'s' if count > 1 else ''})"
        if req.partitions:
            names, where = list(req.partitions), "partition " + ",".join(req.partitions)
        elif defaults:
            names, where = defaults, f"the default partition {defaults[0]}"
        else:
            names, where = sorted(by_partition), "any partition"
        unknown = [p for p in names if p not in by_partition]
        if unknown and len(unknown) == len(names):
            messages.append(f"{jobs} asks for partition {','.join(unknown)}, which sinfo does not list "
                            f"(partitions: {', '.join(sorted(by_partition)) or 'none'}): set slurm_partition "
                            f"in the Slurm profile to one of them")
            continue
        candidates = [n for p in names for n in by_partition.get(p, [])]
        if any(_fits(req, n) for n in candidates):
            continue
        best = Node("", max((n.cpus for n in candidates), default=0), max((n.mem_mb for n in candidates), default=0),
                    max((n.gpus for n in candidates), default=0),
                    max((n.time_limit_min for n in candidates), default=0))
        short = [what for what, bad in (("CPUs", req.cpus > best.cpus), ("memory", req.mem_mb > best.mem_mb),
                                        ("GPUs", req.gpus > best.gpus),
                                        ("time", req.runtime_min > best.time_limit_min)) if bad]
        why = "too many " + " and ".join(short) if short else "no single node offers all of it at once"
        messages.append(
            f"{jobs} asks for {describe(req.cpus, req.mem_mb, req.gpus, req.runtime_min)} on {where}, but its "
            f"largest node offers {describe(best.cpus, best.mem_mb, best.gpus, best.time_limit_min)} "
            f"({why}): Slurm would accept the job and leave it pending forever. Fix: {PROFILE_HINT}.")
    return messages


def _as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def request_from_resources(rule: str, threads: int, resources: Mapping[str, Any]) -> Request:
    """A :class:`Request` from a job's threads and resources, read as the slurm executor plugin reads them."""
    cpus = _as_int(resources.get("cpus_per_task"), 0) or _as_int(threads, 1)
    cpus = max(cpus, 1)
    mem = _as_int(resources.get("mem_mb"))
    if resources.get("mem_mb_per_cpu"):
        mem = _as_int(resources.get("mem_mb_per_cpu")) * cpus
    gpus = _as_int(resources.get("gpu"))
    if not gpus and resources.get("gpu_model"):
        gpus = 1
    if not gpus and resources.get("gres"):
        gpus = gres_gpus(str(resources.get("gres")))
    partition = str(resources.get("slurm_partition") or "").strip("'\"")
    partitions = tuple(p for p in re.split(r"[,\s]+", partition) if p)
    runtime = resources.get("runtime")
    runtime_min = float(runtime) if isinstance(runtime, (int, float)) else 0.0
    if isinstance(runtime, str) and runtime.strip():
        unit = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", runtime.lower())
        if unit:  # Snakemake's human-readable runtimes: 90, 90m, 2h, 1d
            runtime_min = float(unit.group(1)) * {"s": 1 / 60, "": 1, "m": 1, "h": 60, "d": 1440}[unit.group(2)]
        else:
            try:
                runtime_min = parse_time_limit(runtime)
            except ValueError:
                runtime_min = 0.0
    return Request(rule, cpus, mem, gpus, runtime_min, partitions)


def requests_from_jobs(jobs: Iterable[Any]) -> list[Request]:
    """Requests of Snakemake jobs (``workflow.dag.needrun_jobs()``), local rules left out."""
    requests = []
    for job in jobs:
        if getattr(job, "is_local", False):
            continue
        try:
            resources = dict(job.resources.items())
            threads = job.threads
        except Exception as err:  # noqa: BLE001 - a resource callable that needs inputs not there yet
            log.debug("cannot evaluate the resources of %s yet: %s", job, err)
            continue
        requests.append(request_from_resources(job.rule.name, threads, resources))
    return requests


def _parse_resource_line(text: str) -> dict[str, str]:
    out = {}
    for item in re.split(r",\s+(?=\w+=)", text.strip()):
        key, _, value = item.partition("=")
        out[key.strip()] = value.strip()
    return out


def requests_from_dryrun(text: str) -> list[Request]:
    """Requests from the job blocks a ``snakemake --dry-run`` prints (``rule x:``, ``threads:``, ``resources:``).

    The dry run must not scale threads down (give it a large ``--cores``); ``localrule`` blocks are skipped.
    """
    requests = []
    rule = None
    threads, resources = 1, {}

    def flush():
        if rule is not None:
            requests.append(request_from_resources(rule, threads, resources))

    for line in text.splitlines():
        head = re.match(r"^(local)?rule (\w+):\s*$", line)
        if head:
            flush()
            rule = None if head.group(1) else head.group(2)
            threads, resources = 1, {}
            continue
        body = re.match(r"^\s+(threads|resources):\s*(.*)$", line)
        if body and rule is not None:
            if body.group(1) == "threads":
                threads = _as_int(body.group(2), 1)
            else:
                resources = _parse_resource_line(body.group(2))
    flush()
    return requests


class DryRunFailed(UserError):
    """``snakemake --dry-run`` with the profile failed (a bad profile or argument): its output's tail is
    :attr:`output`."""

    def __init__(self, command: str, output: str):
        super().__init__(f"the dry run failed ({command}); its output is above")
        self.output = output


def dry_run_requests(profile: str, snakemake_args: Sequence[str]) -> list[Request]:
    """The requests of the jobs ``snakemake --dry-run --profile PROFILE [args]`` would submit (with a huge
    ``--cores``, so threads are not scaled down). Raises :class:`DryRunFailed` if the dry run fails."""
    cmd = [sys.executable, "-m", "snakemake", "--dry-run", "--cores", "1000000", "--profile", str(profile),
           *snakemake_args]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise DryRunFailed(" ".join(cmd), run.stdout[-4000:] + run.stderr[-4000:])
    return requests_from_dryrun(run.stdout + "\n" + run.stderr)
