"""Gu et al.'s alpha_0 of every store (bertology.attention.sinks), in the one read of a store, and the comparison's
sink rate of an encoder from it (bertology.compare.sinks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertology import compare as cmp
from bertology.analyses import REGISTRY
from bertology.attention.onepass import Job, reduce_store
from bertology.analyses.compare import SOURCES
from bertology.analyses.decoders import SINKS
from bertology.attention.sinks import SINK_COLUMNS, SinkKernel, first_token_alpha, head_table
from bertology.steps.compare import SOURCE_PATHS
from bertology.store import open_store
from tests.builders import kovaleva as kb

SYNC = {"scheduler": "synchronous"}
LONE = kb.Example([-1], [0], [])  # a lone [CLS]: one query row
EXAMPLES = [kb.single_example(), kb.pair_example(), LONE]  # n = 5, 12, 1


def causal_uniform(n: int) -> np.ndarray:
    """(n, n): row t uniform over keys 0..t (a decoder's map)."""
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def sink_maps(ex: kb.Example) -> np.ndarray:
    """(2, 2, n, n). Layer 0: head 0 puts 0.4 on the first token and 0.6 on the last from every row, head 1 is
    uniform. Layer 1: head 0 causal uniform, head 1 puts 0.25 on the first token and 0.75 on the second."""
    n = ex.n
    second = min(1, n - 1)
    return np.stack([np.stack([kb.on_columns(n, [0, n - 1], [0.4, 0.6]), kb.uniform(n)]),
                     np.stack([causal_uniform(n), kb.on_columns(n, [0, second], [0.25, 0.75])])])


def expected_alpha(ex: kb.Example) -> np.ndarray:
    """(2, 2): the mean over the n real rows of A[t, 0] of :func:`sink_maps`, as the float16 store holds it."""
    return sink_maps(ex).astype(np.float16)[..., :, 0].astype(np.float64).sum(-1) / ex.n


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The examples, padded to 16 positions whose rows and columns put all their weight on position 0: a padding
    row that counted would raise alpha_0."""
    ds = kb.build_store(EXAMPLES, sink_maps, pad_value=np.nan)
    att = ds["attention"].values.copy()
    for i, ex in enumerate(EXAMPLES):
        att[i, :, :, ex.n:, :] = 0.0
        att[i, :, :, ex.n:, 0] = 1.0
    ds["attention"] = (ds["attention"].dims, att)
    return kb.write_store(ds, tmp_path_factory.mktemp("sinks") / "s.zarr", chunk=2)


def run_kernel(store, typed_config) -> dict[str, pd.DataFrame]:
    job = Job(typed_config(), "rte", "pretrained", str(store), open_store(store), None, {})
    kernel = SinkKernel.build(job)
    result = reduce_store(store, [kernel], None, compute_kwargs=SYNC)["sinks"]
    return kernel.outputs(result, job).tables


def test_alpha0_is_the_mean_over_every_real_query_row_of_the_attention_to_position_0():
    a = sink_maps(kb.single_example())
    got = first_token_alpha(a)
    assert got[0, 0] == pytest.approx(0.4) and got[1, 1] == pytest.approx(0.25)
    assert got[0, 1] == pytest.approx(1 / 5)                              # uniform: 1/n, row 0 included
    assert got[1, 0] == pytest.approx(sum(1 / (t + 1) for t in range(5)) / 5)  # causal: A[0, 0] = 1 counts
    with pytest.raises(ValueError):
        first_token_alpha(np.zeros((1, 1, 3, 4)))


def test_the_kernel_writes_each_examples_alpha0_padding_excluded(store, typed_config):
    tables = run_kernel(store, typed_config)
    sinks = tables["sinks"]
    assert tuple(sinks.columns) == SINK_COLUMNS and len(sinks) == len(EXAMPLES) * 4
    assert sinks["example_idx"].unique().tolist() == [100, 101, 102]     # store order, the lone token included
    for i, ex in enumerate(EXAMPLES):
        rows = sinks[sinks["example_idx"] == 100 + i].sort_values(["layer", "head"])
        assert (rows["n"] == ex.n).all()
        assert rows["alpha_0"].to_numpy().tolist() == expected_alpha(ex).ravel().tolist()  # exactly
    first = sinks[(sinks["layer"] == 0) & (sinks["head"] == 0) & (sinks["example_idx"] < 102)]
    assert (first["alpha_0"] == float(np.float16(0.4))).all()            # 0.4 to the first token from every row
    last = sinks[(sinks["layer"] == 1) & (sinks["head"] == 1) & (sinks["example_idx"] < 102)]
    assert (last["alpha_0"] == 0.25).all()
    assert (sinks[sinks["example_idx"] == 102]["alpha_0"] == 1.0).all()  # a lone token attends to itself


def test_gus_rate_and_the_per_head_table(store, typed_config):
    tables = run_kernel(store, typed_config)
    # n = 5: 0.4, 0.2, H_5 / 5 = 0.457, 0.25 -> 2 over 0.3; n = 12: 0.4, 0.083, H_12 / 12 = 0.259, 0.25 -> 1;
    # the lone token: 1.0 four times -> 4. Gu's rate: 7 of 12 (example, layer, head).
    assert (tables["sinks"]["alpha_0"] > 0.3).mean() == 7 / 12
    heads = tables["sink_heads"].set_index(["layer", "head", "feature"])
    assert list(tables["sink_heads"].columns) == ["layer", "head", "feature", "mean", "std", "n"]
    assert heads.loc[(0, 0, "over"), "mean"] == 1.0 and heads.loc[(1, 1, "over"), "mean"] == pytest.approx(1 / 3)
    assert heads.loc[(1, 1, "alpha_0"), "mean"] == pytest.approx((0.25 + 0.25 + 1.0) / 3)
    assert (heads["n"] == 3).all()


def test_the_per_head_table_of_one_example_has_no_std():
    one = pd.DataFrame({"example_idx": [7], "layer": [0], "head": [0], "alpha_0": [0.31], "n": [4]})
    table = head_table(one)
    assert table["feature"].tolist() == ["alpha_0", "over"] and table["mean"].tolist() == [0.31, 1.0]
    assert table["std"].isna().all()


def test_the_registry_runs_the_kernel_in_the_one_read():
    assert SinkKernel in REGISTRY.store_kernels()
    declared = REGISTRY.kernel_tables(SinkKernel)
    assert declared["sinks"].path == "stats/{task}/{variant}/sinks.csv"
    assert declared["sinks"].columns == SINK_COLUMNS
    assert "results/stats/rte/pretrained/sinks.csv" in REGISTRY.store_targets(["rte"], ["pretrained"])
    assert SOURCES["sinks"] == (SINKS, ("pretrained",))  # the compare rule waits for it


def store_sink_rows(task: str = "rte") -> pd.DataFrame:
    """sinks.csv (pretrained) of a 1-layer x 2-head encoder on 2 examples: head 0's alpha_0 0.9 and 0.1, head 1's
    0.31 and 0.27."""
    alpha = {0: (0.9, 0.1), 1: (0.31, 0.27)}
    rows = [{"example_idx": 10 + e, "layer": 0, "head": h, "alpha_0": a[e], "n": 7} for h, a in alpha.items()
            for e in (0, 1)]
    return pd.DataFrame(rows).assign(task=task, variant="pretrained")


def test_an_encoders_sink_rate_comes_from_its_stores_alpha0():
    features = {"enc": pd.DataFrame([{"layer": 0, "head": h, "feature": "cls", "mean": 0.0, "std": 0.0, "n": 2,
                                      "task": "rte", "variant": "pretrained"} for h in (0, 1)])}
    table, layers = cmp.sinks({}, features, {"enc": cmp.ENCODER}, ["rte"], store={"enc": store_sink_rows()},
                              sources=SOURCE_PATHS)
    row = table.iloc[0]
    assert row["sink_rate"] == 2 / 4                        # 0.9 and 0.31 exceed 0.3; 0.1 and 0.27 do not
    assert row["source"] == "sinks.csv alpha_0" and row["note"] == "" and row["n"] == 2
    assert (row["n_heads_over"], row["mean_alpha0"]) == (1, pytest.approx((0.5 + 0.29) / 2))  # heads: 0.5, 0.29
    assert layers["value"].tolist() == pytest.approx([0.395])


def test_without_sinks_csv_an_encoder_falls_back_to_the_cls_feature():
    features = pd.DataFrame([{"layer": 0, "head": h, "feature": "cls", "mean": v, "std": 0.1, "n": 10,
                              "task": "rte", "variant": "pretrained"} for h, v in ((0, 0.31), (1, 0.29))])
    table, _ = cmp.sinks({}, {"enc": features}, {"enc": cmp.ENCODER}, ["rte"], store={}, sources=SOURCE_PATHS)
    row = table.iloc[0]
    assert row["source"] == "features.csv cls" and np.isnan(row["sink_rate"]) and "per-head means" in row["note"]


def test_a_decoder_keeps_the_probes_alpha0_and_pools_one_source():
    probe = pd.DataFrame([{"variant": "pretrained", "example": e, "layer": 0, "head": 0, "alpha_0": 0.9, "n": 64}
                          for e in range(3)]).assign(task="rte")
    store = {"dec": pd.concat([store_sink_rows("rte"), store_sink_rows("mrpc")], ignore_index=True)}
    table, _ = cmp.sinks({"dec": probe}, {}, {"dec": cmp.DECODER}, ["rte", "mrpc"], store=store,
                         sources=SOURCE_PATHS)
    rows = table.set_index("task")
    assert rows.loc["rte", "source"] == "decoder_sink.csv alpha_0" and rows.loc["rte", "sink_rate"] == 1.0
    # no probe rows for mrpc: the store's alpha_0, said so
    assert rows.loc["mrpc", "source"] == "sinks.csv alpha_0" and rows.loc["mrpc", "sink_rate"] == 0.5
    # pooled: only the tasks of the model's first source (the probe's), never two sources mixed
    assert rows.loc[cmp.POOLED, "source"] == "decoder_sink.csv alpha_0"
    assert rows.loc[cmp.POOLED, "note"] == "pooled over rte" and rows.loc[cmp.POOLED, "n"] == 3


def test_the_explorer_offers_each_heads_mean_alpha0(store, typed_config):
    from bertology.explorer.catalogue import statistic_metrics

    heads = run_kernel(store, typed_config)["sink_heads"]
    st = next(s for s in REGISTRY.statistics() if s.id == "sinks")
    metrics = {m["id"]: m for m in statistic_metrics(st, {"pretrained": heads}, "rte", 2, 2)}
    assert set(metrics) == {"sinks:alpha_0", "sinks:over"}
    grid = metrics["sinks:alpha_0"]["variants"]["pretrained"]
    mean = heads[heads["feature"] == "alpha_0"].sort_values(["layer", "head"])["mean"]
    assert grid == pytest.approx(mean.tolist(), rel=1e-5)
    assert metrics["sinks:over"]["variants"]["pretrained"][0] == 1.0   # layer 0, head 0: every example over 0.3
