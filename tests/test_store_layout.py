"""The store's layout: one shard file per example chunk, one inner chunk per example. A map or an
example is decompressed alone, reductions read each example cropped to its length, stores of the earlier layout
(`attention` chunked along `example` only) are read with the same checks, and a missing or damaged shard or
inner chunk is one line naming it and the fix."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bertology import store as st
from tests.builders.store import write_store

E, L, H, Q, CHUNK = 10, 2, 3, 12, 4


def synthetic(seed: int = 0) -> dict[str, np.ndarray]:
    """Softmax maps of random logits inside random lengths (3..Q, one of them Q), NaN outside."""
    rng = np.random.default_rng(seed)
    length = rng.integers(3, Q + 1, size=E).astype(np.int16)
    length[3] = Q
    att = np.full((E, L, H, Q, Q), np.nan, np.float16)
    for e, n in enumerate(length):
        x = rng.normal(size=(L, H, n, n))
        p = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
        att[e, :, :, :n, :n] = p.astype(np.float16)
    real = np.arange(Q)[None, :] < length[:, None]
    ids = np.where(real, rng.integers(1000, 2000, size=(E, Q)), 0).astype(np.int32)
    ids[:, 0] = 101
    ids[np.arange(E), length - 1] = 102
    return {"attention": att, "input_ids": ids, "token_type_ids": np.zeros((E, Q), np.int8),
            "segment": np.where(real, 0, -1).astype(np.int8), "word_ids": np.where(real, 0, -1).astype(np.int16),
            "length": length, "example_idx": np.arange(500, 500 + E, dtype=np.int64)}


ATTRS = {"model": "synthetic", "variant": "pretrained", "task": "mrpc", "cls_token_id": 101, "sep_token_id": 102,
         "pad_token_id": 0, "max_length": Q, "keepbits": None}


def write(path, data, layout=st.LAYOUT):
    return write_store(path, data, chunk_size=CHUNK, attrs=ATTRS, layout=layout)


@pytest.fixture(scope="module")
def data():
    return synthetic()


@pytest.fixture(scope="module")
def stores(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("layout")
    return write(d / "new.zarr", data), write(d / "old.zarr", data, st.LEGACY_LAYOUT)


def bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


class DecodeCounter:
    """The bytes of every Blosc decode of an `attention` chunk (5 dimensions) in a read (patched into zarr's codec)."""

    def __init__(self, monkeypatch):
        from zarr.codecs import BloscCodec

        self.sizes: list[int] = []
        original = BloscCodec._decode_single

        async def counting(codec, chunk_bytes, chunk_spec):
            out = await original(codec, chunk_bytes, chunk_spec)
            if len(chunk_spec.shape) == 5:
                self.sizes.append(len(out))
            return out

        monkeypatch.setattr(BloscCodec, "_decode_single", counting)


def test_round_trip_and_the_layout_on_disk(stores, data):
    new, old = stores
    import zarr

    g = zarr.open_group(str(new), mode="r")
    assert g.attrs["layout"] == st.LAYOUT and "layout" not in zarr.open_group(str(old), mode="r").attrs
    assert g["attention"].shards == (CHUNK, L, H, Q, Q) and g["attention"].chunks == (1, L, H, Q, Q)
    # one shard file per example chunk, nothing else under attention/c
    assert sorted(p.relative_to(new / "attention").as_posix() for p in (new / "attention" / "c").rglob("*")
                  if p.is_file()) == [f"c/{k}/0/0/0/0" for k in range(3)]
    for path in (new, old):
        ds = st.open_store(path)
        assert ds["attention"].dims == st.DIMS["attention"]
        for name, value in data.items():
            np.testing.assert_array_equal(ds[name].values, value)  # NaN padding included
        np.testing.assert_array_equal(bits(xr.open_zarr(path)["attention"].values), bits(data["attention"]))


def test_a_cropped_read_holds_each_example_up_to_its_length(stores, data):
    for path in stores:
        for start, stop in ((0, 4), (4, 8), (8, 10)):
            block = st.read_chunk(str(path), start, stop, ["attention", "length"], crop=True)
            m = int(data["length"][start:stop].max())
            assert block["attention"].shape == (stop - start, L, H, m, m)
            np.testing.assert_array_equal(bits(block["attention"]), bits(data["attention"][start:stop, ..., :m, :m]))


def test_a_read_of_examples_holds_each_example_alone_at_its_length_as_float32(stores, data):
    """crop="examples" (the one pass's read): each example's own n x n maps, float32 of the stored float16, and
    their rows' float64 sums; Crops.padded() is the crop=True block, bit for bit. Both layouts."""
    for path in stores:
        for start, stop in ((0, 4), (4, 8), (8, 10)):
            crops = st.read_chunk(str(path), start, stop, ["attention", "length"], crop="examples")["attention"]
            assert isinstance(crops, st.Crops) and len(crops.maps) == len(crops.row_sums) == stop - start
            for e, (a, sums) in enumerate(zip(crops.maps, crops.row_sums)):
                n = int(data["length"][start + e])
                assert a.dtype == np.float32 and a.shape == (L, H, n, n) and sums.shape == (L, H, n)
                assert a.tobytes() == data["attention"][start + e, ..., :n, :n].astype(np.float32).tobytes()
                assert sums.tobytes() == a.sum(axis=-1, dtype=np.float64).tobytes()
            block = st.read_chunk(str(path), start, stop, ["attention"], crop=True)["attention"]
            np.testing.assert_array_equal(bits(crops.padded()), bits(block))


@pytest.mark.parametrize("damage", ["nan", "rows"])
def test_a_read_of_examples_checks_every_example_on_its_row_sums(tmp_path, data, damage):
    """The examples read checks each example from the row sums it returns: a NaN inside a length, or rows that do not
    sum to 1, is one line naming the chunk, the example and the fix, in both layouts."""
    bad = {k: v.copy() for k, v in data.items()}
    if damage == "nan":
        bad["attention"][6, 1, 2, 1, 0] = np.nan
        match = r"`attention` shard 1 \(examples 4\.\.7\): example 2 \(example_idx 506\) has NaN inside its length"
    else:
        bad["attention"][6] *= np.float16(0.5)
        match = r"`attention` shard 1 \(examples 4\.\.7\): attention rows of example 2 \(example_idx 506\) sum to 1"
    for layout in (st.LAYOUT, st.LEGACY_LAYOUT):
        path = write(tmp_path / f"{damage}-{layout}" / "results" / "attention" / "mrpc" / "pretrained.zarr", bad,
                     layout)
        if layout == st.LEGACY_LAYOUT:
            match = match.replace("shard", "chunk")
        with pytest.raises(st.StoreError, match=match) as err:
            st.read_chunk(str(path), 4, 8, ["attention"], crop="examples")
        one_line(err)
        st.read_chunk(str(path), 0, 4, ["attention"], crop="examples")  # the other chunks read as before


def test_one_map_decompresses_only_its_example(stores, monkeypatch):
    new, old = stores
    per_example = L * H * Q * Q * 2
    counter = DecodeCounter(monkeypatch)
    ds = xr.open_zarr(new)
    m = ds["attention"].isel(example=5).sel(layer=1, head=2).values
    assert m.shape == (Q, Q) and counter.sizes == [per_example]  # one inner chunk, one example
    counter.sizes.clear()
    ds["attention"].isel(example=6).values
    assert counter.sizes == [per_example]
    counter.sizes.clear()
    xr.open_zarr(old)["attention"].isel(example=5).sel(layer=1, head=2).values
    assert counter.sizes == [CHUNK * per_example]  # earlier layout: the whole example chunk


@pytest.mark.parametrize("keepbits", [None, 7])
def test_shard_files_are_byte_for_byte_what_zarr_writes(tmp_path, data, keepbits):
    """The extraction writes `attention`'s shard files itself (faster than zarr-python); zarr-python writing the
    same values into the same array gives the same bytes, the last, short shard included."""
    import zarr

    attrs = dict(ATTRS, keepbits=keepbits)
    ours = st.create_store(tmp_path / "ours.zarr", example_idx=data["example_idx"], layers=L, heads=H, max_length=Q,
                           chunk_size=CHUNK, attrs=attrs)
    theirs = st.create_store(tmp_path / "theirs.zarr", example_idx=data["example_idx"], layers=L, heads=H,
                             max_length=Q, chunk_size=CHUNK, attrs=attrs)
    fmt = st.shard_format(ours["attention"])
    assert fmt is not None and fmt.per_shard == CHUNK and fmt.keepbits == keepbits
    for k in range(3):
        sl = slice(k * CHUNK, min((k + 1) * CHUNK, E))
        st.write_shard(ours["attention"], k, data["attention"][sl], fmt)
        with zarr.config.set({"array.write_empty_chunks": True}):
            theirs["attention"][sl] = data["attention"][sl]
        key = f"attention/c/{k}/0/0/0/0"
        assert (tmp_path / "ours.zarr" / key).read_bytes() == (tmp_path / "theirs.zarr" / key).read_bytes()
    got = zarr.open_array(str(tmp_path / "ours.zarr" / "attention"), mode="r")[:]
    if keepbits is None:
        np.testing.assert_array_equal(bits(got), bits(data["attention"]))
    for start, stop in ((0, 4), (8, 10)):
        length = data["length"][start:stop].astype(np.int64)
        block = st.read_shard_cropped(ours["attention"], fmt, start, length, "here", "store")
        m = int(length.max())
        np.testing.assert_array_equal(bits(block), bits(got[start:stop, ..., :m, :m]))
    assert st.shard_format(zarr.open_array(str(tmp_path / "ours.zarr" / "length"), mode="r")) is None


def test_reductions_equal_on_both_layouts(stores):
    from bertology.clark.reduce import ClarkKernel
    from bertology.kovaleva.reduce import KovalevaKernel, features_table, patterns_table
    from bertology.attention.onepass import reduce_store

    new, old = stores
    kernels = [KovalevaKernel(classifier="rule", negation="paper"), ClarkKernel()]
    a, b = (reduce_store(p, kernels, None, compute_kwargs={"scheduler": "synchronous"}) for p in (new, old))
    assert a["kovaleva"].examples == b["kovaleva"].examples == E
    assert features_table(a["kovaleva"]).equals(features_table(b["kovaleva"]))
    np.testing.assert_array_equal(patterns_table(a["kovaleva"].patterns)["fraction"],
                                  patterns_table(b["kovaleva"].patterns)["fraction"])
    np.testing.assert_array_equal(a["clark"].entropy.total, b["clark"].entropy.total)


def test_a_partial_store_of_the_earlier_layout_is_not_resumed(tmp_path, data):
    path = tmp_path / "s.zarr"
    part = st.partial_path(path)
    root = st.create_store(part, example_idx=data["example_idx"], layers=L, heads=H, max_length=Q, chunk_size=CHUNK,
                           attrs=ATTRS, layout=st.LEGACY_LAYOUT)
    st.write_chunk(root, 0, {k: v[:CHUNK] for k, v in data.items() if k != "example_idx"})
    asked = dict(ATTRS, chunk_size=CHUNK, n_chunks=3, codec=st.ATTENTION_CODEC, layout=st.LAYOUT)
    assert st.resume_point(part, asked) is None and not part.exists()  # started over in the new layout
    root = st.create_store(part, example_idx=data["example_idx"], layers=L, heads=H, max_length=Q, chunk_size=CHUNK,
                           attrs=ATTRS)
    st.write_chunk(root, 0, {k: v[:CHUNK] for k, v in data.items() if k != "example_idx"})
    got = st.resume_point(part, asked)
    assert got is not None and got[1] == 1
    with pytest.raises(ValueError, match="unknown store layout"):
        st.create_store(tmp_path / "x.zarr", example_idx=data["example_idx"], layers=L, heads=H, max_length=Q,
                        chunk_size=CHUNK, attrs=ATTRS, layout="per-map")


def shard_index(path):
    """(shard file bytes, index start) of attention shard 1 (the index, at the end: 16 bytes per inner chunk
    (offset, size as little-endian uint64) and a CRC32C)."""
    f = path / "attention" / "c" / "1" / "0" / "0" / "0" / "0"
    raw = bytearray(f.read_bytes())
    return f, raw, len(raw) - (CHUNK * 16 + 4)


def one_line(err: st.StoreError) -> str:
    msg = str(err.value)
    assert "\n" not in msg and "delete" in msg and "re-run the extraction" in msg
    return msg


@pytest.fixture
def damaged(tmp_path, data):
    return write(tmp_path / "results" / "attention" / "mrpc" / "pretrained.zarr", data)


def test_a_missing_inner_chunk_is_one_line_naming_shard_example_and_fix(damaged, data):
    import google_crc32c

    f, raw, at = shard_index(damaged)
    entry = at + 16 * 2  # example 6 = inner chunk 2 of shard 1: marked absent (offset = size = 2**64 - 1)
    raw[entry:entry + 16] = b"\xff" * 16
    raw[-4:] = google_crc32c.value(bytes(raw[at:-4])).to_bytes(4, "little")
    f.write_bytes(bytes(raw))
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 \(examples 4\.\.7, file attention/c/1/0/0/0/0\): "
                                            r"the inner chunk of example 6 is missing") as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"], crop=True)  # what the reductions read
    one_line(err)
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 .*example 2 \(example_idx 506\) has NaN inside "
                                            r"its length") as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"])  # zarr reads it as NaN: the check names it
    one_line(err)
    st.read_chunk(str(damaged), 0, 4, ["attention"], crop=True)  # the other shards read as before


