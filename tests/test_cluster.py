"""bertology.cluster: sinfo parsing and the 'does every job fit a node' check, on captured text (no Slurm)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from bertology import cluster
from bertology.workflow.cli import STEPS

# `sinfo --noheader --Node --format "%P %c %m %G %l"` on the single-node test cluster (tests/cluster/run.sh).
SINFO_ONE_NODE = "cpu* 2 24105 (null) infinite\n"

# A mixed cluster: CPU nodes of two sizes in the default partition, a GPU partition, a short debug queue.
SINFO_MIXED = """\
cpu* 32 192000 (null) 7-00:00:00
cpu* 32 192000 (null) 7-00:00:00
cpu* 64 512000+ (null) 7-00:00:00
gpu 48 384000 gpu:a100:4(S:0-1) 2-00:00:00
gpu 48 384000 gpu:a100:2,gpu:v100:2 2-00:00:00
debug 8 16000 (null) 30:00
"""

# The job blocks `snakemake --dry-run --cores 1000000 --profile profiles/slurm` prints (abridged).
DRYRUN = """\
localrule all:
    input: results/report.html
    jobid: 0
    resources: tmpdir=/tmp
rule train_model:
    input: results/data/sst2/train.parquet
    wildcards: task=sst2, init=pretrained
    threads: 8
    resources: tmpdir=/tmp, disk_mb=<TBD>, mem_mb=16000, mem=16 GB, runtime=720, gpu=0
Shell command: bertology train --threads 8
rule prepare_data:
    output: results/data/sst2/train.parquet
    resources: tmpdir=/tmp, disk_mb=50000, mem_mb=4000, mem=4 GB, runtime=30
rule extract_attention:
    threads: 4
    resources: tmpdir=/tmp, mem_mb=8000, runtime=240, gpu=1, slurm_partition=gpu, slurm_extra='--qos=a,b'
