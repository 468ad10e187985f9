"""The job server (bertology.workflow.jobserver): a job forked from a process that imported everything once writes what
the job's own process writes, exits with its status, and the server refuses what it cannot run that way."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from bertology.workflow import jobserver, launch, serverfiles

DATA_CONFIG = {"data": {"bad_rows": "error", "demo": {"train": 40, "validation": 24}, "max_eval_examples": None,
                        "max_length": 64, "max_train_examples": None, "seed": 1, "short_split": "error",
                        "source": "demo"}}
SCORE_CONFIG = {"data": {"max_length": 64}, "model": "minilm-l6",
                "train": {"eval_batch_size": 8, "mixed_precision": "auto", "seed": 42}}


def bertology(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bertology", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def wait_for(path: str, proc=None, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "the job server did not start listening"
        time.sleep(0.1)


@pytest.fixture()
def server(tmp_path, monkeypatch):
    """A job server for this test process, started in tmp_path; yields (socket path, environment of its jobs)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    # a request timeout far below a job's length: a child must not inherit it (its step would be interrupted)
    path = jobserver.start(os.getpid(), request_timeout=0.5)
    try:
        wait_for(path)
        yield path, dict(os.environ)
    finally:
        jobserver.stop()


def served_jobs(workdir: Path) -> list[str]:
    log = workdir / jobserver.LOG_PATH
    return [line for line in log.read_text().splitlines() if " job " in line] if log.exists() else []


def test_refusal_names_what_differs():
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2", "HOME": "/root"}
    request = {"executable": sys.executable, "package": jobserver.package_path(), "env": dict(env)}
    assert jobserver.refusal(request, env) is None
    # what a library reads only when it runs (Snakemake's thread variables, the job's own) may differ
    assert jobserver.refusal({**request, "env": {**env, "OMP_NUM_THREADS": "1", "BERTOLOGY_X": "y"}}, env) is None
    assert "HF_HUB_OFFLINE" in jobserver.refusal({**request, "env": {**env, "HF_HUB_OFFLINE": "0"}}, env)
    assert "PYTHONPATH" in jobserver.refusal({**request, "env": {**env, "PYTHONPATH": "/elsewhere"}}, env)
    assert "another Python" in jobserver.refusal({**request, "executable": "/usr/bin/python9"}, env)
    assert "another bertology" in jobserver.refusal({**request, "package": "/elsewhere/bertology"}, env)


def test_no_server_means_the_job_runs_in_its_own_process(monkeypatch, tmp_path):
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    assert launch.submit(["prepare-data"]) is None
    for off in ("0", "off"):
        monkeypatch.setenv(jobserver.SOCKET_ENV, off)
        assert launch.submit(["prepare-data"]) is None
    monkeypatch.setenv(jobserver.SOCKET_ENV, str(tmp_path / "nobody.sock"))
    assert launch.submit(["prepare-data"]) is None


def test_a_served_job_writes_what_its_own_process_writes(server, tmp_path):
    path, env = server
    own = dict(env, **{jobserver.SOCKET_ENV: "0"})
    outputs = {}
    for name, job_env in (("served", env), ("own", own)):
        out = tmp_path / name
        data = bertology(["prepare-data", "--config", json.dumps(DATA_CONFIG), "-w", "task=sst2",
                          "-w", "split=validation", "--output", f"table={out}/validation.parquet",
                          "--output", f"skipped={out}/skipped.csv", "--no-mlflow"], tmp_path, job_env)
        assert data.returncode == 0, data.stderr
        score = bertology(["score", "--config", json.dumps(SCORE_CONFIG), "-w", "task=sst2", "-w", "variant=pretrained",
                           "-w", "seedtag=", "--input", f"validation={out}/validation.parquet",
                           "--output", f"score={out}/score.json", "--threads", "2", "--no-mlflow"], tmp_path, job_env)
        assert score.returncode == 0, score.stderr
        assert "bertology.score: sst2 pretrained seed 42" in score.stderr  # the step's log reaches the job's stderr
        record = json.loads((out / "score.json").read_text())
        record.pop("seconds", None)
        outputs[name] = ((out / "validation.parquet").read_bytes(), record)
    assert outputs["served"] == outputs["own"]
    jobs = served_jobs(tmp_path)
    assert len(jobs) == 2 and "prepare-data" in jobs[0] and "score" in jobs[1], jobs


