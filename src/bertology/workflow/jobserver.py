"""A job without its imports: one process imports the steps' libraries once and forks a child per job.

A ``bertology <step>`` job spends seconds importing before it computes anything: torch and transformers'
model classes about 6 s on a 2-core machine, pandas, scipy.stats, dask, zarr and matplotlib 1 to 3 s more; a
default run has about forty jobs that load a model. In a local Snakemake run (``onstart``:
:func:`start_for_workflow`) a *job server* imports them once (:data:`PRELOAD`) and listens on a Unix socket
named in the jobs' environment (:data:`SOCKET_ENV`); each job's ``bertology`` command
(:func:`bertology.workflow.launch.submit`, before anything heavy is imported) hands the server its arguments, working
directory, environment and its stdin/stdout/stderr, and the server forks a child that runs the step as the job's own
process would (:func:`bertology.workflow.cli.main`), writing to the job's log, while the job waits for its exit status.
The child is named in ``ps`` and ``top`` by its step and wildcards (``bertology train_model task=rte init=pretrained``).

What the child does is what a fresh process does, on the same files, with the same libraries and threads:

- it takes the job's working directory and environment (Snakemake's ``OMP_NUM_THREADS`` and the rest), caps
  the BLAS thread pools at the job's thread count as a fresh process's would be (threadpoolctl), forgets the
  server's temporary directory and reseeds the unseeded generators (Python's, numpy's global) from the OS;
- a signal to the job (Snakemake stopping it, Ctrl-C) is passed to the child, once: the child lives in its own
  process group, out of the terminal's reach; a job that is gone (killed) interrupts its child; the job exits with
  the child's status (128 + N for signal N, as a shell).

The server refuses a job it cannot run as a fresh process would, and the job then runs in its own process as
without a server (the result is the same, only slower): another Python or another bertology (PYTHONPATH), or a
variable that the preloaded libraries read when they are imported (HF_*, TORCH*, PYTHON*, ...; the
:data:`IMPORT_TIME_PREFIXES`) set differently from the server's. The server ends with the workflow
(``onsuccess``/``onerror``: :func:`stop`, or within a second of the Snakemake process ending). A server that
ends before :func:`stop` (it failed before it listened: an import, a socket path too long, or it was killed) is
reaped by the workflow at once, which says why on its stderr, and its jobs run in their own processes at once,
each saying why in one line (:mod:`bertology.workflow.serverfiles`: its folder, markers and notes). The server
runs only
with the local executor (on a cluster every job runs on its own node, as before), not on a machine with an NVIDIA
GPU (:func:`wanted`), and not at all with ``BERTOLOGY_JOB_SERVER=0``. What it did is in ``.bertology/jobserver.log``: each job it ran, its pid and exit
status, and each refusal with its reason.

Snakemake's ``benchmark:`` files time the job's command: their wall time (``s``) is the job's, but their memory
and CPU columns then measure the waiting command, not the child (run with ``BERTOLOGY_JOB_SERVER=0`` to have
those).
"""

from __future__ import annotations

import contextlib
import errno
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

from bertology.workflow import serverfiles

SOCKET_ENV = "BERTOLOGY_JOB_SERVER"
"""The server's socket path, exported to the jobs; ``0`` (or ``off``/``false``) before a run turns the server off."""

LOG_PATH = Path(".bertology") / "jobserver.log"

PRELOAD = (
    "numpy", "pandas", "pyarrow.parquet", "scipy.stats", "sklearn.metrics", "torch", "transformers",
    "transformers.modeling_utils", "transformers.models.auto.modeling_auto", "transformers.models.bert.modeling_bert",
    "zarr", "xarray", "dask.array", "matplotlib.pyplot", "spacy", "setproctitle", "bertology.workflow.cli",
)
"""Modules the server imports before it listens (each best-effort: one that fails to import is skipped)."""

IMPORT_TIME_PREFIXES = (
    "PYTHON", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "LD_",
    "MPL", "MATPLOTLIB", "XDG_", "KMP_", "GOMP_", "DASK_", "ZARR", "NUMBA", "SCIPY", "OPENBLAS_THREAD_TIMEOUT",
    "OPENBLAS_CORETYPE", "MKL_CBWR", "MKL_ENABLE",
)
"""Environment variables (by prefix) that the preloaded libraries read at import: a job whose value differs
from the server's runs in its own process."""

