"""Free disk space: a full disk named in one line (the path, what it needed, what is free) instead of
``[Errno 28] No space left on device``, and a check of the free space before a step writes. What a step will
need is the step's own estimate (an attention store's: :mod:`bertology.attention.store_size`).
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from bertology.pipeline.errors import UserError

class DiskFullError(UserError, OSError):
    """Not enough free disk space for what a step writes; the message names the path, the need and what is free."""


def human(n: float) -> str:
    """Bytes as a short human-readable size (1.5 GB, 820 MB, 12 kB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def free_bytes(path: str | Path) -> tuple[int, Path]:
    """Free bytes (for this user) on the filesystem that holds `path`, and the existing directory measured."""
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    return int(shutil.disk_usage(where).free), where


def dir_bytes(path: str | Path) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def check_free_space(path: str | Path, needed: int, *, what: str, fix: str) -> None:
    """Raise :class:`DiskFullError` when the filesystem of `path` has less than `needed` bytes free."""
    free, where = free_bytes(path)
    if free < needed:
        raise DiskFullError(f"not enough free disk space for {path}: {what} needs about {human(needed)}, "
                            f"{human(free)} is free on the filesystem of {where}; {fix}")


def is_disk_full(err: BaseException) -> bool:
    """Whether `err` (or an exception it was raised from) is a full disk or an exceeded quota."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        err = err.__cause__ or err.__context__
    return False


def disk_full_message(err: BaseException, path: str | Path | None = None, *, needed: int | None = None) -> str:
    """One line for a full disk while writing `path` (default: the file the OS names, else the working
    directory), with the file the OS names, what was needed (when known) and what is free there."""
    filename = None
    e: BaseException | None = err
    while e is not None and filename is None:
        filename = getattr(e, "filename", None)
        e = e.__cause__ or e.__context__
    target = path if path is not None else (filename or Path.cwd())
    free, where = free_bytes(target)
    need = f", which needs about {human(needed)}" if needed is not None else ""
    file = f" ({filename})" if filename and str(filename) != str(target) else ""
    return (f"the disk is full while writing {target}{file}{need}: {human(free)} is free on the filesystem of "
            f"{where}; free some space and run again (completed outputs are kept; extraction and fine-tuning resume where they stopped)")
