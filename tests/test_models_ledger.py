"""The ledger, report and explorer of a run of several models: the models' ledgers merged (known verdicts -> known
counts), the model column the claims step writes, the forest plot grouped by model, the claims matrix over models x
tasks, the run's report and its explorer page (in Debian's Chromium: the matrix looked at, the explorers switched and
shown side by side)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.claims.ledger import ALL, COLUMNS
from bertology.claims.models import COUNT_COLUMNS, merge_ledgers, to_markdown, verdict_counts
from tests.builders.claims import synthetic_ledger

MODELS = ("enc", "llama", "gpt2")
TASKS = ["rte", "sst2"]


def _flip(ledger: pd.DataFrame, claim: str, task: str, verdict: str) -> pd.DataFrame:
    ledger = ledger.copy()
    ledger.loc[(ledger.claim == claim) & (ledger.task == task), "verdict"] = verdict
    return ledger


@pytest.fixture(scope="module")
def ledgers() -> dict[str, pd.DataFrame]:
    """Three models' ledgers: the synthetic one (known verdicts) for each, with one claim's verdict on rte set per
    model to holds / contradicted / inconclusive, and another claim's rte row left out of the third model."""
    out = {}
    for m, v in zip(MODELS, ("holds", "contradicted", "inconclusive")):
        ledger = _flip(synthetic_ledger(TASKS, model=m), "kovaleva_cosine_last_layers", "rte", v)
        if m == "gpt2":
            ledger = ledger[~((ledger.claim == "clark_sep_middle") & (ledger.task == "rte"))]
        out[m] = ledger.reset_index(drop=True)
    return out


def test_the_run_ledger_is_every_models_rows_in_the_models_order(ledgers):
    merged = merge_ledgers(ledgers)
    assert list(merged.columns[: len(COLUMNS)]) == list(COLUMNS) and merged.columns[0] == "model"
    assert list(dict.fromkeys(merged["model"])) == list(MODELS)
    assert len(merged) == sum(len(t) for t in ledgers.values())
    for m, t in ledgers.items():
        mine = merged[merged.model == m].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine[list(COLUMNS)], t[list(COLUMNS)], check_dtype=False)
    # p_holm stays each model's own (the rows as each ledger wrote them)
    assert np.allclose(merged.loc[merged.model == "enc", "p_holm"], ledgers["enc"]["p_holm"], equal_nan=True)


def test_a_ledger_of_another_model_is_refused(ledgers):
    from bertology.pipeline.errors import InputError

    with pytest.raises(InputError, match="rows of model 'llama'"):
        merge_ledgers({"enc": ledgers["llama"]})
    unnamed = ledgers["enc"].drop(columns="model")
    assert set(merge_ledgers({"enc": unnamed})["model"]) == {"enc"}


def test_counts_per_claim_and_task_name_the_models(ledgers):
    counts = verdict_counts(merge_ledgers(ledgers))
    assert list(counts.columns) == list(COUNT_COLUMNS)
    row = counts[(counts.claim == "kovaleva_cosine_last_layers") & (counts.task == "rte")].iloc[0]
    assert (row.holds, row.contradicted, row.inconclusive, row.not_computed) == (1, 1, 1, 0)
    assert (row.models_holds, row.models_contradicted, row.models_inconclusive) == ("enc", "llama", "gpt2")
    assert row.holds_in == "one" and row.models == 3
    # a model without the row counts as not computed, named
    missing = counts[(counts.claim == "clark_sep_middle") & (counts.task == "rte")].iloc[0]
    assert missing.not_computed >= 1 and "gpt2" in missing.models_not_computed.split(";")
    # every other row: the three models agree (the synthetic verdicts are the same per model)
    same = ledgers["enc"].set_index(["claim", "task"])["verdict"]
    for r in counts.itertuples():
        if (r.claim, r.task) in {("kovaleva_cosine_last_layers", "rte"), ("clark_sep_middle", "rte")}:
            continue
        v = same[(r.claim, r.task)]
        col = {"holds": "holds", "contradicted": "contradicted", "inconclusive": "inconclusive",
               "not computed": "not_computed"}[v]
        assert getattr(r, col) == 3, (r.claim, r.task)
        assert r.holds_in == ("every" if v == "holds" else "none")
    # every row counts every model once
    assert (counts[["holds", "contradicted", "inconclusive", "not_computed"]].sum(axis=1) == 3).all()
    # one row per claim and task of the ledgers, task-free rows after a claim's per-task ones
    assert len(counts) == len(ledgers["enc"])


