"""Comparing models (bertology.compare, the step compare): each comparison on tables whose answer is known by
construction, then the step on two fake model roots (an encoder-like and a decoder-like one) and a bare one."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology import compare as cmp
from bertology.compare import figures
from bertology.compare.shares import NO_ROLE, class_shares, role_shares
from bertology.kovaleva.patterns import CLASSES
from bertology.pipeline.config import validate_config
from bertology.pipeline.errors import UserError
from bertology.pipeline.layout import path
from bertology.steps.compare import SOURCE_PATHS, compare_roots, model_roots, output_paths, read_model
from tests.builders.steps import run_step

KINDS = {"dec": cmp.DECODER, "enc": cmp.ENCODER}


def sink_rows(task: str = "rte") -> pd.DataFrame:
    """decoder_sink.csv of a 2-layer x 2-head decoder on 2 examples: per head the examples' alpha_0 are (0,0) 0.31
    and 0.31, (0,1) 0.29 and 0.29, (1,0) 0.9 and 0.1, (1,1) 0 and 0; the random initialisation's are all 1."""
    alpha = {(0, 0): (0.31, 0.31), (0, 1): (0.29, 0.29), (1, 0): (0.9, 0.1), (1, 1): (0.0, 0.0)}
    rows = [{"variant": "pretrained", "example": e, "layer": lh[0], "head": lh[1], "alpha_0": a[e], "n": 64}
            for lh, a in alpha.items() for e in (0, 1)]
    rows += [{**r, "variant": "random-init", "alpha_0": 1.0} for r in rows]
    return pd.DataFrame(rows).assign(task=task)


def feature_rows(task: str = "rte", cls: tuple[float, float] = (0.31, 0.29), n: int = 10) -> pd.DataFrame:
    """features.csv (pretrained) of a 1-layer x 2-head encoder: cls means `cls`, sep 0.9 (not the first token)."""
    rows = [{"layer": 0, "head": h, "feature": f, "mean": v, "std": 0.1, "n": n}
            for h in (0, 1) for f, v in (("cls", cls[h]), ("sep", 0.9))]
    return pd.DataFrame(rows).assign(task=task, variant="pretrained")


def test_relative_depth_puts_every_model_on_one_axis():
    assert cmp.relative_depth(5, 6) == 1.0 and cmp.relative_depth(11, 12) == 1.0
    assert cmp.relative_depth(2, 6) == cmp.relative_depth(5, 12) == 0.5
    assert cmp.relative_depth(0, 4) == 0.25


def test_a_decoders_sink_rate_is_gus_share_of_example_layer_head():
    table, layers = cmp.sinks({"dec": sink_rows()}, {}, {"dec": cmp.DECODER}, ["rte"], sources=SOURCE_PATHS)
    row = table.iloc[0]
    # example x layer x head over 0.3: (0,0) twice, (1,0) once: 3 of 8; 0.29 does not count, 0.31 does
    assert row["sink_rate"] == 3 / 8
    # per head (mean over examples): 0.31, 0.29, 0.5, 0 -> two heads over 0.3
    assert (row["n_heads_over"], row["share_heads_over"]) == (2, 0.5)
    assert row["mean_alpha0"] == pytest.approx((0.31 + 0.29 + 0.5 + 0.0) / 4)
    assert (row["layers"], row["heads"], row["n"], row["epsilon"], row["kind"]) == (2, 2, 2, 0.3, "decoder")
    assert row["note"] == ""
    assert layers["value"].tolist() == pytest.approx([0.30, 0.25])
    assert layers["depth"].tolist() == [0.5, 1.0] and set(layers["statistic"]) == {"alpha_0"}


def test_epsilon_is_a_parameter():
    table, _ = cmp.sinks({"dec": sink_rows()}, {}, {"dec": cmp.DECODER}, ["rte"], epsilon=0.05,
                         sources=SOURCE_PATHS)
    assert table.iloc[0]["sink_rate"] == 6 / 8 and table.iloc[0]["n_heads_over"] == 3


