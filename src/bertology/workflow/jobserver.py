"""A job without its imports: one process imports the steps' libraries once and forks a child per job.

A ``bertology <step>`` job spends seconds importing before it computes anything: torch and transformers'
model classes about 6 s on a 2-core machine, pandas, scipy.stats, dask, zarr and matplotlib 1 to 3 s more; a
default run has about forty jobs that load a model. In a local Snakemake run (``onstart``:
:func:`start_for_workflow`) a *job server* imports them once (:data:`PRELOAD`) and listens on a Unix socket
named in the jobs' environment (:data:`SOCKET_ENV`); each job's ``bertology`` command (:func:`submit`, called
by :mod:`bertology.workflow.launch` before anything heavy is imported) hands the server its arguments, working directory,
environment and its stdin/stdout/stderr, and the server forks a child that runs the step as the job's own
process would (:func:`bertology.workflow.cli.main`), writing to the job's log, while the job waits for its exit status.

What the child does is what a fresh process does, on the same files, with the same libraries and threads:

- it takes the job's working directory and environment (Snakemake's ``OMP_NUM_THREADS`` and the rest), caps
  the BLAS thread pools at the job's thread count as a fresh process's would be (threadpoolctl), forgets the
  server's temporary directory and reseeds the unseeded generators (Python's, numpy's global) from the OS;
- a signal to the job (Snakemake stopping it, Ctrl-C) is passed to the child, and a job that is gone
  (killed) interrupts its child; the job exits with the child's status (128 + N for signal N, as a shell).

The server refuses a job it cannot run as a fresh process would, and the job then runs in its own process as
without a server (the result is the same, only slower): another Python or another bertology (PYTHONPATH), or a
variable that the preloaded libraries read when they are imported (HF_*, TORCH*, PYTHON*, ...; the
:data:`IMPORT_TIME_PREFIXES`) set differently from the server's. The server ends with the workflow
(``onsuccess``/``onerror``: :func:`stop`, or within a second of the Snakemake process ending). It runs only
with the local executor (on a cluster every job runs on its own node, as before), not on a machine with an NVIDIA
GPU (:func:`wanted`), and not at all with ``BERTOLOGY_JOB_SERVER=0``. What it did is in ``.bertology/jobserver.log``: each job it ran, its pid and exit
status, and each refusal with its reason.

Snakemake's ``benchmark:`` files time the job's command: their wall time (``s``) is the job's, but their memory
and CPU columns then measure the waiting command, not the child (run with ``BERTOLOGY_JOB_SERVER=0`` to have
those).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SOCKET_ENV = "BERTOLOGY_JOB_SERVER"
"""The server's socket path, exported to the jobs; ``0`` (or ``off``/``false``) before a run turns the server off."""

LOG_PATH = Path(".bertology") / "jobserver.log"

PRELOAD = (
    "numpy", "pandas", "pyarrow.parquet", "scipy.stats", "sklearn.metrics", "torch", "transformers",
    "transformers.modeling_utils", "transformers.models.auto.modeling_auto", "transformers.models.bert.modeling_bert",
    "zarr", "xarray", "dask.array", "matplotlib.pyplot", "spacy", "bertology.workflow.cli",
)
"""Modules the server imports before it listens (each best-effort: one that fails to import is skipped)."""

IMPORT_TIME_PREFIXES = (
    "PYTHON", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "LD_",
    "MPL", "MATPLOTLIB", "XDG_", "KMP_", "GOMP_", "DASK_", "ZARR", "NUMBA", "SCIPY", "OPENBLAS_THREAD_TIMEOUT",
    "OPENBLAS_CORETYPE", "MKL_CBWR", "MKL_ENABLE",
)
"""Environment variables (by prefix) that the preloaded libraries read at import: a job whose value differs
from the server's runs in its own process."""

_OFF = ("0", "off", "false", "no")
STARTING = ".starting"  # beside the socket while the server imports: its pid
_STARTUP_ENV = dict(os.environ)  # the server's environment before its imports (torch adds KMP_* variables, ...)
_THREAD_ENV = "OMP_NUM_THREADS"
log = logging.getLogger("bertology.workflow.jobserver")


# --------------------------------------------------------------------------------------------------
# The job's side
# --------------------------------------------------------------------------------------------------

def _package_path() -> str:
    import bertology

    return str(Path(bertology.__file__).resolve().parent)


def _read_line(conn: socket.socket, buf: bytearray) -> dict[str, Any] | None:
    """The next JSON line from `conn` (None at end of stream); `buf` keeps what follows it."""
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf.extend(chunk)
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


