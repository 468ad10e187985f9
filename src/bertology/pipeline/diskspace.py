"""Free disk space: what an attention store will need, checked before extraction starts, and a full disk
named in one line (the path, what it needed, what is free) instead of ``[Errno 28] No space left on device``.

The estimate: the store holds each example's n x n float16 maps (n its real length, at most max_length) for
every layer and head, Blosc-compressed; the NaN padding around them compresses to almost nothing. Measured by
``bench/bench_store_size.py`` (MiniLM, max_length 128, 256 validation examples each): the store's bytes are
0.99 (CoLA, mean length 11), 0.85 (MRPC, 53) and 0.83 (RTE, 65) times the real values' float16 bytes, i.e.
0.9%, 15.5% and 26.5% of the padded float16 size (the README's "7.8% of float32 pickles" is MRPC's 15.5% of
float16): the real lengths, not max_length, decide the size. (Measured on the unsharded layout; the sharded one
adds 20 bytes of shard index and checksum per chunk, +0.001% on MRPC train: README, "The attention store".)
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bertology.pipeline.errors import UserError

# Bytes on disk per real float16 attention value (2 bytes raw) in a store: the largest ratio measured by
# bench/bench_store_size.py (0.99 on CoLA's short sentences, where the per-example arrays weigh most), so the
# estimate errs on the side of asking for more.
STORE_RATIO = 0.99
FLOAT16_BYTES = 2


class DiskFullError(UserError, OSError):
    """Not enough free disk space for what a step writes; the message names the path, the need and what is free."""


def human(n: float) -> str:
    """Bytes as a short human-readable size (1.5 GB, 820 MB, 12 kB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def store_bytes(lengths: Iterable[int], layers: int, heads: int, max_length: int, *,
                ratio: float = STORE_RATIO) -> int:
    """Estimated bytes on disk of an attention store.

    lengths: (E,) the examples' real token counts (specials included), each capped at max_length; layers L,
    heads H. Returns sum_i min(n_i, max_length)^2 x L x H x 2 bytes x ratio (the measured compression).
    """
    n = np.minimum(np.asarray(list(lengths), dtype=np.int64), int(max_length))
    return int(np.ceil(float((n ** 2).sum()) * layers * heads * FLOAT16_BYTES * ratio))


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


def store_estimate(frame, model_path: str, max_length: int) -> int:
    """Estimated bytes of the attention store of `frame` (prepared rows) under the model at `model_path`:
    :func:`store_bytes` on the examples' tokenised lengths (the model's own tokenizer, truncated at max_length)
    and the model's layers and heads (read from its config, no weights loaded)."""
    from transformers import AutoConfig

    from bertology.models.encoding import encode
    from bertology.models.loading import load_tokenizer

    tokenizer = load_tokenizer(model_path)
    lengths = [len(ids) for ids in encode(tokenizer, frame, max_length)["input_ids"]]
    config = AutoConfig.from_pretrained(model_path, local_files_only=Path(model_path).is_dir(), trust_remote_code=False)
    return store_bytes(lengths, int(config.num_hidden_layers), int(config.num_attention_heads), max_length)


@contextlib.contextmanager
def store_space(output: str | Path, frame, model_path: str, max_length: int):
    """Around an extraction into `output`: before it starts, refuse in one line when the disk has less free
    space than the store still needs (its estimate less what a partial or earlier store already holds);
    while it runs, turn a full disk into one line naming the store, its need and what is free."""
    from bertology.store import partial_path

    needed = store_estimate(frame, model_path, max_length)
    written = dir_bytes(output) + dir_bytes(partial_path(output))
    check_free_space(output, max(needed - written, 0), what=f"its attention store of {len(frame)} examples",
                     fix="free some space, or lower attention.examples or data.max_length, or set attention.keepbits "
                         "(smaller, rounded stores)")
    try:
        yield needed
    except Exception as err:  # noqa: BLE001 - a full disk may arrive wrapped (zarr, the writer thread)
        if isinstance(err, DiskFullError) or not is_disk_full(err):
            raise
        raise DiskFullError(disk_full_message(err, output, needed=needed)) from err