def test_an_encoders_alpha0_is_the_cls_feature_and_its_per_sequence_rate_is_not_computed():
    table, layers = cmp.sinks({}, {"enc": feature_rows()}, {"enc": cmp.ENCODER}, ["rte"], sources=SOURCE_PATHS)
    row = table.iloc[0]
    assert (row["n_heads_over"], row["share_heads_over"]) == (1, 0.5)   # 0.31 counts, 0.29 does not
    assert np.isnan(row["sink_rate"]) and "per-head means" in row["note"]
    assert row["source"] == "features.csv cls" and row["n"] == 10
    assert layers["value"].tolist() == pytest.approx([0.30])


def test_a_missing_table_is_a_row_that_names_it():
    no_cls = feature_rows()[lambda d: d["feature"] != "cls"]
    table, layers = cmp.sinks({}, {"enc": no_cls}, {"dec": cmp.DECODER, "enc": cmp.ENCODER, "bare": cmp.ENCODER},
                              ["rte"], sources=SOURCE_PATHS)
    notes = dict(zip(table["model"], table["note"]))
    assert notes["dec"] == "not computed: no stats/rte/decoder_sink.csv; no stats/rte/pretrained/sinks.csv"
    assert notes["bare"] == ("not computed: no stats/rte/pretrained/sinks.csv; "
                             "no stats/rte/pretrained/features.csv")
    assert notes["enc"].startswith("not computed: no stats/rte/pretrained/sinks.csv; "
                                   "stats/rte/pretrained/features.csv has no cls rows")
    assert table["sink_rate"].isna().all() and layers.empty


def test_sinks_pool_over_tasks():
    sink = pd.concat([sink_rows("rte"), sink_rows("mrpc").assign(alpha_0=lambda d: d["alpha_0"] * 0)])
    feats = pd.concat([feature_rows("rte", (0.4, 0.2), n=10), feature_rows("mrpc", (0.1, 0.2), n=30)])
    table, layers = cmp.sinks({"dec": sink}, {"enc": feats}, KINDS, ["rte", "mrpc"], sources=SOURCE_PATHS)
    pooled = table[table["task"] == cmp.POOLED].set_index("model")
    assert pooled.loc["dec", "sink_rate"] == 3 / 16 and pooled.loc["dec", "n"] == 4
    # head 0: (0.4 * 10 + 0.1 * 30) / 40 = 0.175, head 1: 0.2
    assert pooled.loc["enc", "mean_alpha0"] == pytest.approx((0.175 + 0.2) / 2)
    assert pooled.loc["enc", "note"] == "pooled over rte, mrpc"
    assert set(layers["task"]) == {"rte", "mrpc", cmp.POOLED}


def induction_rows() -> pd.DataFrame:
    """decoder_induction.csv of a 2-layer x 2-head decoder, 2 sequences: head (1, 0) scores 0.8 and 0.6 (mean
    0.7), (0, 1) 0.9 and 0.3 (mean 0.6); the others 0.1; its random initialisation's best head 0.2."""
    score = {(0, 0): (0.1, 0.1), (0, 1): (0.9, 0.3), (1, 0): (0.8, 0.6), (1, 1): (0.1, 0.1)}
    rows = [{"variant": "pretrained", "sequence": s, "layer": lh[0], "head": lh[1], "induction": v[s],
             "induction_stripe": 0.0, "previous_token": 0.0, "duplicate_token": 0.0}
            for lh, v in score.items() for s in (0, 1)]
    rows += [{**r, "variant": "random-init", "induction": 0.2 if r["layer"] == 0 else 0.05} for r in rows]
    return pd.DataFrame(rows).assign(task="rte")


