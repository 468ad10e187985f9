"""bertology.layout: every template gives the path of DESIGN.md section 4, filling is partial, paths read back,
and no other file of rules/ or src/bertology/ spells a results/ path."""

from __future__ import annotations

import pytest

from bertology import layout
from bertology.errors import UserError

#: every template, filled completely, and the path the contract (DESIGN.md section 4) gives it
CONTRACT = {
    ("data", (("task", "rte"), ("split", "validation"))): "results/data/rte/validation.parquet",
    ("data_skipped", (("task", "rte"), ("split", "train"))): "results/data/rte/train.skipped.csv",
    ("demo_trees", ()): "results/data/syntax/demo.conllu",
    ("model", (("task", "rte"), ("init", "random"), ("seedtag", ""))): "results/models/rte/random",
    ("checkpoint", (("task", "rte"), ("init", "pretrained"), ("seedtag", "-seed43"))):
        "results/checkpoints/rte/pretrained-seed43",
    ("score", (("task", "mrpc"), ("variant", "random-finetuned"), ("seedtag", ""))):
        "results/scores/mrpc/random-finetuned.json",
    ("table1", ()): "results/tables/table1.csv",
    ("table1_md", ()): "results/tables/table1.md",
    ("table1_tests", ()): "results/tables/table1_tests.csv",
    ("sample", (("task", "rte"),)): "results/attention/rte/sample.parquet",
    ("words", (("task", "rte"),)): "results/attention/rte/words.parquet",
    ("store", (("task", "rte"), ("variant", "finetuned"))): "results/attention/rte/finetuned.zarr",
    ("syntax_sample", ()): "results/attention/syntax/sample.parquet",
    ("syntax_words", ()): "results/attention/syntax/words.parquet",
    ("syntax_sentences", ()): "results/attention/syntax/sentences.csv",
    ("syntax_counts", ()): "results/attention/syntax/counts.json",
    ("syntax_store", (("model", "rte-finetuned"),)): "results/attention/syntax/rte-finetuned.zarr",
    ("variant_stat", (("task", "rte"), ("variant", "pretrained"), ("file", "patterns.csv"))):
        "results/stats/rte/pretrained/patterns.csv",
    ("cosine", (("task", "rte"), ("seedtag", ""))): "results/stats/rte/cosine.csv",
    ("features_diff", (("task", "rte"), ("seedtag", "-seed43"))): "results/stats/rte/features_diff-seed43.csv",
    ("cosine_examples", (("task", "rte"), ("seedtag", ""))): "results/stats/rte/cosine_examples.npz",
    ("seed_stat", (("task", "rte"), ("name", "roles"))): "results/stats/rte/seeds/roles.csv",
    ("sieve_delta", (("seedtag", ""),)): "results/stats/sieve_delta.csv",
    ("sieve_summary", ()): "results/stats/sieve_summary.csv",
    ("framenet_links", ()): "results/stats/framenet/links.parquet",
    ("framenet_counts", ()): "results/stats/framenet/counts.json",
    ("syntax_stat", (("model", "pretrained"),)): "results/stats/syntax/pretrained.csv",
    ("syntax_summary", (("model", "pretrained"),)): "results/stats/syntax/pretrained.json",
    ("syntax_best", ()): "results/stats/syntax/best_heads.csv",
    ("ablation", (("task", "rte"), ("name", "heads"), ("seedtag", ""))): "results/ablation/rte/heads.csv",
    ("ablation_info", (("task", "rte"), ("seedtag", ""))): "results/ablation/rte/summary.json",
    ("ablation_examples", (("task", "rte"), ("seedtag", "-seed7"))): "results/ablation/rte/examples-seed7.npz",
    ("task_figure", (("name", "ablation-heads"), ("task", "rte"))): "results/figures/ablation-heads-rte.png",
    ("figure", (("name", "table1"),)): "results/figures/table1.png",
    ("sieve_delta_figure", (("seedtag", ""),)): "results/figures/sieve-delta.png",
    ("patterns_labels", (("task", "rte"),)): "results/patterns/rte/labels.csv",
    ("patterns_images", (("task", "rte"),)): "results/patterns/rte/images",
    ("report", ()): "results/report.html",
    ("explorer", ()): "results/explorer.html",
    ("log", (("rule", "store_stats"), ("job", "rte/pretrained"))): "results/logs/store_stats/rte/pretrained.log",
    ("benchmark", (("rule", "table1"), ("job", "table1"))): "results/benchmarks/table1/table1.tsv",
}


