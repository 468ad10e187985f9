"""bertology.pipeline.layout: every template gives the path the contract fixes (docs/reference.md#layout), filling is partial,
paths read back, the reference's table of paths and the templates agree, and no other file of rules/ or
src/bertology/ spells a results/ path."""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

import pytest

from bertology.pipeline import layout
from bertology.pipeline.errors import UserError

#: every template, filled completely, and the path the contract (docs/reference.md#layout) gives it
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
    ("sample", (("task", "rte"),)): "results/data/rte/sample.parquet",
    ("words", (("task", "rte"),)): "results/data/rte/words.parquet",
    ("store", (("task", "rte"), ("variant", "finetuned"))): "results/attention/rte/finetuned.zarr",
    ("syntax_sample", ()): "results/data/syntax/sample.parquet",
    ("syntax_words", ()): "results/data/syntax/words.parquet",
    ("syntax_sentences", ()): "results/data/syntax/sentences.csv",
    ("syntax_counts", ()): "results/data/syntax/counts.json",
    ("syntax_store", (("model", "rte-finetuned"),)): "results/attention/syntax/rte-finetuned.zarr",
    ("variant_stat", (("task", "rte"), ("variant", "pretrained"), ("file", "patterns.csv"))):
        "results/stats/rte/pretrained/patterns.csv",
    ("cosine", (("task", "rte"), ("seedtag", ""))): "results/stats/rte/cosine.csv",
    ("decoder_sink", (("task", "rte"),)): "results/stats/rte/decoder_sink.csv",
    ("decoder_induction", (("task", "rte"),)): "results/stats/rte/decoder_induction.csv",
    ("features_diff", (("task", "rte"), ("seedtag", "-seed43"))): "results/stats/rte/features_diff-seed43.csv",
    ("cosine_examples", (("task", "rte"), ("seedtag", ""))): "results/stats/rte/cosine_examples.npz",
    ("seed_stat", (("task", "rte"), ("name", "roles"))): "results/stats/rte/seeds/roles.csv",
    ("sieve_delta", (("seedtag", ""),)): "results/stats/sieve_delta.csv",
    ("sieve_summary", ()): "results/stats/sieve_summary.csv",
    ("framenet_links", ()): "results/data/framenet/links.parquet",
    ("framenet_counts", ()): "results/data/framenet/counts.json",
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
    ("claims", ()): "results/claims.csv",
    ("claims_md", ()): "results/claims.md",
    ("compare_table", (("name", "sinks"),)): "results/compare/sinks.csv",
    ("compare_figure", (("name", "depth"),)): "results/compare/depth.png",
    ("models_counts", ()): "results/compare/claims.csv",
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
    assert layout.parse("data", "/run/results/data/rte/train.parquet") == {"task": "rte", "split": "train"}
    assert layout.parse("data", "data/rte/train.parquet", split="train") == {"task": "rte"}
    assert layout.parse("data", "/run/results/data/rte/validation.parquet", split="train") is None
    assert layout.parse("store", "x/attention/rte/finetuned-seed4.zarr") == {"task": "rte", "variant": "finetuned-seed4"}
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


# --------------------------------------------------------------------- no path spelled outside the layout

REPO = Path(__file__).resolve().parents[1]
#: files allowed to spell a results/ path literal, and why (none: every path comes from bertology.pipeline.layout)
EXCEPTIONS: dict[str, str] = {}


def _literals_py(path: Path) -> list[tuple[int, str]]:
    """The string literals of a Python file that start with 'results/' (docstrings excluded: they document)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):  # an f-string's literal parts are Constants too
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and node.value.startswith("results/")):
            out.append((node.lineno, node.value))
    return out


def _literals_smk(path: Path) -> list[tuple[int, str]]:
    """The string literals of a Snakemake file (Python's tokens; comments excluded) that start with 'results/'."""
    out = []
    with path.open() as f:
        for tok in tokenize.generate_tokens(f.readline):
            if tok.type == tokenize.STRING:
                body = tok.string.lstrip("rbfuRBFU").strip("\"'")
                if body.startswith("results/"):
                    out.append((tok.start[0], tok.string))
    return out


def test_no_results_path_is_spelled_outside_the_layout():
    files = [*sorted((REPO / "rules").glob("*.smk")), REPO / "Snakefile",
             *sorted((REPO / "src" / "bertology").rglob("*.py"))]
    found = []
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        if rel == "src/bertology/pipeline/layout.py" or rel in EXCEPTIONS:
            continue
        literals = _literals_py(path) if path.suffix == ".py" else _literals_smk(path)
        found += [f"{rel}:{line}: {text}" for line, text in literals]
    assert not found, "results/ paths spelled outside bertology.pipeline.layout (use layout.path):\n" + "\n".join(found)


def test_the_check_finds_a_spelled_path(tmp_path):
    py = tmp_path / "m.py"
    py.write_text('"""results/x.csv is documented."""\nA = "results/a.csv"\nB = f"results/{A}/b.csv"\n'
                  'C = "see results/c.csv"\n')
    assert [line for line, _ in _literals_py(py)] == [2, 3]
    smk = tmp_path / "r.smk"
    smk.write_text('# results/x.csv in a comment\nrule r:\n    output:\n        t="results/t.csv",\n'
                   '        u=f"results/{{task}}/u.csv",\n')
    assert [line for line, _ in _literals_smk(smk)] == [4, 5]


#: paths of the reference's table that are no layout template, and why
NOT_TEMPLATES = {
    "results/mlflow.db": "the MLflow store is the config's mlflow.tracking_uri (its default names it)",
    "results/mlartifacts": "MLflow's artifacts sit beside the sqlite store (bertology.tracking.uri)",
}


#: a value of each wildcard the reference's paths show
SAMPLE = {"task": "rte", "split": "train", "init": "pretrained", "seedtag": "-seed43", "variant": "finetuned",
          "model": "rte-finetuned", "rule": "score"}


def _braces(text: str) -> list[str]:
    """'a/{x,y}-b' -> ['a/x-b', 'a/y-b'] (the reference's shorthand; a field without a comma stays)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if m is None:
        return [text]
    return [e for alt in m.group(1).split(",") for e in _braces(text[:m.start()] + alt + text[m.end():])]


def test_the_reference_lists_every_template_and_only_layout_paths():
    text = (REPO / "docs" / "reference.md").read_text()
    table = text.split("<!-- layout:begin -->")[1].split("<!-- layout:end -->")[0]
    documented = [p.rstrip("/") for cell in re.findall(r"^\| ([^|]+) \|", table, re.M)
                  for code in re.findall(r"`(results/[^`]+)`", cell) for p in _braces(code)]
    assert documented, "no paths found in the reference's layout table"
    covered = set()
    for doc in documented:
        if doc in NOT_TEMPLATES:
            continue
        relative = layout.fill(doc.removeprefix(f"{layout.ROOT}/"), **SAMPLE)
        keys = [k for k in layout.TEMPLATES if layout.match(k, relative) is not None]
        assert keys, f"docs/reference.md lists {doc}, which no bertology.pipeline.layout template gives"
        covered.update(keys)
    assert set(layout.TEMPLATES) - covered == set(), "templates the reference's layout table does not list"