def submit(argv: list[str], *, prog: str | None = None) -> int | None:
    """Run ``bertology <argv>`` in a child of the job server: its exit status, or None when there is no
    server (no socket named, none listening) or it refused the job (then run it in this process)."""
    path = os.environ.get(SOCKET_ENV, "")
    if not path or path.lower() in _OFF:
        return None
    _wait_while_starting(path)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(5)
        conn.connect(path)
        request = {"argv": argv, "prog": prog or sys.argv[0], "cwd": os.getcwd(), "env": dict(os.environ),
                   "executable": sys.executable, "package": _package_path()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        # the reply (a pid or a refusal) comes in milliseconds; a job that gives up waiting closes the connection,
        # which interrupts a child forked too late (_watch_job) before it runs the step beside this process
        conn.settimeout(60)
        buf = bytearray()
        reply = _read_line(conn, buf)
    except OSError:
        conn.close()
        return None
    if not reply or "pid" not in reply:
        conn.close()
        return None
    child = int(reply["pid"])
    conn.settimeout(None)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            status = _read_line(conn, buf)
            break
        except InterruptedError:
            continue
    conn.close()
    if status is None:
        print(f"bertology: the job server ended before the job's process ({child}) did", file=sys.stderr)
        return 1
    return int(status["exit"])


def _wait_while_starting(path: str, timeout: float = 180) -> None:
    """Wait for a server that is still importing (its ``.starting`` file names its pid) to listen on `path`:
    on a few cores the job would otherwise import the same libraries beside it, both at half speed."""
    marker = Path(path + STARTING)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        try:
            pid = int(marker.read_text() or 0)
        except (OSError, ValueError):
            return
        if pid and not _alive(pid):
            return
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------------
# The server's side
# --------------------------------------------------------------------------------------------------

def refusal(request: dict[str, Any], env: dict[str, str] | None = None) -> str | None:
    """Why this server cannot run `request` as a fresh process would (None: it can)."""
    env = _STARTUP_ENV if env is None else env
    if request.get("executable") != sys.executable:
        return f"another Python ({request.get('executable')}, the server's is {sys.executable})"
    if request.get("package") != _package_path():
        return f"another bertology ({request.get('package')}, the server's is {_package_path()})"
    theirs = request.get("env") or {}
    differ = sorted(k for k in set(theirs) | set(env)
                    if k.startswith(IMPORT_TIME_PREFIXES) and theirs.get(k) != env.get(k))
    if differ:
        return f"variables read at import differ from the server's: {', '.join(differ)}"
    return None


def _watch_job(conn: socket.socket) -> None:
    """In the child: when the job's end of the connection closes (the job was killed), interrupt the step."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGINT)


def _run_child(request: dict[str, Any], fds: list[int], conn: socket.socket, closing: list[Any]) -> None:
    """The forked child: become the job's process, run its step, exit with its status (never returns)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for thing in closing:  # the listener, the wake-up pipe's fds, the other jobs' connections
            if isinstance(thing, int):
                os.close(thing)
            else:
                thing.close()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        # the job's environment, with what the imports added to it (torch's KMP_* ...), as in a fresh process
        added = {k: v for k, v in os.environ.items() if k not in _STARTUP_ENV}
        os.environ.clear()
        os.environ.update({**added, **request["env"]})
        sys.argv = [request.get("prog") or "bertology", *request["argv"]]
        tempfile.tempdir = None
        _fresh_state(os.environ.get(_THREAD_ENV))
        conn.settimeout(None)  # the watcher waits as long as the step runs
        threading.Thread(target=_watch_job, args=(conn,), daemon=True).start()
        from bertology.workflow.cli import main

        try:
            code = main(list(request["argv"]))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except KeyboardInterrupt:
            code = 130
    except KeyboardInterrupt:  # the job was killed before its step began (while the child was still setting up)
        code = 130
    except BaseException:  # noqa: BLE001 - the child must end here, never return into the server's loop
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _fresh_state(threads: str | None) -> None:
    """What a fresh process of the job would have: unseeded generators from the OS, BLAS pools at its threads."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if threads and threads.isdigit():
        with contextlib.suppress(Exception):
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=int(threads))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import `modules` (best-effort); the names that failed."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional library only means its jobs import it themselves
            failed.append(name)
    return failed


def serve(path: str | Path, parent: int, *, modules: tuple[str, ...] = PRELOAD, request_timeout: float = 10) -> None:
    """Import `modules`, then run jobs sent to the Unix socket `path` until the process `parent` ends or
    SIGTERM; each job in a forked child (:func:`_run_child`). Single-threaded, so that forking is safe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the jobs themselves (same process group)
    t0 = time.perf_counter()
    failed = preload(modules)  # SIGTERM ends the process at once until it serves (no job to wait for yet)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    log.info("preloaded %d modules in %.1f s%s", len(modules) - len(failed), time.perf_counter() - t0,
             f" (not importable: {', '.join(failed)})" if failed else "")
    path = str(path)
    if threading.active_count() > 1:
        log.warning("threads running after the imports (%s): not serving", threading.enumerate())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + STARTING)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.replace(path + ".tmp", path)  # jobs connect only once the server accepts
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path + STARTING)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    try:
        while not stopping and _alive(parent):
            try:
                ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
            except InterruptedError:
                ready = []
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            if listener in ready:
                _accept(listener, children, [listener, wake_r, wake_w, *children.values()], request_timeout)
            _reap(children)
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while children and time.monotonic() < deadline:
            _reap(children)
            time.sleep(0.1)
        log.info("stopped")


