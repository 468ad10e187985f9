"""The pretrained-only mode (train.inits: []): nothing is fine-tuned, every analysis that needs no fine-tuned model
runs on the pretrained one, and a declared task may be text only (label: null). The run's targets, the explorer's
inputs, the ledger's `not computed` rows (no fine-tuned model; no [CLS] on a decoder), the onstart notes, the
config error of a text-only task that would be fine-tuned, and the whole DAG on a text-only task with a tiny BERT."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.builders import declared as b


def _run(**over):
    from bertology.registry import Run

    values = dict(tasks=("rte",), splits=("train", "validation"), stores=("pretrained",), inits=(), seedtags=(),
                  finetuned=(), enabled=frozenset({"norms", "gold_trees"}))
    return Run(**{**values, **over})


def test_a_run_without_inits_wants_no_fine_tuned_output():
    from bertology.analyses import REGISTRY

    targets = REGISTRY.targets(_run())
    assert not [t for t in targets if "finetuned" in t or "/models/" in t or "/scores/" in t], targets
    assert not [t for t in targets if "/ablation/" in t or "cosine" in t or "table1" in t or "sieve_delta" in t]
    assert {"results/claims.csv", "results/report.html", "results/explorer.html"} <= set(targets)
    assert {"results/attention/rte/pretrained.zarr", "results/stats/rte/pretrained/features.csv",
            "results/stats/rte/pretrained/sieve.csv", "results/stats/syntax/pretrained.csv",
            "results/figures/features-rte.png", "results/figures/sieve-roles-rte.png", "results/figures/norms-rte.png",
            "results/figures/patterns-tasks.png", "results/stats/sieve_summary.csv"} <= set(targets)
    assert "cosine" not in REGISTRY.outputs("kovaleva_figures", _run())
    assert "faithfulness" not in REGISTRY.outputs("norms_figures", _run())
    fine = REGISTRY.targets(_run(stores=("pretrained", "finetuned"), inits=("pretrained",), seedtags=("",),
                                 finetuned=("finetuned",)))
    assert {"results/stats/rte/cosine.csv", "results/tables/table1.csv", "results/figures/features-rte.png",
            "results/stats/syntax/rte-finetuned.csv"} <= set(fine)


def test_the_finetuned_setting_follows_the_fine_tuned_variants():
    assert "finetuned" not in _run(enabled=frozenset({"finetuned"})).enabled
    assert "finetuned" in _run(finetuned=("finetuned",), seedtags=("",)).enabled
    assert _run().values("first_seed") == () and _run().values("syntax_models") == ("pretrained",)


def test_the_explorer_reads_the_pretrained_model_only():
    from bertology.explorer.inputs import explorer_inputs

    got = explorer_inputs(["rte"], results="results", norms=True, finetuned=False)
    assert not [p for p in got["required"] if "finetuned" in p or "/models/" in p or "cosine" in p
                or "/ablation/" in p], got["required"]
    assert "results/stats/rte/pretrained/features.csv" in got["required"]
    assert "results/stats/rte/cosine.csv" in got["optional"]
    both = explorer_inputs(["rte"], results="results", norms=True)
    assert "results/attention/rte/finetuned.zarr" in both["required"]
    assert "results/stats/rte/cosine.csv" in both["required"]


def test_the_explorer_notes_no_file_the_run_does_not_make(tmp_path):
    from bertology.explorer.inputs import Inputs

    src = Inputs.of(tmp_path, ["stats/rte/pretrained/features.csv"])
    notes: list[str] = []
    assert src.read_csv(tmp_path / "stats/rte/finetuned/features.csv", notes) is None and notes == []
    assert src.read_csv(tmp_path / "stats/rte/pretrained/features.csv", notes) is None
    assert notes == [f"{tmp_path.name}/stats/rte/pretrained/features.csv absent"]


def _features(cls: bool) -> pd.DataFrame:
    """A features.csv of 2 layers x 4 heads; without [CLS] (a decoder) its cls rows have no value."""
    rng = np.random.default_rng(0)
    rows = []
    for layer in range(2):
        for head in range(4):
            for f in ("cls", "sep", "noun", "verb"):
                empty = f == "cls" and not cls
                rows.append({"layer": layer, "head": head, "feature": f,
                             "mean": np.nan if empty else float(rng.uniform()),
                             "std": np.nan if empty else 0.1, "n": 0 if empty else 8})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("claim", ["kovaleva_special_tokens", "kovaleva_cls_early_sep_late"])
def test_the_cls_claims_of_a_decoder_read_not_computed(tmp_path, claim):
    from bertology.analyses import REGISTRY
    from bertology.claims.bootstrap import NOT_COMPUTED, Boot
    from bertology.claims.kovaleva import NO_CLS
    from bertology.claims.ledger import build_ledger

    boot = Boot(resamples=50, confidence=0.95, seed=0)
    (tmp_path / "stats/rte/finetuned").mkdir(parents=True)
    c = [c for c in REGISTRY.claims("decoder") if c.id == claim]
    _features(cls=False).to_csv(tmp_path / "stats/rte/finetuned/features.csv", index=False)
    (row,) = build_ledger(tmp_path, c, ["rte"], [42], boot).to_dict("records")
    assert row["verdict"] == NOT_COMPUTED and row["note"] == NO_CLS and "decoder" in row["note"]
    assert math.isnan(row["ci_low"]) and row["rests_on"].startswith("nothing: ")
    _features(cls=True).to_csv(tmp_path / "stats/rte/finetuned/features.csv", index=False)
    (row,) = build_ledger(tmp_path, c, ["rte"], [42], boot).to_dict("records")
    assert row["verdict"] != NOT_COMPUTED and math.isfinite(row["effect"])


def test_without_seeds_the_claims_about_a_fine_tuned_model_read_not_computed(tmp_path):
    from bertology.analyses import REGISTRY
    from bertology.claims.bootstrap import NOT_COMPUTED, Boot
    from bertology.claims.ledger import NO_FINETUNING, build_ledger

    (tmp_path / "stats/rte/pretrained").mkdir(parents=True)
    _features(cls=True).to_csv(tmp_path / "stats/rte/pretrained/features.csv", index=False)
    claims = [c for c in REGISTRY.claims("encoder") if c.id in ("kovaleva_special_tokens", "kovaleva_table1_pretrained",
                                                                 "kovaleva_disable_head", "clark_sep_middle")]
    ledger = build_ledger(tmp_path, claims, ["rte"], [], Boot(resamples=50, confidence=0.95, seed=0))
    rows = ledger.set_index("claim")
    for fine in ("kovaleva_special_tokens", "kovaleva_table1_pretrained", "kovaleva_disable_head"):
        assert rows.loc[fine, "verdict"] == NOT_COMPUTED and rows.loc[fine, "note"] == NO_FINETUNING
    assert rows.loc["clark_sep_middle", "verdict"] != NOT_COMPUTED  # about the pretrained model: computed


def test_a_claim_whose_tables_lack_what_it_reads_is_not_computed():
    from bertology.analyses import REGISTRY
    from bertology.claims.bootstrap import NOT_COMPUTED, Boot
    from bertology.claims.ledger import evaluate

    claim = next(c for c in REGISTRY.claims() if c.id == "kobayashi_mixing_residual")
    pre_norm = pd.DataFrame({"layer": np.arange(4), "measure": "attn_n", "mean": 0.5, "std": 0.1, "n": 10})
    row = evaluate(claim, "rte", [{"mixing": pre_norm}], Boot(resamples=50, confidence=0.95, seed=0))
    assert row["verdict"] == NOT_COMPUTED and row["note"] == "mixing.csv lacks measure attnres_n", row


def test_the_notes_say_once_what_is_left_out():
    from bertology.workflow.snakefile import pretrained_only_notes

    tasks = ["rte", {"name": "plain", "label": None}, {"name": "own", "label": "y"}]
    assert pretrained_only_notes({"train": {"inits": ["pretrained"]}, "tasks": tasks}) == []
    fine, text = pretrained_only_notes({"train": {"inits": []}, "tasks": tasks})
    assert fine.startswith("bertology: train.inits is []: ") and "cosine" in fine and "not computed" in fine
    assert text.startswith("bertology: task(s) plain are text only (label: null)")


def _text_only_config(inits):
    return {"model": "minilm-l6", "train": {"inits": inits},
            "tasks": [{"name": "plain", "source": "plain.csv", "text": "sentence", "label": None}]}


def test_a_text_only_task_that_would_be_fine_tuned_is_one_line():
    from bertology.pipeline.config import ConfigError, validate_config

    with pytest.raises(ConfigError) as err:
        validate_config(_text_only_config(["pretrained"]))
    message = str(err.value)
    assert "\n" not in message and "plain is text only (label: null)" in message and "train.inits: []" in message
    assert validate_config(_text_only_config([]))["tasks"][0]["label"] is None


def test_a_text_only_split_holds_text_and_no_label(tmp_path, monkeypatch):
    from bertology.data.declared import read_declared
    from bertology.pipeline.config import validate_config

    b.write_csv(b.five_class(20)[["sentence"]], tmp_path / "plain.csv")
    monkeypatch.chdir(tmp_path)
    decl = validate_config(_text_only_config([]))["tasks"][0]
    split = read_declared({**decl, "splits": {"train": "train", "validation": 0.25}}, "validation", seed=1,
                          bad_rows="error")
    assert len(split.frame) == 5 and split.frame["label"].isna().all() and split.label_names == ()
    assert list(split.frame.columns) == ["idx", "text_a", "text_b", "label"]


@pytest.mark.slow
def test_the_pretrained_only_dag_of_a_text_only_task(tmp_path, tiny_model_dir, config_file, snakemake_run):
    from bertology.claims.ledger import NO_FINETUNING

    b.write_csv(b.five_class(40)[["sentence"]], tmp_path / "plain.csv")
    config_file(tmp_path, model=str(tiny_model_dir), train={"inits": []},
                tasks=[{"name": "plain", "source": "plain.csv", "text": "sentence", "label": None,
                        "splits": {"validation": 0.3}}],
                attention={"examples": 8, "batch_size": 8, "chunk_size": 8},
                analysis={"claims": {"bootstrap": 50}, "norms": {"examples": 4}})
    dry = snakemake_run(tmp_path, "-n", "--quiet", "rules").stdout
    assert "train_model" not in dry and "score" not in dry and "ablation" not in dry and "cosine" not in dry
    proc = snakemake_run(tmp_path, "--cores", "2")
    notes = [line for line in proc.stderr.splitlines() if line.startswith("bertology: ")]
    assert any(n.startswith("bertology: train.inits is []") for n in notes), notes
    assert any(n.startswith("bertology: task(s) plain are text only") for n in notes), notes
    r = tmp_path / "results"
    assert (r / "report.html").exists() and (r / "explorer.html").exists()
    assert not (r / "models").exists() and not (r / "scores").exists()
    assert not [p for p in r.rglob("*finetuned*")]
    assert pd.read_parquet(r / "data/plain/train.parquet")["label"].isna().all()
    ledger = pd.read_csv(r / "claims.csv")
    fine = ledger[ledger.variant == "finetuned"]
    assert len(fine) > 0 and (fine.verdict == "not computed").all() and (fine.note == NO_FINETUNING).all()
    pre = ledger[ledger.variant == "pretrained"]
    assert (pre.verdict != "not computed").any()
    assert "stats/plain/finetuned" not in (r / "explorer.html").read_text()  # no note of a file the run never makes
    figures = {p.name for p in (r / "figures").iterdir()}
    assert {"features-plain.png", "patterns-plain.png", "entropy-plain.png", "sieve-roles-plain.png",
            "patterns-tasks.png"} <= figures and not [f for f in figures if "cosine" in f or "ablation" in f]
    assert set(pd.read_csv(r / "stats/sieve_summary.csv").variant) == {"pretrained"}
    report = (r / "report.html").read_text()
    assert "not computed" in report and NO_FINETUNING.split(":")[0] in report