def test_a_served_job_exits_with_its_status_and_says_why(server, tmp_path):
    path, env = server
    unknown = bertology(["no-such-step"], tmp_path, env)
    assert unknown.returncode == 2 and "unknown step 'no-such-step'" in unknown.stderr
    bad = bertology(["prepare-data", "--config", "{not json", "-w", "task=sst2", "--no-mlflow"], tmp_path, env)
    assert bad.returncode == 1 and "bertology prepare-data: error: --config is not valid JSON" in bad.stderr, bad.stderr
    assert len(served_jobs(tmp_path)) == 2


def test_a_job_the_server_refuses_runs_in_its_own_process(server, tmp_path):
    path, env = server
    proc = bertology(["no-such-step"], tmp_path, dict(env, HF_HUB_CACHE=str(tmp_path / "elsewhere")))
    assert proc.returncode == 2 and "unknown step" in proc.stderr
    log = (tmp_path / jobserver.LOG_PATH).read_text()
    assert "refused no-such-step: variables read at import differ from the server's: HF_HUB_CACHE" in log
    assert not served_jobs(tmp_path)


def test_the_server_ends_with_its_workflow(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parent = subprocess.Popen(["sleep", "600"])
    sock = str(tmp_path / "jobs.sock")
    server = subprocess.Popen([sys.executable, "-m", "bertology.workflow.jobserver", "--socket", sock, "--parent", str(parent.pid)])
    try:
        wait_for(sock)
        parent.kill()
        parent.wait()
        assert server.wait(timeout=30) == 0
        assert not os.path.exists(sock)
    finally:
        parent.kill()
        server.kill()


def test_a_workflow_serves_its_jobs_and_writes_the_same_files(tmp_path, config_file, snakemake_run, monkeypatch):
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    targets = ["results/scores/sst2/pretrained.json", "results/data/sst2/sample.parquet"]
    runs = {}
    for name, setting in (("served", None), ("own", "0")):
        work = tmp_path / name
        work.mkdir()
        config_file(work, tasks=["sst2"])
        if setting is None:
            monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
        else:
            monkeypatch.setenv(jobserver.SOCKET_ENV, setting)
        snakemake_run(work, "--cores", "2", *targets)
        record = json.loads((work / targets[0]).read_text())
        record.pop("seconds", None)
        runs[name] = (record, (work / targets[1]).read_bytes(), served_jobs(work))
    assert runs["served"][:2] == runs["own"][:2]
    assert len(runs["served"][2]) >= 2 and not runs["own"][2]  # the jobs after the server's imports were served


@pytest.mark.parametrize("after", [0.0, 0.1])
def test_a_killed_job_interrupts_its_child(server, tmp_path, after):
    """Killed at once after the server forked its child (still setting up) or a little later (in its step): exit 130."""
    path, env = server
    out = tmp_path / "data"
    data = bertology(["prepare-data", "--config", json.dumps(DATA_CONFIG), "-w", "task=sst2", "-w", "split=validation",
                      "--output", f"table={out}/validation.parquet", "--output", f"skipped={out}/skipped.csv",
                      "--no-mlflow"], tmp_path, env)
    assert data.returncode == 0, data.stderr
    job = subprocess.Popen([sys.executable, "-m", "bertology", "score", "--config", json.dumps(SCORE_CONFIG),
                            "-w", "task=sst2", "-w", "variant=pretrained", "-w", "seedtag=",
                            "--input", f"validation={out}/validation.parquet", "--output", f"score={out}/score.json",
                            "--no-mlflow"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    log = tmp_path / jobserver.LOG_PATH
    deadline = time.monotonic() + 60
    while len(served_jobs(tmp_path)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(after)
    job.kill()  # as a job killed outright: the child is told by its connection closing
    job.wait()
    child = served_jobs(tmp_path)[-1].rsplit("pid ", 1)[1]
    while f"pid {child} exited" not in log.read_text():
        assert time.monotonic() < deadline + 60
        time.sleep(0.1)
    # interrupted (KeyboardInterrupt), not left running; the child's stderr is the job's
    assert f"pid {child} exited 130" in log.read_text(), job.stderr.read().decode()
    assert not (out / "score.json").exists()


def test_a_server_stopped_while_it_imports_ends_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    path = jobserver.start(os.getpid())
    started = time.monotonic()
    jobserver.stop()
    assert time.monotonic() - started < 5  # a run with nothing to do does not wait for the imports
    assert not os.path.exists(path) and jobserver.SOCKET_ENV not in os.environ


def test_which_workflows_get_a_server(monkeypatch, tmp_path):
    from types import SimpleNamespace

    def workflow(name, non_local=False, dryrun=False):
        settings = SimpleNamespace(non_local_exec=non_local, dryrun_exec=dryrun, touch_exec=False)
        return SimpleNamespace(executor_plugin=SimpleNamespace(name=name, common_settings=settings))

    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert jobserver.wanted(workflow("local"), gpus=[]) is None
    assert "slurm executor" in jobserver.wanted(workflow("slurm", non_local=True), gpus=[])
    assert "GPU machine (nvidia0)" in jobserver.wanted(workflow("local"), gpus=["nvidia0"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert jobserver.wanted(workflow("local"), gpus=["nvidia0"]) is None  # no GPU visible to the jobs
    monkeypatch.setenv(jobserver.SOCKET_ENV, "0")
    assert jobserver.wanted(workflow("local"), gpus=[]) == f"{jobserver.SOCKET_ENV}=0"
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()
    assert jobserver.gpu_devices(tmp_path) == ["nvidia0"]


def test_a_zombie_is_not_alive():
    """A process that ended but is not reaped yet (a zombie) answers os.kill(pid, 0): it counts as ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert serverfiles.alive(os.getpid())
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not serverfiles.alive(proc.pid)
    finally:
        proc.wait()
    assert not serverfiles.alive(proc.pid)


@pytest.fixture()
def short_tmp():
    """A folder whose path leaves room for a socket's (pytest's tmp_path can be too long)."""
    folder = tempfile.mkdtemp(prefix="js-")
    try:
        yield Path(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


FAILING_PRELOAD = {"exits": "raise SystemExit('no memory for it')", "dies": "import os; os._exit(3)"}


@pytest.mark.parametrize("how", ["too long", "bind fails", "import exits", "import dies", "killed"])
def test_a_server_that_ends_before_it_listens_is_seen_at_once(how, tmp_path, short_tmp, monkeypatch, capfd):
    """A job waiting for a server that ends before it listens runs in its own process within 2 s of its end (not
    the 180 s it waits for one importing), saying why in one line; the workflow says so once on its stderr."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    socket_path, modules = None, ()
    if how == "too long":
        socket_path = str(short_tmp / ("d" * 100) / "jobs.sock")
        os.makedirs(os.path.dirname(socket_path))
    elif how == "bind fails":
        socket_path = str(short_tmp / "jobs.sock")
        os.mkdir(socket_path + serverfiles.BOUND_SUFFIX)  # bind: address in use
    elif how.startswith("import"):
        (tmp_path / "failing_preload.py").write_text(FAILING_PRELOAD[how.split()[1]])
        monkeypatch.setenv("PYTHONPATH", str(tmp_path))
        modules = ("failing_preload",)
    else:
        modules = jobserver.PRELOAD  # seconds of imports, killed in the middle
    path = jobserver.start(os.getpid(), modules=modules, socket_path=socket_path)
    proc = jobserver._SERVER["proc"]
    ended = []

    def watch():
        if how == "killed":
            time.sleep(0.5)
            proc.kill()
        proc.wait()
        ended.append(time.monotonic())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert launch.submit(["no-such-step"]) is None
        returned = time.monotonic()
        watcher.join()
        assert returned - ended[0] < 2, f"the job waited {returned - ended[0]:.1f} s after the server ended"
        err, deadline = "", time.monotonic() + 30
        while "from now on" not in err and time.monotonic() < deadline:  # the workflow's watcher says it too
            err += capfd.readouterr().err
            time.sleep(0.05)
        job = [line for line in err.splitlines() if line.endswith("running this job in its own process")]
        assert len(job) == 1 and f"the job server (pid {proc.pid}) ended before it listened" in job[0], err
        said = [line for line in err.splitlines() if "the jobs run in their own processes from now on" in line]
        assert len(said) == 1, err
        expected = {"too long": "over the 107 a Unix socket allows", "bind fails": "Address already in use",
                    "import exits": "SystemExit: no memory for it", "import dies": "(exit status 3)",
                    "killed": "ended before it listened"}[how]
        assert expected in said[0] and not os.path.exists(path + serverfiles.STARTING), err
        started = time.monotonic()
        assert launch.submit(["no-such-step"]) is None and time.monotonic() - started < 2  # the next job too
    finally:
        jobserver.stop()


COUNTING_STEP = """
import os, signal, time
from pathlib import Path
import bertology.workflow.cli as cli

def count_interrupts(argv):
    seen = []
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write)  # a byte each time SIGINT is delivered, even two before the handler runs once
    signal.signal(signal.SIGINT, lambda *_: seen.append(1))
    Path("pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1)  # a second SIGINT (the terminal's and the job's) would come within milliseconds of the first
    Path("count").write_text(str(len(os.read(read, 100))))
    return 130 if seen else 0

cli.main = count_interrupts
"""

WORKFLOW = """
import os, signal, subprocess, sys, time
from bertology.workflow import jobserver
signal.signal(signal.SIGINT, lambda *_: None)  # the workflow waits for its job, as Snakemake does
path = jobserver.start(os.getpid(), modules=("counting_step",))
while not os.path.exists(path):
    time.sleep(0.05)
print(subprocess.call([sys.executable, "-m", "bertology", "count", "-w", "task=rte", "-w", "init=pretrained"]))
jobserver.stop()
"""


def test_ctrl_c_reaches_a_served_job_once_and_ps_names_it(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group: the workflow, its job and the server) reaches the served
    child exactly once, through its job; the child shows in ps as its step and wildcards."""
    (tmp_path / "counting_step.py").write_text(COUNTING_STEP)
    env = {k: v for k, v in os.environ.items() if k != jobserver.SOCKET_ENV}
    env["PYTHONPATH"] = str(tmp_path)
    workflow = subprocess.Popen([sys.executable, "-c", WORKFLOW], cwd=tmp_path, env=env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "pid").exists():
            assert time.monotonic() < deadline and workflow.poll() is None, workflow.stderr.read()
            time.sleep(0.05)
        child = int((tmp_path / "pid").read_text())
        title = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        assert title == "bertology count task=rte init=pretrained"
        # out of the terminal's process group: the terminal's SIGINT and the job's would often come as one
        # delivery (a signal already pending), so the count alone would not always see two
        assert os.getpgid(child) == child != os.getpgid(workflow.pid)
        os.killpg(workflow.pid, signal.SIGINT)
        out, err = workflow.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(workflow.pid, signal.SIGKILL)
    assert (tmp_path / "count").read_text() == "1", err
    assert out.strip() == "130", err
    assert f"pid {child} exited 130" in (tmp_path / jobserver.LOG_PATH).read_text()


def test_a_killed_runs_folder_is_removed_by_the_next_start(short_tmp, monkeypatch, tmp_path):
    """The folder of a run whose owner has ended (exited, or a zombie) goes at the next start; a live run's, one
    without an owner, or one of another host stays."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        folders = {name: os.path.dirname(serverfiles.new_folder(pid, [str(short_tmp)]))
                   for name, pid in (("ended", ended.pid), ("zombie", zombie.pid), ("live", os.getpid()))}
        bare = short_tmp / f"{serverfiles.PREFIX}{ended.pid}-bare"  # being made: no owner yet
        bare.mkdir()
        elsewhere = Path(os.path.dirname(serverfiles.new_folder(ended.pid, [str(short_tmp)])))
        record = json.loads((elsewhere / serverfiles.OWNER).read_text())
        (elsewhere / serverfiles.OWNER).write_text(json.dumps({**record, "host": "another-host"}))
        while serverfiles.alive(zombie.pid):
            time.sleep(0.01)
        path = jobserver.start(os.getpid(), modules=())
        try:
            assert path.startswith(str(short_tmp)) and os.path.isdir(os.path.dirname(path))
            assert not os.path.exists(folders["ended"]) and not os.path.exists(folders["zombie"])
            assert os.path.isdir(folders["live"]) and bare.is_dir() and elsewhere.is_dir()
        finally:
            jobserver.stop()
        assert not os.path.exists(os.path.dirname(path))
    finally:
        zombie.wait()


def test_a_server_whose_workflow_is_killed_removes_its_folder(tmp_path, short_tmp):
    """Snakemake killed outright: its server ends within seconds and takes its folder with it."""
    env = {k: v for k, v in os.environ.items() if k != jobserver.SOCKET_ENV}
    env["TMPDIR"] = str(short_tmp)
    owner = subprocess.Popen([sys.executable, "-c", "import os, time\nfrom bertology.workflow import jobserver\n"
                              "print(jobserver.start(os.getpid(), modules=()), flush=True)\ntime.sleep(600)"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        path = owner.stdout.readline().strip()
        wait_for(path)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 60
    while os.path.exists(os.path.dirname(path)):
        assert time.monotonic() < deadline, os.listdir(os.path.dirname(path))
        time.sleep(0.1)


def test_a_socket_folder_fits_a_unix_socket(short_tmp, monkeypatch):
    """A temporary directory too long for a Unix socket's path: the folder goes to the next one where it fits."""
    long = short_tmp / ("d" * 100)
    long.mkdir()
    path = serverfiles.new_folder(os.getpid(), [str(long), str(short_tmp)])
    assert serverfiles.fits(path) and path.startswith(str(short_tmp / serverfiles.PREFIX))
    assert serverfiles.owned_by(os.path.dirname(path), os.getpid())
    assert serverfiles.new_folder(os.getpid(), [str(long)]) is None
    assert not serverfiles.fits(str(long / "x" / "jobs.sock"))
