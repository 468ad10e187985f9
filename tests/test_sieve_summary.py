"""Summaries of the sieve tests: layer thirds, deltas, role sets, overlaps, Spearman; single-sentence tasks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats

from bertology.sieve.sieve_figures import role_combinations, role_grid_image
from bertology.sieve.reduce import run_sieve
from bertology.sieve.summary import layer_groups, roles_per_head, sieve_delta, summarize
from tests.builders import store as store_builder


def table_from(assign: dict[tuple[int, int], set[str]], means: dict[tuple[int, int, str], float] | None = None,
               L: int = 3, H: int = 2, roles=("local", "delimiter", "syntactic", "cls")) -> pd.DataFrame:
    rows = []
    for l in range(L):
        for h in range(H):
            for r in roles:
                rows.append({"layer": l, "head": h, "role": r, "n": 10,
                             "mean": (means or {}).get((l, h, r), 1.0 + l + 0.1 * h), "std": 1.0, "t": 0.0,
                             "p_value": 0.01 if r in assign.get((l, h), set()) else 0.9,
                             "assigned": r in assign.get((l, h), set()), "tau": 3.0})
    return pd.DataFrame(rows)


def test_layer_groups_are_consecutive_thirds():
    assert [layer_groups(12)[l] for l in range(12)] == ["initial"] * 4 + ["middle"] * 4 + ["final"] * 4
    assert [layer_groups(6)[l] for l in range(6)] == ["initial"] * 2 + ["middle"] * 2 + ["final"] * 2
    assert [layer_groups(7)[l] for l in range(7)] == ["initial"] * 3 + ["middle"] * 2 + ["final"] * 2
    with pytest.raises(ValueError):
        layer_groups(0)


def test_delta_is_the_difference_of_head_means_per_third():
    pre = table_from({}, L=6)
    fine = pre.copy()
    fine.loc[(fine["layer"] >= 4) & (fine["role"] == "cls"), "mean"] += 2.0
    fine.loc[(fine["layer"] == 0) & (fine["head"] == 1) & (fine["role"] == "local"), "mean"] -= 1.0
    delta = sieve_delta(pre, fine, "rte").set_index(["role", "layer_group"])
    assert delta.loc[("cls", "final"), "delta"] == pytest.approx(2.0)
    assert delta.loc[("cls", "initial"), "delta"] == pytest.approx(0.0)
    assert delta.loc[("local", "initial"), "delta"] == pytest.approx(-1.0 / 4)   # one of 2 layers x 2 heads
    assert delta.loc[("local", "initial"), "pretrained"] == pytest.approx(pre.query(
        "role == 'local' and layer < 2")["mean"].mean())
    assert (delta["n_heads"] == 4).all() and (delta["task"] == "rte").all()


def test_summary_shares_overlaps_and_spearman():
    assign = {(0, 0): {"local", "syntactic"}, (0, 1): {"delimiter", "cls"}, (1, 0): {"syntactic"},
              (1, 1): {"local", "cls"}, (2, 0): {"delimiter"}, (2, 1): set()}
    rng = np.random.default_rng(0)
    means = {(l, h, r): float(rng.uniform(0, 5)) for l in range(3) for h in range(2) for r in ("local", "syntactic")}
    table = table_from(assign, means)
    row = summarize(table, task="rte", variant="finetuned")
    assert row["n_heads"] == 6
    assert row["share_delimiter"] == pytest.approx(2 / 6)
    assert row["no_role_heads"] == 1 and row["share_no_role"] == pytest.approx(1 / 6)
    assert row["syntactic_and_local"] == 1
    assert row["overlap_syntactic_local"] == pytest.approx(1 / 2)
    assert row["jaccard_syntactic_local"] == pytest.approx(1 / 3)
    # multi-skilled = two or more fine roles (Fig. 5's roles; the unions delimiter/syntactic not counted)
    assert row["multi_skilled_heads"] == 1
    local = [means[(l, h, "local")] for l in range(3) for h in range(2)]
    syn = [means[(l, h, "syntactic")] for l in range(3) for h in range(2)]
    want = stats.spearmanr(local, syn)
    assert row["spearman_rho"] == pytest.approx(want.statistic) and row["spearman_p"] == pytest.approx(want.pvalue)
    assert np.isnan(row["spearman_rho_examples"])     # no per-example scores given
    scores = xr.DataArray(rng.normal(size=(5, 3, 2, 2)), dims=("example", "layer", "head", "role"),
                          coords={"role": ["local", "syntactic"]})
    row = summarize(table, scores, task="rte", variant="finetuned")
    a, b = scores.sel(role="local").values.ravel(), scores.sel(role="syntactic").values.ravel()
    assert row["spearman_rho_examples"] == pytest.approx(stats.spearmanr(a, b).statistic)
    assert row["spearman_n_pairs"] == 30


def test_role_combinations_and_grid_order_multi_skilled_first():
    assign = {(0, 0): {"local"}, (0, 1): {"local", "cls", "syntactic"}, (1, 0): set(), (1, 1): {"cls"}}
    table = table_from(assign, L=2)
    combos = role_combinations(table, ["local", "delimiter", "syntactic"])
    assert combos.sum() == 4
    assert combos[(True, False, True)] == 1 and combos[(False, False, False)] == 2
    wide = roles_per_head(table, ["local", "cls", "syntactic"])
    assert wide.loc[(0, 1), "n_roles"] == 3
    img, order = role_grid_image(table, ["local", "cls", "syntactic"])
    assert order[0].tolist() == [1, 0]            # head 1 (3 roles) before head 0 (1 role)
    assert order[1].tolist() == [1, 0]
    assert img.shape[0] == 2 * 3 and img.shape[1] == 2 * 3    # 2x2 role squares + gap per cell


def test_single_sentence_store_has_no_block_role(tmp_path):
    CLS, SEP = 101, 102
    E, T = 6, 8
    ids = np.zeros((E, T), dtype=np.int32)
    length = np.array([8, 7, 6, 8, 5, 7], dtype=np.int16)
    wid = np.full((E, T), -1, dtype=np.int16)
    att = np.full((E, 1, 2, T, T), np.nan, dtype=np.float16)
    words = []
    for e, n in enumerate(length):
        ids[e, :n] = [CLS] + list(range(2000, 2000 + n - 2)) + [SEP]
        wid[e, 1:n - 1] = np.arange(n - 2)
        att[e, :, :, :n, :n] = 1 / n
        att[e, 0, 1, :n, :n] = 0
        att[e, 0, 1, :n, 0] = 1                      # head 1: everything on [CLS]
        words += [(e, w, "amod" if w == 0 else "ROOT", 1 if w == 0 else w) for w in range(n - 2)]
    ds = xr.Dataset({"attention": (("example", "layer", "head", "query", "key"), att),
                     "input_ids": (("example", "query"), ids),
                     "token_type_ids": (("example", "query"), np.zeros((E, T), dtype=np.int8)),
                     "segment": (("example", "query"),
                                 np.where(np.arange(T) < np.asarray(length)[:, None], 0, -1).astype(np.int8)),
                     "word_ids": (("example", "query"), wid), "length": (("example",), length),
                     "example_idx": (("example",), np.arange(E, dtype=np.int64))},
                    coords={"layer": [0], "head": [0, 1]},
                    attrs={"task": "sst2", "variant": "pretrained", "cls_token_id": CLS, "sep_token_id": SEP,
                           "pad_token_id": 0, "max_length": T, "complete": True, "model": "synthetic",
                           "split": "validation"})
    store_builder.write_store(tmp_path / "s.zarr", ds, chunk_size=4)
    words = pd.DataFrame(words, columns=["example_idx", "word", "dep", "head"])
    table, scores = run_sieve(tmp_path / "s.zarr", words, tau=3.0, alpha=0.05, window=2, correction="none",
                              compute_kwargs={"scheduler": "synchronous"})
    assert "block" not in set(table["role"]) and len(set(table["role"])) == 11
    cls_head = table[table["head"] == 1].set_index("role")
    assert set(cls_head.index[cls_head["assigned"]]) == {"cls"}
    assert cls_head.loc["cls", "mean"] == pytest.approx(length.mean())
    # delimiter = {[CLS], [SEP]}: n * (1 + 0) / 2, about 3.4 on average -- not significant over 6 examples
    assert cls_head.loc["delimiter", "mean"] == pytest.approx(length.mean() / 2)
    assert cls_head.loc["delimiter", "p_value"] == pytest.approx(stats.ttest_1samp(
        length / 2, 3.0, alternative="greater").pvalue)
    amod = table[(table["head"] == 0) & (table["role"] == "amod")]
    assert amod["mean"].item() == pytest.approx(1.0, rel=1e-3) and not amod["assigned"].item()