def test_the_best_induction_head_is_the_largest_mean_over_sequences():
    table = cmp.induction({"dec": induction_rows()}, {**KINDS, "bare": cmp.DECODER}, ["rte"],
                          sources=SOURCE_PATHS).set_index("model")
    best = table.loc["dec"]
    assert (best["layer"], best["head"], best["score"], best["depth"]) == (1, 0, pytest.approx(0.7), 1.0)
    assert (best["layers"], best["heads"], best["n"], best["random_init_score"]) == (2, 2, 2, 0.2)
    assert table.loc["enc", "note"].startswith("not computed: the induction probe runs on decoders only")
    assert table.loc["bare", "note"] == "not computed: no stats/rte/decoder_induction.csv"


def test_a_tie_goes_to_the_first_head():
    rows = induction_rows().assign(induction=0.5)
    best = cmp.induction({"dec": rows}, {"dec": cmp.DECODER}, ["rte"], sources=SOURCE_PATHS).iloc[0]
    assert (best["layer"], best["head"]) == (0, 0)


def pattern_rows(task: str, variant: str, n: int, classes: dict[tuple[int, int], str]) -> pd.DataFrame:
    """patterns.csv: each head's maps all of one class (fraction 1, 0 for the others), n maps per head."""
    rows = [{"layer": lh[0], "head": lh[1], "class": c, "fraction": float(c == cls), "n": n}
            for lh, cls in classes.items() for c in CLASSES]
    return pd.DataFrame(rows).assign(task=task, variant=variant)


def test_pattern_shares_weigh_each_head_by_its_maps_and_pool_over_tasks():
    rte = pattern_rows("rte", "pretrained", 10, {(0, 0): "vertical", (0, 1): "vertical", (1, 0): "diagonal",
                                                  (1, 1): "block"})
    mrpc = pattern_rows("mrpc", "pretrained", 30, {(0, 0): "heterogeneous", (0, 1): "heterogeneous",
                                                    (1, 0): "heterogeneous", (1, 1): "heterogeneous"})
    table = cmp.patterns({"enc": pd.concat([rte, mrpc])}, {"enc": cmp.ENCODER, "dec": cmp.DECODER},
                         ["rte", "mrpc"], sources=SOURCE_PATHS)
    share = table[table["model"] == "enc"].set_index(["task", "class"])["share"]
    assert share["rte", "vertical"] == 0.5 and share["rte", "diagonal"] == 0.25 and share["rte", "block"] == 0.25
    # pooled: 40 + 120 maps; vertical 20 of 160, heterogeneous 120 of 160
    assert share["all", "vertical"] == 20 / 160 and share["all", "heterogeneous"] == 120 / 160
    dec = table[table["model"] == "dec"]
    assert len(dec) == 2 and dec["note"].tolist() == ["not computed: no stats/rte/pretrained/patterns.csv",
                                                      "not computed: no stats/mrpc/pretrained/patterns.csv"]
    assert set(table["variant"]) == {"pretrained"}   # no fine-tuned rows: no fine-tuned variant, no note


def test_class_shares_recompute_the_pooled_row_from_the_heads():
    rows = pattern_rows("rte", "pretrained", 4, {(0, 0): "vertical", (0, 1): "block"})
    pooled_row = pd.DataFrame([{"layer": -1, "head": -1, "class": "vertical", "fraction": 0.99, "n": 8,
                                "task": "rte", "variant": "pretrained"}])
    shares = class_shares(pd.concat([rows, pooled_row])).set_index("class")
    assert shares.loc["vertical", "share"] == 0.5 and shares.loc["vertical", "n"] == 8
    assert shares["share"].sum() == 1.0


def sieve_rows(task: str, variant: str, assigned: dict[tuple[int, int], set[str]]) -> pd.DataFrame:
    roles = ("local", "delimiter", "syntactic")
    rows = [{"layer": lh[0], "head": lh[1], "role": r, "assigned": r in got, "n": 5, "mean": 1.0}
            for lh, got in assigned.items() for r in roles]
    return pd.DataFrame(rows).assign(task=task, variant=variant)