def test_a_damaged_inner_chunk_or_shard_index_is_one_line(damaged):
    f, raw, at = shard_index(damaged)
    offset = int.from_bytes(raw[at + 16:at + 24], "little")  # example 5's inner chunk
    raw[offset + 40] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(st.StoreError, match=r"file attention/c/1/0/0/0/0\): the inner chunk of example 5 does not "
                                            r"match its checksum") as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"], crop=True)
    one_line(err)
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 .*cannot be decoded .*checksum") as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"])  # through zarr: its CRC32C codec says so
    one_line(err)
    raw[offset + 40] ^= 0xFF
    raw[at + 3] ^= 0x01  # the index itself
    f.write_bytes(bytes(raw))
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 .*the shard index does not match its checksum"
                       ) as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"], crop=True)
    one_line(err)
    with pytest.raises(st.StoreError, match=r"`attention` shard 1 .*cannot be decoded") as err:
        st.read_chunk(str(damaged), 4, 8, ["attention"])
    one_line(err)
    f.unlink()
    with pytest.raises(st.StoreError, match=r"lacks `attention` shard 1 \(examples 4\.\.7, file attention/c/1/0/0/0/0\)"
                       ) as err:
        st.open_store(damaged)
    one_line(err)


def test_open_store_reads_lazily_without_dask_and_checks_what_it_reads(damaged, data, monkeypatch):
    """open_store's view is xarray's lazy indexing (no Dask): one map or one example reads and decodes that
    example's inner chunk alone; chunks= gives a Dask view reading through the same checks."""
    import numcodecs

    decoded: list[int] = []
    original = numcodecs.Blosc.decode

    def counting(self, buf, out=None):
        res = original(self, buf, out=out)
        decoded.append(np.asarray(res).nbytes)
        return res

    monkeypatch.setattr(numcodecs.Blosc, "decode", counting)
    per_example = L * H * Q * Q * 2
    ds = st.open_store(damaged, check_rows=False)
    assert ds["attention"].chunks is None and per_example not in decoded  # no Dask; no attention read at open
    m = ds["attention"].isel(example=5).sel(layer=1, head=2).values
    np.testing.assert_array_equal(bits(m), bits(data["attention"][5, 1, 2]))
    assert [n for n in decoded if n >= per_example] == [per_example]  # one inner chunk, one example
    np.testing.assert_array_equal(bits(ds["attention"][[7, 2], :, 1, :5].values),
                                  bits(data["attention"][[7, 2], :, 1, :5]))
    dask_view = st.open_store(damaged, chunks={"example": 1})
    assert dask_view["attention"].chunks[0] == (1,) * E
    np.testing.assert_array_equal(bits(dask_view["attention"].values), bits(data["attention"]))


