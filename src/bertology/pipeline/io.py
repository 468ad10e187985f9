"""Writing files atomically: a killed job never leaves half a file where a finished one is expected.

:func:`atomic_write` is the one temp-file-and-rename: it yields a temporary path in the destination's
directory (same file system, so the rename is atomic), and when the block ends without an error flushes
the file to disk (fsync) and moves it into place with ``os.replace``; on an error the temporary file is
removed and the destination is left as it was. The helpers below write one file type each through it.
(The Zarr stores and the fine-tuned model directories are written by their own modules.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and pandas are imported by the writers that use them: writing JSON imports neither
    import numpy as np
    import pandas as pd


def _fsync(path: Path) -> None:
    """Flush a written file (or a directory's entries) to disk; file systems that cannot are let be."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_write(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """``with atomic_write(path) as tmp: write(tmp)``: `path` appears complete or not at all.

    tmp is ``<dir>/.<name>.<pid>.tmp<suffix>`` beside `path` (parent directories created); give `suffix` for
    writers that choose the format by the file name (``np.savez`` appends ``.npz`` otherwise). The hidden,
    ``.tmp`` name keeps globs for ``*.json``/``*.csv`` from seeing an unfinished file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{suffix}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent)


def write_text(text: str, path: str | Path) -> Path:
    """Write UTF-8 text atomically (HTML pages, Markdown, CoNLL-U)."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(obj: Any, path: str | Path, *, indent: int | None = 2, default=None, end: str = "\n") -> Path:
    """Write `obj` as JSON atomically: ``json.dumps(obj, indent=indent, default=default) + end``."""
    return write_text(json.dumps(obj, indent=indent, default=default) + end, path)


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a CSV table (no index) atomically."""
    with atomic_write(path) as tmp:
        df.to_csv(tmp, index=False)
    return Path(path)


def write_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a parquet table (no index) atomically."""
    with atomic_write(path) as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)


def write_npz(arrays: Mapping[str, np.ndarray], path: str | Path) -> Path:
    """Write named arrays as a compressed ``.npz`` atomically (``np.savez_compressed``)."""
    import numpy as np

    with atomic_write(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, **arrays)
    return Path(path)


def write_png(fig, path: str | Path, dpi: int) -> Path:
    """Write a matplotlib figure as PNG atomically (the figure stays open)."""
    with atomic_write(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    return Path(path)


def write_torch(obj: Any, path: str | Path) -> Path:
    """Write `obj` with ``torch.save`` atomically (checkpoints, the pattern classifier)."""
    import torch

    with atomic_write(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)