def test_every_template_gives_the_contract_path():
    assert {key for key, _ in CONTRACT} == set(layout.TEMPLATES), "a template without its contract path here"
    for (key, values), expected in CONTRACT.items():
        assert layout.path(key, **dict(values)) == expected
        assert set(layout.fields(key)) == {name for name, _ in values}, key


def test_filling_is_partial_and_keeps_wildcards():
    assert layout.path("store") == "results/attention/{task}/{variant}.zarr"
    assert layout.path("store", variant="pretrained") == "results/attention/{task}/pretrained.zarr"
    assert layout.path("score", seedtag="") == "results/scores/{task}/{variant}.json"
    # a value that is itself a wildcard (or a doubled brace for a later expand) is inserted as it is
    assert layout.path("variant_stat", task="{{task}}", file="sieve.csv") == "results/stats/{{task}}/{variant}/sieve.csv"
    assert layout.rel("variant_stat", file="norms.csv") == "stats/{task}/{variant}/norms.csv"


def test_root_and_expansion():
    assert layout.path("report", root="/tmp/run/results") == "/tmp/run/results/report.html"
    assert layout.path("report", root=None) == "report.html"
    assert layout.paths("store", task=["rte", "sst2"], variant=("pretrained", "finetuned")) == [
        "results/attention/rte/pretrained.zarr", "results/attention/rte/finetuned.zarr",
        "results/attention/sst2/pretrained.zarr", "results/attention/sst2/finetuned.zarr"]
    assert layout.paths("cosine", seedtag=["", "-seed43"]) == ["results/stats/{task}/cosine.csv",
                                                               "results/stats/{task}/cosine-seed43.csv"]


def test_logs_and_benchmarks():
    assert layout.log("table1") == "results/logs/table1/table1.log"
    assert layout.log("score", "{task}/{variant}{seedtag}") == "results/logs/score/{task}/{variant}{seedtag}.log"
    assert layout.benchmark("extract_attention", "{task}/{variant}") == \
        "results/benchmarks/extract_attention/{task}/{variant}.tsv"


def test_unknown_template_or_field_says_which_exist():
    with pytest.raises(KeyError, match="templates: data"):
        layout.path("stores")
    with pytest.raises(TypeError, match="its fields: task, variant"):
        layout.path("store", seedtag="")


def test_paths_read_back():
    assert layout.match("store", "attention/rte/pretrained.zarr") == {"task": "rte", "variant": "pretrained"}
    assert layout.match("ablation", "ablation/rte/heads-seed43.csv") == {"task": "rte", "name": "heads",
                                                                        "seedtag": "-seed43"}
    assert layout.match("ablation", "ablation/rte/heads.csv", seedtag="") == {"task": "rte", "name": "heads"}
    assert layout.match("cosine", "stats/rte/cosine-seed43.csv", seedtag="") is None
    assert layout.match("cosine", "stats/rte/cosine-seed43.csv") == {"task": "rte", "seedtag": "-seed43"}
    assert layout.match("score", "scores/rte/finetuned-seed43.json") == {"task": "rte", "variant": "finetuned",
                                                                         "seedtag": "-seed43"}
    assert layout.match("variant_stat", "stats/rte/finetuned/x/mixing.csv", file="mixing.csv") is None
    declared = ["stats/rte/finetuned/mixing.csv", "stats/rte/pretrained/mixing.csv", "stats/rte/pretrained/norms.csv"]
    assert layout.matching(layout.rel("variant_stat", file="mixing.csv"), declared) == declared[:2]
    assert layout.under("/a/results", ["/a/results/stats/x.csv", "/b/y.csv"]) == ["stats/x.csv"]


def test_variant_to_model():
    assert layout.model_dir("rte", "pretrained") is None
    assert layout.model_dir("rte", "random-finetuned", "-seed43") == "results/models/rte/random-seed43"
    assert layout.variant_model("rte", "finetuned") == "results/models/rte/pretrained"
    assert layout.variant_model("rte", "finetuned-seed43") == "results/models/rte/pretrained-seed43"
    assert layout.variant_model("rte", "pretrained") is None
    assert layout.syntax_model("sst2-finetuned-seed5") == "results/models/sst2/pretrained-seed5"
    assert layout.syntax_model("pretrained") is None
    assert layout.checkpoint("rte", "random") == "results/checkpoints/rte/random"
    with pytest.raises(UserError, match="unknown variant"):
        layout.variant_model("rte", "pretrained-seed43")
    with pytest.raises(UserError, match="unknown model"):
        layout.syntax_model("finetuned")
