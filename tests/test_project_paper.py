"""bench/project_paper.py: the projection's arithmetic on made-up costs (known answers by construction), every job
of config/paper.yaml's DAG (Snakemake's own dry run) gets a cost, none silently zero; a run of several models maps
each `{name}__{rule}` job to its rule's cost model at that model's size; bench/projection_check.py's table on a
made-up benchmarks tree."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import project_paper as pp  # noqa: E402
import projection_check as pc  # noqa: E402

# made-up per-unit costs (seconds): distinct powers of two, so that every term is visible in a sum
COSTS = {"job_fixed": 1.0, "prep_example": 0.5, "annotate_example": 2.0, "train_step": 16.0, "grad_example": 4.0,
         "eval_example": 0.25, "extract_example": 8.0, "onepass_example": 32.0, "cosine_example": 64.0,
         "eager_example": 0.5, "views_fe": 10.0, "faithfulness_fe": 6.0, "figure": 128.0, "plot_import": 256.0}
SIZES = {"x": (100, 10), "y": (50, 3000)}  # task -> (train, validation)
SETTINGS = pp.Settings(epochs=3, batch_size=32, attention_examples=1000, ablation_examples=None,
                       importance_examples=40, pruning_step=0.25, random_orders=2, layers=2, heads=3)


def test_forward_counts_by_enumeration():
    # 2 layers x 3 heads: intact 1; layer 0's heads 3 x 1, layer 1's 3 x 1/2; layer 0 whole 1, layer 1 whole 1/2
    assert pp.sweep_forwards(2, 3) == 1 + 3 + 1.5 + 1 + 0.5
    # the 12 x 12 BERT: 1 + 13 x (12 + 11 + ... + 1) / 12
    assert pp.sweep_forwards(12, 12) == pytest.approx(1 + 13 * 78 / 12)
    # step 1/4: points 0, .25, .5, .75, 1; the 3 inner ones for the importance order and 2 random, the ends once
    assert pp.pruning_forwards(2, 3, 0.25, 2) == 2 + 3 * 3
    assert pp.pruning_forwards(12, 12, 0.1, 5) == 2 + 6 * 9


@pytest.mark.parametrize(("rule", "wc", "seconds"), [
    # 1 + ceil(3 x ceil(100 / 32)) = 12 steps x 16 + 3 epochs x 10 dev x 0.25
    ("train_model", {"task": "x", "init": "random"}, 1 + 12 * 16 + 30 * 0.25),
    ("prepare_data", {"task": "x", "split": "train"}, 1 + 100 * 0.5),
    ("prepare_data", {"task": "y", "split": "validation"}, 1 + 3000 * 0.5),
    ("score", {"task": "y", "variant": "finetuned"}, 1 + 3000 * 0.25),
    ("attention_sample", {"task": "x"}, 1 + 10 * 0.5),
    ("annotate_words", {"task": "y"}, 1 + 1000 * 2.0),           # the sample: 1000 of y's 3000
    ("extract_attention", {"task": "x", "variant": "pretrained"}, 1 + 10 * 8.0),
    ("store_stats", {"task": "y", "variant": "finetuned"}, 1 + 1000 * 32.0),
    ("kovaleva_cosine", {"task": "x"}, 1 + 10 * 64.0),
    ("norms_views", {"task": "x", "variant": "pretrained"}, 1 + 10 * 10 * 0.5),
    ("norms_faithfulness", {"task": "y"}, 1 + 1000 * 6 * 0.5),
    ("ablation_sweep", {"task": "y"}, 1 + 3000 * 7 * 0.25),       # every dev example (ablation.examples null)
    ("ablation_pruning", {"task": "x"}, 1 + 40 * 4.0 + 10 * 11 * 0.25),
    ("report", {}, 1.0),
])
def test_job_cost_known_answers(rule, wc, seconds):
    assert pp.job_cost(rule, wc, SIZES, SETTINGS, COSTS)[0] == pytest.approx(seconds)


def test_a_rule_without_a_cost_model_or_a_task_without_sizes_stops_the_projection():
    with pytest.raises(pp.ProjectionError, match="rule new_rule has no cost model"):
        pp.project([("score", {"task": "x", "variant": "pretrained"}), ("new_rule", {"task": "x"})], SIZES,
                   SETTINGS, COSTS)
    with pytest.raises(pp.ProjectionError, match="no split sizes for task 'z'"):
        pp.job_cost("score", {"task": "z", "variant": "pretrained"}, SIZES, SETTINGS, COSTS)


def test_a_costs_file_lacking_a_unit_is_refused():
    meta = {"train_batch": 32, "max_length": 128, "costs": dict(COSTS)}
    pp.check_costs(meta)
    pp.check_costs(dict(meta, train_batch=4, max_length=64))  # another batch or length is scaled (scale_costs)
    with pytest.raises(pp.ProjectionError, match="lacks the per-unit costs views_fe"):
        pp.check_costs(dict(meta, costs={k: v for k, v in COSTS.items() if k != "views_fe"}))


def test_totals_per_rule():
    jobs = [("score", {"task": "x", "variant": v}) for v in ("pretrained", "finetuned")] + [("report", {})]
    rows = pp.project(jobs, SIZES, pp.Settings(), COSTS)  # BERT-base at 128 tokens: the units as measured
    assert pp.per_rule(rows) == {"score": (2, 2 * (1 + 10 * 0.25)), "report": (1, 1.0)}
    # the job server's start-up: once per snakemake call
    rows = pp.project(jobs, SIZES, pp.Settings(), dict(COSTS, run_start=4096.0))
    assert pp.per_rule(rows)[pp.RUN_START] == (1, 4096.0) and len(rows) == len(jobs) + 1


def test_parse_dry_run():
    text = ("rule score:\n    input: a\n    output: results/x.csv, results/y.png\n"
            "    benchmark: results/benchmarks/score/rte/finetuned.tsv\n"
            "    wildcards: task=rte, variant=finetuned, seedtag=\n    resources: x\n\n"
            "localrule all:\n    input: b\n    jobid: 0\n")
    jobs = pp.parse_dry_run(text)
    assert [(j.rule, j.wildcards) for j in jobs] == [("score", {"task": "rte", "variant": "finetuned",
                                                                "seedtag": ""}), ("all", {})]
    assert jobs[0].outputs == ("results/x.csv", "results/y.png") and pp.figures_of(jobs[0].outputs) == 1
    assert jobs[0].benchmark == "results/benchmarks/score/rte/finetuned.tsv" and jobs[1].benchmark is None


def test_a_summary_rule_pays_its_figures():
    assert pp.job_cost("report", {}, SIZES, SETTINGS, COSTS, ("r.html",))[0] == 1.0
    assert pp.job_cost("compare", {}, SIZES, SETTINGS, COSTS, ("a.csv", "a.png", "b.png"))[0] == 1 + 256 + 2 * 128
    with pytest.raises(pp.ProjectionError, match="figure, plot_import"):
        pp.job_cost("compare", {}, SIZES, SETTINGS, {k: v for k, v in COSTS.items() if k != "figure"}, ("a.png",))


def test_a_job_that_loads_a_model_pays_its_set_up():
    c = dict(COSTS, model_setup=512.0)
    assert pp.job_cost("score", {"task": "y"}, SIZES, SETTINGS, c)[0] == pytest.approx(1 + 512 + 3000 * 0.25)
    assert pp.job_cost("extract_attention", {"task": "x"}, SIZES, SETTINGS, c)[0] == pytest.approx(1 + 512 + 10 * 8)
    assert pp.job_cost("store_stats", {"task": "x"}, SIZES, SETTINGS, c)[0] == pytest.approx(1 + 10 * 32)
    assert pp.job_cost("annotate_words", {"task": "x"}, SIZES, SETTINGS, dict(c, spacy_load=64.0))[0] == \
        pytest.approx(1 + 64 + 10 * 2.0)


def test_scaling_to_a_model_and_its_settings():
    assert pp.scale_costs(COSTS, pp.Settings()) == pytest.approx(COSTS)  # BERT-base, 128 tokens, batch 32
    # a model of half BERT-base's layers, hidden and weights, at 64 tokens, batch 8
    s = pp.Settings(layers=6, heads=12, hidden=384, params=pp.BERT_BASE_PARAMS // 2, max_length=64, batch_size=8)
    ref = 128 * (2 * pp.BERT_BASE_PARAMS + 4 * 12 * 128 * 768)
    fwd = 64 * (2 * (pp.BERT_BASE_PARAMS // 2) + 4 * 6 * 64 * 384) / ref
    maps = 6 * 12 * 64 ** 2 / (12 * 12 * 128 ** 2)  # 1/8
    c = pp.scale_costs(COSTS, s)
    assert c["eval_example"] == pytest.approx(0.25 * fwd) and c["eager_example"] == pytest.approx(0.5 * fwd)
    assert c["train_step"] == pytest.approx(16 * fwd * 8 / 32)
    assert c["onepass_example"] == pytest.approx(32 * maps) and c["cosine_example"] == pytest.approx(64 * maps)
    # extraction: its forward (eval_example's 0.25 s) as a forward, the other 7.75 s as the maps
    assert c["extract_example"] == pytest.approx(0.25 * fwd + 7.75 * maps)
    assert {k: c[k] for k in ("job_fixed", "annotate_example", "views_fe", "figure")} == \
        {k: COSTS[k] for k in ("job_fixed", "annotate_example", "views_fe", "figure")}
    # measured at batch 16 and 64 tokens: at those settings a step is as measured
    same = pp.Settings(batch_size=16, max_length=64)
    assert pp.scale_costs(COSTS, same, measured_batch=16, measured_length=64)["train_step"] == pytest.approx(16)


def test_a_task_is_counted_at_its_examples_lengths():
    # a task whose examples are 64 tokens costs what max_length 64 costs; mixed lengths: the maps by mean tokens^2
    at64 = pp.scale_costs(COSTS, pp.Settings(max_length=64))
    assert pp.scale_costs(COSTS, pp.Settings(tokens={"x": (64.0, 64.0)}), task="x") == pytest.approx(at64)
    assert pp.scale_costs(COSTS, pp.Settings(tokens={"x": (64.0, 64.0)}), task="y") == pytest.approx(COSTS)
    mixed = pp.scale_costs(COSTS, pp.Settings(tokens={"x": (64.0, 96.0)}), task="x")
    assert mixed["onepass_example"] == pytest.approx(32 * 96 ** 2 / 128 ** 2)
    # the lengths under a model's tokenizer (the embedded MiniLM) from a GLUE-layout directory, cut at max_length
    lengths = pp.token_lengths("minilm-l6", pp.GLUE, ["rte", "mrpc"], 128)
    if not lengths:
        pytest.skip(f"no GLUE files in {pp.GLUE}")
    for mean, rms in lengths.values():
        assert 10 < mean <= rms <= 128


def test_a_models_size_from_its_config_json(tmp_path):
    from transformers import BertConfig, GPT2Config

    BertConfig(num_labels=2).save_pretrained(tmp_path / "bert")
    # BERT-base: BERT_BASE_PARAMS checked; every mixing view (post-LN)
    assert pp.model_size(str(tmp_path / "bert")) == pp.ModelSize(views=MIXING)
    GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=600, n_positions=128).save_pretrained(tmp_path / "gpt2")
    size = pp.model_size(str(tmp_path / "gpt2"))
    # per layer: ln 2 x 64, attention 32 x 96 + 96 + 32 x 32 + 32, MLP 32 x 128 + 128 + 128 x 32 + 32; final ln
    # 64; the score head 32 x 2 (no bias); embeddings (wte, wpe) not counted
    per_layer = 2 * 64 + (32 * 96 + 96 + 32 * 32 + 32) + (32 * 128 + 128 + 128 * 32 + 32)
    assert size == pp.ModelSize(layers=2, heads=4, hidden=32, params=2 * per_layer + 64 + 64, views=MIXING)
    with pytest.raises(pp.ProjectionError, match="no config.json"):
        pp.model_size(str(tmp_path / "absent"))


MIXING = ("alti", "globenc", "decompx", "value_zeroing")


def test_a_gated_pre_norm_model_gets_no_decompx_and_its_norms_views_cost_less(tmp_path):
    """The views a model gets are the analysis' own plan (bertology.norms.analysis.mixing_plan) of the model built
    on the meta device; norms_views' forward-equivalents drop the parts of the views it does not get."""
    from transformers import LlamaConfig

    LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                intermediate_size=64, vocab_size=600).save_pretrained(tmp_path / "llama")
    assert pp.model_size(str(tmp_path / "llama")).views == ("alti", "globenc", "value_zeroing")
    parts = {"capture": 1.0, "raw": 0.5, "rollout": 0.5, "flow": 2.0, "alti": 3.0, "alti_logit": 0.25,
             "globenc": 0.75, "decompx": 10.0, "value_zeroing": 8.0}
    c = pp.costs_of({"costs": {"views_fe": sum(parts.values())}, "norm_parts_fe": parts})
    assert pp.views_fe(c, None) == pp.views_fe(c, MIXING) == 26.0
    assert pp.views_fe(c, ("alti", "globenc", "value_zeroing")) == 16.0
    assert pp.views_fe(c, ("value_zeroing",)) == 26.0 - 10.0 - 3.0 - 0.75 - 0.25  # ALTI-Logit goes with ALTI
    assert pp.views_fe({"views_fe": 26.0}, ("value_zeroing",)) == 26.0  # costs without the parts: as measured
    s = pp.Settings(views=("alti", "globenc", "value_zeroing"), norms_examples=4)
    sec, what = pp.job_cost("norms_views", {"task": "rte"}, {"rte": (100, 10)}, s,
                            {**c, "job_fixed": 1.0, "eager_example": 0.5})
    assert sec == 1.0 + 4 * 16.0 * 0.5 and what == "4 ex. x 16 FE"


