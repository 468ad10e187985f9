"""bench/compare_runs.py: bit for bit by default; --rtol/--atol compare floats within a tolerance and counts,
ranks, labels and verdicts exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import compare_runs as cr  # noqa: E402

TOL = ["--rtol", "1e-6", "--atol", "1e-9"]


def _run(root: Path, score=0.25, tiny=0.0, n=10.0, verdict="supported", rank=1.0, weight=0.5) -> Path:
    (root / "stats").mkdir(parents=True)
    pd.DataFrame({"layer": [0, 1], "score": [score, 2.0], "tiny": [tiny, 0.0], "n": [n, 3.0],
                  "verdict": [verdict, "refuted"], "mean_rank": [rank, 2.0]}).to_csv(root / "stats" / "t.csv",
                                                                                   index=False)
    (root / "s.json").write_text(json.dumps({"accuracy": score, "n_examples": 5, "seconds": 1.0,
                                             "per_layer": [{"value": weight}]}))
    pd.DataFrame({"method": ["flow"], "score": [score]}).to_parquet(root / "v.parquet")
    np.savez(root / "a.npz", x=np.array([score, weight]), count=np.array([n]))
    return root


@pytest.mark.parametrize("change, exact_differs, tol_differs", [
    ({}, False, False),
    ({"score": 0.25 * (1 + 5e-7)}, True, False),       # relative 5e-7: within 1e-6
    ({"score": 0.25 * (1 + 5e-6)}, True, True),        # relative 5e-6: beyond
    ({"tiny": 5e-10}, True, False),                    # absolute 5e-10 from 0: within 1e-9
    ({"tiny": 5e-9}, True, True),
    ({"n": 10.0 + 1e-12}, True, True),                 # a count: exact in any mode
    ({"rank": 1.0 + 1e-12}, True, True),               # a rank: exact
    ({"verdict": "refuted"}, True, True),              # a verdict (string): exact
    ({"weight": 0.5 * (1 + 1e-7)}, True, False),       # JSON nested in a list, npz
])
def test_tolerance_mode_is_exact_on_counts_ranks_and_labels(tmp_path, capsys, change, exact_differs, tol_differs):
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", **change)
    assert cr.main([str(a), str(b)]) == int(exact_differs)
    assert cr.main([*TOL, str(a), str(b)]) == int(tol_differs)
    out = capsys.readouterr().out
    if exact_differs and not tol_differs:
        assert "within tolerance" in out and "equal within rtol 1e-06 / atol 1e-09 only" in out


def test_tolerance_close_treats_nan_and_infinity_as_equal_to_themselves():
    tol = cr.Tolerance(1e-6, 1e-9)
    assert tol.close([np.nan, np.inf, 1.0], [np.nan, np.inf, 1.0 + 1e-7])
    assert not tol.close([np.inf], [-np.inf]) and not tol.close([np.nan], [0.0]) and not tol.close([1.0], [1.0, 1.0])
    assert not cr.EXACT.close([1.0], [1.0 + 1e-15]) and cr.EXACT.close([np.nan], [np.nan])
    assert tol.json_equal({"a": [1, 2.0]}, {"a": [1, 2.0 + 1e-9]}) and not tol.json_equal({"a": 1}, {"a": True})


def test_negative_tolerance_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        cr.main(["--rtol", "-1", str(tmp_path), str(tmp_path)])


def test_a_digest_is_compared_without_the_hashes_of_its_json_files(tmp_path):
    """Two runs' model digests differ in training.json's hash (its timings) and agree on every other file: equal; a
    different weights hash is a difference."""
    def digest(training: str, weights: str) -> dict:
        return {"algorithm": "sha256", "format": 1,
                "files": {"config.json": {"sha256": "c", "size": 1}, "training.json": {"sha256": training, "size": 2},
                          "model.safetensors": {"sha256": weights, "size": 3}}}

    a, b, c = tmp_path / "a" / cr.DIGEST, tmp_path / "b" / cr.DIGEST, tmp_path / "c" / cr.DIGEST
    for path, d in ((a, digest("t1", "w")), (b, digest("t2", "w")), (c, digest("t1", "w2"))):
        path.parent.mkdir()
        path.write_text(json.dumps(d))
    assert cr.compare_file(a, b) is None
    assert cr.compare_file(a, c) == "JSON differs"


def test_a_moved_file_is_compared_with_its_old_path(tmp_path, capsys):
    """--moved OLD=NEW pairs run A's OLD with run B's NEW: a file, a folder, '*' for one path component."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root, folder, score in ((a, "attention", 0.25), (b, "data", 0.25)):
        for task in ("rte", "syntax"):
            (root / folder / task).mkdir(parents=True)
            pd.DataFrame({"idx": [0, 1], "score": [score, 1.0]}).to_parquet(root / folder / task / "sample.parquet")
        (root / folder / "syntax" / "counts.json").write_text(json.dumps({"sentences": 3}))
    (a / "stats" / "framenet").mkdir(parents=True)
    (b / "data" / "framenet").mkdir(parents=True)
    for root in (a, b):
        (root / "stats" / "rte").mkdir(parents=True)
        pd.DataFrame({"x": [1.0]}).to_csv(root / "stats" / "rte" / "t.csv", index=False)
    (a / "stats" / "framenet" / "counts.json").write_text(json.dumps({"links": 4}))
    (b / "data" / "framenet" / "counts.json").write_text(json.dumps({"links": 4}))

    assert cr.main([str(a), str(b)]) == 1
    assert "only in A: attention/rte/sample.parquet" in capsys.readouterr().out
    moves = ["--moved", "attention/*/sample.parquet=data/*/sample.parquet", "--moved", "attention/syntax=data/syntax",
             "--moved", "stats/framenet=data/framenet"]
    assert cr.main([*moves, str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "5 files compared (4 moved), 0 differ, 0 on one side only"

    pd.DataFrame({"idx": [0, 1], "score": [0.5, 1.0]}).to_parquet(b / "data" / "rte" / "sample.parquet")
    assert cr.main([*moves, str(a), str(b)]) == 1
    assert "DIFFERS data/rte/sample.parquet (was attention/rte/sample.parquet): frame differs" in capsys.readouterr().out


@pytest.mark.parametrize("spec", ["attention/x", "=data", "attention/*=data", "attention/sam*=data/*",
                                  "attention/*/a=data/*/*/a"])
def test_a_malformed_move_is_refused(tmp_path, spec):
    with pytest.raises(SystemExit):
        cr.main(["--moved", spec, str(tmp_path), str(tmp_path)])


def test_moved_renames_the_first_matching_rule_and_keeps_the_rest_of_the_path():
    rules = [cr.move_rule("attention/syntax=data/syntax"), cr.move_rule("attention/*/words.parquet=data/*/words.parquet")]
    assert cr.moved("attention/syntax/words.parquet", rules) == "data/syntax/words.parquet"
    assert cr.moved("attention/rte/words.parquet", rules) == "data/rte/words.parquet"
    assert cr.moved("attention/rte/pretrained.zarr", rules) == "attention/rte/pretrained.zarr"
    assert cr.moved("attention/syntaxes/words.parquet", rules[:1]) == "attention/syntaxes/words.parquet"