def test_role_shares_count_heads_and_heads_without_a_role():
    rows = sieve_rows("rte", "pretrained", {(0, 0): {"local", "syntactic"}, (0, 1): {"local"}, (1, 0): set(),
                                            (1, 1): {"delimiter"}})
    shares = role_shares(rows).set_index("role")
    assert list(shares.index) == ["local", "delimiter", "syntactic", NO_ROLE]
    assert shares["heads"].tolist() == [2, 1, 1, 1] and set(shares["n_heads"]) == {4}
    assert shares["share"].tolist() == [0.5, 0.25, 0.25, 0.25]


def test_roles_per_task_and_variant():
    pre = sieve_rows("rte", "pretrained", {(0, 0): {"local"}, (0, 1): set()})
    fine = sieve_rows("rte", "finetuned", {(0, 0): {"local"}, (0, 1): {"local"}})
    table = cmp.roles({"enc": pd.concat([pre, fine])}, {"enc": cmp.ENCODER}, ["rte"], sources=SOURCE_PATHS)
    local = table[table["role"] == "local"].set_index("variant")["share"]
    assert (local["pretrained"], local["finetuned"]) == (0.5, 1.0)


def entropy_rows(task: str, layers: int, value: float) -> pd.DataFrame:
    rows = [{"layer": layer, "head": 0, "feature": f, "mean": v, "std": 0.0, "n": 3}
            for layer in range(layers) for f, v in (("all", value * (layer + 1)), ("uniform", 2.0))]
    return pd.DataFrame(rows).assign(task=task, variant="pretrained")


def test_a_6_layer_and_a_12_layer_model_end_at_depth_1():
    six = pattern_rows("rte", "pretrained", 5, {(layer, 0): "vertical" for layer in range(6)})
    twelve = pattern_rows("rte", "pretrained", 5, {(layer, 0): "diagonal" for layer in range(12)})
    kinds = {"six": cmp.ENCODER, "twelve": cmp.ENCODER}
    curves = cmp.pattern_layers({"six": six, "twelve": twelve}, kinds, ["rte"], sources=SOURCE_PATHS)
    last = curves[(curves["statistic"] == "pattern_vertical")].groupby("model").last()
    assert last.loc["six", "layer"] == 5 and last.loc["twelve", "layer"] == 11
    assert last.loc["six", "depth"] == last.loc["twelve", "depth"] == 1.0
    assert (last.loc["six", "value"], last.loc["twelve", "value"]) == (1.0, 0.0)
    entropy = cmp.entropy_layers({"six": entropy_rows("rte", 6, 0.5)}, kinds, ["rte"], sources=SOURCE_PATHS)
    ratio = entropy[entropy["statistic"] == "entropy_ratio"]
    assert ratio["value"].tolist() == pytest.approx([0.25 * (layer + 1) for layer in range(6)])
    assert entropy[entropy["model"] == "twelve"]["note"].tolist() == [
        "not computed: no stats/rte/pretrained/entropy.csv"]


def test_depth_pools_tasks_and_cosine_only_where_fine_tuned():
    cos = pd.DataFrame([{"layer": layer, "head": h, "mean": 0.9 - 0.1 * layer + 0.02 * h, "std": 0.0, "n": 3,
                         "task": "rte"} for layer in range(3) for h in (0, 1)])
    kinds = {"enc": cmp.ENCODER, "dec": cmp.DECODER}
    cosine = cmp.cosine_layers({"enc": cos}, kinds, ["rte", "mrpc"], sources=SOURCE_PATHS)
    assert set(cosine["model"]) == {"enc"}     # dec was never fine-tuned: no curve, no note
    assert cosine[cosine["task"] == "rte"]["value"].tolist() == pytest.approx([0.91, 0.81, 0.71])
    assert cosine[cosine["task"] == "mrpc"]["note"].tolist() == ["not computed: no stats/mrpc/cosine.csv"]
    entropy = cmp.entropy_layers({"enc": pd.concat([entropy_rows("rte", 2, 1.0), entropy_rows("mrpc", 2, 3.0)])},
                                 {"enc": cmp.ENCODER}, ["rte", "mrpc"], sources=SOURCE_PATHS)
    table = cmp.depth([cosine, entropy])
    pooled = table[(table["task"] == cmp.POOLED) & (table["statistic"] == "entropy")]
    assert pooled["value"].tolist() == [2.0, 4.0] and set(pooled["note"]) == {"pooled over rte, mrpc"}
    assert not ((table["task"] == cmp.POOLED) & (table["statistic"] == "cosine")).any()  # one task only
    assert list(table.columns) == list(cmp.DEPTH_COLUMNS)