"""


def test_parse_sinfo_one_node():
    [node] = cluster.parse_sinfo(SINFO_ONE_NODE)
    assert node == cluster.Node("cpu", 2, 24105, 0, math.inf, default=True)


def test_parse_sinfo_mixed():
    nodes = cluster.parse_sinfo(SINFO_MIXED)
    assert len(nodes) == 6
    assert {n.partition for n in nodes if n.default} == {"cpu"}
    assert nodes[2].mem_mb == 512000  # '+' (a lower bound in grouped output) is read as the number
    assert [n.gpus for n in nodes if n.partition == "gpu"] == [4, 4]
    assert nodes[0].time_limit_min == 7 * 1440
    assert nodes[-1].time_limit_min == 30  # MM:SS


@pytest.mark.parametrize("text,minutes", [("infinite", math.inf), ("UNLIMITED", math.inf), ("90", 90),
                                          ("30:00", 30), ("2:00:00", 120), ("1-00:00:00", 1440),
                                          ("1-12", 2160), ("2-01:30", 2970)])
def test_parse_time_limit(text, minutes):
    assert cluster.parse_time_limit(text) == minutes


@pytest.mark.parametrize("gres,gpus", [("(null)", 0), ("gpu:4", 4), ("gpu:a100:4(S:0-1)", 4), ("gpu", 1),
                                       ("gpu:a100:2,gpu:v100:2", 4), ("mps:100,gpu:tesla:1", 1)])
def test_gres_gpus(gres, gpus):
    assert cluster.gres_gpus(gres) == gpus


def test_too_many_threads_names_the_rule_and_the_fix():
    nodes = cluster.parse_sinfo(SINFO_ONE_NODE)
    reqs = [cluster.Request("extract_attention", cpus=4, mem_mb=4000, runtime_min=120)] * 2
    reqs.append(cluster.Request("sieve", cpus=2, mem_mb=6000, runtime_min=60))
    [msg] = cluster.check(reqs, nodes)
    assert msg.startswith("rule extract_attention (2 jobs) asks for 4 CPUs")
    assert "largest node offers 2 CPUs" in msg and "too many CPUs" in msg
    assert "max-threads" in msg and "pending forever" in msg


def test_gpu_request_on_a_cpu_only_cluster():
    nodes = cluster.parse_sinfo(SINFO_ONE_NODE)
    [msg] = cluster.check([cluster.Request("train_model", cpus=2, mem_mb=16000, gpus=1)], nodes)
    assert "too many GPUs" in msg and "the default partition cpu" in msg


def test_unknown_partition():
    nodes = cluster.parse_sinfo(SINFO_ONE_NODE)
    [msg] = cluster.check([cluster.Request("train_model", partitions=("gpu",))], nodes)
    assert "partition gpu, which sinfo does not list" in msg and "cpu" in msg


def test_mixed_cluster_fits_per_partition():
    nodes = cluster.parse_sinfo(SINFO_MIXED)
    ok = [cluster.Request("train_model", cpus=8, mem_mb=32000, gpus=1, runtime_min=720, partitions=("gpu",)),
          cluster.Request("sieve", cpus=64, mem_mb=400000, runtime_min=60),  # only the big CPU node
          cluster.Request("kovaleva", cpus=2, mem_mb=2000, runtime_min=20, partitions=("debug", "cpu"))]
    assert cluster.check(ok, nodes) == []
    bad = [cluster.Request("train_model", cpus=2, gpus=1),  # default partition has no GPUs
           cluster.Request("ablation_sweep", cpus=8, gpus=1, runtime_min=5000, partitions=("gpu",)),
           cluster.Request("sieve", cpus=64, mem_mb=600000)]
    msgs = cluster.check(bad, nodes)
    assert len(msgs) == 3
    assert "too many GPUs" in msgs[0]
    assert "too many time" in msgs[1]
    assert "too many memory" in msgs[2]


def test_no_single_node_offers_all():
    nodes = cluster.parse_sinfo("cpu* 64 8000 (null) infinite\ncpu* 8 512000 (null) infinite\n")
    [msg] = cluster.check([cluster.Request("x", cpus=32, mem_mb=100000)], nodes)
    assert "no single node offers all of it at once" in msg


def test_request_from_resources_reads_like_the_slurm_plugin():
    req = cluster.request_from_resources("r", 4, {"mem_mb_per_cpu": 1000, "gres": "gpu:a100:2",
                                                  "slurm_partition": "gpu,gpu2", "runtime": "2h"})
    assert req == cluster.Request("r", 4, 4000, 2, 120, ("gpu", "gpu2"))
    assert cluster.request_from_resources("r", 8, {"cpus_per_task": 2, "gpu": 0}).cpus == 2


def test_requests_from_dryrun():
    reqs = cluster.requests_from_dryrun(DRYRUN)
    assert [r.rule for r in reqs] == ["train_model", "prepare_data", "extract_attention"]  # localrule skipped
    train, prep, extract = reqs
    assert (train.cpus, train.mem_mb, train.gpus, train.runtime_min) == (8, 16000, 0, 720)
    assert (prep.cpus, prep.mem_mb) == (1, 4000)
    assert (extract.cpus, extract.gpus, extract.partitions) == (4, 1, ("gpu",))


def test_requests_from_jobs_and_check_workflow():
    def job(rule, threads, local=False, **res):
        return SimpleNamespace(rule=SimpleNamespace(name=rule), threads=threads, resources=res, is_local=local)

    jobs = [job("all", 1, local=True), job("train_model", 8, mem_mb=16000, gpu=0), job("sieve", 2, mem_mb=6000)]
    assert [r.rule for r in cluster.requests_from_jobs(jobs)] == ["train_model", "sieve"]
    nodes = cluster.parse_sinfo(SINFO_ONE_NODE)
    wf = SimpleNamespace(executor_plugin=SimpleNamespace(name="slurm"),
                         config={"mlflow": {"tracking_uri": "http://127.0.0.1:5000"}},
                         dag=SimpleNamespace(needrun_jobs=lambda: jobs))
    with pytest.raises(Exception, match="rule train_model .* 8 CPUs"):
        cluster.check_workflow(wf, nodes=nodes)
    jobs[1] = job("train_model", 2, mem_mb=16000)
    assert cluster.check_workflow(wf, nodes=nodes) == []
    wf.config["mlflow"]["tracking_uri"] = "sqlite:///results/mlflow.db"
    assert "sqlite" in cluster.check_workflow(wf, nodes=nodes)[0]
    local = SimpleNamespace(executor_plugin=SimpleNamespace(name="local"))
    assert cluster.check_workflow(local) == []  # not on Slurm: nothing to check, sinfo never called


def _check(repo, tmp_path, profile, *args):
    sinfo = tmp_path / "sinfo.txt"
    sinfo.write_text(SINFO_ONE_NODE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "bertology.workflow.cli", "cluster-check", "--profile", str(profile), "--sinfo-file", str(sinfo),
         "--", "--snakefile", str(repo / "Snakefile"), "--directory", str(tmp_path / "wf"),
         "--configfile", str(repo / "tests/cluster/config.yaml"), *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def test_check_the_shipped_profile_on_a_two_cpu_node(repo, tmp_path):
    """The real dry run of profiles/slurm (with the workflow profile profiles/default applied as usual):
    max-threads 8 is reported for the rules that ask for more than 2 CPUs; with --max-threads 2 all fit."""
    shipped = _check(repo, tmp_path, repo / "profiles/slurm")
    assert shipped.returncode == 1, shipped.stdout + shipped.stderr
    assert "rule train_model (4 jobs) asks for 8 CPUs" in shipped.stdout
    assert "too many CPUs" in shipped.stdout and "max-threads" in shipped.stdout
    fits = _check(repo, tmp_path, repo / "profiles/slurm", "--max-threads", "2")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert "every job fits a node" in fits.stdout


def test_profile_partition_reaches_the_jobs(repo, tmp_path):
    """slurm_partition set in the Slurm profile reaches every job (profiles/default must not shadow it
    with a default-resources of its own): a partition sinfo does not list is named for each rule."""
    profile = tmp_path / "profile"
    profile.mkdir()
    text = (repo / "profiles/slurm/config.yaml").read_text()
    assert '  # slurm_partition: "cpu"' in text
    (profile / "config.yaml").write_text(text.replace('  # slurm_partition: "cpu"', '  slurm_partition: "nosuch"'))
    run = _check(repo, tmp_path, profile, "--max-threads", "2")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "rule prepare_data" in run.stdout and "asks for partition nosuch" in run.stdout


def test_the_requests_are_the_declarations_with_the_profiles_overrides(repo, tmp_path):
    """What cluster-check compares with sinfo is each step's declaration (bertology.registry.Step: threads, mem_mb,
    runtime, gpu) with the Slurm profile's set-threads and set-resources over it, threads capped to max-threads:
    the profile is the one place a cluster changes them."""
    profile = tmp_path / "profile"
    profile.mkdir()
    text = (repo / "profiles/slurm/config.yaml").read_text()
    (profile / "config.yaml").write_text(text + "set-threads:\n  store_stats: 3\n  train_model: 16\n")
    settings = yaml.safe_load((profile / "config.yaml").read_text())
    requests = cluster.dry_run_requests(str(profile), [
        "--snakefile", str(repo / "Snakefile"), "--directory", str(tmp_path / "wf"),
        "--configfile", str(repo / "tests/cluster/config.yaml")])
    assert {"train_model", "store_stats", "prepare_data", "report"} <= {r.rule for r in requests}
    defaults = settings["default-resources"]
    for req in set(requests):
        if req.rule == "all":  # the target rule runs no step: the profile's default-resources
            assert (req.cpus, req.mem_mb, req.runtime_min) == (1, defaults["mem_mb"], defaults["runtime"])
            continue
        step = STEPS[req.rule]
        resources = {**step.resources, **settings["set-resources"].get(req.rule, {})}
        cpus = min(settings["set-threads"].get(req.rule, step.threads), settings["max-threads"])
        assert (req.cpus, req.mem_mb, req.gpus, req.runtime_min) == (
            cpus, resources["mem_mb"], resources.get("gpu", 0), resources["runtime"]), req


def test_cluster_steps_are_in_the_one_cli_and_fail_in_one_line(tmp_path, capsys):
    """cluster-check and cluster-dask are steps of bertology.workflow.cli.STEPS (not a second command line): a
    missing sinfo capture and a missing dask-jobqueue are one line each, exit 1."""
    from bertology.workflow import cli

    assert {"cluster_check", "cluster_dask"} <= set(cli.STEPS)
    assert cli.main(["cluster-check", "--sinfo-file", str(tmp_path / "none.txt"), "--", "--configfile", "x.yaml"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertology cluster-check: error: --sinfo-file"), err
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        assert cli.main(["cluster-dask", "--workers", "1"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "needs dask-jobqueue" in err[0], err


def test_dask_options_become_slurmcluster_arguments():
    from bertology.cluster.dask_launcher import DaskSlurm

    kwargs = DaskSlurm(workers=2, cores=4, memory="16GB", walltime="01:00:00", partition="cpu", host="127.0.0.1",
                       prologue=("module load x",)).cluster_kwargs()
    assert kwargs["cores"] == 4 and kwargs["memory"] == "16GB" and kwargs["processes"] == 1
    assert kwargs["queue"] == "cpu" and "account" not in kwargs
    assert kwargs["scheduler_options"] == {"host": "127.0.0.1"} and kwargs["job_script_prologue"] == ["module load x"]


def test_cluster_modules_import_one_way():
    """bertology.cluster is one job per module: the fit check, the tracking warning and the Dask launcher import
    no other module of the package; only the workflow's start-up check (onstart) combines the first two."""
    import ast
    from pathlib import Path

    allowed = {"fit": set(), "tracking_warning": set(), "dask_launcher": set(), "onstart": {"fit", "tracking_warning"}}
    root = Path(cluster.__file__).parent
    assert {p.stem for p in root.glob("*.py")} - {"__init__"} == set(allowed)
    for name, ok in allowed.items():
        tree = ast.parse((root / f"{name}.py").read_text())
        used = {node.module.removeprefix("bertology.cluster").lstrip(".") for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertology.cluster")}
        assert used <= ok, (name, used)