@pytest.mark.parametrize("damage", ["absent", "checksum", "index", "nan"])
def test_open_store_names_a_damaged_example_when_it_is_read(damaged, data, damage):
    """open_store opens a store whose shard 1 is damaged (its checks at open are the metadata, the files and
    example 0); reading a damaged map or example is one line naming the shard file, the example and the fix (the
    checksums cover the whole inner chunk; NaN and row sums are checked on the maps read); the others read as
    before."""
    import google_crc32c

    f, raw, at = shard_index(damaged)
    offset, size = (int.from_bytes(raw[at + 16 + 8 * i:at + 24 + 8 * i], "little") for i in range(2))  # example 5
    if damage == "absent":
        raw[at + 16:at + 32] = b"\xff" * 16
        raw[-4:] = google_crc32c.value(bytes(raw[at:-4])).to_bytes(4, "little")
        want = "the inner chunk of example 5 is missing"
    elif damage == "checksum":
        raw[offset + 40] ^= 0xFF
        want = "the inner chunk of example 5 does not match its checksum"
    elif damage == "index":
        raw[at + 3] ^= 0x01
        want = "the shard index does not match its checksum"
    else:  # a valid inner chunk holding NaN inside the example's length
        import numcodecs

        bad = data["attention"][5].copy()
        bad[1, 2, 0, 0] = np.nan
        enc = numcodecs.Blosc(cname="zstd", clevel=1, shuffle=1, blocksize=1 << 20, typesize=2).encode(bad)
        enc += google_crc32c.value(enc).to_bytes(4, "little")
        body = raw[:at]
        new_off = len(body)
        body += enc
        index = bytearray(raw[at:-4])
        index[16:32] = new_off.to_bytes(8, "little") + len(enc).to_bytes(8, "little")
        raw = body + index + google_crc32c.value(bytes(index)).to_bytes(4, "little")
        want = r"example 5 \(example_idx 505\) has NaN inside its length"
    f.write_bytes(bytes(raw))
    ds = st.open_store(damaged)
    for read in (lambda: ds["attention"].isel(example=5).sel(layer=1, head=2).values,  # the damaged map
                 lambda: ds["attention"].isel(example=5).values):  # the example's stack
        with pytest.raises(st.StoreError, match=r"`attention` shard 1 \(examples 4\.\.7, file attention/c/1/0/0/0/0\)"
                                                r".*" + want) as err:
            read()
        one_line(err)
    np.testing.assert_array_equal(bits(ds["attention"].isel(example=9).values), bits(data["attention"][9]))
    if damage != "index":
        np.testing.assert_array_equal(bits(ds["attention"].isel(example=4).values), bits(data["attention"][4]))


