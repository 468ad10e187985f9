"""The ``bertology`` command: a job of a local Snakemake run goes to the job server (:func:`submit`; the server,
:mod:`bertology.workflow.jobserver`, runs its step in a child of a process that has imported everything already);
otherwise, or when the server refuses it or is gone, the step runs here (:func:`bertology.workflow.cli.main`).
This module imports nothing heavy itself."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from bertology.workflow import serverfiles
from bertology.workflow.jobserver import OFF, SOCKET_ENV, package_path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    code = submit(argv)
    if code is None:
        from bertology.workflow.cli import main as run_here

        code = run_here(argv)
    return code


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


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCONT)
"""The signals a job passes to its child, which lives in its own process group: the terminal's signals reach
only the job."""


def submit(argv: list[str], *, prog: str | None = None) -> int | None:
    """Run ``bertology <argv>`` in a child of the job server: its exit status, or None when there is no
    server (no socket named, none listening, it ended: one line on stderr says so) or it refused the job (then run
    it in this process). A signal of :data:`FORWARDED` reaches the child once, even one that comes before its pid;
    Ctrl-Z (SIGTSTP) stops the child with the job."""
    path = os.environ.get(SOCKET_ENV, "")
    if not path or path.lower() in OFF:
        return None
    why = _wait_while_starting(path)
    if why:
        print(f"bertology: {why}; running this job in its own process", file=sys.stderr)
        return None
    child: list[int] = []
    caught: list[int] = []  # the signals that came before the child's pid

    def forward(signum, _frame):
        if not child:
            caught.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child[0], signum)

    def suspend(_signum, _frame):
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)  # SIGCONT (fg, bg) resumes this process, which resumes the child

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, suspend)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    buf = bytearray()
    try:
        conn.settimeout(5)
        conn.connect(path)
        request = {"argv": argv, "prog": prog or sys.argv[0], "cwd": os.getcwd(), "env": dict(os.environ),
                   "executable": sys.executable, "package": package_path()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        # the reply (the child's pid, once it is in its own process group, or a refusal) comes in milliseconds;
        # a job that gives up waiting closes the connection, which interrupts a child forked too late
        # (_watch_job) before it runs the step beside this process
        conn.settimeout(60)
        reply = _read_line(conn, buf)
    except OSError:
        reply = None
    if not reply or "pid" not in reply:
        conn.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in [sig for sig in caught if sig != signal.SIGCONT][:1]:  # this process runs the job: its own
            signal.raise_signal(sig)
        return None
    child.append(int(reply["pid"]))
    for sig in dict.fromkeys(caught):
        forward(sig, None)
    conn.settimeout(None)
    while True:
        try:
            status = _read_line(conn, buf)
            break
        except InterruptedError:
            continue
    conn.close()
    if status is None:
        print(f"bertology: the job server ended before the job's process ({child[0]}) did", file=sys.stderr)
        return 1
    return int(status["exit"])


def _wait_while_starting(path: str, timeout: float = 180) -> str | None:
    """Wait for a server that is still importing (its marker names its pid) to listen on `path`: on a few cores
    the job would otherwise import the same libraries beside it, both at half speed. Why the job must run in its
    own process (the server ended before it listened, or ended since), or None (it listens, or there is none)."""
    deadline = time.monotonic() + timeout
    pid = None
    while time.monotonic() < deadline:
        why = serverfiles.ended(path)
        if why or os.path.exists(path):
            return why
        pid = serverfiles.starting(path)
        if pid is None:  # no marker: it listens now, or it said why it ended, or there is no server
            return serverfiles.ended(path)
        if not serverfiles.alive(pid):
            return serverfiles.ended(path) or f"the job server (pid {pid}) ended before it listened"
        time.sleep(0.05)
    return f"the job server (pid {pid}) did not listen within {timeout:.0f} s"


if __name__ == "__main__":
    sys.exit(main())