def test_the_run_markdown_has_a_section_per_model(ledgers):
    text = to_markdown(merge_ledgers(ledgers), 0.95)
    assert [m for m in re.findall(r"^## (\S+)$", text, flags=re.M)] == list(MODELS)
    assert text.count("| claim | task |") == 3 and "each model's own" in text


def test_the_run_markdown_of_ledgers_read_back_from_csv_is_the_same(ledgers, tmp_path):
    """The run's ledger step reads each model's claims.csv: its empty cells come back NaN, never 'nan' in the text."""
    back = {}
    for m, ledger in ledgers.items():
        ledger.to_csv(tmp_path / f"{m}.csv", index=False)
        back[m] = pd.read_csv(tmp_path / f"{m}.csv")
    assert back["enc"]["seed_verdicts"].isna().any() and back["enc"]["paper_value"].isna().any()
    text = to_markdown(merge_ledgers(back), 0.95)
    assert "nan" not in text.lower().replace("nanmean", "")
    assert text == to_markdown(merge_ledgers(ledgers), 0.95)


def test_the_claims_step_writes_the_model_column(tmp_path, typed_config):
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    results = tmp_path / "results"
    results.mkdir()
    config = validate_config({"tasks": ["rte"], "model_name": "mini", "analysis": {"claims": {"bootstrap": 20}}})
    assert run_step("claims", config, outputs={"ledger": results / "claims.csv",
                                                "markdown": results / "claims.md"}) == 0
    ledger = pd.read_csv(results / "claims.csv")
    assert ledger.columns[0] == "model" and set(ledger["model"]) == {"mini"}
    assert len(ledger) and set(ledger["verdict"]) == {"not computed"}


def test_the_forest_groups_each_claims_rows_by_model(ledgers):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology.claims.forest import forest_figure, panel_rows

    merged = merge_ledgers(ledgers)
    rows = merged[merged.claim == "kovaleva_cosine_last_layers"]
    assert panel_rows(rows, TASKS, MODELS) == [(m, t) for m in MODELS for t in TASKS]
    free = merged[merged.task == ALL]
    if len(free):
        claim = free.claim.iloc[0]
        assert panel_rows(merged[merged.claim == claim], TASKS, MODELS) == [(m, ALL) for m in MODELS]
    fig = forest_figure(merged, 0.95)
    try:
        labels = {ax.get_title(loc="left").split("  ·")[0]: [t.get_text() for t in ax.get_yticklabels()]
                  for ax in fig.axes}
        assert labels["kovaleva_cosine_last_layers"] == [f"{m} · {t}" for m in MODELS for t in TASKS]
        assert "per model and task" in fig._suptitle.get_text()
    finally:
        plt.close(fig)
    one = forest_figure(ledgers["enc"], 0.95)  # one model: labelled by task alone, as before
    try:
        ticks = [t.get_text() for ax in one.axes for t in ax.get_yticklabels()]
        assert "rte" in ticks and not any("·" in t for t in ticks)
    finally:
        plt.close(one)