def test_stores_of_earlier_or_other_writers_are_read_or_refused_in_one_line(tmp_path, data, caplog):
    """Stores of the earlier layout (bertology <= 0.1: no `layout` attribute) are read, with a log line saying to
    re-extract them; a store not written by the extraction (no `n_chunks`) or of a layout this version does not
    know, or whose `attention` is sharded otherwise, is refused with one line saying to re-extract it."""
    import json
    import logging

    import zarr

    from bertology.pipeline.outputcache import DIGEST_FILE

    old = write(tmp_path / "old.zarr", data, st.LEGACY_LAYOUT)
    (old / DIGEST_FILE).unlink()  # bertology <= 0.1 wrote no digest
    with caplog.at_level(logging.INFO, logger="bertology.store"):
        ds = st.open_store(old)
    assert "earlier layout" in caplog.text and "re-run the extraction" in caplog.text
    np.testing.assert_array_equal(bits(ds["attention"].isel(example=6).values), bits(data["attention"][6]))
    for key, value, want in (("n_chunks", None, "no `n_chunks` attribute: not a store written by the extraction"),
                             ("layout", "per-map", "layout 'per-map', which this version of bertology does not read")):
        path = write(tmp_path / f"{key}.zarr", data)
        (path / DIGEST_FILE).unlink()  # another writer's store carries no bertology digest (bertology.pipeline.outputcache)
        g = zarr.open_group(str(path), mode="r+", use_consolidated=False)
        if value is None:
            del g.attrs[key]
        else:
            g.attrs[key] = value
        zarr.consolidate_metadata(str(path))
        with pytest.raises(st.StoreError, match=want) as err:
            st.open_store(path)
        one_line(err)
    other = write(tmp_path / "other.zarr", data)  # the layout attribute, but a sharding bertology did not write
    (other / DIGEST_FILE).unlink()
    meta = json.loads((other / "attention" / "zarr.json").read_text())
    inner = meta["codecs"][0]["configuration"]["codecs"]
    meta["codecs"][0]["configuration"]["codecs"] = [c for c in inner if c["name"] != "crc32c"]
    (other / "attention" / "zarr.json").write_text(json.dumps(meta))
    zarr.consolidate_metadata(str(other))
    with pytest.raises(st.StoreError, match="`attention` is sharded with other codecs than the example-shards layout's"
                       ) as err:
        st.open_store(other)
    one_line(err)
    with pytest.raises(st.StoreError, match="sharded with other codecs") as err:
        st.read_chunk(str(other), 0, 4, ["attention"], crop=True)
    one_line(err)
    g = zarr.open_group(str(old), mode="r+", use_consolidated=False)
    g.attrs["complete"] = False
    zarr.consolidate_metadata(str(old))
    with pytest.raises(st.IncompleteStoreError, match="not marked complete"):
        st.open_store(old)


