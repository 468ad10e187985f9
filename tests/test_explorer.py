"""The head explorer (results/explorer.html) and the report, checked in a real headless browser.

A small results/ directory is built here: real attention stores written by bertology.store's writer (2 layers
x 3 heads, random post-softmax maps), a words table with dependency arcs, sieve.csv and sieve_scores.npz
from the real sieve code, and the per-head CSVs in their docs/reference.md#columns columns. The page is then opened
from disk (file://) in Debian's Chromium driven by Playwright (never a downloaded browser): a head and an
example are clicked and the maps and values on screen are compared with the stores and the CSVs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology import store as st
from bertology.data import sample_positions
from bertology.explorer import (decode_maps, explorer_inputs, load_explorer_data, quantise, render_explorer,
                                write_explorer)
from tests.builders.browser import open_page as _open
from tests.builders.browser import wait_view as _wait

from tests.builders.explorer import E, H, L, build_results

@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return build_results(tmp_path_factory.mktemp("explorer"))


@pytest.fixture(scope="module")
def data(results) -> dict:
    return load_explorer_data(results, ["rte", "sst2"], examples=6, seed=3)


@pytest.fixture(scope="module")
def page(results, data) -> Path:
    out = results / "explorer.html"
    out.write_text(render_explorer(data), encoding="utf-8")
    return out


# --------------------------------------------------------------------------------------------------
# the data, without a browser


def _metric(task: dict, mid: str) -> dict:
    return next(m for m in task["metrics"] if m["id"] == mid)


def test_data_equals_the_csvs(results, data):
    rte = data["tasks"][0]
    assert rte["task"] == "rte" and rte["layers"] == L and rte["heads"] == H and rte["store_examples"] == E
    cos = pd.read_csv(results / "stats/rte/cosine.csv")
    got = _metric(rte, "cosine")["single"]
    for r in cos.itertuples():
        assert got[r.layer * H + r.head] == pytest.approx(r.mean, rel=1e-5)
    for variant in ("pretrained", "finetuned"):
        sieve = pd.read_csv(results / f"stats/rte/{variant}/sieve.csv")
        roles = rte["sieve"]["roles"]
        stats = rte["sieve"]["stats"][variant]
        for r in sieve.itertuples():
            i = (r.layer * H + r.head) * len(roles) + roles.index(r.role)
            assert stats["assigned"][i] == int(r.assigned)
            if np.isfinite(r.mean):
                assert stats["mean"][i] == pytest.approx(r.mean, rel=1e-5)
                assert stats["p_value"][i] == pytest.approx(r.p_value, rel=1e-5, abs=1e-300)
        feats = pd.read_csv(results / f"stats/rte/{variant}/features.csv")
        noun = _metric(rte, "features:noun")["variants"][variant]
        for r in feats[feats.feature == "noun"].itertuples():
            assert noun[r.layer * H + r.head] == pytest.approx(r.mean, rel=1e-5)
    cls = _metric(rte, "cls:sep")["variants"]["finetuned"]
    assert all(v is None for v in cls[:H * (L - 1)]) and all(v is not None for v in cls[H * (L - 1):])
    abl = pd.read_csv(results / "ablation/rte/heads.csv")
    m = _metric(rte, "ablation:accuracy")
    for r in abl.itertuples():
        i = r.layer * H + r.head
        assert m["single"][i] == pytest.approx(r.delta, rel=1e-5)
        assert (m["ci"]["low"][i], m["ci"]["high"][i]) == (pytest.approx(r.ci_low, rel=1e-5), pytest.approx(r.ci_high, rel=1e-5))
        assert m["marks"]["single"][i] == int(r.significant)
    assert _metric(rte, "importance")
    assert not any(m["id"].startswith("entropy") for m in rte["metrics"])  # absent: skipped, no error


def test_absent_statistics_are_skipped_with_a_note(data):
    sst2 = data["tasks"][1]
    ids = {m["id"] for m in sst2["metrics"]}
    assert "cosine" not in ids and not any(i.startswith("ablation") for i in ids)
    assert any("cosine.csv absent" in n for n in sst2["notes"])
    assert "block" not in sst2["sieve"]["roles"] and "block" in data["tasks"][0]["sieve"]["roles"]


def test_embedded_maps_are_the_stores_sample(results, data):
    for t in data["tasks"]:
        ds = {v: st.open_store(results / "attention" / t["task"] / f"{v}.zarr") for v in t["variants"]}
        want = sample_positions(E, 6, 3)
        assert [ex["pos"] for ex in t["examples"]] == want.tolist()
        for ex in t["examples"]:
            p, n = ex["pos"], ex["n"]
            assert ex["idx"] == int(ds["finetuned"].example_idx[p]) and n == int(ds["finetuned"].length[p])
            assert ex["tokens"][0] == "[CLS]" and ex["tokens"][-1] == "[SEP]" and "##s" in ex["tokens"]
            for v in t["variants"]:
                a = ds[v].attention[p, :, :, :n, :n].values.astype(np.float32)
                q = decode_maps(ex["maps"][v], (L, H, n, n))
                assert np.abs(q / 255.0 - a).max() <= 1 / 510 + 1e-6
                assert (q == quantise(a)).all()
            scores = np.load(results / "stats" / t["task"] / "finetuned" / "sieve_scores.npz")
            k = int(np.nonzero(scores["example_idx"] == ex["idx"])[0][0])
            roles = scores["role"].tolist()
            got = ex["sieve"]["finetuned"]
            for j, r in enumerate(t["sieve"]["roles"]):
                want_v = scores["scores"][k, 1, 2, roles.index(r)]
                g = got[(1 * H + 2) * len(t["sieve"]["roles"]) + j]
                assert (g is None and not np.isfinite(want_v)) or g == pytest.approx(float(want_v), rel=1e-5)


def test_histograms_count_every_scored_example(results, data):
    t = data["tasks"][0]
    sv = t["sieve"]
    R, B = len(sv["roles"]), sv["bins"]
    scores = np.load(results / "stats/rte/pretrained/sieve_scores.npz")
    roles = scores["role"].tolist()
    for i in range(L * H * R):
        lay, hd, r = i // (H * R), (i // R) % H, i % R
        vals = scores["scores"][:, lay, hd, roles.index(sv["roles"][r])]
        counts = sv["hist"]["pretrained"][i * B:(i + 1) * B]
        assert sum(counts) == int(np.isfinite(vals).sum())
        assert sv["hi"][i] >= np.nanmax(vals) if np.isfinite(vals).any() else True


def test_page_is_self_contained(data):
    text = render_explorer(data)
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    blob = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S).group(1)
    assert json.loads(blob) == json.loads(json.dumps(data))


def test_page_script_is_the_modules_in_their_declared_order(data):
    """The page's one inline script holds every module of render.SCRIPTS verbatim, in the declared order; every
    .js asset is listed there, no module line is longer than 120 characters, and no module holds text that would
    end or hide an HTML script element ("</script", "<!--"), so the escaping leaves each verbatim."""
    from importlib import resources

    from bertology.explorer.render import SCRIPTS, asset

    text = render_explorer(data)
    scripts = re.findall(r"<script>(.*?)</script>", text, re.S)
    assert len(scripts) == 1
    shipped = {p.name for p in resources.files("bertology.explorer").joinpath("assets").iterdir()
               if p.name.endswith(".js")}
    assert len(SCRIPTS) == len(set(SCRIPTS)) and set(SCRIPTS) == shipped
    end = 0
    for name in SCRIPTS:
        body = asset(name)
        assert not re.search(r"</script|<!--", body, re.I), name
        long = [i for i, line in enumerate(body.splitlines(), 1) if len(line) > 120]
        assert not long, f"{name}: lines {long} are longer than 120 characters"
        at = scripts[0].find(body, end)
        assert at >= 0, f"{name} is not in the page after the modules before it in SCRIPTS"
        end = at + len(body)


def test_size_budget_leaves_examples_out(results):
    small = load_explorer_data(results, ["rte"], examples=8, seed=3, budget_bytes=1)
    t = small["tasks"][0]
    assert len(t["examples"]) == 1 and t["dropped"] == 7  # the first example always stays


def test_missing_store_task_is_skipped(results, tmp_path):
    out = write_explorer(results, ["rte", "cola"], tmp_path / "e.html", examples=2, seed=0)
    data = load_explorer_data(results, ["cola"], examples=2, seed=0)
    assert data["tasks"] == [] and data["skipped"][0]["task"] == "cola"
    assert out.stat().st_size > 0


def test_inputs_for_the_rule():
    got = explorer_inputs(["rte"])
    assert "results/attention/rte/finetuned.zarr" in got["required"]
    assert "results/stats/rte/finetuned/sieve_scores.npz" in got["required"]
    assert "results/ablation/rte/importance.csv" in got["required"]  # every registry statistic's table
    assert "results/stats/rte/pretrained/entropy.csv" in got["required"]
    assert "results/stats/rte/finetuned/norms.csv" in got["optional"]  # only with analysis.norms.enabled
    assert "results/stats/rte/seeds/cosine.csv" in got["optional"]     # only with two or more train.seeds
    assert "results/stats/rte/finetuned/decoder_heads.csv" in got["optional"]  # only for a decoder model
    assert "results/attention/rte/probe-finetuned.zarr" in got["optional"]       # the decoder probe's maps
    both = explorer_inputs(["rte"], norms=True, seeds=True, decoder=True)
    assert both["optional"] == [] and set(both["required"]) == set(got["required"]) | set(got["optional"])
    assert "results/stats/rte/finetuned/faithfulness_examples.csv" in both["required"]
    assert len(both["required"]) == len(set(both["required"]))


def _same_page(a: dict, b: dict) -> bool:
    return {**a, "generated": None} == {**b, "generated": None}


def test_the_page_reads_only_its_declared_inputs(results, data):
    """With the rule's inputs declared the page is the one of everything under results/ (explorer_inputs names
    every file it reads); a file that is there but not declared is not shown, and the page says so."""
    listed = explorer_inputs(["rte", "sst2"], results="", norms=True, seeds=True)
    declared = load_explorer_data(results, ["rte", "sst2"], examples=6, seed=3,
                                  inputs=listed["required"] + listed["optional"])
    assert _same_page(declared, data)
    without = [p for p in listed["required"] if p != "stats/rte/cosine.csv"]
    rte = load_explorer_data(results, ["rte"], examples=6, seed=3, inputs=without)["tasks"][0]
    assert "cosine" not in {m["id"] for m in rte["metrics"]} and (results / "stats/rte/cosine.csv").exists()
    assert "results/stats/rte/cosine.csv not declared as an input of the explorer" in rte["notes"]


# --------------------------------------------------------------------------------------------------
# in the browser


def _pixels(pg, selector: str) -> dict:
    """Colours at the centre of every cell of a heatmap canvas, with its geometry."""
    return pg.eval_on_selector(selector, """cv => {
        const d = cv.dataset, n = +d.n, c = +d.cell, x0 = +d.x0, y0 = +d.y0, r = +d.dpr;
        const img = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        const out = [];
        for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
          const x = Math.floor((x0 + j * c + c / 2) * r), y = Math.floor((y0 + i * c + c / 2) * r);
          const k = 4 * (y * cv.width + x);
          out.push([img[k], img[k + 1], img[k + 2]]);
        }
        return {n, px: out};
    }""")


def _expected_colours(pg, values: np.ndarray) -> np.ndarray:
    return np.array(pg.evaluate("vs => vs.map(v => window.bertologyExplorer.attnRGB(v))", values.ravel().tolist()))


@pytest.mark.browser
def test_explorer_in_chromium(browser, results, data, page):
    url = page.resolve().as_uri()
    pg, watch = _open(browser, url)
    _wait(pg, "overview")
    rte = data["tasks"][0]
    holds = pg.inner_text("#about")
    assert f"{len(rte['examples'])} of {E} examples" in holds and "open_store" in holds

    # overview: cosine and the fine-tuned delimiter bias on the grid equal the CSVs
    pg.select_option("#metric", "cosine")
    _wait(pg, "overview")
    cos = pd.read_csv(results / "stats/rte/cosine.csv")
    cells = pg.eval_on_selector_all("#overview rect.cell", "rs => rs.map(r => [+r.dataset.layer, +r.dataset.head, r.dataset.value])")
    assert len(cells) == L * H
    for lay, hd, v in cells:
        assert float(v) == pytest.approx(cos[(cos["layer"] == lay) & (cos["head"] == hd)]["mean"].item(), rel=1e-5)
    pg.select_option("#metric", "sieve:delimiter")
    _wait(pg, "overview")
    pg.click('#ov-variant button[data-ov="pretrained"]')
    _wait(pg, "overview")
    sv = pd.read_csv(results / "stats/rte/pretrained/sieve.csv")
    sv = sv[sv.role == "delimiter"]
    cells = pg.eval_on_selector_all("#overview rect.cell", "rs => rs.map(r => [+r.dataset.layer, +r.dataset.head, r.dataset.value])")
    for lay, hd, v in cells:
        assert float(v) == pytest.approx(sv[(sv["layer"] == lay) & (sv["head"] == hd)]["mean"].item(), rel=1e-5)
    assert pg.locator("#overview circle.mark").count() == int(sv.assigned.sum())
    pg.click('#ov-variant button[data-ov="all"]')
    _wait(pg, "overview")
    assert pg.locator("#overview svg.grid").count() == 3

    # click a head: its statistics, its sieve table and its maps
    lay, hd = 1, 2
    pg.click(f'#overview svg.grid[data-panel="pretrained"] rect.cell[data-layer="{lay}"][data-head="{hd}"]')
    _wait(pg, "head")
    assert pg.inner_text("#head-title").endswith(f"layer {lay + 1} · head {hd + 1}")
    got = float(pg.get_attribute('#head-stats td[data-metric="cosine"]', "data-value"))
    assert got == pytest.approx(cos[(cos["layer"] == lay) & (cos["head"] == hd)]["mean"].item(), rel=1e-5)
    abl = pd.read_csv(results / "ablation/rte/heads.csv").query(f"layer == {lay} and head == {hd}")
    cell = pg.locator('#head-stats td[data-metric="ablation:accuracy"]')
    assert float(cell.get_attribute("data-value")) == pytest.approx(abl.delta.item(), rel=1e-5)
    shown = [float(x) for x in re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?", cell.inner_text().replace("−", "-"))]
    assert shown == pytest.approx([abl.delta.item(), abl.ci_low.item(), abl.ci_high.item()], rel=5e-3, abs=1e-4)
    for variant in ("pretrained", "finetuned"):
        sieve = pd.read_csv(results / f"stats/rte/{variant}/sieve.csv").query(f"layer == {lay} and head == {hd}")
        for r in sieve.itertuples():
            sel = f'#sieve-table td[data-role="{r.role}"][data-variant="{variant}"]'
            mean = pg.get_attribute(sel + '[data-field="mean"]', "data-value")
            p = pg.locator(sel + '[data-field="p_value"]')
            if np.isfinite(r.mean):
                assert float(mean) == pytest.approx(r.mean, rel=1e-5)
                assert float(p.get_attribute("data-value")) == pytest.approx(r.p_value, rel=1e-5, abs=1e-300)
            assert p.get_attribute("data-assigned") == ("1" if r.assigned else "0")
            assert ("✓" in p.inner_text()) == bool(r.assigned)
        roles = ", ".join(sieve[sieve.assigned].role) or "no role"
        assert roles in pg.inner_text("#head-roles")
    # the histogram of every role holds every scored example; the marker is this example's score
    npz = np.load(results / "stats/rte/finetuned/sieve_scores.npz")
    ex0 = rte["examples"][0]
    k = int(np.nonzero(npz["example_idx"] == ex0["idx"])[0][0])
    for j, role in enumerate(npz["role"].tolist()):
        counts = pg.get_attribute(f'#sieve-hists svg[data-role="{role}"] polyline[data-variant="finetuned"]', "data-counts")
        assert sum(map(int, counts.split(","))) == int(np.isfinite(npz["scores"][:, lay, hd, j]).sum())
        marker = pg.locator(f'#sieve-hists svg[data-role="{role}"] path[data-variant="finetuned"]')
        if np.isfinite(npz["scores"][k, lay, hd, j]):
            assert float(marker.get_attribute("data-example-score")) == pytest.approx(float(npz["scores"][k, lay, hd, j]), rel=1e-5)

    # the maps on screen are the store's (pixel colours at every cell centre; quantised for display)
    _check_heatmaps(pg, results, rte, example=0, lay=lay, hd=hd)
    # hover a cell: the tooltip gives the store's value
    canvas = pg.locator('#head-maps canvas.heatmap[data-variant="finetuned"]')
    x0, y0, c = canvas.evaluate("c => [+c.dataset.x0, +c.dataset.y0, +c.dataset.cell]")
    canvas.hover(position={"x": x0 + 2 * c + c / 2, "y": y0 + 1 * c + c / 2})  # query 1, key 2
    shown = float(re.search(r"attention ([0-9.]+)", pg.inner_text("#tip")).group(1))
    fin = st.open_store(results / "attention/rte/finetuned.zarr")
    assert shown == pytest.approx(float(fin.attention[ex0["pos"], lay, hd, 1, 2]), abs=1 / 510 + 1e-4)
    assert "“" + ex0["tokens"][1] + "”" in pg.inner_text("#tip")

    # dependency arcs: one per non-root word; those marked followed are the arcs whose dependent attends most
    # to its head (word-level attention of the displayed map)
    _check_arcs(pg, rte, example=0, lay=lay, hd=hd, variant="finetuned")

    # the example view: choose an example, every head's map, pretrained next to fine-tuned
    pg.click('#tabs button[data-view="example"]')
    _wait(pg, "example")
    pg.select_option("#example-select", "2")
    _wait(pg, "example")
    ex2 = rte["examples"][2]
    assert f"example_idx {ex2['idx']}" in pg.inner_text("#example")
    assert pg.locator("#sm-grid .sm-cell").count() == L * H
    assert pg.locator("#sm-grid canvas").count() == 2 * L * H
    pre = st.open_store(results / "attention/rte/pretrained.zarr")
    for variant, ds in (("pretrained", pre), ("finetuned", fin)):
        sel = f'#sm-grid .sm-cell[data-layer="0"][data-head="1"] canvas[data-variant="{variant}"]'
        px = pg.eval_on_selector(sel, """(cv, n) => {
            const img = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data, s = cv.width, out = [];
            for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
              const x = Math.floor((j + 0.5) * s / n), y = Math.floor((i + 0.5) * s / n), k = 4 * (y * s + x);
              out.push([img[k], img[k + 1], img[k + 2]]);
            }
            return out; }""", ex2["n"])
        a = ds.attention[ex2["pos"], 0, 1, :ex2["n"], :ex2["n"]].values.astype(np.float32)
        assert np.abs(np.array(px) - _expected_colours(pg, a)).max() <= 3
    # a small map opens the head view on the same example
    pg.click('#sm-grid .sm-cell[data-layer="1"][data-head="0"]')
    _wait(pg, "head")
    assert pg.inner_text("#head-title").endswith("layer 2 · head 1")
    _check_heatmaps(pg, results, rte, example=2, lay=1, hd=0)

    # another task from the selector
    pg.select_option("#task", "1")
    _wait(pg, "head")
    assert pg.inner_text("#head-title").startswith("SST-2")
    watch.check()
    pg.close()


def _check_heatmaps(pg, results, t, *, example, lay, hd):
    ex = t["examples"][example]
    for variant in t["variants"]:
        got = _pixels(pg, f'#head-maps canvas.heatmap[data-variant="{variant}"]')
        assert got["n"] == ex["n"]
        ds = st.open_store(results / "attention" / t["task"] / f"{variant}.zarr")
        a = ds.attention[ex["pos"], lay, hd, :ex["n"], :ex["n"]].values.astype(np.float32)
        diff = np.abs(np.array(got["px"]) - _expected_colours(pg, a))
        assert diff.max() <= 3, f"{variant} map differs from the store by up to {diff.max()} colour levels"


def _check_arcs(pg, t, *, example, lay, hd, variant):
    ex = t["examples"][example]
    q = decode_maps(ex["maps"][variant], (L, H, ex["n"], ex["n"]))[lay, hd] / 255.0
    wid = np.array(ex["word_ids"])
    nw = len(ex["words"])
    M = np.zeros((nw, nw))
    for u in range(nw):
        pu = np.nonzero(wid == u)[0]
        for v in range(nw):
            M[u, v] = q[np.ix_(pu, np.nonzero(wid == v)[0])].sum(axis=1).mean()
    arcs = pg.eval_on_selector_all("#arc-card path.dep", "ps => ps.map(p => [+p.dataset.dep, +p.dataset.head, p.classList.contains('followed')])")
    want = [(u, w[3]) for u, w in enumerate(ex["words"]) if w[3] != u]
    assert sorted((d, h) for d, h, _ in arcs) == sorted(want)
    for d, h, followed in arcs:
        assert followed == (int(np.argmax(M[d])) == h)


@pytest.mark.browser
def test_report_in_chromium(browser, results, page):
    from bertology.pipeline.config import validate_config
    from bertology.report.page import build_report

    out = results / "report.html"
    config = validate_config({"model": "tiny", "tasks": ["rte", "sst2"], "data": {"source": "demo"}})
    declared = [p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file()]
    out.write_text(build_report(results, {**config, "note": "x" * 400}, declared), encoding="utf-8")
    url = out.resolve().as_uri()
    pg, watch = _open(browser, url, width=1400)
    pg.wait_for_load_state("load")
    sizes = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert sizes[0] <= sizes[1], f"the report scrolls sideways: {sizes[0]} px wide in a {sizes[1]} px window"
    assert pg.locator("#table1 table").count() >= 1
    assert "| RTE |" not in pg.inner_text("#table1")
    assert pg.locator("#table1 td", has_text="61.3").count() == 1
    assert pg.locator('a[href="explorer.html"]').count() == 1
    watch.check()
    pg.close()


def test_claims_in_chromium(browser, results, tmp_path):
    """The explorer offers each claim of results/claims.csv; picking one outlines exactly its heads in the grid and
    shows its verdict and effect."""
    import shutil

    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import build_ledger
    from bertology.claims.bootstrap import Boot

    work = tmp_path / "results"
    shutil.copytree(results, work)
    ledger = build_ledger(work, REGISTRY.claims(), ["rte"], [42], Boot(resamples=100, confidence=0.95, seed=0))
    ledger.to_csv(work / "claims.csv", index=False)
    data = load_explorer_data(work, ["rte"], examples=2, seed=3)
    claims = data["tasks"][0]["claims"]
    assert [c["id"] for c in claims] == list(ledger["claim"])
    claim = next(c for c in claims if c["heads"] and c["verdict"] != "not computed")
    out = work / "explorer.html"
    out.write_text(render_explorer(data), encoding="utf-8")
    pg, watch = _open(browser, out.resolve().as_uri())
    _wait(pg, "overview")
    assert pg.locator("#overview rect.cell.claimed").count() == 0
    pg.select_option("#claim", claim["id"])
    _wait(pg, "overview")
    outlined = pg.eval_on_selector_all("#overview rect.cell.claimed", "rs => rs.map(r => [+r.dataset.layer, +r.dataset.head])")
    assert outlined and {tuple(x) for x in outlined} == {tuple(x) for x in claim["heads"]}
    info = pg.inner_text("#claim-info")
    assert claim["verdict"] in info and claim["statement"] in info
    assert f"claim={claim['id']}" in pg.evaluate("location.hash")
    watch.check()


def _shot_dir(tmp_path) -> Path:
    """Where the Chromium tests leave their screenshots (to look at): $BERTOLOGY_SCREENSHOTS, else the test's tmp."""
    import os

    out = Path(os.environ.get("BERTOLOGY_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.browser
def test_claims_matrix_in_chromium(browser, results, tmp_path):
    """The claim picker's first view is the claims matrix (claims down, tasks across, a task-free claim one cell
    across them); clicking a cell switches to its task, picks the claim and outlines exactly its heads."""
    import shutil

    from tests.builders.claims import synthetic_ledger

    work = tmp_path / "results"
    shutil.copytree(results, work)
    ledger = synthetic_ledger(["rte", "sst2"], extra=True)
    ledger.to_csv(work / "claims.csv", index=False)
    data = load_explorer_data(work, ["rte", "sst2"], examples=2, seed=3)
    assert [c["id"] for c in data["tasks"][1]["claims"]] == list(ledger[ledger.task.isin(["sst2", "all"])]["claim"])
    out = work / "explorer.html"
    out.write_text(render_explorer(data), encoding="utf-8")
    pg, watch = _open(browser, out.resolve().as_uri())
    _wait(pg, "overview")
    assert pg.locator("#claims-view[open] #claims-matrix").count() == 1
    n_claims = ledger["claim"].nunique()
    assert pg.locator("#claims-matrix tbody tr").count() == n_claims
    assert pg.locator("#claims-matrix td.mcell").count() == len(ledger)
    free = pg.locator('#claims-matrix td.mcell[data-task="all"]')
    assert free.count() == 3 and free.first.get_attribute("colspan") == "2"
    pg.screenshot(path=str(_shot_dir(tmp_path) / "explorer-matrix.png"), full_page=True)
    row = ledger[(ledger.task == "sst2") & (ledger.verdict == "contradicted")].iloc[0]
    cell = pg.locator(f'#claims-matrix td.mcell[data-claim="{row.claim}"][data-task="sst2"]')
    assert "contradicted" in cell.inner_text() and cell.get_attribute("class").split()[1] == "c-contradicted"
    cell.click()
    _wait(pg, "overview")
    assert pg.evaluate("new URLSearchParams(location.hash.slice(1)).get('task')") == "sst2"
    assert pg.input_value("#claim") == row.claim
    outlined = pg.eval_on_selector_all("#overview rect.cell.claimed", "rs => rs.map(r => [+r.dataset.layer, +r.dataset.head])")
    assert {tuple(x) for x in outlined} == {(0, 1), (1, 2)}
    assert pg.locator("#claims-view[open]").count() == 0  # folded once a claim is picked
    pg.screenshot(path=str(_shot_dir(tmp_path) / "explorer-picked.png"), full_page=True)
    watch.check()
    pg.close()


@pytest.mark.browser
def test_report_opens_with_the_claims_matrix_in_chromium(browser, results, tmp_path):
    """The report's first section is the claims matrix, then the forest plot, then the full ledger; the page does
    not scroll sideways; a cell's row link lands on the claim's full row."""
    import shutil

    from bertology.claims.forest import write_forest
    from bertology.pipeline.config import validate_config
    from bertology.report.page import build_report
    from tests.builders.claims import synthetic_ledger

    work = tmp_path / "results"
    shutil.copytree(results, work)
    ledger = synthetic_ledger(["rte", "sst2"], seeds=3)
    ledger.to_csv(work / "claims.csv", index=False)
    write_forest(ledger, work / "figures" / "claims.png", 0.95)
    config = validate_config({"model": "tiny", "tasks": ["rte", "sst2"], "data": {"source": "demo"}})
    declared = [p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()]
    out = work / "report.html"
    out.write_text(build_report(work, config, declared), encoding="utf-8")
    pg, watch = _open(browser, out.resolve().as_uri(), width=1400)
    pg.wait_for_load_state("load")
    sizes = pg.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert sizes[0] <= sizes[1], f"the report scrolls sideways: {sizes[0]} px wide in a {sizes[1]} px window"
    tops = [pg.locator(sel).bounding_box()["y"] for sel in ("#claims-matrix", "#fig-claims", "#claims-ledger")]
    assert tops == sorted(tops)
    assert tops[0] < 1000, "the matrix is on the first screen"
    pg.screenshot(path=str(_shot_dir(tmp_path) / "report-top.png"))
    pg.screenshot(path=str(_shot_dir(tmp_path) / "report-claims.png"), full_page=True)
    link = pg.locator('#claims-matrix td[data-claim="kovaleva_cosine_last_layers"][data-task="rte"] a', has_text="row")
    link.click()
    assert pg.evaluate("location.hash") == "#claim-kovaleva_cosine_last_layers-rte"
    watch.check()
    pg.close()
