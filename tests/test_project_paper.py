"""bench/project_paper.py: the projection's arithmetic on made-up costs (known answers by construction), and every
job of config/paper.yaml's DAG (Snakemake's own dry run) gets a cost, none silently zero."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import project_paper as pp  # noqa: E402

# made-up per-unit costs (seconds): distinct powers of two, so that every term is visible in a sum
COSTS = {"job_fixed": 1.0, "prep_example": 0.5, "annotate_example": 2.0, "train_step": 16.0, "grad_example": 4.0,
         "eval_example": 0.25, "extract_example": 8.0, "onepass_example": 32.0, "cosine_example": 64.0,
         "eager_example": 0.5, "views_fe": 10.0, "faithfulness_fe": 6.0}
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


def test_a_costs_file_of_another_batch_size_length_or_lacking_a_unit_is_refused():
    meta = {"train_batch": 32, "max_length": 128, "costs": dict(COSTS)}
    pp.check_costs(meta, pp.Settings(), 128)
    with pytest.raises(pp.ProjectionError, match="train batch 4 and max_length 128, the config has 32 and 128"):
        pp.check_costs(dict(meta, train_batch=4), pp.Settings(), 128)
    with pytest.raises(pp.ProjectionError, match="max_length 128, the config has 32 and 256"):
        pp.check_costs(meta, pp.Settings(), 256)
    with pytest.raises(pp.ProjectionError, match="lacks the per-unit costs views_fe"):
        pp.check_costs(dict(meta, costs={k: v for k, v in COSTS.items() if k != "views_fe"}), pp.Settings(), 128)


def test_totals_per_rule():
    jobs = [("score", {"task": "x", "variant": v}) for v in ("pretrained", "finetuned")] + [("report", {})]
    rows = pp.project(jobs, SIZES, SETTINGS, COSTS)
    assert pp.per_rule(rows) == {"score": (2, 2 * (1 + 10 * 0.25)), "report": (1, 1.0)}


def test_parse_dry_run():
    text = ("rule score:\n    input: a\n    wildcards: task=rte, variant=finetuned, seedtag=\n    resources: x\n\n"
            "localrule all:\n    input: b\n    jobid: 0\n")
    assert pp.parse_dry_run(text) == [("score", {"task": "rte", "variant": "finetuned", "seedtag": ""}),
                                      ("all", {})]


def test_every_job_of_the_paper_dag_gets_a_cost(tmp_path):
    jobs = pp.dag_jobs(pp.PAPER)
    counts = Counter(rule for rule, _ in jobs)
    # the paper's seven tasks, two inits: 14 models, 14 stores
    assert counts["train_model"] == 14 and counts["extract_attention"] == 14 and counts["ablation_sweep"] == 7
    sizes = {t: (1, 1) for t in pp.GLUE_SIZES}
    ones = {k: 1.0 for k in COSTS}
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"costs": ones}))
    rows = pp.project(jobs, sizes, pp.Settings(), json.loads(costs.read_text())["costs"])
    assert len(rows) == len(jobs)
    # every job pays the fixed cost; every job of a rule that works per example or step counts some
    assert all(r["seconds"] > 1.0 for r in rows if r["rule"] not in pp.SUMMARY_RULES)
    assert all(r["seconds"] == 1.0 for r in rows if r["rule"] in pp.SUMMARY_RULES)
    assert {r["rule"] for r in rows} == set(counts)
    assert {t for rule, wc in jobs if (t := wc.get("task"))} == {"mrpc", "stsb", "sst2", "qqp", "rte", "qnli", "mnli"}


def test_the_faithfulness_cost_counts_every_view_the_step_ranks():
    """One AOPC deletion curve per view of faithful.VIEWS and one for the random order; every view is costed."""
    from bertology.norms.faithful import VIEWS

    assert pp.AOPC_ORDERS == len(VIEWS) + 1
    assert set(VIEWS) - {"norm"} <= set(pp.VIEW_PARTS)
