"""What an attention store will need on disk, checked before extraction starts (the disk-full helpers are the
ground's, :mod:`bertology.pipeline.diskspace`).

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
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bertology.pipeline.diskspace import DiskFullError, check_free_space, dir_bytes, disk_full_message, is_disk_full

# Bytes on disk per real float16 attention value (2 bytes raw) in a store: the largest ratio measured by
# bench/bench_store_size.py (0.99 on CoLA's short sentences, where the per-example arrays weigh most), so the
# estimate errs on the side of asking for more.
STORE_RATIO = 0.99
FLOAT16_BYTES = 2


def store_bytes(lengths: Iterable[int], layers: int, heads: int, max_length: int, *,
                ratio: float = STORE_RATIO) -> int:
    """Estimated bytes on disk of an attention store.

    lengths: (E,) the examples' real token counts (specials included), each capped at max_length; layers L,
    heads H. Returns sum_i min(n_i, max_length)^2 x L x H x 2 bytes x ratio (the measured compression).
    """
    n = np.minimum(np.asarray(list(lengths), dtype=np.int64), int(max_length))
    return int(np.ceil(float((n ** 2).sum()) * layers * heads * FLOAT16_BYTES * ratio))


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
