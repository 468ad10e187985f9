"""The kovaleva commands end to end on constructed stores: CSV schemas, figures, the annotation round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bertology.cli import main
from tests.kovaleva_fixtures import build_store, long_example, pair_example, single_example, words_table, write_store
from tests.test_kovaleva_reduce import maps

EXAMPLES = [pair_example(), single_example(), pair_example(), long_example(8, 6)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    import os

    d = tmp_path_factory.mktemp("kov")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{d / 'mlflow.db'}"
    os.environ["MLFLOW_EXPERIMENT_NAME"] = "test"
    att = d / "results" / "attention" / "mrpc"
    for variant in ("pretrained", "finetuned"):
        ds = build_store(EXAMPLES, lambda ex, v=variant: maps(ex, v), max_length=24)
        ds.attrs["variant"] = variant
        write_store(ds, att / f"{variant}.zarr", chunk=3)
    words_table(EXAMPLES).to_parquet(att / "words.parquet")
    return d


def test_stats_cosine_and_figures(run_dir):
    att, stats = run_dir / "results" / "attention" / "mrpc", run_dir / "results" / "stats" / "mrpc"
    params = json.dumps({"patterns": {"classifier": "rule"}, "relations": {"framenet": None, "percentile": 90},
                         "dask": {"scheduler": "synchronous"}})
    fn_rows = pd.DataFrame({"layer": [0, 0, 0, 1, 1, 1], "head": [0, 1, 2, 0, 1, 2], "source": "framenet",
                            "mean": [0.1, 0.2, 0.3, 0.4, 0.5, 0.9], "std": 0.01, "n": 5,
                            "flagged": [False] * 5 + [True]})
    fn_rows.to_csv(run_dir / "fn.csv", index=False)
    for variant in ("pretrained", "finetuned"):
        extra = ["--framenet", str(run_dir / "fn.csv")] if variant == "finetuned" else []
        assert main(["kovaleva-stats", "--store", str(att / f"{variant}.zarr"), "--words", str(att / "words.parquet"),
                     "--task", "mrpc", "--variant", variant, "--params", params, "--outdir", str(stats / variant),
                     *extra]) == 0
    assert main(["kovaleva-cosine", "--pretrained", str(att / "pretrained.zarr"), "--finetuned",
                 str(att / "finetuned.zarr"), "--task", "mrpc", "--params", params, "--words", str(att / "words.parquet"),
                 "--output", str(stats / "cosine.csv"), "--features-diff", str(stats / "features_diff.csv")]) == 0
    cols = {"features": ["layer", "head", "feature", "mean", "std", "n"], "cls": ["layer", "head", "feature", "mean", "std", "n"],
            "relations": ["layer", "head", "source", "mean", "std", "n", "flagged"],
            "patterns": ["layer", "head", "class", "fraction", "n"]}
    for name, expected in cols.items():
        df = pd.read_csv(stats / "pretrained" / f"{name}.csv")
        assert list(df.columns) == expected
        assert df["layer"].dtype.kind == "i" and df["head"].dtype.kind == "i"
    rel = pd.read_csv(stats / "finetuned" / "relations.csv")
    assert set(rel["source"]) == {"framenet", "dependency"}
    cos = pd.read_csv(stats / "cosine.csv")
    assert list(cos.columns) == ["layer", "head", "mean", "std", "n"] and (cos["n"] == len(EXAMPLES)).all()
    diff = pd.read_csv(stats / "features_diff.csv")
    assert list(diff.columns) == cols["features"] and len(diff) == 2 * 3 * 8
    figs = run_dir / "results" / "figures"
    assert main(["kovaleva-figures", "--task", "mrpc", "--stats-dir", str(stats), "--outdir", str(figs)]) == 0
    for name in ("patterns", "cosine", "features", "cls", "relations"):
        png = figs / f"{name}-mrpc.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert main(["kovaleva-overview", "--tasks", "mrpc", "--stats-dir", str(run_dir / "results" / "stats"),
                 "--outdir", str(figs)]) == 0
    assert (figs / "patterns-tasks.png").stat().st_size > 5000 and (figs / "cosine-tasks.png").stat().st_size > 5000


def test_export_then_train_round_trip(run_dir, capsys):
    import torch

    torch.set_num_threads(1)
    store = run_dir / "results" / "attention" / "mrpc" / "pretrained.zarr"
    out = run_dir / "annotate"
    assert main(["patterns-export", "--store", str(store), "--count", "12", "--seed", "1", "--outdir", str(out)]) == 0
    sheet = pd.read_csv(out / "labels.csv", keep_default_na=False)
    assert len(sheet) == 12 and (sheet["label"] == "").all()
    assert all((out / p).is_file() for p in sheet["image"])
    assert set(sheet["example"]) <= set(range(100, 100 + len(EXAMPLES)))
    with pytest.raises(ValueError, match="annotate the sheet first"):
        from bertology.kovaleva.cli import load_labelled_maps
        load_labelled_maps(pd.read_csv(out / "labels.csv"), [str(store)])
    # the researcher's labels: here the head's construction (0 stripe, 1 uniform, 2 previous token)
    sheet["label"] = np.array(["vertical", "heterogeneous", "diagonal"])[sheet["head"]]
    sheet.to_csv(out / "labels.csv", index=False)
    model = run_dir / "cnn.pt"
    assert main(["patterns-train", "--labels", str(out / "labels.csv"), "--store", str(store), "--output", str(model),
                 "--epochs", "2", "--size", "8"]) == 0
    assert model.is_file() and json.loads((run_dir / "cnn.pt.json").read_text())["n"] == 12
    # the trained CNN drops into the one-pass reduction
    from bertology.kovaleva import reduce as red

    part = red.store_stats(store, run_dir / "results" / "attention" / "mrpc" / "words.parquet", classifier=str(model),
                           scheduler={"scheduler": "synchronous"})
    assert part.patterns.sum() == len(EXAMPLES) * 2 * 3


def test_user_errors_are_one_line(run_dir, capsys):
    assert main(["kovaleva-stats", "--store", str(run_dir / "nope.zarr"), "--words", "w.parquet",
                 "--outdir", str(run_dir / "x")]) == 1
    assert "run the extraction first" in capsys.readouterr().err
