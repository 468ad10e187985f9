"""Extraction: batched eager forward passes that fill the attention store chunk by chunk.

Per chunk of the sample (in sample order): tokenise (with offsets, aligned to the spaCy words), sort the
chunk's examples by length, run batches padded to their own longest example with ``output_attentions=True``
and copy each example's n x n maps, cast to float16 and nothing else, straight into a NaN-filled
(e, L, H, max_length, max_length) chunk buffer, then compress and write the chunk (one shard file of
`attention`, one inner chunk per example: :func:`bertology.store.write_chunk`) with Blosc on as many
threads as torch has (:func:`bertology.store.blosc_threads`). On a CPU the write follows the chunk's forward
passes (both use every core; a writer running beside the forward only made the two wait on each other:
on 2 cores and 1536 MRPC pairs it reached 0.83x of a plain forward's examples/s, writing after the forward
0.90x; bench/bench_extract.py measures 0.93x on all 3668 train pairs); on a GPU a writer
thread writes the chunk while the next one is computed. Memory is one chunk buffer (two on a GPU) whatever
the number of examples, and a killed extraction loses at most the chunk in flight (the chunk being written
is counted only once on disk; see :func:`bertology.store.write_chunk`).

With the norm analyses on (``value_norms=True``), :class:`bertology.norms.values.Capture` is entered around the
forward passes: its hooks on the value projections give the value norms ||f_h(x_j)|| (B, L, H, N) of the same
forward, copied per example into a NaN-filled (e, L, H, max_length) float32 buffer written as the store's
`value_norm` with the chunk.

Glossary: E examples, e examples of one chunk, B of one batch, L layers, H heads, Q = K = max_length,
N longest real length in a batch.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology import store as st
from bertology.attention.annotate import WordSpans, align_words
from bertology.pipeline.config import AttentionConfig, ConfigError
from bertology.pipeline.errors import InputError, snakemake_command

log = logging.getLogger(__name__)

def chunk_inputs(tokenizer, frame: pd.DataFrame, spans: WordSpans, max_length: int) -> dict[str, np.ndarray]:
    """Tokenise one chunk of the sample and align its wordpieces to the spaCy words.

    frame: e prepared rows. Returns input_ids (e, Q) int32 padded with the pad id, token_type_ids (e, Q)
    int8 (the tokenizer's where the model is given them, :func:`bertology.models.encoding.gives_token_type_ids`;
    0 elsewhere), segment (e, Q) int8 (0/1 from the tokenizer's sequence
    ids, -1 padding: :func:`bertology.models.encoding.segments`), word_ids (e, Q) int16 (-1 for specials/padding),
    length (e,) int16.
    """
    from bertology.models.encoding import encode, segments, texts

    enc = encode(tokenizer, frame, max_length, offsets=True)
    pair = texts(frame)[1] is not None
    e, Q = len(frame), int(max_length)
    out = {"input_ids": np.full((e, Q), tokenizer.pad_token_id, np.int32),
           "token_type_ids": np.zeros((e, Q), np.int8),
           "segment": np.full((e, Q), -1, np.int8),
           "word_ids": np.full((e, Q), -1, np.int16),
           "length": np.zeros(e, np.int16)}
    idx = frame["idx"].to_numpy(np.int64)
    for i in range(e):
        ids = enc["input_ids"][i]
        n = len(ids)
        out["input_ids"][i, :n] = ids
        if "token_type_ids" in enc:
            out["token_type_ids"][i, :n] = enc["token_type_ids"][i]
        out["segment"][i, :n] = segments(enc.sequence_ids(i), pair)
        out["length"][i] = n
        starts, ends, segs = spans.spans(int(idx[i]))
        out["word_ids"][i, :n] = align_words(np.asarray(enc["offset_mapping"][i]), enc.sequence_ids(i),
                                             starts, ends, segs, claim=spans.claims(int(idx[i])))
    return out


def length_batches(length: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """The positions sorted by length (longest first, so the peak memory shows at once), cut into
    ceil(e / batch_size) batches of near-equal size (at most batch_size each).

    length: (e,). Returns index arrays.
    """
    order = np.argsort(-np.asarray(length), kind="stable")
    return [b for b in np.array_split(order, -(-len(order) // max(int(batch_size), 1))) if len(b)] if len(order) else []


def run_batches(model, inputs: dict[str, np.ndarray], *, token_types: bool, batch_size: int, device: str,
                out: np.ndarray, capture=None, norms_out: np.ndarray | None = None) -> None:
    """Forward passes over one chunk's examples in length-sorted batches; float16 maps written into `out`.

    inputs: as returned by :func:`chunk_inputs` (e examples); token_types: whether the model is given their
    token_type_ids (:func:`bertology.models.encoding.gives_token_type_ids` of the tokenizer that made them; else
    it gets none); out: (e, L, H, Q, Q) float16, NaN-filled; each
    example's (L, H, n, n) block is set to the eager forward's post-softmax attention cast to float16 (round to
    nearest), its padding left NaN. capture: a :class:`bertology.norms.values.Capture` entered on `model` (its
    hooks take the value norms in the same forward pass); then norms_out (e, L, H, Q) float32, NaN-filled, gets
    each example's (L, H, n) value norms ||f_h(x_j)||.
    """
    import torch

    length = inputs["length"].astype(np.int64)
    buf = torch.from_numpy(out)
    nbuf = None if norms_out is None else torch.from_numpy(norms_out)
    with torch.inference_mode():
        for pos in length_batches(length, batch_size):
            N = int(length[pos].max())
            ids = torch.from_numpy(inputs["input_ids"][pos, :N].astype(np.int64)).to(device)
            mask = (torch.arange(N)[None, :] < torch.from_numpy(length[pos])[:, None]).long().to(device)
            kwargs = {}
            if token_types:
                tt = inputs["token_type_ids"][pos, :N].astype(np.int64)
                kwargs["token_type_ids"] = torch.from_numpy(tt).to(device)
            res = model(input_ids=ids, attention_mask=mask, output_attentions=True, **kwargs)
            if res.attentions is None or res.attentions[0] is None:
                raise RuntimeError("the model returned no attention weights; it must be loaded with "
                                   "attn_implementation='eager'")
            for layer, a in enumerate(res.attentions):  # a: (B, H, N, N) float32
                if a.device.type != "cpu":  # one cast and one transfer per layer, not one per example
                    a = a.to(torch.float16).cpu()
                for j, p in enumerate(pos):
                    n = int(length[p])
                    buf[p, layer, :, :n, :n].copy_(a[j, :, :n, :n])  # the float16 cast, in the copy
            if nbuf is not None:
                norms = capture.value_norms().cpu()                  # (B, L, H, N) float32
                for j, p in enumerate(pos):
                    n = int(length[p])
                    nbuf[p, :, :, :n].copy_(norms[j, :, :, :n])


class ChunkWriter:
    """Writes filled chunk buffers to the store: in a thread of its own while the next chunk is computed
    (`background`, for a GPU forward: the CPU is free meanwhile), or at once in the caller's thread (on a CPU,
    where the forward already keeps every core busy and a concurrent writer only makes the two wait on
    each other).

    Buffers circulate between a free pool and the writer (background: two buffers, memory = 2 chunks; else
    one); a buffer comes back NaN-filled (the writer resets the n x n blocks it was given after writing: the
    padding was never touched). An error in a background writer is raised in the caller at its next
    :meth:`buffer`, :meth:`submit` or :meth:`close`.
    """

    def __init__(self, root, shape: tuple[int, ...], *, background: bool = True,
                 on_chunk: Callable[[int], None] | None = None):
        self.root, self.on_chunk, self.error = root, on_chunk, None
        self.free: queue.Queue = queue.Queue()
        for _ in range(2 if background else 1):
            self.free.put(np.full(shape, np.nan, np.float16))
        self.todo: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="store-writer", daemon=True) if background else None
        if self.thread is not None:
            self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.todo.get()
            if item is None:
                return
            self._write(*item)

    def _write(self, chunk: int, att: np.ndarray, rest: dict[str, np.ndarray]) -> None:
        try:
            if self.error is None:
                e = len(rest["length"])
                st.write_chunk(self.root, chunk, dict(rest, attention=att[:e]))
                if self.on_chunk is not None:
                    self.on_chunk(chunk)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller
            self.error = err
        finally:
            if self.error is None:
                for i, n in enumerate(rest["length"]):
                    att[i, :, :, :n, :n] = np.nan
            else:
                att.fill(np.nan)
            self.free.put(att)

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def buffer(self) -> np.ndarray:
        buf = self.free.get()
        self._check()
        return buf

    def submit(self, chunk: int, att: np.ndarray, rest: dict[str, np.ndarray]) -> None:
        self._check()
        if self.thread is None:
            self._write(chunk, att, rest)
            self._check()
        else:
            self.todo.put((chunk, att, rest))

    def close(self) -> None:
        self.stop()
        self._check()

    def stop(self) -> None:
        """End the writer thread (after the chunks already submitted); no error raised."""
        if self.thread is not None and self.thread.is_alive():
            self.todo.put(None)
            self.thread.join()


def special_token_ids(tokenizer) -> dict[str, int | None]:
    """The tokenizer's own [CLS]-like, [SEP]-like and padding ids (bos/eos where it names no cls/sep).

    RoBERTa: <s>, </s>, <pad>; BERT: [CLS], [SEP], [PAD]. The analyses find the special positions from these
    (bertology.store.SpecialTokens), never from hard-coded ids.
    """
    def first(*names: str) -> int | None:
        ids = [getattr(tokenizer, n, None) for n in names]
        return next((int(i) for i in ids if i is not None), None)

    out = {"cls_token_id": first("cls_token_id", "bos_token_id"), "sep_token_id": first("sep_token_id", "eos_token_id"),
           "pad_token_id": first("pad_token_id")}
    if out["sep_token_id"] is None or out["pad_token_id"] is None:
        raise InputError(f"the tokenizer {type(tokenizer).__name__} names no sep/eos or no pad token: bertology needs "
                         f"them to find the text boundaries and padding")
    return out


def store_attrs(*, model: str, model_path: str, variant: str, task: str, attention: AttentionConfig, seed: int,
                max_length: int, tokenizer, layers: int, heads: int, example_idx: np.ndarray,
                causal: bool = False, geometry: dict[str, list] | None = None) -> dict[str, Any]:
    """The store's attributes: identity (what it holds) + provenance; config_hash covers the identity.

    model: the config `model`; model_path: what was loaded (resolved name or fine-tuned directory);
    attention: the `attention` section; seed: data.seed; max_length: data.max_length; causal: the model is a
    decoder (:func:`bertology.models.kinds.model_kind`): row t of every map covers keys 0..t only; geometry: the heads'
    key/value groups and the layers' windows (:func:`bertology.models.kinds.attention_geometry`).
    """
    from bertology import __version__
    from bertology.pipeline.config import config_hash
    from bertology.models.loading import weights_fingerprint

    fingerprint = weights_fingerprint(model_path) if Path(model_path).is_dir() else f"hub:{model_path}"
    examples = attention.examples
    precision = st.precision_attrs(attention.keepbits)
    attrs: dict[str, Any] = {
        "model": str(model), "variant": variant, "task": task, "split": attention.split,
        "examples": None if examples is None else int(examples), "seed": int(seed), "max_length": int(max_length),
        "weights_fingerprint": fingerprint, "sample_hash": st.sample_hash(example_idx),
        "keepbits": precision["keepbits"],
        "spacy_model": attention.spacy_model, **special_token_ids(tokenizer),
        "layers": int(layers), "heads": int(heads), "n_examples": int(len(example_idx)),
    }
    attrs["config_hash"] = config_hash(attrs)
    attrs.update({"bertology_version": __version__, "model_path": str(model_path), "causal": bool(causal),
                  **(geometry or {}), **precision})
    return attrs


def extract_store(output: str | Path, *, frame: pd.DataFrame, words: pd.DataFrame, model: str, model_path: str,
                  variant: str, task: str, attention: AttentionConfig, seed: int, max_length: int,
                  device: str | None = None, progress: bool = True,
                  on_chunk: Callable[[int], None] | None = None,
                  background_writer: bool | None = None, value_norms: bool = False) -> dict[str, Any]:
    """Extract (or resume, or reuse) the attention store of one task and variant.

    frame: the attention sample (results/data/{task}/sample.parquet), E rows in store order; words:
    its words.parquet. model: the config `model` (recorded); model_path: what to load, the resolved
    `model` or a fine-tuned directory (bertology.models.loading.load_encoder); attention: the `attention`
    section; seed: data.seed (recorded); device: None = a GPU if there is one. Writes to
    ``{output}.partial`` chunk by chunk, in sample order, each as soon as its examples are computed (sorted
    by length within the chunk), and renames it to `output` when complete; an interrupted extraction resumes
    from its last complete chunk. on_chunk(c) is called (in the writer) after chunk c is on disk.
    background_writer: write each chunk in a thread of its own while the next is computed (None: on a GPU
    only; see :class:`ChunkWriter`). value_norms: also the store's `value_norm` (E, L, H, Q) float32, the value norms
    ||f_h(x_j)|| taken by :class:`bertology.norms.values.Capture` in the same forward passes (ignored, with a log
    line, on a model whose attention blocks it cannot find); a complete store without them is then re-extracted.
    Returns stats: n_examples, chunks_computed, seconds, cpu_seconds, examples_per_s, bytes, reused, value_norms.
    """
    import torch
    import zarr
    from tqdm import tqdm

    from bertology.models.encoding import gives_token_type_ids
    from bertology.models.loading import load_encoder, load_tokenizer
    from bertology.models.kinds import attention_geometry, model_kind

    output = Path(output)
    batch_size, chunk_size = attention.batch_size, attention.chunk_size
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = load_tokenizer(model_path)
    encoder = load_encoder(model_path, device=device)
    cfg = encoder.config
    capture = None
    if value_norms:
        from bertology.norms.values import Capture, NormsUnsupported

        try:
            capture = Capture(encoder)
        except NormsUnsupported as err:
            log.info("no value norms in %s: %s", output, str(err).split("; leave")[0])
    L, H = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
    if max_length > int(getattr(cfg, "max_position_embeddings", max_length)):
        raise ConfigError(f"data.max_length={max_length} exceeds the model's max_position_embeddings "
                         f"{cfg.max_position_embeddings}; lower data.max_length")
    example_idx = frame["idx"].to_numpy(np.int64)
    E = len(example_idx)
    attrs = store_attrs(model=model, model_path=model_path, variant=variant, task=task, attention=attention, seed=seed,
                        max_length=max_length, tokenizer=tokenizer, layers=L, heads=H, example_idx=example_idx,
                        causal=model_kind(cfg) == "decoder", geometry=attention_geometry(cfg))
    identity = {k: attrs[k] for k in st.IDENTITY_ATTRS}
    if output.exists():
        try:
            ds = st.open_store(output, expect=identity, check_rows=False)
            if capture is not None and "value_norm" not in ds.variables:
                raise st.StoreError(f"{output} holds no value norms and they are asked (analysis.norms.enabled)")
            log.info("%s is complete and matches the request: reused, nothing extracted", output)
            return {"n_examples": E, "chunks_computed": 0, "seconds": 0.0, "examples_per_s": float("nan"),
                    "bytes": dir_bytes(output), "reused": True, "value_norms": "value_norm" in ds.variables}
        except st.StoreError as err:
            log.warning("replacing %s: %s", output, err)
            import shutil

            shutil.rmtree(output)
    spans = WordSpans(words)
    lost = [int(i) for i in example_idx if int(i) not in spans]
    if lost:
        raise InputError(f"the words table has no words for example_idx {lost[:5]}: it does not belong to this "
                         f"sample; re-create it (`{snakemake_command(forcerun=('annotate_words',))}`)")
    partial = st.partial_path(output)
    attrs_full = dict(attrs, chunk_size=int(chunk_size), n_chunks=-(-E // chunk_size), codec=st.ATTENTION_CODEC,
                      layout=st.LAYOUT, value_norms=capture is not None)
    resumed = st.resume_point(partial, attrs_full)
    if resumed is None:
        root, done = st.create_store(partial, example_idx=example_idx, layers=L, heads=H, max_length=max_length,
                                     chunk_size=chunk_size, attrs=attrs, value_norms=capture is not None), 0
    else:
        root, done = resumed
    n_chunks = int(root.attrs["n_chunks"])
    Q = int(max_length)
    if background_writer is None:
        background_writer = torch.device(device).type != "cpu"
    writer = ChunkWriter(root, (chunk_size, L, H, Q, Q), background=background_writer, on_chunk=on_chunk)
    t0, c0 = time.perf_counter(), time.process_time()
    computed = 0
    bar = tqdm(total=E, initial=min(done * chunk_size, E), desc=f"{task}/{variant}", unit="ex",
               disable=not progress, mininterval=1.0, smoothing=0.1)
    try:
        with zarr.config.set({"array.write_empty_chunks": True}), st.blosc_threads(torch.get_num_threads()), \
                (capture if capture is not None else contextlib.nullcontext()):
            for c in range(done, n_chunks):
                rows = frame.iloc[c * chunk_size:(c + 1) * chunk_size]
                inputs = chunk_inputs(tokenizer, rows, spans, max_length)
                buf = writer.buffer()
                if capture is not None:   # small (Q times smaller than the maps): a fresh one per chunk
                    inputs["value_norm"] = np.full((len(rows), L, H, Q), np.nan, np.float32)
                run_batches(encoder, inputs, token_types=gives_token_type_ids(tokenizer), batch_size=batch_size,
                            device=device, out=buf[:len(rows)], capture=capture, norms_out=inputs.get("value_norm"))
                writer.submit(c, buf, inputs)
                computed += 1
                bar.update(len(rows))
            writer.close()
    finally:
        bar.close()
        writer.stop()
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    n_done = min((n_chunks - done) * chunk_size, E - done * chunk_size)
    st.finalize(root, partial, output)
    stats = {"n_examples": E, "chunks_computed": computed, "seconds": seconds, "cpu_seconds": cpu_seconds,
             "examples_per_s": n_done / max(seconds, 1e-9), "bytes": dir_bytes(output), "reused": False,
             "value_norms": capture is not None}
    log.info("%s: %d examples (%d chunks computed) in %.1f s, %.1f examples/s, %.1f kB/example on disk",
             output, E, computed, seconds, stats["examples_per_s"], stats["bytes"] / max(E, 1) / 1e3)
    return stats


def dir_bytes(path: str | Path) -> int:
    """Bytes on disk of the files under `path` (apparent sizes)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def write_probe_store(output: str | Path, *, tokens: np.ndarray, maps: np.ndarray, model: str, model_path: str,
                      variant: str, task: str, seed: int, tokenizer, causal: bool = True,
                      geometry: dict[str, list] | None = None) -> Path:
    """An attention store of maps computed elsewhere (the decoder probe's sequences of token ids, which are no
    text of a task): the same layout, attributes and checks as :func:`extract_store`'s, split ``probe``, one chunk.

    tokens: (E, T) int token ids, every one real (length T); maps: (E, L, H, T, T) float attention. Words: none
    (``word_ids`` -1), one segment. Written to a partial store and moved into place (:func:`bertology.store.finalize`).
    """
    output = Path(output)
    tokens = np.asarray(tokens, dtype=np.int64)
    E, T = tokens.shape
    _, L, H, _, _ = maps.shape
    attention = AttentionConfig(split="probe", examples=None, batch_size=E, chunk_size=E, spacy_model="", keepbits=None,
                                word_models=())
    attrs = store_attrs(model=model, model_path=model_path, variant=variant, task=task, attention=attention,
                        seed=seed, max_length=T, tokenizer=tokenizer, layers=L, heads=H,
                        example_idx=np.arange(E), causal=causal, geometry=geometry)
    partial = st.partial_path(output)
    root = st.create_store(partial, example_idx=np.arange(E), layers=L, heads=H, max_length=T, chunk_size=E,
                           attrs=attrs)
    st.write_chunk(root, 0, {"attention": np.asarray(maps, dtype=np.float16),
                             "input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
                             "segment": np.zeros_like(tokens), "word_ids": np.full_like(tokens, -1),
                             "length": np.full(E, T, dtype=np.int64)})
    if output.exists():
        import shutil

        shutil.rmtree(output)
    return st.finalize(root, partial, output)
