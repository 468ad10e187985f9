"""End-to-end: stores written through the extraction's writer, heads with known roles, the steps, Snakemake rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bertology.sieve.masks import roles_for
from bertology.sieve.reduce import compute_scores, run_sieve
from bertology.sieve.scores_io import read_scores
from bertology.store import open_store
from tests.builders import store as store_builder
from tests.builders.sieve import (CLS_HEAD, PREV_HEAD, SEP_HEAD, STORE_CONFIG, SYN_HEAD, UNIFORM_HEAD, E, H,
                                  L, full_words, write_store)

SIEVE = {"tau": 3.0, "alpha": 0.05, "correction": "none"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("sieve-e2e")
    att = root / "results" / "attention" / "rte"
    att.mkdir(parents=True)
    words = write_store(att / "pretrained.zarr", "pretrained", 0.9)
    write_store(att / "finetuned.zarr", "finetuned", 0.5)
    (root / "results" / "data" / "rte").mkdir(parents=True)
    full_words(words).to_parquet(root / "results" / "data" / "rte" / "words.parquet")
    return root


def assigned(table, layer, head):
    sub = table[(table["layer"] == layer) & (table["head"] == head)]
    return set(sub.loc[sub["assigned"], "role"])


def test_roles_recovered_from_a_chunked_store(stores):
    path = stores / "results" / "attention" / "rte" / "pretrained.zarr"
    words = pd.read_parquet(stores / "results" / "data" / "rte" / "words.parquet")
    table, scores = run_sieve(path, words, window=1, **SIEVE, compute_kwargs={"scheduler": "threads", "num_workers": 2},
                              batch=3)
    n = np.arange(E) % 3 + np.arange(E) % 2 + 12
    assert assigned(table, *CLS_HEAD) == {"cls"} or assigned(table, *CLS_HEAD) == {"cls", "delimiter"}
    cls = table.query("layer == 0 and head == 0 and role == 'cls'")
    assert cls["mean"].item() == pytest.approx(0.9 * n.mean(), rel=2e-3)
    # segment b's amod dependent sits right after its head: a previous-token head is an amod head too
    assert assigned(table, *PREV_HEAD) == {"prev_local", "local", "amod"}
    prev = table.query("layer == 0 and head == 1 and role == 'prev_local'")
    assert prev["mean"].item() == pytest.approx(n.mean(), rel=2e-3) and prev["n"].item() == E
    assert assigned(table, *SYN_HEAD) >= {"nsubj", "dobj", "amod", "advmod", "syntactic"}
    nsubj = table.query("layer == 1 and head == 0 and role == 'nsubj'")
    assert nsubj["mean"].item() == pytest.approx(n.mean() / 2, rel=2e-3)   # head word in two wordpieces
    assert assigned(table, *UNIFORM_HEAD) == set()
    uniform = table[(table["layer"] == 1) & (table["head"] == 1)]
    np.testing.assert_allclose(uniform["mean"], 1.0, rtol=2e-3)
    assert assigned(table, *SEP_HEAD) == {"sep", "delimiter"}
    # block head: n / |Q tokens of t's segment|, averaged over the queries
    a_q = 5 + np.arange(E) % 3
    b_q = 4 + np.arange(E) % 2
    want = (n * (a_q * (1 / a_q) + b_q * (1 / b_q)) / (a_q + b_q)).mean()
    assert table.query("layer == 2 and head == 2 and role == 'block'")["mean"].item() == pytest.approx(want, rel=2e-3)
    assert set(table["role"]) == set(roles_for(True))
    # same scores with the synchronous scheduler and a different sub-batch
    again = compute_scores(path, words, roles=roles_for(True), window=1,
                           compute_kwargs={"scheduler": "synchronous"}, batch=24)
    np.testing.assert_allclose(again.values, scores.values, rtol=1e-6, equal_nan=True)   # float32 sums
    assert scores["example_idx"].values.tolist() == list(range(1000, 1000 + E))


def test_incomplete_or_missing_store_is_a_clear_error(stores, tmp_path):
    with pytest.raises(FileNotFoundError, match="no attention store"):
        open_store(tmp_path / "nope.zarr")
    src = stores / "results" / "attention" / "rte" / "pretrained.zarr"
    dst = tmp_path / "partial.zarr"
    store_builder.write_store(dst, xr.open_zarr(src), finish=False).rename(dst)  # a partial store (complete=False) moved into place
    with pytest.raises(ValueError, match="incomplete|not marked complete"):
        open_store(dst)


def snakemake_commands(work, snakemake_run) -> list[str]:
    """The shell commands of the sieve rules for `work` (Snakemake dry run), the stores' one-pass jobs first."""

    targets = ["results/stats/sieve_summary.csv", "results/stats/sieve_delta.csv",
               *(f"results/figures/sieve-{k}-rte.png" for k in ("scores", "overlap", "roles"))]
    proc = snakemake_run(work, "-n", "-p", "--cores", "2", "--allowed-rules", "store_stats", "sieve_figures", "sieve_delta",
                         "sieve_summary", "--", *targets)
    cmds = [line.split("Shell command:", 1)[1].strip() for line in (proc.stdout + proc.stderr).splitlines()
            if "Shell command:" in line]
    assert len(cmds) == 5, proc.stdout[-3000:]
    return sorted(cmds, key=lambda c: not c.startswith("bertology store_stats "))