def test_the_matrix_header_names_each_model_over_its_tasks(ledgers):
    from bertology.report.models import models_matrix_html

    merged = merge_ledgers(ledgers)
    reports = {m: f"m/{m}/report.html" for m in MODELS}
    page = models_matrix_html(merged, None, 0.95, reports)
    thead = page.split("<thead>")[1].split("</thead>")[0]
    top, second = thead.split("</tr>")[:2]
    assert re.findall(r'class="model mfirst" colspan=(\d+) data-model="([^"]+)"', top) == [("2", m) for m in MODELS]
    assert re.findall(r'<a href="m/([^/]+)/report.html">', top) == list(MODELS)
    assert re.findall(r">(rte|sst2)</th>", second) == TASKS * 3
    body = page.split("<tbody>")[1]
    cells = re.findall(r'data-claim="([^"]+)" data-task="([^"]+)" data-model="([^"]+)" data-verdict="([^"]+)"', body)
    assert len(cells) == len(merged)  # every row one cell (the left-out one an empty cell)
    assert ("kovaleva_cosine_last_layers", "rte", "llama", "contradicted") in cells
    assert 'href="m/gpt2/report.html#claim-kovaleva_cosine_last_layers-rte"' in body
    assert body.count("<tr>") == merged.claim.nunique()


def _fake_png(path: Path, colour: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1], color=colour)
    fig.savefig(path)
    plt.close(fig)
    return path


@pytest.fixture(scope="module")
def run_results(tmp_path_factory, ledgers) -> Path:
    """A run's results root of three models: each model's claims.csv, report.html and explorer.html (a small page)
    under m/{name}/, the run's ledger, counts and forest plot written by the step, two comparisons."""
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    results = tmp_path_factory.mktemp("models") / "results"
    files = []
    for m, ledger in ledgers.items():
        root = results / "m" / m
        root.mkdir(parents=True)
        ledger.to_csv(root / "claims.csv", index=False)
        (root / "report.html").write_text(f"<!doctype html><title>{m}</title><h1>report of {m}</h1>")
        files.append(root / "claims.csv")
    config = validate_config({"tasks": TASKS, "models": list(MODELS), "data": {"source": "demo"}})
    outputs = {"ledger": results / "claims.csv", "markdown": results / "claims.md",
               "forest": results / "figures" / "claims.png", "counts": results / "compare" / "claims.csv"}
    assert run_step("models_ledger", config, inputs={"ledgers": files}, outputs=outputs) == 0
    pd.DataFrame({"model": list(MODELS), "task": "rte", "sink_rate": [0.1, 0.8, 0.7]}).to_csv(
        results / "compare" / "sinks.csv", index=False)
    _fake_png(results / "compare" / "sinks.png", "red")
    _fake_png(results / "compare" / "depth.png", "blue")
    return results


def test_the_step_writes_the_run_ledger_counts_and_forest(run_results, ledgers):
    merged = pd.read_csv(run_results / "claims.csv")
    assert list(dict.fromkeys(merged["model"])) == list(MODELS)
    counts = pd.read_csv(run_results / "compare" / "claims.csv")
    assert list(counts.columns) == list(COUNT_COLUMNS)
    assert (run_results / "figures" / "claims.png").stat().st_size > 10_000
    assert "## llama" in (run_results / "claims.md").read_text()


def test_a_ledger_outside_a_models_folder_is_one_line(tmp_path, ledgers):
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    ledgers["enc"].to_csv(tmp_path / "claims.csv", index=False)
    config = validate_config({"tasks": TASKS})
    assert run_step("models_ledger", config, inputs={"ledgers": [tmp_path / "claims.csv"]},
                    outputs={"ledger": tmp_path / "out.csv", "markdown": tmp_path / "out.md"}) != 0


def _report(results: Path, declared: list[str]) -> str:
    from bertology.pipeline.config import validate_config
    from bertology.report.models import build_models_report

    config = validate_config({"tasks": TASKS, "models": list(MODELS), "data": {"source": "demo"}})
    return build_models_report(results, config, declared, 0.95)


