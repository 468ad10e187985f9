"""The explorer and the norm analyses: the head grid offers norms.csv (Kobayashi et al. 2020 statistics), and the
example view colours each example's tokens by each token view (raw, norm-weighted, rollout, flow; the fine-tuned
model's ablation and input x gradient importance), pretrained next to fine-tuned, with the per-example Spearman
agreement of each view with the importance. The results/ directory is built here (tests.test_explorer's stores),
the token-score files beside it with scores drawn at random, so their right display is known by construction."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology import store as st
from bertology.data import sample_positions
from tests.builders.browser import open_page as _open
from tests.builders.browser import wait_view as _wait
from tests.builders.explorer import H, L, build_results
from tests.builders.explorer import tokenizer as _tokenizer
from tests.builders.explorer import HOSTILE

SCORED = [0, 2, 3, 5, 7, 9]  # store positions of rte's examples with token scores (the norm sample)
FLOW = 3                     # flow and importance on the first 3 of them, as analysis.flow.examples does


def test_head_grid_offers_the_norm_statistics(tmp_path):
    from bertology.explorer import explorer_inputs, load_explorer_data
    from bertology.norms.norm_stats import NormStats

    results = build_results(tmp_path)
    rng = np.random.default_rng(0)
    stats = NormStats(L, H)
    for _ in range(3):
        n = 6
        alpha = rng.dirichlet(np.ones(n), size=(L, H, n))
        stats.update(alpha, rng.uniform(0.5, 2, size=(L, H, n)), np.array([0, 3, 2, 3, 3, 1]), rng.integers(1, 9, n))
    table = stats.table()
    table.to_csv(results / "stats" / "rte" / "finetuned" / "norms.csv", index=False)
    data = load_explorer_data(results, ["rte"], examples=2, seed=3)
    metrics = {m["id"]: m for m in data["tasks"][0]["metrics"]}
    m = metrics["norms:norm_share cls"]
    assert set(m["variants"]) == {"finetuned"}
    want = table[(table["measure"] == "norm_share") & (table["category"] == "cls") & table["head"].notna()]
    for r in want.itertuples():
        assert m["variants"]["finetuned"][int(r.layer) * H + int(r.head)] == pytest.approx(r.mean, rel=1e-4)
    assert "norms:spearman_norm_frequency ordinary" in metrics
    inputs = explorer_inputs(["rte"])["optional"]
    for name in ("pretrained/norms.csv", "pretrained/token_scores.parquet", "finetuned/importance.parquet",
                 "finetuned/faithfulness_examples.csv"):
        assert f"results/stats/rte/{name}" in inputs


# --------------------------------------------------------------------------------------------------
# token views


def add_token_views(results: Path, task: str = "rte") -> dict[str, pd.DataFrame]:
    """token_scores.parquet of both variants (views of the SCORED examples, flow on the first FLOW),
    importance.parquet, faithfulness_examples.csv and faithfulness.csv of the fine-tuned model, in the norm
    steps' columns (bertology.norms.analysis.SCORE_COLUMNS), with the store's wordpieces. Returns the tables."""
    from bertology.norms.analysis import SCORE_COLUMNS
    from bertology.norms.faithful import IMPORTANCES, VIEWS, example_correlations, summarise

    tok = _tokenizer()
    ds = st.open_store(results / "attention" / task / "finetuned.zarr")
    rng = np.random.default_rng(7)
    out: dict[str, list] = {"pretrained": [], "finetuned": [], "importance": [], "rhos": []}
    for k, p in enumerate(SCORED):
        n = int(ds["length"][p])
        idx = int(ds["example_idx"][p])
        ids = ds["input_ids"][p, :n].values
        words = [tok.id_to_token(int(i)) for i in ids]
        ordinary = ds["word_ids"][p, :n].values >= 0
        frame = lambda method, score: pd.DataFrame({"example_idx": idx, "position": np.arange(n), "word": words,  # noqa: E731
                                                     "method": method, "score": score})
        views = {}
        for variant in ("pretrained", "finetuned"):
            for view in VIEWS[:3] + (VIEWS[3:] if k < FLOW else ()):
                score = rng.normal(0, 1, n) if view == "decompx" else rng.dirichlet(np.ones(n))   # DecompX: signed
                views[view] = score
                out[variant].append(frame(view, score))
        if k < FLOW:
            imps = {"ablation": np.where(ordinary, rng.normal(0, 0.1, n), np.nan), "gradient": rng.normal(0, 1, n)}
            out["importance"] += [frame(m, imps[m]) for m in IMPORTANCES]
            out["rhos"] += [{"example_idx": idx, "view": v, "importance": i, "rho": r}
                            for (v, i), r in example_correlations(views, imps, ordinary).items()]
    tables = {v: pd.concat(out[v], ignore_index=True)[SCORE_COLUMNS] for v in ("pretrained", "finetuned", "importance")}
    tables["rhos"] = pd.DataFrame(out["rhos"], columns=["example_idx", "view", "importance", "rho"])
    tables["faithfulness"] = summarise(tables["rhos"], confidence=0.9, resamples=50, seed=0)
    d = results / "stats" / task
    for variant in ("pretrained", "finetuned"):
        tables[variant].to_parquet(d / variant / "token_scores.parquet")
    tables["importance"].to_parquet(d / "finetuned" / "importance.parquet")
    tables["rhos"].to_csv(d / "finetuned" / "faithfulness_examples.csv", index=False)
    tables["faithfulness"].to_csv(d / "finetuned" / "faithfulness.csv", index=False)
    return tables


@pytest.fixture(scope="module")
def views_results(tmp_path_factory) -> tuple[Path, dict[str, pd.DataFrame]]:
    results = build_results(tmp_path_factory.mktemp("views"))
    return results, add_token_views(results)


def _scores(table: pd.DataFrame, idx: int, method: str) -> np.ndarray:
    return table[(table.example_idx == idx) & (table.method == method)].sort_values("position")["score"].to_numpy()


def test_pick_examples_takes_the_preferred_groups_first():
    from bertology.explorer import pick_examples

    idx = np.arange(100) * 3 + 1
    assert np.array_equal(pick_examples(idx, [], 7, 5), sample_positions(100, 7, 5))  # the plain seeded sample
    got = pick_examples(idx, [{4, 31, 301}, {4, 7, 10, 13}], 5, 0)
    assert list(got[:2]) == [1, 10]              # 4 and 31 (301 is not in the store)
    assert set(got[2:]) <= {2, 3, 4} and len(set(got)) == 5  # then 3 of 7, 10, 13: a seeded sample of them
    assert np.array_equal(got, pick_examples(idx, [{4, 31, 301}, {4, 7, 10, 13}], 5, 0))
    assert len(pick_examples(idx, [set(range(1000))], 500, 0)) == 100


def test_the_examples_with_token_views_are_the_ones_offered(views_results):
    from bertology.explorer import load_explorer_data

    results, tables = views_results
    ds = st.open_store(results / "attention/rte/finetuned.zarr")
    scored = [int(ds["example_idx"][p]) for p in SCORED]
    data = load_explorer_data(results, ["rte", "sst2"], examples=4, seed=3)
    rte, sst2 = data["tasks"]
    exs = rte["examples"]
    assert [e["idx"] for e in exs[:FLOW]] == scored[:FLOW]  # the examples with every view come first
    assert all(e["idx"] in scored for e in exs)             # and only examples with token scores while they last
    more = load_explorer_data(results, ["rte"], examples=8, seed=3)["tasks"][0]["examples"]
    assert {e["idx"] for e in more[:len(scored)]} == set(scored) and len(more) == 8
    tv = rte["token_views"]
    assert tv["views"] == ["raw", "norm", "rollout", "flow", "alti", "globenc", "decompx", "value_zeroing", "alti_logit"]
    assert tv["importances"] == ["ablation", "gradient"] and tv["signed"] == ["decompx", "alti_logit"]
    assert tv["mixing"] == {"pretrained": FLOW, "finetuned": FLOW}
    assert tv["missing"] == {} and tv["scored"] == {"pretrained": 6, "finetuned": 6} and tv["flow"]["finetuned"] == FLOW
    for e in exs:
        for variant in ("pretrained", "finetuned"):
            for method, got in e["views"][variant].items():
                assert got == pytest.approx(_scores(tables[variant], e["idx"], method), rel=1e-5)
        has_flow = e["idx"] in scored[:FLOW]
        assert ("flow" in e["views"]["finetuned"]) == has_flow and bool(e["importance"]) == has_flow
        if has_flow:
            want = _scores(tables["importance"], e["idx"], "ablation")
            assert np.array_equal(np.isnan(np.array(e["importance"]["ablation"], float)), np.isnan(want))
            for r in tables["rhos"][tables["rhos"].example_idx == e["idx"]].itertuples():
                assert e["rho"][r.view][r.importance] == pytest.approx(r.rho, rel=1e-5, nan_ok=True)
    faith = tables["faithfulness"].set_index(["view", "importance"])
    assert tv["faith"]["rollout"]["gradient"]["mean"] == pytest.approx(faith.loc[("rollout", "gradient"), "mean"], rel=1e-5)
    # sst2 has no token scores: the page says why for each variant, and its examples are the plain seeded sample
    assert set(sst2["token_views"]["missing"]) == {"pretrained", "finetuned"}
    assert "token_scores.parquet absent" in sst2["token_views"]["missing"]["pretrained"]
    assert sst2["token_views"]["importance_missing"] and sst2["token_views"]["rho_missing"]
    assert sorted(e["pos"] for e in sst2["examples"]) == list(sample_positions(10, 4, 3))


def test_token_scores_that_do_not_match_the_store_are_said_not_shown(views_results, tmp_path):
    import shutil

    from bertology.explorer import load_explorer_data

    results, tables = views_results
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    bad = tables["pretrained"]
    first = int(bad.example_idx.iloc[0])
    bad = bad[~((bad.example_idx == first) & (bad.position == 0))]  # one position short
    bad.to_parquet(copy / "stats/rte/pretrained/token_scores.parquet")
    ex = next(e for e in load_explorer_data(copy, ["rte"], examples=4, seed=3)["tasks"][0]["examples"]
              if e["idx"] == first)
    assert "pretrained" not in ex["views"] and "finetuned" in ex["views"]
    assert any("not the store's" in n for n in ex["views_note"])


@pytest.mark.browser
def test_token_views_in_chromium(browser, views_results, tmp_path):  # noqa: F811 - the imported fixture
    from bertology.explorer import load_explorer_data, render_explorer

    results, tables = views_results
    data = load_explorer_data(results, ["rte", "sst2"], examples=6, seed=3)
    page = tmp_path / "explorer.html"
    page.write_text(render_explorer(data), encoding="utf-8")
    url = page.resolve().as_uri()
    pg, watch = _open(browser, url)
    _wait(pg, "overview")
    pg.click('#tabs button[data-view="example"]')
    _wait(pg, "example")
    rte = data["tasks"][0]
    options = pg.eval_on_selector_all("#example-select option", "os => os.map(o => o.textContent)")
    assert [o[0] for o in options[:FLOW]] == ["◆"] * FLOW and options[FLOW].startswith("◇")
    pg.select_option("#example-select", "1")  # an example with every view
    _wait(pg, "example")
    ex = rte["examples"][1]
    n = ex["n"]
    # one row per view, the two models in two columns beside it
    assert pg.eval_on_selector_all("#token-views .tv-vhead", "hs => hs.map(h => h.textContent)") == ["pretrained", "fine-tuned"]
    for method in ("raw", "flow", "gradient"):
        boxes = [pg.locator(f'#token-views [data-method="{method}"]').nth(k).bounding_box() for k in range(3)]
        assert boxes[0]["y"] == pytest.approx(boxes[1]["y"], abs=1) == pytest.approx(boxes[2]["y"], abs=1)
        assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
    for variant in ("pretrained", "finetuned"):
        for method in ("raw", "norm", "rollout", "flow"):
            cell = f'#token-views .tv-cell[data-variant="{variant}"][data-method="{method}"]'
            got = pg.eval_on_selector_all(cell + " .tv-tok", "ts => ts.map(t => [t.textContent, +t.dataset.score])")
            assert [t for t, _ in got] == ex["tokens"]
            assert [s for _, s in got] == pytest.approx(_scores(tables[variant], ex["idx"], method), rel=1e-5)
        # the scale is the row's: the largest score of either model on the example's words is the darkest colour
    abl = '#token-views .tv-cell[data-variant="finetuned"][data-method="ablation"] .tv-tok'
    assert pg.locator(abl).count() == n
    assert "fine-tuned classifier's only" in pg.inner_text('#token-views .tv-cell[data-variant="pretrained"][data-method="ablation"]')
    rhos = tables["rhos"][tables["rhos"].example_idx == ex["idx"]]
    for r in rhos.itertuples():
        shown = pg.get_attribute(f'#token-views .tv-cell[data-variant="finetuned"][data-method="{r.view}"] '
                                 f'.tv-rho[data-importance="{r.importance}"]', "data-rho")
        if np.isfinite(r.rho):
            assert float(shown) == pytest.approx(r.rho, rel=1e-5)
    # colours: one scale per row shared by both models, its top = the largest score on the words
    raw = {v: _scores(tables[v], ex["idx"], "raw") for v in ("pretrained", "finetuned")}
    words = np.array(ex["word_ids"]) >= 0
    top = max(raw[v][words].max() for v in raw)
    bottom = min(raw[v][words].min() for v in raw)
    shown = pg.eval_on_selector_all('#token-views .tv-cell[data-method="raw"] .tv-tok',
                                    "ts => ts.map(t => [getComputedStyle(t).backgroundColor, t.classList.contains('clipped')])")
    x = np.concatenate([raw["pretrained"], raw["finetuned"]])
    assert [c for (c, _), v in zip(shown, x) if v == top] == ["rgb(128, 0, 38)"]      # the top of the scale
    assert [c for (c, _), v in zip(shown, x) if v == bottom] == ["rgb(255, 255, 255)"]  # its bottom
    assert [clipped for _, clipped in shown] == list((x > top) | (x < bottom))          # specials outside: dashed
    # DecompX is signed: a diverging scale symmetric around 0, its largest |score| on the words at an end
    dx = np.concatenate([_scores(tables[v], ex["idx"], "decompx") for v in ("pretrained", "finetuned")])
    on_words = np.concatenate([words, words])
    k = int(np.flatnonzero(on_words & (np.abs(dx) == np.abs(dx[on_words]).max()))[0])
    shown = pg.eval_on_selector_all('#token-views .tv-cell[data-method="decompx"] .tv-tok',
                                    "ts => ts.map(t => getComputedStyle(t).backgroundColor)")
    assert shown[k] == ("rgb(178, 24, 43)" if dx[k] > 0 else "rgb(33, 102, 172)")
    pg.click('#tvfrom button[data-k="zero"]')  # from 0: the bottom is 0, the row's smallest word is coloured
    _wait(pg, "example")
    shown = pg.eval_on_selector_all('#token-views .tv-cell[data-method="raw"] .tv-tok',
                                    "ts => ts.map(t => [getComputedStyle(t).backgroundColor, t.classList.contains('clipped')])")
    assert [c for (c, _), v in zip(shown, x) if v == bottom] != ["rgb(255, 255, 255)"]
    assert [clipped for _, clipped in shown] == list(x > top)
    # hovering a token finds it in every row of both models
    pg.hover('#token-views .tv-cell[data-variant="finetuned"][data-method="rollout"] .tv-tok[data-pos="2"]')
    assert pg.locator("#token-views .tv-tok.hl").count() == 2 * 9 + 2     # 9 views of each model, 2 importances
    assert f"“{ex['tokens'][2]}”" in pg.inner_text("#tip")
    if os.environ.get("BERTOLOGY_SCREENSHOTS"):  # a directory to look at the view in
        pg.locator("#token-views").screenshot(path=str(Path(os.environ["BERTOLOGY_SCREENSHOTS"]) / "token-views.png"))
    # an example without flow and importance says so
    pg.select_option("#example-select", str(FLOW))
    _wait(pg, "example")
    assert "not computed for this example: flow runs on a capped sample" in pg.inner_text(
        '#token-views .tv-cell[data-variant="pretrained"][data-method="flow"]')
    assert "the newer mixing views run on a capped sample" in pg.inner_text(
        '#token-views .tv-cell[data-variant="pretrained"][data-method="alti"]')
    assert "importance runs on the flow examples" in pg.inner_text(
        '#token-views .tv-cell[data-variant="finetuned"][data-method="ablation"]')
    # a task without token scores says why, for each model
    pg.select_option("#task", "1")
    _wait(pg, "example")
    notes = pg.inner_text("#token-views .tv-notes")
    assert "stats/sst2/pretrained/token_scores.parquet absent" in notes and "fine-tuned" in notes
    assert pg.locator("#token-views .tv-tok").count() == 0
    watch.check()
    pg.close()


@pytest.mark.browser
def test_hostile_token_labels_show_as_text_in_the_token_views(browser, hostile_results):
    from bertology.explorer import load_explorer_data, render_explorer

    add_token_views(hostile_results)
    data = load_explorer_data(hostile_results, ["rte"], examples=4, seed=3)
    page = hostile_results / "token-views.html"
    page.write_text(render_explorer(data), encoding="utf-8")
    pg, watch = _open(browser, page.resolve().as_uri())
    _wait(pg, "overview")
    pg.click('#tabs button[data-view="example"]')
    _wait(pg, "example")
    labels = set()
    for i, ex in enumerate(data["tasks"][0]["examples"]):
        pg.select_option("#example-select", str(i))
        _wait(pg, "example")
        shown = pg.eval_on_selector_all('#token-views .tv-cell[data-variant="finetuned"][data-method="raw"] .tv-tok',
                                        "ts => ts.map(t => t.textContent)")
        assert shown == ex["tokens"]
        labels |= set(shown)
    assert labels & set(HOSTILE)  # the hostile words are token labels here (no tokenizer.json: labels from words)
    assert pg.evaluate("document.body.dataset.pwned") is None
    assert pg.evaluate("document.querySelectorAll('script, img, style').length") == 3
    watch.check()
    pg.close()


def test_task_tables_reach_the_explorer(browser, views_results, tmp_path):  # noqa: F811 - the imported fixture
    """A per-task table a report section shows and that is not per head (concentration.csv, a table function's
    output; faithfulness.csv) is in the page's data and on the overview as a task table, with its rows."""
    from bertology.explorer import load_explorer_data, render_explorer
    from bertology.norms.concentration import token_concentration

    results, tables = views_results
    stats = results / "stats" / "rte" / "pretrained"
    concentration = token_concentration(tables["pretrained"])["table"]
    concentration.to_csv(stats / "concentration.csv", index=False)
    data = load_explorer_data(results, ["rte"], examples=2, seed=3)
    got = {(t["file"], t["variant"]): t for t in data["tasks"][0]["tables"]}
    conc = got[("results/stats/rte/pretrained/concentration.csv", "pretrained")]
    assert conc["columns"] == list(concentration.columns) and conc["n_rows"] == len(concentration)
    assert [r[0] for r in conc["rows"]] == list(concentration["method"])
    assert ("results/stats/rte/finetuned/faithfulness.csv", "") in got
    assert not any("norms.csv" in f for f, _ in got)  # per head: on the grid, not a task table
    page = tmp_path / "explorer.html"
    page.write_text(render_explorer(data), encoding="utf-8")
    pg, watch = _open(browser, page.resolve().as_uri())
    _wait(pg, "overview")
    sel = '#task-tables details[data-file="results/stats/rte/pretrained/concentration.csv"]'
    pg.click(sel + " summary")
    assert pg.locator(sel + " tbody tr").count() == len(concentration)
    assert pg.inner_text(sel + " summary").startswith("How concentrated each token view is")
    watch.check()