def test_the_explorer_costs_its_sampled_examples_maps():
    """Per task min(16, sample) examples x (1 + inits) variants x layers x heads x mean squared tokens bytes."""
    s = pp.Settings(layers=2, heads=3, inits=1, attention_examples=10, tasks=("rte", "mrpc"),
                    tokens={"rte": (4, 5), "mrpc": (3, 4)})
    sizes = {"rte": (100, 50), "mrpc": (100, 8)}
    assert pp.explorer_bytes(s, sizes) == 10 * 2 * 2 * 3 * 25 + 8 * 2 * 2 * 3 * 16
    sec, what = pp.job_cost("explorer", {}, sizes, s, {"job_fixed": 1.0, "explorer_map_byte": 1e-3})
    assert sec == pytest.approx(1.0 + pp.explorer_bytes(s, sizes) * 1e-3) and what.endswith("MB of maps")
    assert pp.job_cost("explorer", {}, sizes, s, {"job_fixed": 1.0}) == (1.0, "fixed job cost only")


def test_a_run_of_several_models_maps_each_rule_to_its_models_size(tmp_path):
    sizes_of = {"hub/big": pp.ModelSize(), "hub/small": pp.ModelSize(layers=2, heads=4, hidden=64, params=1000)}
    cfgfile = tmp_path / "config.yaml"
    cfgfile.write_text(
        "models:\n  - {name: big, model: hub/big}\n"
        "  - {name: small-one, model: hub/small, train: {batch_size: 8}, data: {max_length: 64}}\n"
        "tasks: [rte]\ndata: {source: demo, demo: {train: 100, validation: 10}}\n")
    cfg = pp.load_config(cfgfile)
    models = pp.run_models(cfg, sizes_of.get)
    assert set(models) == {"big__", "small_one__", ""}
    big, small = models["big__"][1], models["small_one__"][1]
    assert (big.layers, big.max_length, big.batch_size) == (12, 128, 32)
    assert (small.layers, small.heads, small.hidden, small.params, small.max_length, small.batch_size) == \
        (2, 4, 64, 1000, 64, 8)
    assert models[""] == ("", big)  # the shared and the run's own rules: the first model's config
    sizes, _ = pp.run_sizes(cfg)
    assert sizes == {"rte": (100, 10)}
    jobs = [pp.Job("big__extract_attention", {"task": "rte", "variant": "pretrained"}),
            pp.Job("small_one__extract_attention", {"task": "rte", "variant": "pretrained"}),
            pp.Job("small_one__ablation_sweep", {"task": "rte"}),
            pp.Job("prepare_data", {"task": "rte", "split": "train"}),
            pp.Job("compare", {}, ("results/compare/sinks.csv", "results/compare/sinks.png"))]
    rows = pp.project(jobs, sizes, models[""][1], COSTS, models)
    assert [r["model"] for r in rows] == ["big", "small-one", "small-one", "", ""]
    sc = pp.scale_costs(COSTS, small)
    assert rows[0]["seconds"] == pytest.approx(1 + 10 * 8.0)  # BERT-base size: the unit as measured
    assert rows[1]["seconds"] == pytest.approx(1 + 10 * sc["extract_example"]) and sc["extract_example"] < 8.0 / 50
    assert rows[2]["seconds"] == pytest.approx(1 + 10 * pp.sweep_forwards(2, 4) * sc["eval_example"])
    assert rows[3]["seconds"] == pytest.approx(1 + 100 * 0.5)
    assert rows[4]["seconds"] == pytest.approx(1 + 256 + 128)
    with pytest.raises(pp.ProjectionError, match="rule new_rule has no cost model"):
        pp.project([pp.Job("small_one__new_rule", {"task": "rte"})], sizes, big, COSTS, models)


