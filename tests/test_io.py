"""bertology.pipeline.io: the one atomic writer and its typed helpers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bertology.pipeline import io


def test_atomic_write_moves_a_complete_file_into_place(tmp_path):
    path = tmp_path / "sub" / "t.txt"
    with io.atomic_write(path) as tmp:
        assert tmp.parent == path.parent and tmp.name.startswith(".t.txt.") and tmp.name.endswith(".tmp")
        tmp.write_text("new")
        assert not path.exists()                 # nothing at the destination until the block ends
    assert path.read_text() == "new"
    assert [p.name for p in path.parent.iterdir()] == ["t.txt"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with io.atomic_write(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_typed_helpers_write_what_their_library_writes(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    pd.testing.assert_frame_equal(pd.read_csv(io.write_csv(df, tmp_path / "t.csv")), df)
    pd.testing.assert_frame_equal(pd.read_parquet(io.write_parquet(df, tmp_path / "t.parquet")), df)
    assert (io.write_json({"x": 1}, tmp_path / "a.json").read_text() == '{\n  "x": 1\n}\n')
    assert (io.write_json({"x": 1.5}, tmp_path / "b.json", indent=None, end="").read_text() == '{"x": 1.5}')
    out = io.write_npz({"x": np.arange(3)}, tmp_path / "s.npz")
    assert out.name == "s.npz" and sorted(p.name for p in tmp_path.glob("s*")) == ["s.npz"]
    with np.load(out) as z:
        assert z["x"].tolist() == [0, 1, 2]
    assert io.write_text("é\n", tmp_path / "p.html").read_text(encoding="utf-8") == "é\n"
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1}


def test_png_is_written_whole(tmp_path):
    from bertology.pipeline.plotting import new_figure, save_figure

    fig, ax = new_figure(2, 2)
    ax.plot([0, 1], [1, 0])
    path = save_figure(fig, tmp_path / "f.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]