# --------------------------------------------------------------------------------------------------
# the step, on model roots written here


def write(root: Path, key: str, table: pd.DataFrame, **values: str) -> None:
    file = Path(path(key, root=root, **values))
    file.parent.mkdir(parents=True, exist_ok=True)
    table.drop(columns=[c for c in ("task", "variant") if c in table and key == "variant_stat"]).to_csv(file,
                                                                                                         index=False)


def encoder_root(root: Path, tasks: list[str], layers: int = 6) -> Path:
    """An encoder-like model: features, patterns, sieve, entropy of both variants, and the cosine."""
    rng = np.random.default_rng(0)
    for task, variant in itertools.product(tasks, ("pretrained", "finetuned")):
        heads = {(layer, h): CLASSES[(layer + h) % 5] for layer in range(layers) for h in range(2)}
        stat = {"task": task, "variant": variant}
        write(root, "variant_stat", pattern_rows(task, variant, 8, heads), **stat, file="patterns.csv")
        write(root, "variant_stat", sieve_rows(task, variant, {lh: {"local"} if lh[0] % 2 else {"delimiter"}
                                                               for lh in heads}), **stat, file="sieve.csv")
        write(root, "variant_stat", entropy_rows(task, layers, 0.3), **stat, file="entropy.csv")
        cls = pd.DataFrame([{"layer": lh[0], "head": lh[1], "feature": "cls", "mean": rng.uniform(0, 0.6),
                             "std": 0.1, "n": 8} for lh in heads])
        write(root, "variant_stat", cls, **stat, file="features.csv")
        write(root, "cosine", pd.DataFrame([{"layer": lh[0], "head": lh[1], "mean": 1 - 0.05 * lh[0], "std": 0.0,
                                             "n": 8} for lh in heads]), task=task, seedtag="")
    return root


def decoder_root(root: Path, tasks: list[str], layers: int = 12) -> Path:
    """A decoder-like model: the probe's tables and the pretrained store's patterns, sieve and entropy."""
    rng = np.random.default_rng(1)
    for task in tasks:
        heads = [(layer, h) for layer in range(layers) for h in range(3)]
        sink = pd.DataFrame([{"variant": v, "example": e, "layer": lh[0], "head": lh[1],
                              "alpha_0": rng.uniform(0, 1) if lh[0] else 0.05, "n": 20}
                             for v in ("pretrained", "random-init") for e in range(4) for lh in heads])
        write(root, "decoder_sink", sink, task=task)
        ind = pd.DataFrame([{"variant": v, "sequence": s, "layer": lh[0], "head": lh[1],
                             "induction_stripe": 0.0, "induction": 0.9 if lh == (7, 2) and v == "pretrained" else 0.1,
                             "previous_token": 0.0, "duplicate_token": 0.0}
                            for v in ("pretrained", "random-init") for s in range(3) for lh in heads])
        write(root, "decoder_induction", ind, task=task)
        stat = {"task": task, "variant": "pretrained"}
        write(root, "variant_stat", pattern_rows(task, "pretrained", 8, {lh: "vertical" for lh in heads}), **stat,
              file="patterns.csv")
        write(root, "variant_stat", sieve_rows(task, "pretrained", {lh: set() for lh in heads}), **stat,
              file="sieve.csv")
        write(root, "variant_stat", entropy_rows(task, layers, 0.1), **stat, file="entropy.csv")
    return root


@pytest.fixture
def roots(tmp_path):
    tasks = ["rte", "mrpc"]
    return {"enc": encoder_root(tmp_path / "m" / "enc", tasks), "dec": decoder_root(tmp_path / "m" / "dec", tasks),
            "bare": (tmp_path / "m" / "bare")}