def test_the_check_puts_measured_next_to_projected(tmp_path):
    def bench(path, *seconds):
        f = tmp_path / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("s\th:m:s\tmax_rss\n" + "".join(f"{x}\t0:00:01\t1.0\n" for x in seconds))

    bench("results/benchmarks/prepare_data/rte/train.tsv", 10.0)
    bench("results/m/small-one/benchmarks/score/rte/pretrained.tsv", 2.0, 4.0)  # repeated: the mean, 3 s
    bench("results/m/small-one/benchmarks/score/rte/finetuned.tsv", 5.0)
    bench("results/m/small-one/benchmarks/old_rule/rte.tsv", 1.0)  # no job in the DAG: counted, not compared
    for log, work in [("results/m/small-one/logs/score/rte/pretrained.log", 2.5),
                      ("results/m/small-one/logs/score/rte/finetuned.log", 4.0)]:
        (tmp_path / log).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / log).write_text(f"2026-11-29 11:00:00,000 INFO bertology.workflow.cli: score: work {work} s\n")
    measured = pc.measured_jobs(tmp_path)
    assert measured["results/m/small-one/benchmarks/score/rte/pretrained.tsv"] == \
        ("small_one__score", "small-one", 3.0, 2.5)
    assert measured["results/benchmarks/prepare_data/rte/train.tsv"] == ("prepare_data", "", 10.0, None)
    rows = [{"rule": "prepare_data", "model": "", "seconds": 25.0,
             "benchmark": "results/benchmarks/prepare_data/rte/train.tsv"},
            {"rule": "small_one__score", "model": "small-one", "seconds": 4.0,
             "benchmark": "results/m/small-one/benchmarks/score/rte/pretrained.tsv"},
            {"rule": "small_one__score", "model": "small-one", "seconds": 4.0,
             "benchmark": "results/m/small-one/benchmarks/score/rte/finetuned.tsv"},
            {"rule": "small_one__report", "model": "small-one", "seconds": 1.0,
             "benchmark": "results/m/small-one/benchmarks/report/report.tsv"},
            {"rule": "all", "model": "", "seconds": 1.0, "benchmark": None}]
    res = pc.compare(measured, rows, job_fixed=0.5)
    table = {e["rule"]: e for e in res["rules"]}
    assert table["prepare_data"] == {"rule": "prepare_data", "model": "(run)", "jobs": 1, "measured_s": 10.0,
                                     "projected_s": 25.0, "ratio": 2.5, "within_2x": False, "work_s": None}
    score = table["small_one__score"]
    assert score["jobs"] == 2 and score["ratio"] == pytest.approx(1.0) and score["within_2x"]
    assert score["model"] == "small-one"
    # the work alone: 2.5 + 4.0 s logged; projected 8 s less 2 x job_fixed 0.5
    assert score["work_s"] == 6.5 and score["projected_work_s"] == 7.0 and score["work_ratio"] == pytest.approx(7 / 6.5)
    assert res["not_measured"] == ["small_one__report"]
    assert res["no_job"] == ["results/m/small-one/benchmarks/old_rule/rte.tsv"]
    md = pc.markdown(res, "t", ["load"])
    assert "| prepare_data | (run) | 1 | 10.0 | 25.0 | 2.50 | no |  |  |  |" in md and "Within 2x: 1 of 2 rules" in md
    assert "| small_one__score | small-one | 2 | 8.0 | 8.0 | 1.00 | yes | 6.5 | 7.0 | 1.08 |" in md


