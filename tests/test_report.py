"""The report: self-contained, every figure embedded once in its section, tables shown."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from bertology.pipeline.config import validate_config
from bertology.report.page import SECTIONS, assign_figures, build_report


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
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json

    cfg = validate_config({"model": "minilm-l6", "tasks": ["rte"], "ablation": {"bootstrap": 77}})
    return sections_json(cfg, STEPS["report"].config)


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
    from bertology.report.page import markdown_to_html

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


# ------------------------------------------------------------------ the answer at a glance: matrix, forest, native report

TASKS3 = ["sst2", "mrpc", "rte"]


def _cells(text):
    """(claim, task, verdict, classes, colspan) of every matrix cell of a page."""
    from html.parser import HTMLParser

    out = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "td" and "data-claim" in a:
                out.append((a["data-claim"], a["data-task"], a["data-verdict"], a["class"], int(a.get("colspan", 1))))

    P().feed(text)
    return out


def test_claims_matrix_one_row_per_claim_one_column_per_task():
    """The matrix of a ledger: a row per claim, a column per task, each cell the verdict as colour (its class) and
    word with the effect [interval] and the n it rests on; a task-free claim one cell across the tasks; links to
    the claim's full row and to its figure (when the report has it); the legend counts Holm's tests. A column the
    matrix does not know (another helper's flag) is ignored."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import effect_text
    from bertology.claims.render import ledger_html, matrix_html
    from tests.builders.claims import synthetic_ledger

    ledger = synthetic_ledger(TASKS3, extra=True)
    text = matrix_html(ledger, ["cosine-rte", "parser-syntax"], 0.95)
    cells = _cells(text)
    assert len(cells) == len(ledger)
    assert text.count("<tr>") == 1 + len(REGISTRY.claims())  # the header and a row per claim
    assert [f"<th>{t}</th>" in text for t in TASKS3] == [True] * 3
    with_seeds = synthetic_ledger(TASKS3, seeds=3)
    seeded = matrix_html(with_seeds, [], 0.95)
    n_per_seed = 3 * int((with_seeds["seed_verdicts"].fillna("") != "").sum())  # a dot per seed of each row
    assert seeded.count("3 seeds pooled") == 3 and seeded.count('class="sd v-') == n_per_seed
    for (claim, task, verdict, cls, span), r in zip(cells, ledger.to_dict("records")):
        assert (claim, task, verdict) == (r["claim"], r["task"], r["verdict"])
        assert f"c-{verdict.replace(' ', '-')}" in cls.split()
        assert span == (3 if task == "all" else 1)
    free = [c for c in cells if c[1] == "all"]
    assert {c[0] for c in free} == {"clark_parser_nsubj", "clark_parser_obj", "clark_parser_det"}
    row = ledger[(ledger.claim == "kovaleva_cosine_last_layers") & (ledger.task == "rte")].iloc[0]
    cell = text.split('data-claim="kovaleva_cosine_last_layers" data-task="rte"')[1].split("</td>")[0]
    assert f">{row['verdict']}<" in cell and effect_text(row) in cell and row["rests_on"] in cell
    assert 'href="#claim-kovaleva_cosine_last_layers-rte"' in cell and 'href="#fig-cosine-rte"' in cell
    other = text.split('data-claim="kovaleva_cosine_last_layers" data-task="sst2"')[1].split("</td>")[0]
    assert "fig-" not in other  # the report has no cosine-sst2 figure: no link
    assert 'href="#fig-parser-syntax"' in text
    n_tests = int(ledger["p"].notna().sum())
    assert f"<b>{n_tests} tests</b>" in text
    for word in ("holds", "contradicted", "inconclusive", "not computed"):
        assert f">{word}</span>" in text
    full = ledger_html(ledger, ["cosine-rte"], 0.95)
    for claim, task, *_ in cells:  # every cell's row link has its target in the full ledger
        assert f'id="claim-{claim}-{task}"' in full


def test_forest_plot_draws_every_claim_against_its_null():
    """The forest plot of a ledger: a panel per claim, grouped by paper; a row per task (one for a task-free claim);
    the null drawn as a vertical line; each marker coloured by its row's verdict; the n beside each row."""
    from matplotlib.colors import to_hex

    from bertology.claims.forest import COLOURS, forest_figure, pack_columns, paper_blocks
    from tests.builders.claims import synthetic_ledger

    ledger = synthetic_ledger(TASKS3, seeds=3, extra=True)
    fig = forest_figure(ledger, 0.95)
    panels = [ax for ax in fig.axes if ax.get_title(loc="left")]
    claims = [c for _, cs in paper_blocks(ledger) for c in cs]  # by paper, each paper's in the ledger's order
    assert sorted(claims) == sorted(set(ledger["claim"]))
    assert [ax.get_title(loc="left").split()[0] for ax in panels] == claims
    for ax, claim in zip(panels, claims):
        rows = ledger[ledger.claim == claim]
        null = float(rows["null"].iloc[0])
        assert any(list(line.get_xdata()) == [null, null] and line.get_linestyle() == "--" for line in ax.lines)
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == (["all tasks"] if (rows.task == "all").all() else TASKS3)
        dots = [line for line in ax.lines if line.get_marker() == "o"]
        drawn = rows[rows.verdict != "not computed"]
        assert len(dots) == len(drawn)
        for dot, verdict in zip(dots, drawn["verdict"]):
            colour = dot.get_color() if dot.get_markerfacecolor() != "white" else dot.get_markeredgecolor()
            assert to_hex(colour) == COLOURS[verdict]
        texts = [t.get_text() for t in ax.texts]
        assert sum(t.startswith("n = ") for t in texts) == len(drawn)
    papers = [t.get_text() for t in fig.texts]
    assert "Kovaleva et al. 2019" in papers and "Pande et al. 2021" in papers
    plt.close(fig)
    assert pack_columns([1, 1, 1, 1], 2) == [[0, 1], [2, 3]]
    assert pack_columns([5, 1, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4, 5]]
    assert pack_columns([1, 2], 1) == [[0, 1]]


def test_report_opens_with_the_matrix_then_the_forest_plot_then_the_ledger(tmp_path):
    from bertology.claims.forest import write_forest
    from tests.builders.claims import synthetic_ledger

    results = tmp_path / "results"
    results.mkdir()
    ledger = synthetic_ledger(TASKS3)
    ledger.to_csv(results / "claims.csv", index=False)
    write_forest(ledger, results / "figures" / "claims.png", 0.95)
    _png(results / "figures" / "cosine-rte.png")
    text = build_report(results, validate_config({"model": "minilm-l6", "tasks": TASKS3, "data": {"source": "demo"}}),
                        _declared(results))
    claims = text.split('<section id="claims">')[1].split("</section>")[0]
    assert claims.index('id=claims-matrix') < claims.index('id="fig-claims"') < claims.index("table class='tbl claims'")
    assert "Other figures" not in text and text.count("data:image/png;base64,") == 2


def test_native_report_captions_are_the_registrys():
    """report/captions/*.rst are bertology.report.native.caption_files() (regenerate: python -m
    bertology.report.native), and every figure the rules flag has its paper's category."""
    from pathlib import Path, PurePosixPath

    from bertology.report.native import caption_files, report_flags

    repo = Path(__file__).resolve().parents[1]
    files = caption_files()
    on_disk = {p.relative_to(repo).as_posix() for p in (repo / "report" / "captions").glob("*.rst")}
    assert on_disk == set(files), "python -m bertology.report.native writes them"
    for rel, text in files.items():
        assert (repo / rel).read_text() == text, f"{rel}: regenerate with python -m bertology.report.native"
    from bertology.analyses import REGISTRY

    flagged = [(o.path, o.report) for o in REGISTRY.declared_outputs() if o.report]
    figures = [(PurePosixPath(path).stem.replace("-{task}", "").replace("{seedtag}", ""), name) for path, name in flagged
               if path.startswith("figures/")]
    assert len(figures) >= 15
    for name, flag in figures:
        assert name == flag, (name, flag)
        flags = report_flags(name)
        assert flags["category"] != "Other figures" and (repo / flags["caption"]).is_file(), name
    assert report_flags("cosine")["category"] == "Kovaleva et al. 2019"
    assert report_flags("parser-syntax")["subcategory"].startswith("Heads as dependency parsers")
    assert report_flags("claims")["category"] == "Claims"
