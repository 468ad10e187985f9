"""The kovaleva steps end to end on constructed stores: CSV schemas, figures, the annotation round trip, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.analyses import REGISTRY
from bertology.workflow.cli import STEPS
from bertology.pipeline.config import validate_config
from bertology.pipeline.configjson import sections_json
from tests.builders import identity_attrs
from tests.builders.kovaleva import (build_store, long_example, maps, pair_example, single_example, words_table,
                                     write_store)
from tests.builders.steps import run_step

EXAMPLES = [pair_example(), single_example(), pair_example(), long_example(8, 6)]
# the config the stores were "extracted" under (the analyses refuse a store of other settings)
STORE_CONFIG = {"model": "test", "data": {"max_length": 24}, "attention": {"examples": len(EXAMPLES)}}


def config(step: str) -> str:
    """--config of a step: the sections it declares, from a validated config (tasks: mrpc)."""
    cfg = validate_config({"tasks": ["mrpc"], "analysis": {"relations": {"percentile": 90},
                                                           "dask": {"scheduler": "synchronous"}}, **STORE_CONFIG})
    return sections_json(cfg, STEPS[step].config)


def files(flag: str, **paths) -> list[str]:
    """--input/--output NAME=PATH arguments; a list value gives the name once per path."""
    out = []
    for name, value in paths.items():
        for p in (value if isinstance(value, list) else [value]):
            out += [flag, f"{name}={p}"]
    return out


def run(step: str, *, wildcards: dict | None = None, inputs: dict, outputs: dict) -> int:
    return run_step(step, config(step), wildcards, inputs, outputs)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("kov")
    att = d / "results" / "attention" / "mrpc"
    for variant in ("pretrained", "finetuned"):
        ds = build_store(EXAMPLES, lambda ex, v=variant: maps(ex, v), max_length=24)
        ds.attrs.update(identity_attrs("mrpc", variant, **STORE_CONFIG))
        write_store(ds, att / f"{variant}.zarr", chunk=3)
    words_table(EXAMPLES).to_parquet(att / "words.parquet")
    return d


def test_stats_cosine_and_figures(run_dir):
    att, stats = run_dir / "results" / "attention" / "mrpc", run_dir / "results" / "stats" / "mrpc"
    fn_rows = pd.DataFrame({"layer": [0, 0, 0, 1, 1, 1], "head": [0, 1, 2, 0, 1, 2], "source": "framenet",
                            "mean": [0.1, 0.2, 0.3, 0.4, 0.5, 0.9], "std": 0.01, "n": 5,
                            "flagged": [False] * 5 + [True]})
    fn_rows.to_csv(run_dir / "fn.csv", index=False)
    # every table of the one read of the store (Kovaleva's, Clark's, Pande's), as the registry declares them
    names = {name: Path(path).name for name, path in REGISTRY.store_outputs().items()}
    for variant in ("pretrained", "finetuned"):
        extra = {"framenet": run_dir / "fn.csv"} if variant == "finetuned" else {}
        assert run("store_stats", wildcards={"task": "mrpc", "variant": variant},
                   inputs={"store": att / f"{variant}.zarr", "words": att / "words.parquet", **extra},
                   outputs={name: stats / variant / file for name, file in names.items()}) == 0
    assert run("kovaleva_cosine", wildcards={"task": "mrpc"},
               inputs={"pretrained": att / "pretrained.zarr", "finetuned": att / "finetuned.zarr",
                       "words": att / "words.parquet"},
               outputs={"cosine": stats / "cosine.csv", "features_diff": stats / "features_diff.csv"}) == 0
    cols = {"features": ["layer", "head", "feature", "mean", "std", "n"],
            "cls": ["layer", "head", "feature", "mean", "std", "n"],
            "relations": ["layer", "head", "source", "mean", "std", "n", "flagged"],
            "patterns": ["layer", "head", "class", "fraction", "n"],
            "entropy": ["layer", "head", "feature", "mean", "std", "n"],
            "parser": ["relation", "direction", "layer", "head", "accuracy", "n", "baseline_offset",
                       "baseline_accuracy"]}
    for name, expected in cols.items():
        df = pd.read_csv(stats / "pretrained" / f"{name}.csv")
        assert list(df.columns) == expected
        assert df["layer"].dtype.kind == "i" and df["head"].dtype.kind == "i"
    rel = pd.read_csv(stats / "finetuned" / "relations.csv")
    assert set(rel["source"]) == {"framenet", "dependency"}
    assert set(pd.read_csv(stats / "pretrained" / "relations.csv")["source"]) == {"dependency"}
    cos = pd.read_csv(stats / "cosine.csv")
    assert list(cos.columns) == ["layer", "head", "mean", "std", "n"] and (cos["n"] == len(EXAMPLES)).all()
    diff = pd.read_csv(stats / "features_diff.csv")
    assert list(diff.columns) == cols["features"] and len(diff) == 2 * 3 * 8
    figs = run_dir / "results" / "figures"
    per_variant = {name: [stats / v / f"{name}.csv" for v in ("pretrained", "finetuned")] for name in names}
    figures = {name: figs / f"{name}-mrpc.png" for name in ("patterns", "cosine", "features", "cls", "relations")}
    assert run("kovaleva_figures", wildcards={"task": "mrpc"},
               inputs={**per_variant, "cosine": stats / "cosine.csv", "features_diff": stats / "features_diff.csv"},
               outputs=figures) == 0
    for png in figures.values():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert run("kovaleva_overview", inputs={"pretrained": [stats / "pretrained" / "patterns.csv"],
                                            "finetuned": [stats / "finetuned" / "patterns.csv"],
                                            "cosine": [stats / "cosine.csv"]},
               outputs={"patterns": figs / "patterns-tasks.png", "cosine": figs / "cosine-tasks.png"}) == 0
    assert (figs / "patterns-tasks.png").stat().st_size > 5000 and (figs / "cosine-tasks.png").stat().st_size > 5000
    clark_figures = {name: figs / f"{name}-mrpc.png" for name in ("entropy", "parser")}
    assert run("clark_figures", wildcards={"task": "mrpc"},
               inputs={name: [stats / v / f"{name}.csv" for v in ("pretrained", "finetuned")] for name in ("entropy", "parser")},
               outputs=clark_figures) == 0
    for png in clark_figures.values():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    parser = pd.read_csv(stats / "pretrained" / "parser.csv")
    assert set(parser["relation"]) == {"det", "nsubj", "neg", "punct", "dobj"}  # spaCy labels; ROOT is no arc


def test_export_then_train_round_trip(run_dir, monkeypatch, capsys, tmp_path):
    import shlex

    import torch

    from bertology.workflow.cli import main

    from bertology.kovaleva import patterns as pat
    from bertology.kovaleva import reduce as red
    from bertology.steps import kovaleva as steps
    from bertology.store import open_store

    torch.set_num_threads(1)
    monkeypatch.setattr(steps, "SHEET_MAPS", 12)
    monkeypatch.setattr(steps, "SHEET_SEED", 1)
    store = run_dir / "results" / "attention" / "mrpc" / "pretrained.zarr"
    out = run_dir / "annotate"
    capsys.readouterr()
    assert run("patterns_sheet", wildcards={"task": "mrpc"}, inputs={"store": store},
               outputs={"sheet": out / "labels.csv", "images": out / "images"}) == 0
    # the command that trains the CNN once the sheet is labelled
    (printed,) = [c for c in capsys.readouterr().out.split("`")[1::2] if c.startswith("bertology ")]
    sheet = pd.read_csv(out / "labels.csv", keep_default_na=False)
    assert len(sheet) == 12 and (sheet["label"] == "").all()
    assert all((out / p).is_file() for p in sheet["image"])
    assert set(sheet["example"]) <= set(range(100, 100 + len(EXAMPLES)))
    with pytest.raises(ValueError, match="annotate the sheet first"):
        pat.labelled_maps(pd.read_csv(out / "labels.csv"), [open_store(store)])
    # the researcher's labels: here the head's construction (0 stripe, 1 uniform, 2 previous token)
    sheet["label"] = np.array(["vertical", "heterogeneous", "diagonal"])[sheet["head"]]
    sheet.to_csv(out / "labels.csv", index=False)
    monkeypatch.setattr(steps, "CNN_EPOCHS", 2)
    monkeypatch.setattr(steps, "CNN_SIZE", 8)
    # the printed command, run as printed in the working directory (tracked, to a store of this test's own)
    monkeypatch.chdir(run_dir)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    argv = shlex.split(printed)
    assert argv[:2] == ["bertology", "patterns-train"] and argv[-2:] == ["--output", "model=cnn.pt"], printed
    assert main(argv[1:]) == 0
    model = run_dir / "cnn.pt"
    report = capsys.readouterr().out
    assert model.is_file() and json.loads(report[report.index("{"):])["n"] == 12
    # the trained CNN drops into the one-pass reduction
    part = red.store_stats(store, words_table(EXAMPLES), classifier=str(model),
                           compute_kwargs={"scheduler": "synchronous"}, negation="paper")
    assert part.patterns.sum() == len(EXAMPLES) * 2 * 3


def test_user_errors_are_one_line(run_dir, capsys):
    att = run_dir / "results" / "attention" / "mrpc"
    stats = run_dir / "x"
    outputs = {name: stats / Path(path).name for name, path in REGISTRY.store_outputs().items()}
    capsys.readouterr()
    assert run("store_stats", inputs={"store": run_dir / "nope.zarr", "words": att / "words.parquet"},
               outputs=outputs) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == (f"bertology store-stats: error: no attention store at "
                                         f"'{run_dir / 'nope.zarr'}'; run the extraction first: "
                                         f"`snakemake --cores 2 {run_dir / 'nope.zarr'}`\n")
    pd.DataFrame({"example_idx": [1]}).to_parquet(run_dir / "bad.parquet")
    assert run("store_stats", inputs={"store": att / "pretrained.zarr", "words": run_dir / "bad.parquet"},
               outputs=outputs) == 1
    bad = run_dir / "bad.parquet"
    assert capsys.readouterr().err == (
        f"bertology store-stats: error: {bad} lacks column(s) ['word', 'segment', 'text', 'lemma', 'pos', 'tag', "
        f"'dep', 'head', 'is_punct', 'start_char', 'end_char']: not a words table of the annotation step (columns "
        f"example_idx, word, segment, text, lemma, pos, tag, dep, head, is_punct, start_char, end_char); delete it "
        f"and re-run (`rm {bad}`; `snakemake --cores 2 {bad}`)\n")
    patterns = run_dir / "results" / "stats" / "mrpc" / "pretrained" / "patterns.csv"
    assert run("kovaleva_overview", inputs={"pretrained": [patterns, patterns], "finetuned": [patterns],
                                            "cosine": [patterns]},
               outputs={"patterns": stats / "p.png", "cosine": stats / "c.png"}) == 1
    assert capsys.readouterr().err == ("bertology kovaleva-overview: error: step kovaleva_overview: --input pretrained "
                                       "needs one path per task of the config's tasks (mrpc), in that order; got 2\n")