OFF = ("0", "off", "false", "no")  # values of SOCKET_ENV that turn the server off
_STARTUP_ENV = dict(os.environ)  # the server's environment before its imports (torch adds KMP_* variables, ...)
_THREAD_ENV = "OMP_NUM_THREADS"
log = logging.getLogger("bertology.workflow.jobserver")


def package_path() -> str:
    """The folder of the bertology package this process imports."""
    import bertology

    return str(Path(bertology.__file__).resolve().parent)


# --------------------------------------------------------------------------------------------------
# The server's side
# --------------------------------------------------------------------------------------------------

def refusal(request: dict[str, Any], env: dict[str, str] | None = None) -> str | None:
    """Why this server cannot run `request` as a fresh process would (None: it can)."""
    env = _STARTUP_ENV if env is None else env
    if request.get("executable") != sys.executable:
        return f"another Python ({request.get('executable')}, the server's is {sys.executable})"
    if request.get("package") != package_path():
        return f"another bertology ({request.get('package')}, the server's is {package_path()})"
    theirs = request.get("env") or {}
    differ = sorted(k for k in set(theirs) | set(env)
                    if k.startswith(IMPORT_TIME_PREFIXES) and theirs.get(k) != env.get(k))
    if differ:
        return f"variables read at import differ from the server's: {', '.join(differ)}"
    return None


#: set in the child when its job's end of the connection closed (the job was killed): the child then exits 130,
#: however its step ended (a write to the job's closed stderr can raise BrokenPipeError before the interrupt lands)
_JOB_GONE = threading.Event()


def _watch_job(conn: socket.socket) -> None:
    """In the child: when the job's end of the connection closes (the job was killed), interrupt the step."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    _JOB_GONE.set()
    os.kill(os.getpid(), signal.SIGINT)


def _run_child(request: dict[str, Any], fds: list[int], conn: socket.socket, closing: list[Any]) -> None:
    """The forked child: become the job's process, run its step, exit with its status (never returns)."""
    code = 1
    try:
        # its own process group, first (SIGINT is still ignored, as in the server): the terminal's Ctrl-C reaches
        # the job, which passes it on (submit), so the child gets it once
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")  # the job forwards its signals from now on
        _set_title(request["argv"])
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
    except (BrokenPipeError, ConnectionResetError):  # the same, seen as its connection or its stdio closing first
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
        os._exit(130 if _JOB_GONE.is_set() else code if isinstance(code, int) else 1)


def _set_title(argv: list[str]) -> None:
    """Name this process in ``ps`` and ``top`` by its step and wildcards: ``bertology train_model task=rte
    init=pretrained`` (a process title is cosmetic: without setproctitle it keeps the server's)."""
    with contextlib.suppress(ImportError):
        from setproctitle import setproctitle

        setproctitle(" ".join(filter(None, ["bertology", *argv[:1], _wildcards(argv)])))


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
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the jobs, which pass it to their children
    path = str(path)
    try:
        listener = _listen(path, modules)
    except BaseException as err:  # whatever ends it before it listens, the jobs waiting for it are told why at once
        serverfiles.mark_ended(path, f"the job server (pid {os.getpid()}) ended before it listened ({_why(err)})")
        raise
    if listener is None:
        return
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    serverfiles.listening(path)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    try:
        while not stopping and serverfiles.alive(parent):
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


def _listen(path: str, modules: tuple[str, ...]) -> socket.socket | None:
    """Import `modules`, then listen on the Unix socket `path` (None: threads run after the imports, so forking
    would not be safe; the jobs are told). Raises OSError when `path` is too long for a Unix socket, before the
    imports."""
    if not serverfiles.fits(path):  # before seconds of imports
        raise OSError(errno.ENAMETOOLONG, serverfiles.too_long(path))
    t0 = time.perf_counter()
    failed = preload(modules)  # SIGTERM ends the process at once until it serves (no job to wait for yet)
    log.info("preloaded %d modules in %.1f s%s", len(modules) - len(failed), time.perf_counter() - t0,
             f" (not importable: {', '.join(failed)})" if failed else "")
    if threading.active_count() > 1:
        log.warning("threads running after the imports (%s): not serving", threading.enumerate())
        serverfiles.mark_ended(path, f"the job server (pid {os.getpid()}) did not serve: threads ran after its "
                                     f"imports")
        return None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path + serverfiles.BOUND_SUFFIX)
        listener.listen(64)
        os.replace(path + serverfiles.BOUND_SUFFIX, path)  # jobs connect only once the server accepts
    except BaseException:
        listener.close()
        raise
    return listener