def test_the_step_writes_every_table_and_figure(roots, tmp_path):
    roots["bare"].mkdir(parents=True)
    out = output_paths(tmp_path / "results")
    code = run_step("compare", validate_config({"tasks": ["rte", "mrpc"]}),
                    inputs={"roots": [str(r) for r in roots.values()]},
                    outputs={name: str(file) for name, file in out.items()})
    assert code == 0
    for name, file in out.items():
        assert file.stat().st_size > 0, name
    tables = {name: pd.read_csv(out[name], keep_default_na=False, na_values=[""]) for name in cmp.COLUMNS}
    for name, columns in cmp.COLUMNS.items():
        assert tuple(tables[name].columns) == columns, name
    sinks = tables["sinks"].set_index(["model", "task"])
    assert sinks.loc[("dec", "rte"), "kind"] == "decoder" and sinks.loc[("enc", "rte"), "kind"] == "encoder"
    assert np.isfinite(sinks.loc[("dec", cmp.POOLED), "sink_rate"])
    assert sinks.loc[("bare", "rte"), "note"] == ("not computed: no stats/rte/pretrained/sinks.csv; "
                                                  "no stats/rte/pretrained/features.csv")
    best = tables["induction"].set_index(["model", "task"]).loc[("dec", "rte")]
    assert (best["layer"], best["head"], best["depth"]) == (7, 2, pytest.approx(8 / 12))
    depth = tables["depth"]
    ends = depth[(depth["statistic"] == "entropy_ratio") & (depth["task"] == "rte")].groupby("model")["depth"].max()
    assert ends["enc"] == ends["dec"] == 1.0
    assert set(depth[depth["statistic"] == "cosine"]["model"]) == {"enc"}
    patterns = tables["patterns"]
    assert set(patterns[patterns["model"] == "enc"]["variant"]) == {"pretrained", "finetuned"}
    assert patterns[(patterns["model"] == "dec") & (patterns["task"] == cmp.POOLED)].set_index("class").loc[
        "vertical", "share"] == 1.0
    roles = tables["roles"].set_index(["model", "task", "variant", "role"])
    assert roles.loc[("dec", "rte", "pretrained", NO_ROLE), "share"] == 1.0
    assert roles.loc[("enc", "rte", "pretrained", "local"), "share"] == 0.5


def test_compare_roots_reads_what_exists(roots, tmp_path):
    roots.pop("bare")
    written = compare_roots(roots, ["rte"], tmp_path / "out")
    assert written == output_paths(tmp_path / "out") and all(p.exists() for p in written.values())
    assert set(read_model(roots["dec"], ["rte"])) == {"decoder_sink", "decoder_induction", "patterns", "sieve",
                                                      "entropy"}
    forced = compare_roots(roots, ["rte"], tmp_path / "forced", kinds={"dec": cmp.ENCODER})
    induction = pd.read_csv(forced["induction"])
    assert induction["note"].str.startswith("not computed: the induction probe runs on decoders only").all()


def test_bad_roots_are_one_line(tmp_path, capsys):
    with pytest.raises(UserError, match="share the name a"):
        model_roots([tmp_path / "x" / "a", tmp_path / "y" / "a"])
    code = run_step("compare", validate_config({"tasks": ["rte"]}), inputs={"roots": [str(tmp_path / "nope")]},
                    outputs={name: str(file) for name, file in output_paths(tmp_path).items()})
    err = capsys.readouterr().err
    assert code == 1 and err.strip().count("\n") == 0 and "no such model results directory" in err


def test_the_figures_draw_what_is_not_computed(tmp_path):
    table, _ = cmp.sinks({}, {}, {"bare": cmp.ENCODER}, ["rte"], sources=SOURCE_PATHS)
    assert figures.sinks_figure(table, tmp_path / "s.png").stat().st_size > 0
    assert figures.depth_figure(cmp.depth([]), tmp_path / "d.png").stat().st_size > 0