def _declared(results: Path) -> list[str]:
    return sorted(p.relative_to(results).as_posix() for p in results.rglob("*")
                  if p.is_file() and (p.name != "report.html" or p.parent.parent.name == "m"))


def test_the_report_opens_with_the_matrix_then_counts_forest_comparisons_and_links(run_results):
    declared = _declared(run_results)
    assert "m/enc/report.html" in declared and "compare/depth.png" in declared
    page = _report(run_results, declared)
    order = [page.index(s) for s in ('id=claims-matrix', 'id=claims-counts', 'id="claims-forest"',
                                     'id="compare"', 'id="models"')]
    assert order == sorted(order)
    assert page.count("data:image/png;base64,") == 3  # the forest and two comparison figures
    assert 'id="compare-sinks"' in page and 'id="compare-depth"' in page and 'id="compare-roles"' not in page
    assert "sink rate" in page  # the caption
    for m in MODELS:
        assert f'<li data-model="{m}"><b>{m}</b>: <a href="m/{m}/report.html">report</a></li>' in page
    assert "https://" not in page.split("<pre class=md>")[0] and "src=\"http" not in page
    # only what is declared: without the comparisons and the counts, neither section
    fewer = _report(run_results, [d for d in declared if not d.startswith("compare/")])
    assert 'id="compare"' not in fewer and "id=claims-counts" not in fewer


def test_the_explorer_page_switches_between_the_models_explorers():
    from bertology.explorer.models import models_explorer_html

    page = models_explorer_html({m: f"m/{m}/explorer.html" for m in MODELS}, {"enc": "m/enc/report.html"})
    assert re.findall(r'<option value="([^"]+)">', page) == [*MODELS, *MODELS]
    assert '"llama":"m/llama/explorer.html"' in page and '<a href="m/enc/report.html">enc</a>' in page
    with pytest.raises(ValueError):
        models_explorer_html({})


