"""The whole workflow on a tiny random decoder (Llama: grouped key/value heads, a bos token, no pad token): every
step that applies to a causal model runs, the decoder probe writes its tables and figure, the ledger holds the
decoder claims, and the norm family runs (value norms of grouped key/value heads, mixing without the post-LN
measure, rollout, flow, Value Zeroing, ALTI, GlobEnc, faithfulness by deletion) with DecompX left out in one
line (a gated MLP)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.builders.decoders import build_decoder
from tests.conftest import write_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, snakemake_run):
    work = tmp_path_factory.mktemp("decoder-run")
    model = build_decoder("llama", work / "llama", style="llama")
    write_config(work, model=str(model), tasks=["rte"], attention={"examples": 12, "batch_size": 4, "chunk_size": 4},
                 ablation={"examples": 12, "bootstrap": 20, "pruning": {"random_orders": 1}},
                 train={"seeds": [42, 43]})
    proc = snakemake_run(work, "--cores", "2")
    return work / "results", proc


def test_the_probe_writes_its_tables_and_figure(run):
    results, _ = run
    # the pretrained model and its random initialisation once per task, the fine-tuned models once per seed
    for where, models in (("", ["pretrained", "random-init"]), ("finetuned/", ["finetuned", "random-finetuned"]),
                          ("finetuned-seed43/", ["finetuned", "random-finetuned"])):
        sink = pd.read_csv(results / f"stats/rte/{where}decoder_sink.csv")
        induction = pd.read_csv(results / f"stats/rte/{where}decoder_induction.csv")
        assert list(pd.unique(sink["variant"])) == models and list(pd.unique(induction["variant"])) == models
        assert len(sink) == 2 * 12 * 2 * 4 and sink["alpha_0"].between(0, 1).all() and (sink["n"] <= 64).all()
        assert len(induction) == 2 * 10 * 2 * 4 and induction["induction"].between(0, 1).all()
    first = pd.read_csv(results / "stats/rte/finetuned/decoder_sink.csv")
    assert not first["alpha_0"].equals(sink["alpha_0"])                 # the two seeds' models differ
    for variant in ("pretrained", "finetuned", "finetuned-seed43"):
        heads = pd.read_csv(results / f"stats/rte/{variant}/decoder_heads.csv")
        assert len(heads) == 8 and heads["share_sink"].between(0, 1).all()
    assert (results / "figures/decoder-rte.png").stat().st_size > 10_000


def test_the_ledger_holds_the_decoder_claims(run):
    results, _ = run
    ledger = pd.read_csv(results / "claims.csv")
    decoder = ledger[ledger["claim"].str.startswith(("gu_", "olsson_"))]
    assert sorted(decoder["claim"]) == ["gu_sink_first_token", "gu_sink_first_token_finetuned", "gu_sink_kept_finetuned",
                                        "olsson_induction", "olsson_induction_finetuned",
                                        "olsson_induction_kept_finetuned"]
    assert (decoder["verdict"] != "not computed").all() and decoder["ci_low"].notna().all()
    finetuned = decoder[decoder["claim"].str.endswith("_finetuned")]
    assert (finetuned["n_seeds"] == 2).all()                               # every seed's probe
    norms = ledger[ledger["claim"].str.startswith("kobayashi_")]
    assert len(norms) and (norms["verdict"] != "not computed").all()      # the norm analyses ran
    report = (results / "report.html").read_text()
    assert "attention sinks and induction heads" in report and '<figure id="fig-decoder-rte">' in report


def test_steps_that_apply_ran_and_the_norms_run_with_the_pre_norm_views(run):
    results, proc = run
    for path in ("attention/rte/pretrained.zarr", "attention/rte/finetuned.zarr", "stats/rte/finetuned/patterns.csv",
                 "stats/rte/finetuned/sieve.csv", "ablation/rte/heads.csv", "ablation/rte/pruning.csv",
                 "tables/table1.csv", "explorer.html", "stats/rte/finetuned/faithfulness.csv"):
        assert (results / path).exists(), path
    assert not [line for line in proc.stderr.splitlines() if "norm analyses" in line]
    for variant in ("pretrained", "finetuned"):
        norms = pd.read_csv(results / f"stats/rte/{variant}/norms.csv")
        assert set(norms["head"].dropna()) == {0, 1, 2, 3}                 # 4 query heads over 2 key/value heads
        mixing = pd.read_csv(results / f"stats/rte/{variant}/mixing.csv")
        assert set(mixing["measure"]) == {"attn_w", "attn_n", "attnres_w", "attnres_n"}       # no post-LN measure
        scores = pd.read_parquet(results / f"stats/rte/{variant}/token_scores.parquet")
        assert {"raw", "norm", "rollout", "flow", "value_zeroing", "alti", "globenc"} <= set(scores["method"])
        assert "decompx" not in set(scores["method"])
        rollout = scores[scores["method"] == "rollout"].groupby("example_idx")["score"]
        assert (rollout.apply(lambda s: (s > 0).sum()) > 1).all()          # the last token's row, not row 0
        log = (results / f"logs/norms_views/rte/{variant}.log").read_text()
        notes = [line for line in log.splitlines() if "no DecompX" in line]
        assert len(notes) == 1 and "gated MLP" in notes[0]
    faith = pd.read_csv(results / "stats/rte/finetuned/faithfulness.csv")
    assert {"ablation", "gradient", "aopc"} <= set(faith["importance"]) and faith["n"].max() > 0


def test_the_probe_maps_are_stores_and_the_explorer_shows_them(run):
    from bertology.explorer.load import load_explorer_data
    from bertology.store import open_store

    results, _ = run
    for model in ("pretrained", "random-init", "finetuned", "random-finetuned", "finetuned-seed43"):
        ds = open_store(results / f"attention/rte/probe-{model}.zarr", check_rows=True)
        assert ds.attrs["split"] == "probe" and ds.sizes["example"] == 10 and ds.attrs["causal"]
        assert ds.sizes["query"] == 101 and ds.attrs["head_groups"] == [0, 0, 1, 1]
    (task,) = load_explorer_data(results, ["rte"], examples=2, seed=0)["tasks"]
    probes = [ex for ex in task["examples"] if ex.get("probe")]
    assert len(probes) == 1 and set(probes[0]["maps"]) == {"pretrained", "finetuned"} and probes[0]["n"] == 101


def test_the_explorer_shows_the_probe_sequence_in_chromium(run, browser, tmp_path):
    from tests.builders.browser import open_page, wait_view

    results, _ = run
    pg, watch = open_page(browser, (results / "explorer.html").resolve().as_uri())
    wait_view(pg, "overview")
    pg.click('#tabs button[data-view="example"]')
    wait_view(pg, "example")
    options = pg.eval_on_selector_all("#example-select option", "os => os.map(o => [o.value, o.textContent])")
    value, text = next(o for o in options if o[1].startswith("decoder probe 1"))
    pg.select_option("#example-select", value)
    wait_view(pg, "example")
    assert "random tokens repeated twice" in pg.inner_text("#example")
    assert pg.locator("#sm-grid canvas").count() == 2 * 2 * 4            # both models' maps of 2 layers x 4 heads
    pg.screenshot(path=str(tmp_path / "probe.png"), full_page=False)
    watch.check()
