"""The norm steps through the command line, as their rules run them, on a tiny random fine-tuned BERT."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.builders.encoders import build_encoder


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from bertology.data import write_prepared
    from bertology.demo import generate

    tmp = tmp_path_factory.mktemp("norms")
    model = build_encoder("bert", tmp / "model")
    write_prepared(generate("mrpc", "validation", 12, seed=3), tmp / "sample.parquet")
    write_prepared(generate("mrpc", "train", 30, seed=4), tmp / "train.parquet")
    return tmp, model


def config(step: str, **analysis) -> str:
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json

    cfg = validate_config({"data": {"max_length": 48}, "analysis": analysis})
    return sections_json(cfg, STEPS[step].config)


def test_views_faithfulness_and_figures(setup):
    from bertology.workflow.cli import main

    tmp, model = setup
    out = tmp / "stats"
    analysis = {"norms": {"examples": 6, "batch_size": 4}, "flow": {"examples": 3, "bootstrap": 50},
                "mixing_views": {"examples": 4}}
    for variant in ("pretrained", "finetuned"):
        d = out / variant
        args = ["norms-views", "-w", "task=mrpc", "-w", f"variant={variant}", "--input", f"sample={tmp / 'sample.parquet'}",
                "--input", f"train={tmp / 'train.parquet'}", "--output", f"norms={d / 'norms.csv'}",
                "--output", f"mixing={d / 'mixing.csv'}", "--output", f"scores={d / 'token_scores.parquet'}",
                "--output", f"layers={d / 'mixing_layers.parquet'}", "--output", f"decision={d / 'decision.parquet'}",
                "--config", config("norms_views", **analysis), "--no-mlflow"]
        if variant == "finetuned":
            args += ["--input", f"model={model}"]
        else:  # the pretrained variant runs the config `model`: here the same tiny directory
            cfg = json.loads(args[args.index("--config") + 1])
            cfg["model"] = str(model)
            args[args.index("--config") + 1] = json.dumps(cfg)
        assert main(args) == 0
    scores = pd.read_parquet(out / "finetuned" / "token_scores.parquet")
    assert scores["example_idx"].nunique() == 6
    assert scores.loc[scores["method"] == "flow", "example_idx"].nunique() == 3
    newer = ("alti", "globenc", "decompx", "value_zeroing")
    for variant in ("pretrained", "finetuned"):     # the newer views on the capped sample, both models
        s = pd.read_parquet(out / variant / "token_scores.parquet")
        assert all(s.loc[s["method"] == m, "example_idx"].nunique() == 4 for m in newer)
        layers = pd.read_parquet(out / variant / "mixing_layers.parquet")
        assert list(layers.columns) == ["example_idx", "layer", "position", "method", "score"]
        # ALTI-Logit: the fine-tuned classifier's alone (the pretrained encoder has no head)
        logit = {"alti_logit"} if variant == "finetuned" else set()
        assert set(layers["method"]) == set(newer) | logit and set(layers["layer"]) == {0, 1}
        decision = pd.read_parquet(out / variant / "decision.parquet")
        assert decision.empty == (variant == "pretrained") and list(decision.columns) == [
            "example", "layer", "part", "head", "logit", "contrast", "predicted", "runner_up"]
        assert decision.empty or decision["example"].nunique() == 4
    # the fine-tuned DecompX view is the predicted class's signed part: some parts are negative
    assert (scores.loc[scores["method"] == "decompx", "score"] < 0).any()
    assert main(["norms-faithfulness", "-w", "task=mrpc", "--input", f"sample={tmp / 'sample.parquet'}",
                 "--input", f"scores={out / 'finetuned' / 'token_scores.parquet'}", "--input", f"model={model}",
                 "--output", f"table={out / 'finetuned' / 'faithfulness.csv'}",
                 "--output", f"importance={out / 'finetuned' / 'importance.parquet'}",
                 "--output", f"examples={out / 'finetuned' / 'faithfulness_examples.csv'}",
                 "--output", f"pairs={out / 'finetuned' / 'faithfulness_pairs.csv'}",
                 "--config", config("norms_faithfulness", **analysis), "--no-mlflow"]) == 0
    faith = pd.read_csv(out / "finetuned" / "faithfulness.csv")
    # 9 views (ALTI-Logit's included) x (2 importances + AOPC) + AOPC's random order
    assert len(faith) == 9 * 3 + 1 and (faith["n"] <= 3).all() and (faith["n"] >= 1).any()
    assert set(faith.loc[faith["importance"] == "aopc", "view"]) == {*newer, "raw", "norm", "rollout", "flow",
                                                                     "alti_logit", "random"}
    pairs = pd.read_csv(out / "finetuned" / "faithfulness_pairs.csv")
    assert len(pairs) == 3 * 36 + 9 and set(pairs["separated"]) <= {True, False}
    rhos = pd.read_csv(out / "finetuned" / "faithfulness_examples.csv")  # the per-example rhos faith summarises
    assert list(rhos.columns) == ["example_idx", "view", "importance", "rho"] and rhos["example_idx"].nunique() == 3
    mean = rhos.groupby(["view", "importance"])["rho"].mean()
    for r in faith.itertuples():
        assert mean[(r.view, r.importance)] == pytest.approx(r.mean, nan_ok=True)
    imp = pd.read_parquet(out / "finetuned" / "importance.parquet")
    assert imp["example_idx"].nunique() == 3
    assert np.isnan(imp.loc[(imp["method"] == "ablation") & (imp["position"] == 0), "score"]).all()  # [CLS] kept
    figs = tmp / "figures"
    assert main(["norms-figures", "-w", "task=mrpc",
                 "--input", f"norms={out / 'pretrained' / 'norms.csv'}", "--input", f"norms={out / 'finetuned' / 'norms.csv'}",
                 "--input", f"mixing={out / 'pretrained' / 'mixing.csv'}",
                 "--input", f"mixing={out / 'finetuned' / 'mixing.csv'}",
                 "--input", f"faithfulness={out / 'finetuned' / 'faithfulness.csv'}",
                 "--output", f"norms={figs / 'norms-mrpc.png'}", "--output", f"mixing={figs / 'mixing-mrpc.png'}",
                 "--output", f"faithfulness={figs / 'faithfulness-mrpc.png'}",
                 "--config", config("norms_figures"), "--no-mlflow"]) == 0
    assert all((figs / f"{n}-mrpc.png").stat().st_size > 1000 for n in ("norms", "mixing", "faithfulness"))


def test_more_examples_than_the_attention_sample_takes_all_of_it(setup):
    from bertology.workflow.cli import main

    tmp, model = setup
    d = tmp / "all"
    assert main(["norms-views", "-w", "task=mrpc", "-w", "variant=finetuned", "--input", f"sample={tmp / 'sample.parquet'}",
                 "--input", f"train={tmp / 'train.parquet'}", "--input", f"model={model}",
                 "--output", f"norms={d / 'norms.csv'}", "--output", f"mixing={d / 'mixing.csv'}",
                 "--output", f"scores={d / 'token_scores.parquet'}", "--output", f"layers={d / 'mixing_layers.parquet'}",
                 "--output", f"decision={d / 'decision.parquet'}",
                 "--config", config("norms_views", norms={"examples": 50}, flow={"examples": 1},
                                    mixing_views={"examples": 0}), "--no-mlflow"]) == 0
    assert pd.read_parquet(d / "token_scores.parquet")["example_idx"].nunique() == 12


def test_a_missing_model_is_a_one_line_error(setup, capsys):
    from bertology.workflow.cli import main

    tmp, _ = setup
    d = tmp / "err"
    code = main(["norms-views", "-w", "task=mrpc", "-w", "variant=finetuned", "--input", f"sample={tmp / 'sample.parquet'}",
                 "--input", f"train={tmp / 'train.parquet'}", "--output", f"norms={d / 'norms.csv'}",
                 "--output", f"mixing={d / 'mixing.csv'}", "--output", f"scores={d / 'token_scores.parquet'}",
                 "--output", f"layers={d / 'mixing_layers.parquet'}", "--output", f"decision={d / 'decision.parquet'}",
                 "--config", config("norms_views"), "--no-mlflow"])
    assert code != 0
    err = capsys.readouterr().err
    assert "--input model=" in err and "Traceback" not in err