def _shot_dir(tmp_path) -> Path:
    import os

    out = Path(os.environ.get("BERTOLOGY_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.browser
def test_the_report_matrix_in_chromium(browser, run_results, tmp_path):
    """The run's report in Chromium: the matrix first, each model's name over its tasks, no sideways scroll of
    the page; a screenshot of the matrix to look at."""
    from tests.builders.browser import open_page

    out = run_results / "report.html"
    out.write_text(_report(run_results, _declared(run_results)), encoding="utf-8")
    pg, watch = open_page(browser, out.resolve().as_uri(), width=1400)
    pg.wait_for_load_state("load")
    sizes = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert sizes[0] <= sizes[1], f"the report scrolls sideways: {sizes[0]} px wide in a {sizes[1]} px window"
    heads = pg.eval_on_selector_all("#claims-matrix th.model", "hs => hs.map(h => h.textContent)")
    assert heads == list(MODELS)
    # each model's header spans exactly its tasks' columns
    for m in MODELS:
        top = pg.locator(f'#claims-matrix th.model[data-model="{m}"]').bounding_box()
        tasks = pg.locator(f'#claims-matrix thead tr:nth-child(2) th[data-model="{m}"]')
        first, last = tasks.first.bounding_box(), tasks.last.bounding_box()
        assert abs(top["x"] - first["x"]) < 2 and abs(top["x"] + top["width"] - last["x"] - last["width"]) < 2
    tops = [pg.locator(sel).bounding_box()["y"] for sel in ("#claims-matrix", "#claims-counts", "#fig-claims")]
    assert tops == sorted(tops) and tops[0] < 1000
    pg.screenshot(path=str(_shot_dir(tmp_path) / "models-report.png"), full_page=True)
    box = pg.locator("#claims-matrix").bounding_box()  # the page unscrolled: the sticky navigation above it
    pg.screenshot(path=str(_shot_dir(tmp_path) / "models-report-matrix.png"), full_page=True,
                  clip={"x": 0, "y": 0, "width": 1400, "height": box["y"] + min(box["height"], 900)})
    watch.check()
    pg.close()


@pytest.mark.browser
def test_the_explorer_switches_and_shows_two_models_side_by_side(browser, tmp_path):
    """The run's explorer in Chromium over two models' real explorers: the chosen model's in the frame, the choice
    in the URL hash; beside it a second model's, which follows the first's selection."""
    from bertology.explorer import load_explorer_data, render_explorer
    from bertology.explorer.models import models_explorer_html
    from tests.builders.browser import open_page
    from tests.builders.explorer import build_results

    base = build_results(tmp_path / "one")
    text = render_explorer(load_explorer_data(base, ["rte", "sst2"], examples=2, seed=3))
    results = tmp_path / "results"
    for m in ("enc", "dec"):
        (results / "m" / m).mkdir(parents=True)
        (results / "m" / m / "explorer.html").write_text(text.replace("bertology explorer", f"explorer {m}"),
                                                          encoding="utf-8")
    out = results / "explorer.html"
    out.write_text(models_explorer_html({m: f"m/{m}/explorer.html" for m in ("enc", "dec")}), encoding="utf-8")
    pg, watch = open_page(browser, out.resolve().as_uri() + "#model=dec", width=1600)
    pg.wait_for_load_state("load")
    left = pg.frame_locator("#left")
    left.locator("body[data-rendered]").wait_for()
    assert pg.locator("#left").get_attribute("src").startswith("m/dec/explorer.html")
    assert pg.locator("#right").is_hidden()
    pg.select_option("#beside", "enc")
    right = pg.frame_locator("#right")
    right.locator("body[data-rendered]").wait_for()
    assert pg.evaluate("new URLSearchParams(location.hash.slice(1)).get('beside')") == "enc"
    # the left explorer shows sst2: the right one follows
    frame = pg.frame(url=re.compile(r".*/m/dec/explorer.html.*"))
    frame.select_option("#task", "1")
    pg.wait_for_function("() => (document.getElementById('right').dataset.at || '').includes('task=sst2')",
                         timeout=10_000)
    assert "task=sst2" in pg.evaluate("new URLSearchParams(location.hash.slice(1)).get('at')")
    other = pg.frame(url=re.compile(r".*/m/enc/explorer.html.*"))
    assert other.evaluate("new URLSearchParams(location.hash.slice(1)).get('task')") == "sst2"
    pg.screenshot(path=str(_shot_dir(tmp_path) / "models-explorer.png"))
    assert not watch.errors, watch.errors
    pg.close()


def test_the_report_and_explorer_steps_write_the_run_pages(run_results):
    """The two steps as their rules run them: the report from its declared targets, the explorer from the models'
    explorers (relative links, so the run's folder moves whole)."""
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    config = validate_config({"tasks": TASKS, "models": list(MODELS), "data": {"source": "demo"}})
    for m in MODELS:
        (run_results / "m" / m / "explorer.html").write_text(f"<!doctype html><title>{m}</title>")
    targets = [run_results / d for d in _declared(run_results) if d != "explorer.html"]
    out = run_results / "run-pages"
    assert run_step("models_report", config, inputs={"targets": targets},
                    outputs={"report": run_results / "report.html"}) == 0
    page = (run_results / "report.html").read_text()
    assert "id=claims-matrix" in page and '<a href="m/llama/explorer.html">explorer</a>' in page
    explorers = [run_results / "m" / m / "explorer.html" for m in MODELS]
    assert run_step("models_explorer", config, inputs={"explorers": explorers},
                    outputs={"page": run_results / "explorer.html"}) == 0
    text = (run_results / "explorer.html").read_text()
    assert '"enc":"m/enc/explorer.html"' in text and str(run_results) not in text
    assert run_step("models_report", config, inputs={"targets": [run_results / "m" / "enc" / "nothing.csv"]},
                    outputs={"report": out / "report.html"}) != 0
