"""The job server's files and the state of its processes: a folder whose socket path fits AF_UNIX's limit, who
owns it, the marker that says the server is still importing, the note that says why it is gone, and whether a
process still runs (a zombie does not).

A server (:mod:`bertology.workflow.jobserver`) listens on ``jobs.sock`` in a folder :func:`new_folder` makes in
the first of the temporary directory, ``$XDG_RUNTIME_DIR`` and ``/tmp`` where the socket's path fits
(:data:`SOCKET_PATH_MAX`), named ``bertology-jobs-<owner pid>-*`` and holding ``owner.json`` (the workflow
process's pid, host and PID namespace). Beside the socket, ``jobs.sock.starting`` names the server's pid while it
imports, and ``jobs.sock.ended`` says in one line why the server is gone (it failed before it listened, or it
ended while the workflow still ran). :func:`remove_stale` removes the folders whose owner has ended (a run killed
before it could remove its own), never one of a process that still runs, nor one it cannot tell the owner of.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

SOCKET_NAME = "jobs.sock"
PREFIX = "bertology-jobs-"
OWNER = "owner.json"
STARTING = ".starting"  # beside the socket while the server imports: its pid
ENDED = ".ended"  # beside the socket once the server is gone without being stopped: one line, why
BOUND_SUFFIX = ".tmp"  # the server binds <socket>.tmp, then renames it to the socket once it listens
SOCKET_PATH_MAX = (108 if sys.platform.startswith("linux") else 104) - 1
"""The longest path in bytes a Unix socket can be bound to (``sun_path`` holds it and its NUL)."""


def fits(path: str | os.PathLike) -> bool:
    """Whether the server can bind `path` (and the name it binds first, `path` + :data:`BOUND_SUFFIX`)."""
    return len(os.fsencode(os.fspath(path) + BOUND_SUFFIX)) <= SOCKET_PATH_MAX


def too_long(path: str | os.PathLike) -> str:
    """One line saying why `path` cannot be a Unix socket's path."""
    size = len(os.fsencode(os.fspath(path) + BOUND_SUFFIX))
    return (f"the socket path {os.fspath(path)}{BOUND_SUFFIX} is {size} bytes, over the {SOCKET_PATH_MAX} a Unix "
            f"socket allows")


def alive(pid: int) -> bool:
    """Whether process `pid` exists and has not ended: a zombie (ended, not yet reaped by its parent) has."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # it ended just now (Linux), or there is no /proc to tell a zombie by (macOS: it counts)
        return not os.path.isdir("/proc/self")
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def owner_record(pid: int) -> dict[str, object]:
    """What names the owner of a folder: its pid, this host and this PID namespace (a pid means nothing in another)."""
    try:
        namespace: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    return {"pid": pid, "host": socket.gethostname(), "pidns": namespace}


def socket_dirs() -> list[str]:
    """Where a server's folder may go, in order: the temporary directory, ``$XDG_RUNTIME_DIR``, ``/tmp``."""
    out: list[str] = []
    for d in (tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if d and os.path.isdir(d) and os.path.realpath(d) not in map(os.path.realpath, out):
            out.append(d)
    return out


def new_folder(owner: int, dirs: list[str] | None = None) -> str | None:
    """Make a folder owned by process `owner` in the first of `dirs` (default :func:`socket_dirs`) where its socket
    fits; the socket's path in it, or None when it fits in none."""
    for d in socket_dirs() if dirs is None else dirs:
        # mkdtemp's name: the prefix, the pid and 8 random characters
        if not fits(os.path.join(d, f"{PREFIX}{owner}-{'x' * 8}", SOCKET_NAME)):
            continue
        folder = tempfile.mkdtemp(prefix=f"{PREFIX}{owner}-", dir=d)
        Path(folder, OWNER).write_text(json.dumps(owner_record(owner)))
        return os.path.join(folder, SOCKET_NAME)
    return None


def owned_by(folder: str | os.PathLike, pid: int) -> bool:
    """Whether `folder` records process `pid` of this host and PID namespace as its owner."""
    try:
        record = json.loads(Path(folder, OWNER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record == owner_record(pid)


def remove_stale(dirs: list[str] | None = None) -> list[str]:
    """Remove the server folders in `dirs` (default :func:`socket_dirs`) whose owner, a process of this host and
    PID namespace, has ended; the folders removed. A folder without a readable owner, of another user, host or
    namespace, or whose owner still runs is left as it is."""
    removed = []
    for d in socket_dirs() if dirs is None else dirs:
        for folder in sorted(Path(d).glob(f"{PREFIX}*")):
            try:
                if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
                    continue
                record = json.loads((folder / OWNER).read_text())
                pid = int(record["pid"])
            except (OSError, ValueError, TypeError, KeyError):
                continue
            if record == owner_record(pid) and not alive(pid):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(str(folder))
    return removed


def mark_starting(path: str, pid: int) -> None:
    """Name the server `pid` beside its socket `path` while it imports."""
    Path(path + STARTING).write_text(str(pid))


def starting(path: str) -> int | None:
    """The pid of the server still importing for socket `path` (None: no marker, it listens or is gone)."""
    try:
        return int(Path(path + STARTING).read_text() or 0) or None
    except (OSError, ValueError):
        return None


def listening(path: str) -> None:
    """The server listens on `path`: its marker goes."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path + STARTING)


def mark_ended(path: str, why: str) -> None:
    """Say beside socket `path` why its server is gone (the first reason written stays), and remove its marker
    and socket. Never raises (the folder may be gone)."""
    with contextlib.suppress(OSError):
        fd = os.open(path + ENDED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(" ".join(why.split()))
    for leftover in (path + STARTING, path):
        with contextlib.suppress(OSError):
            os.unlink(leftover)


def ended(path: str) -> str | None:
    """Why the server of socket `path` is gone, as it said (None: it did not say)."""
    try:
        return Path(path + ENDED).read_text().strip() or None
    except OSError:
        return None
