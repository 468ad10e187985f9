"""The report: self-contained, every figure embedded once in its section, tables shown."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from bertology.config import validate_config
from bertology.report import SECTIONS, assign_figures, build_report


def _png(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    plt.close(fig)


def _declared(results):
    """Every file under `results`, as the report rule would declare them (paths under the results root)."""
    return [p.relative_to(results).as_posix() for p in sorted(results.rglob("*")) if p.is_file()]


def test_figures_are_assigned_by_prefix(tmp_path):
    names = ["cosine-rte", "sieve-roles-rte", "sieve-delta", "ablation-heads-mrpc", "table1", "mystery"]
    got = assign_figures([tmp_path / f"{n}.png" for n in names])
    assert [p.stem for p in got["cosine"]] == ["cosine-rte"]
    assert sorted(p.stem for p in got["sieve"]) == ["sieve-delta", "sieve-roles-rte"]
    assert [p.stem for p in got["ablation"]] == ["ablation-heads-mrpc"]
    assert [p.stem for p in got["table1"]] == ["table1"]
    assert [p.stem for p in got["other"]] == ["mystery"]


def test_report_is_self_contained(tmp_path):
    results = tmp_path / "results"
    for name in ["table1", "cosine-rte", "features-rte", "sieve-roles-rte", "oddball"]:
        _png(results / "figures" / f"{name}.png")
    (results / "tables").mkdir(parents=True)
    pd.DataFrame({"task": ["rte"], "variant": ["finetuned"], "metric": ["accuracy"], "value": [0.61],
                  "n": [277]}).to_csv(results / "tables" / "table1.csv", index=False)
    (results / "tables" / "table1.md").write_text("| Dataset | Fine-tuned |\n|---|---|\n| RTE | 61.0 |\n")
    (results / "stats").mkdir()
    pd.DataFrame({"task": ["rte"], "delimiter_share": [0.42]}).to_csv(results / "stats" / "sieve_summary.csv",
                                                                       index=False)
    text = build_report(results, validate_config({"model": "minilm-l6", "tasks": ["rte"], "data": {"source": "demo"}}),
                        _declared(results))
    assert text.count("data:image/png;base64,") == 5
    assert not re.search(r'src="(?!data:)', text), "every image must be embedded"
    assert "<link" not in text and "<script src" not in text
    for section in SECTIONS:
        assert f'id="{section.key}"' in text
        assert section.finding[:40].replace("'", "&#x27;") in text
    assert "0.42" in text
    # table1.md is shown as a table, not as its Markdown source
    assert "| RTE | 61.0 |" not in text
    assert "<th>Fine-tuned</th>" in text and "<td class=txt>RTE</td><td class=num>61.0</td>" in text
    assert "Other figures" in text and "oddball" in text
    # an analysis that produced nothing says so instead of silently vanishing
    patterns = text.split('id="patterns"')[1].split("</section>")[0]
    assert "No output of this analysis" in patterns


def test_report_shows_only_its_declared_inputs(tmp_path):
    results = tmp_path / "results"
    for name in ["cosine-rte", "cosine-sst2"]:
        _png(results / "figures" / f"{name}.png")
    for task, value in [("rte", 0.125), ("sst2", 0.875)]:
        (results / "ablation" / task).mkdir(parents=True)
        pd.DataFrame({"task": [task], "delta": [value]}).to_csv(results / "ablation" / task / "summary.csv", index=False)
    declared = ["figures/cosine-rte.png", "ablation/rte/summary.csv"]
    text = build_report(results, validate_config({}), declared)
    assert text.count("data:image/png;base64,") == 1 and "cosine-rte" in text and "cosine-sst2" not in text
    assert "0.125" in text and "0.875" not in text


def _report_config() -> str:
    from bertology.cli import STEPS
    from bertology.config import sections_json, validate_config

    cfg = validate_config({"model": "minilm-l6", "tasks": ["rte"], "ablation": {"bootstrap": 77}})
    return sections_json(cfg, STEPS["report"].sections)


def test_report_step_reads_the_directory_of_its_output(tmp_path, monkeypatch):
    from tests.builders.steps import run_step

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    results = tmp_path / "run" / "results"
    _png(results / "figures" / "cosine-rte.png")
    _png(tmp_path / "results" / "figures" / "sieve-roles-rte.png")   # another results/ (e.g. the cwd's): not read
    (results / "ablation" / "rte").mkdir(parents=True)
    pd.DataFrame({"task": ["rte"], "finding": ["random_head"], "delta": [-0.0123]}).to_csv(
        results / "ablation" / "rte" / "summary.csv", index=False)
    monkeypatch.chdir(tmp_path)
    out = results / "report.html"
    targets = [results / "figures" / "cosine-rte.png", results / "ablation" / "rte" / "summary.csv"]
    assert run_step("report", _report_config(), inputs={"targets": targets}, outputs={"report": out}, options=()) == 0
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 1 and "cosine-rte" in text and "sieve-roles-rte" not in text
    assert "-0.0123" in text
    assert '&quot;bootstrap&quot;: 77' in text and "minilm-l6" in text   # the whole config is shown
    assert not list(results.glob("*.tmp"))


def test_report_step_names_a_missing_input(tmp_path, capsys):
    from tests.builders.steps import run_step

    missing = tmp_path / "results" / "tables" / "table1.csv"
    assert run_step("report", _report_config(), inputs={"targets": missing},
                    outputs={"report": tmp_path / "results" / "report.html"}, options=("--no-mlflow",)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"bertology report: error: the report needs 1 missing input(s), e.g. {missing}: run the "
                            f"workflow (snakemake) to produce them first\n")


def test_markdown_tables_and_notes():
    from bertology.report import markdown_to_html

    out = markdown_to_html("| A | B |\n|---|--:|\n| x | 1.5 |\n| y | 2 |\n\nA note, with <html>.\n")
    assert out.count("<tr>") == 3 and "<th>A</th><th>B</th>" in out
    assert "<td class=txt>x</td><td class=num>1.5</td>" in out
    assert "<p class=note>A note, with &lt;html&gt;.</p>" in out


def test_report_links_the_explorer_when_present(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "explorer.html").write_text("<!doctype html>")
    assert "explorer.html" not in build_report(results, validate_config({}), [])   # on disk, not declared
    assert '<a href="explorer.html">' in build_report(results, validate_config({}), ["explorer.html"])