def test_rules_run_end_to_end(stores, monkeypatch, config_file, snakemake_run):
    """Snakemake plans the sieve rules; their exact shell commands then run here (in-process, for speed)."""
    import shlex

    from bertology.workflow.cli import main

    config_file(stores, tasks=["rte"], analysis={"sieve": {"window": 1, "correction": "fdr_bh"},
                                                  "dask": {"scheduler": "synchronous"}},
                model=STORE_CONFIG["model"], data=STORE_CONFIG["data"], attention=STORE_CONFIG["attention"])
    commands = snakemake_commands(stores, snakemake_run)
    monkeypatch.chdir(stores)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{stores}/results/mlflow.db")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    for cmd in commands:
        argv = shlex.split(cmd.split(" > ", 1)[0])
        assert argv[0] == "bertology"
        assert main(argv[1:]) == 0, cmd
    table = pd.read_csv("results/stats/rte/pretrained/sieve.csv")
    assert list(table.columns[:10]) == ["layer", "head", "role", "n", "mean", "std", "t", "p_value", "assigned", "tau"]
    assert (table["correction"] == "fdr_bh").all() and (table["p_adjusted"] >= table["p_value"] - 1e-12).all()
    scores = read_scores("results/stats/rte/pretrained/sieve_scores.npz")
    assert scores.shape == (E, L, H, len(roles_for(True)))
    for name in ("scores-rte", "overlap-rte", "roles-rte", "delta"):
        assert (stores / "results" / "figures" / f"sieve-{name}.png").stat().st_size > 10_000
    delta = pd.read_csv("results/stats/sieve_delta.csv")
    assert list(delta.columns) == ["task", "role", "layer_group", "pretrained", "finetuned", "delta", "n_heads"]
    n = np.arange(E) % 3 + np.arange(E) % 2 + 12
    cls_initial = delta.query("role == 'cls' and layer_group == 'initial'")
    assert cls_initial["delta"].item() == pytest.approx((0.5 - 0.9) * n.mean() / H, rel=5e-3)
    assert cls_initial["n_heads"].item() == H
    # the [CLS] head's spare mass is spread over the other tokens, the [SEP]s included
    sep = delta[delta["role"] == "sep"].set_index("layer_group")["delta"]
    assert sep["initial"] == pytest.approx((n * 0.4 / (n - 1)).mean() / H, rel=5e-3)
    assert sep["middle"] == pytest.approx(0, abs=1e-6) and sep["final"] == pytest.approx(0, abs=1e-6)
    summary = pd.read_csv("results/stats/sieve_summary.csv").set_index("variant")
    assert summary.loc["pretrained", "n_heads"] == L * H
    assert summary.loc["pretrained", "delimiter_heads"] == summary.loc["pretrained", "heads_delimiter"]
    assert summary.loc["pretrained", "share_no_role"] == pytest.approx(
        summary.loc["pretrained", "no_role_heads"] / (L * H))
    assert {"spearman_rho", "spearman_p", "overlap_syntactic_local", "jaccard_syntactic_local"} <= set(summary.columns)