@pytest.mark.parametrize("name", ["input_ids", "token_type_ids", "segment", "word_ids", "length", "example_idx"])
def test_a_flipped_byte_in_any_small_variable_is_one_line(damaged, data, name):
    """Every chunk of every variable is checksummed, the small variables' too: one flipped byte anywhere in a chunk
    file is one line naming the file and the fix, never silent values."""
    key = "c/1" + "/0" * (len(st.DIMS[name]) - 1)
    f = damaged / name / key
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    f.write_bytes(bytes(raw))
    where = rf"`{name}` chunk 1 \(examples 4\.\.7, file {name}/{key}\)"
    with pytest.raises(st.StoreError, match=where + ".*cannot be (decoded|read)") as err:
        if name in ("length", "example_idx"):  # open_store reads `length` through its own decoder, the rest via zarr
            ds = st.open_store(damaged)
            ds[name].values
        else:
            st.read_chunk(str(damaged), 4, 8, [name])
    one_line(err)
    if name == "length":  # what open_store's attention reads check each example's length against
        with pytest.raises(st.StoreError, match=where + " cannot be read .*checksum") as err:
            st.open_store(damaged)["attention"].isel(example=5).values
        one_line(err)
    np.testing.assert_array_equal(st.read_chunk(str(damaged), 0, 4, [name])[name], data[name][:4])


