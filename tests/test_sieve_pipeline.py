"""End-to-end: stores written with to_zarr, heads with known roles, the CLI commands, Snakemake rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

try:  # tests/ is a package (tests/__init__.py); fall back to a rootdir-style conftest import
    from tests.conftest import run_snakemake, write_config
except ImportError:  # pragma: no cover
    from conftest import run_snakemake, write_config

from bertology.sieve.reduce import compute_scores, load_scores, open_attention, run_sieve
from bertology.sieve.masks import roles_for

CLS, SEP, PAD = 101, 102, 0
E, L, H, T = 24, 3, 4, 16
# (layer, head) of the heads built with a known role; every other head attends uniformly
CLS_HEAD, PREV_HEAD, SYN_HEAD, UNIFORM_HEAD, BLOCK_HEAD, SEP_HEAD = (0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (2, 3)


def make_examples():
    """Pair examples of 12-15 tokens with multi-wordpiece words and four dependency relations."""
    ids = np.full((E, T), PAD, dtype=np.int32)
    tt = np.zeros((E, T), dtype=np.int8)
    wid = np.full((E, T), -1, dtype=np.int16)
    length = np.zeros(E, dtype=np.int16)
    rows = []
    for e in range(E):
        a = [1, 2, 1, 1] + [1] * (e % 3)
        b = [1, 1, 2] + [1] * (e % 2)
        toks, segs, wids = [CLS], [0], [-1]
        w = 0
        for seg, sizes in ((0, a), (1, b)):
            for size in sizes:
                toks += [1000 + 10 * w + k for k in range(size)]
                segs += [seg] * size
                wids += [w] * size
                w += 1
            toks.append(SEP)
            segs.append(seg)
            wids.append(-1)
        n = len(toks)
        ids[e, :n], tt[e, :n], wid[e, :n], length[e] = toks, segs, wids, n
        k = len(a)
        deps = ["nsubj", "ROOT", "amod", "obj"] + ["det"] * (len(a) - 4) + ["advmod", "ROOT", "amod"] + \
            ["punct"] * (len(b) - 3)
        heads = [1, 1, 3, 1] + [1] * (len(a) - 4) + [k + 1, k + 1, k + 1] + [k + 1] * (len(b) - 3)
        rows += [(1000 + e, i, int(i >= k), deps[i], heads[i]) for i in range(w)]
    words = pd.DataFrame(rows, columns=["example_idx", "word", "segment", "dep", "head"])
    words["word"] = words["word"].astype(np.int16)
    words["head"] = words["head"].astype(np.int16)
    return ids, tt, wid, length, words


def make_attention(ids, wid, length, words, cls_mass):
    att = np.full((E, L, H, T, T), np.nan, dtype=np.float64)
    for e in range(E):
        n = int(length[e])
        real = np.arange(n)
        q = [t for t in real if t != 0 and ids[e, t] != SEP]
        seps = [t for t in real if ids[e, t] == SEP]
        att[e, :, :, :n, :n] = 1.0 / n
        c = att[(e, *CLS_HEAD)]
        c[:n, :n] = (1 - cls_mass) / (n - 1)
        c[:n, 0] = cls_mass
        p = att[(e, *PREV_HEAD)]
        for i, t in enumerate(q):
            p[t, :n] = 0
            p[t, q[max(i - 1, 0)]] = 1
        s = att[(e, *SYN_HEAD)]
        wex = words[words["example_idx"] == 1000 + e]
        dep_of = dict(zip(wex["word"], zip(wex["dep"], wex["head"])))
        for t in q:
            dep, head = dep_of[int(wid[e, t])]
            if dep in ("nsubj", "obj", "amod", "advmod"):
                targets = np.flatnonzero(wid[e, :n] == head)
                s[t, :n] = 0
                s[t, targets] = 1 / len(targets)
        b = att[(e, *BLOCK_HEAD)]
        seg = np.asarray([0 if t < seps[0] else 1 for t in range(n)])
        for t in q:
            same = [u for u in q if seg[u] == seg[t]]
            b[t, :n] = 0
            b[t, same] = 1 / len(same)
        sp = att[(e, *SEP_HEAD)]
        for t in q:
            sp[t, :n] = 0
            sp[t, seps] = 1 / len(seps)
    return att.astype(np.float16)


def write_store(path, variant, cls_mass, chunk=5):
    ids, tt, wid, length, words = make_examples()
    att = make_attention(ids, wid, length, words, cls_mass)
    ds = xr.Dataset(
        {"attention": (("example", "layer", "head", "query", "key"), att),
         "input_ids": (("example", "query"), ids), "token_type_ids": (("example", "query"), tt),
         "word_ids": (("example", "query"), wid), "length": (("example",), length),
         "example_idx": (("example",), np.arange(1000, 1000 + E, dtype=np.int64))},
        coords={"layer": np.arange(L), "head": np.arange(H)},
        attrs={"model": "synthetic", "variant": variant, "task": "rte", "split": "validation", "cls_token_id": CLS,
               "sep_token_id": SEP, "pad_token_id": PAD, "max_length": T, "complete": True})
    ds.chunk({"example": chunk}).to_zarr(path, mode="w")
    return words


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("sieve-e2e")
    att = root / "results" / "attention" / "rte"
    att.mkdir(parents=True)
    words = write_store(att / "pretrained.zarr", "pretrained", 0.9)
    write_store(att / "finetuned.zarr", "finetuned", 0.5)
    words.to_parquet(att / "words.parquet")
    return root


def assigned(table, layer, head):
    sub = table[(table["layer"] == layer) & (table["head"] == head)]
    return set(sub.loc[sub["assigned"], "role"])


def test_roles_recovered_from_a_chunked_store(stores):
    path = stores / "results" / "attention" / "rte" / "pretrained.zarr"
    words = pd.read_parquet(path.parent / "words.parquet")
    table, scores = run_sieve(path, path.parent / "words.parquet", params={"window": 1},
                              compute_kwargs={"scheduler": "threads", "num_workers": 2}, batch=3)
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
    again = compute_scores(open_attention(path), words, roles=roles_for(True), window=1,
                           compute_kwargs={"scheduler": "synchronous"}, batch=24)
    np.testing.assert_allclose(again.values, scores.values, rtol=1e-6, equal_nan=True)   # float32 sums
    assert scores["example_idx"].values.tolist() == list(range(1000, 1000 + E))


def test_incomplete_or_missing_store_is_a_clear_error(stores, tmp_path):
    with pytest.raises(FileNotFoundError, match="no attention store"):
        open_attention(tmp_path / "nope.zarr")
    src = stores / "results" / "attention" / "rte" / "pretrained.zarr"
    dst = tmp_path / "partial.zarr"
    ds = xr.open_zarr(src).load()
    ds.attrs["complete"] = False
    ds.to_zarr(dst, mode="w")
    with pytest.raises(ValueError, match="incomplete|not marked complete"):
        open_attention(dst)


def snakemake_commands(work) -> list[str]:
    """The shell commands of the sieve rules for `work` (Snakemake dry run), sieve jobs first."""

    targets = ["results/stats/sieve_summary.csv", "results/stats/sieve_delta.csv",
               *(f"results/figures/sieve-{k}-rte.png" for k in ("scores", "overlap", "roles"))]
    proc = run_snakemake(work, "-n", "-p", "--cores", "2", "--allowed-rules", "sieve", "sieve_figures", "sieve_delta",
                         "sieve_summary", "--", *targets)
    cmds = [line.split("Shell command:", 1)[1].strip() for line in (proc.stdout + proc.stderr).splitlines()
            if "Shell command:" in line]
    assert len(cmds) == 5, proc.stdout[-3000:]
    return sorted(cmds, key=lambda c: not c.startswith("bertology sieve "))


def test_rules_run_end_to_end(stores, monkeypatch):
    """Snakemake plans the sieve rules; their exact shell commands then run here (in-process, for speed)."""
    import shlex

    from bertology.cli import main

    write_config(stores, tasks=["rte"], analysis={"sieve": {"window": 1, "correction": "fdr_bh"},
                                                  "dask": {"scheduler": "synchronous"}})
    commands = snakemake_commands(stores)
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
    scores = load_scores("results/stats/rte/pretrained/sieve_scores.npz")
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