def test_every_job_of_the_paper_dag_gets_a_cost(tmp_path):
    jobs = pp.dag_jobs(pp.PAPER)
    counts = Counter(j.rule for j in jobs)
    # the paper's seven tasks, two inits: 14 models, 14 stores
    assert counts["train_model"] == 14 and counts["extract_attention"] == 14 and counts["ablation_sweep"] == 7
    sizes = {t: (1, 1) for t in pp.GLUE_SIZES}
    ones = {k: 1.0 for k in COSTS}
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"costs": ones}))
    rows = pp.project(jobs, sizes, pp.Settings(), json.loads(costs.read_text())["costs"])
    assert len(rows) == len(jobs)
    # every job pays the fixed cost; every job of a rule that works per example or step counts some; a summary
    # rule its figures
    assert all(r["seconds"] > 1.0 for r in rows if r["rule"] not in pp.SUMMARY_RULES)
    figures = {j.rule: pp.figures_of(j.outputs) for j in jobs}
    assert all(r["seconds"] == 1.0 + (1 + figures[r["rule"]] if figures[r["rule"]] else 0)
               for r in rows if r["rule"] in pp.SUMMARY_RULES)
    assert figures["kovaleva_figures"] > 1
    assert {r["rule"] for r in rows} == set(counts)
    assert {t for j in jobs if (t := j.wildcards.get("task"))} == {"mrpc", "stsb", "sst2", "qqp", "rte", "qnli", "mnli"}


def test_the_faithfulness_cost_counts_every_view_the_step_ranks():
    """One AOPC deletion curve per view of faithful.VIEWS and one for the random order; every view is costed."""
    from bertology.norms.faithful import VIEWS

    assert pp.AOPC_ORDERS == len(VIEWS) + 1
    assert set(VIEWS) - {"norm"} <= set(pp.VIEW_PARTS)