def test_the_metadata_is_compact_and_the_small_variables_smaller_than_the_earlier_layout(stores):
    """The new layout's JSON metadata carries no indentation and its small variables take fewer bytes than the
    earlier layout's (zstd 19 / Blosc zstd 9 against zstd 3): what pays for the shard index and checksums."""
    import json

    from bertology.attention.extract import dir_bytes

    new, old = stores
    for f in new.rglob("zarr.json"):
        text = f.read_text()
        assert "\n" not in text and text == json.dumps(json.loads(text), allow_nan=True), f
    assert "\n" in (old / "zarr.json").read_text()  # the earlier layout as bertology <= 0.1 wrote it
    for name in ("token_type_ids", "segment", "word_ids"):
        assert dir_bytes(new / name) < dir_bytes(old / name), name


def test_examples_compressed_at_once_decode_to_the_same_values_and_bytes_every_time():
    """The extraction's Blosc context (2 threads): examples are compressed two at a time, one thread each; each
    decodes to its example bit for bit, has the length a one-at-a-time encode gives, and the same bytes twice."""
    import numcodecs
    import numcodecs.blosc as nb

    from bertology.store.shards import encode_examples

    rng = np.random.default_rng(3)
    maps = rng.random((5, 2, 3, 256, 256)).astype(np.float16)  # 768 kB an example: two 512 kB blocks
    maps[1, :, :, 100:] = np.nan
    blosc = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE, blocksize=1 << 19)
    one_by_one = [blosc.encode(m) for m in maps]
    with st.blosc_threads(2):
        at_once, again = encode_examples(blosc, maps), encode_examples(blosc, maps)
        assert nb.use_threads is True  # the context's setting is back
    assert at_once == again
    assert [len(b) for b in at_once] == [len(b) for b in one_by_one]
    for m, b in zip(maps, at_once):
        assert np.frombuffer(blosc.decode(b), dtype=np.float16).reshape(m.shape).view(np.uint16).tobytes() \
            == m.view(np.uint16).tobytes()