def _accept(listener: socket.socket, children: dict[int, socket.socket], closing: list[Any],
            timeout: float) -> None:
    """Read one job's request (waiting at most `timeout` seconds for it), then refuse it or fork its child."""
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(timeout)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        buf = bytearray(data)
        while b"\n" not in buf:
            chunk = conn.recv(1 << 20)
            if not chunk:
                raise OSError("the job closed the connection")
            buf.extend(chunk)
        request = json.loads(bytes(buf).partition(b"\n")[0])
        why = refusal(request) if len(fds) == 3 else "it did not pass its stdin, stdout and stderr"
        if why:
            log.info("refused %s: %s", " ".join(request.get("argv", [])[:1]), why)
            conn.sendall(json.dumps({"refused": why}).encode() + b"\n")
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            _run_child(request, fds, conn, closing)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        children[pid] = conn
        argv = request["argv"]
        log.info("job %s %s: pid %d", argv[0] if argv else "", _wildcards(argv), pid)
    except (OSError, ValueError) as err:
        log.warning("a job's request failed: %s", err)
        conn.close()
    finally:
        for fd in fds:
            os.close(fd)


def _wildcards(argv: list[str]) -> str:
    return " ".join(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-w")


def _reap(children: dict[int, socket.socket]) -> None:
    """Collect ended children and send each job its exit status (128 + N when killed by signal N)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        conn = children.pop(pid, None)
        log.info("pid %d exited %d", pid, code)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
            conn.close()


# --------------------------------------------------------------------------------------------------
# The workflow's side
# --------------------------------------------------------------------------------------------------

_SERVER: dict[str, Any] = {}


def gpu_devices(dev: Path = Path("/dev")) -> list[str]:
    """The NVIDIA device files of this machine (``/dev/nvidia0``, ...), found without touching CUDA."""
    return sorted(p.name for p in dev.glob("nvidia[0-9]*")) if dev.is_dir() else []


def wanted(workflow: Any, *, gpus: list[str] | None = None) -> str | None:
    """Why this workflow runs without a job server (None: it runs one): turned off, a non-local executor, or a
    machine with an NVIDIA GPU (a process may not use CUDA after a fork from one whose imports initialised it, and
    whether transformers' imports do is not checked here: there each job runs in its own process)."""
    if os.environ.get(SOCKET_ENV, "").lower() in _OFF:
        return f"{SOCKET_ENV}={os.environ[SOCKET_ENV]}"
    plugin = getattr(workflow, "executor_plugin", None)
    settings = getattr(plugin, "common_settings", None)
    if plugin is None or settings is None or settings.non_local_exec or settings.dryrun_exec or settings.touch_exec:
        return f"the {getattr(plugin, 'name', 'unknown')} executor runs jobs elsewhere"
    gpus = gpu_devices() if gpus is None else gpus
    if gpus and os.environ.get("CUDA_VISIBLE_DEVICES", None) not in ("", "-1"):
        return f"a GPU machine ({', '.join(gpus)}): each job initialises CUDA in its own process"
    return None


def start_for_workflow(workflow: Any) -> str | None:
    """Start the job server for a local run (``onstart``) and export its socket to the jobs; the socket path,
    or None when :func:`wanted` says no. The jobs started before it listens run in their own processes."""
    if wanted(workflow) is not None:
        return None
    return start(os.getpid())


def start(parent: int, *, request_timeout: float = 10) -> str:
    """Start a server for the jobs of process `parent`; exports and returns its socket path. request_timeout:
    how long the server waits for a connected job's request."""
    folder = tempfile.mkdtemp(prefix="bertology-jobs-")
    path = os.path.join(folder, "jobs.sock")
    LOG_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG_PATH, "a") as logfile:
        proc = subprocess.Popen([sys.executable, "-m", "bertology.workflow.jobserver", "--socket", path,
                                 "--parent", str(parent), "--request-timeout", str(request_timeout)], stdin=subprocess.DEVNULL, stdout=logfile,
                                stderr=subprocess.STDOUT, cwd=os.getcwd(), env=dict(os.environ))
    Path(path + STARTING).write_text(str(proc.pid))
    _SERVER.update(proc=proc, folder=folder)
    os.environ[SOCKET_ENV] = path
    return path


def stop() -> None:
    """End the server started by :func:`start` (``onsuccess``/``onerror``); no-op without one."""
    proc = _SERVER.pop("proc", None)
    folder = _SERVER.pop("folder", None)
    os.environ.pop(SOCKET_ENV, None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=40)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bertology.workflow.jobserver", description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the Unix socket to listen on")
    ap.add_argument("--parent", type=int, required=True, help="serve until this process ends")
    ap.add_argument("--request-timeout", type=float, default=10, help="seconds to wait for a connected job's request")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
    serve(args.socket, args.parent, request_timeout=args.request_timeout)
    logging.shutdown()
    os._exit(0)  # not seconds of tearing down torch and the rest: the children are gone, the log is flushed


if __name__ == "__main__":
    main()