def _why(err: BaseException) -> str:
    """An exception in a few words: its type and message."""
    text = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


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
            _run_child(request, fds, conn, closing)  # it sends the job its pid
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
    if os.environ.get(SOCKET_ENV, "").lower() in OFF:
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


def start(parent: int, *, request_timeout: float = 10, modules: tuple[str, ...] = PRELOAD,
          socket_path: str | None = None) -> str | None:
    """Start a server for the jobs of process `parent`; exports and returns its socket path (None: no temporary
    directory has room for a socket's path, said in one line). request_timeout: how long the server waits for a
    connected job's request; modules: what it imports before it listens; socket_path: where it listens (default:
    in a new folder, :func:`bertology.workflow.serverfiles.new_folder`, made after removing those of runs that have
    ended). The server is watched (:func:`_watch_server`): one that ends before :func:`stop` is reaped at once,
    and its jobs and the terminal are told why."""
    folder = None
    if socket_path is None:
        serverfiles.remove_stale()
        socket_path = serverfiles.new_folder(parent)
        if socket_path is None:
            print(f"bertology: no job server: {serverfiles.too_long(Path(tempfile.gettempdir(), 'x' * 24))} in "
                  f"each temporary directory ({', '.join(serverfiles.socket_dirs())}); each job runs in its own "
                  f"process", file=sys.stderr)
            return None
        folder = os.path.dirname(socket_path)
    LOG_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG_PATH, "a") as logfile:
        proc = subprocess.Popen([sys.executable, "-m", "bertology.workflow.jobserver", "--socket", socket_path,
                                 "--parent", str(parent), "--request-timeout", str(request_timeout),
                                 "--preload", ",".join(modules)], stdin=subprocess.DEVNULL, stdout=logfile,
                                stderr=subprocess.STDOUT, cwd=os.getcwd(), env=dict(os.environ))
    serverfiles.mark_starting(socket_path, proc.pid)
    _SERVER.update(proc=proc, folder=folder, path=socket_path)
    threading.Thread(target=_watch_server, args=(proc, socket_path), name="bertology-jobserver", daemon=True).start()
    os.environ[SOCKET_ENV] = socket_path
    return socket_path


def _watch_server(proc: subprocess.Popen, path: str) -> None:
    """In the workflow's process: reap the server when it ends. One that ends before :func:`stop` (it failed
    before it listened, or was killed) leaves beside its socket the line its jobs say (they run in their own
    processes at once) and says it on the workflow's stderr."""
    code = proc.wait()
    if _SERVER.get("proc") is not proc:  # stopped by stop(): the workflow's end
        return
    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    when = " before it listened" if serverfiles.starting(path) else ""
    serverfiles.mark_ended(path, f"the job server (pid {proc.pid}) ended{when} ({how})")
    print(f"bertology: {serverfiles.ended(path)}; the jobs run in their own processes from now on (its log: "
          f"{LOG_PATH})", file=sys.stderr)


def stop() -> None:
    """End the server started by :func:`start` (``onsuccess``/``onerror``); no-op without one."""
    proc = _SERVER.pop("proc", None)
    folder = _SERVER.pop("folder", None)
    path = _SERVER.pop("path", None)
    os.environ.pop(SOCKET_ENV, None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=40)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    elif path:
        for leftover in (path + serverfiles.STARTING, path + serverfiles.ENDED):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bertology.workflow.jobserver", description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the Unix socket to listen on")
    ap.add_argument("--parent", type=int, required=True, help="serve until this process ends")
    ap.add_argument("--request-timeout", type=float, default=10, help="seconds to wait for a connected job's request")
    ap.add_argument("--preload", default=None,
                    help="the modules to import before listening, comma-separated (default: PRELOAD)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
    modules = PRELOAD if args.preload is None else tuple(filter(None, args.preload.split(",")))
    serve(args.socket, args.parent, modules=modules, request_timeout=args.request_timeout)
    folder = os.path.dirname(os.path.abspath(args.socket))
    if not serverfiles.alive(args.parent) and serverfiles.owned_by(folder, args.parent):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)  # its workflow was killed: nobody else will
    logging.shutdown()
    os._exit(0)  # not seconds of tearing down torch and the rest: the children are gone, the log is flushed


if __name__ == "__main__":
    main()
