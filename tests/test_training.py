"""Fine-tuning, evaluation, resumption, the GLUE metrics and Table 1.

Inputs are built so that the right answer is known: metrics against values computed by hand, a keyword
task a tiny random BERT must learn, an interrupted run that must end where an uninterrupted one ends.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.models.metrics import compute_metrics
from bertology.pipeline.tasks import get_task
from tests.builders.steps import run_step


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def validated(**overrides) -> dict:
    """A validated config: the schema fills every key that `overrides` leaves out."""
    from bertology.pipeline.config import validate_config

    return validate_config(overrides)


def train_config(**train):
    """bertology.pipeline.config.TrainConfig with the schema's defaults, `train` keys overridden."""
    from bertology.pipeline.configjson import sections_from_json, sections_json

    return sections_from_json(sections_json(validated(train=train), ["train"])).train


def step_config(step: str, **overrides) -> str:
    """The --config JSON a rule hands `step` (its declared sections of a validated config)."""
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.configjson import sections_json

    return sections_json(validated(**overrides), STEPS[step].config)

# ---------------------------------------------------------------------------------------------- data

FILLER = ("the cat sat on a mat near old house while dog ran over green hill under blue sky with "
          "small bird and tall tree by river in town at night").split()
KEYWORD = "wonderful"


def keyword_frame(n: int, seed: int, pair: bool = False) -> pd.DataFrame:
    """A prepared frame (idx, text_a, text_b, label): label 1 iff text_a contains KEYWORD (half of them)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = list(rng.choice(FILLER, size=rng.integers(4, 9)))
        label = int(i % 2 == 0)
        if label:
            words.insert(int(rng.integers(0, len(words) + 1)), KEYWORD)
        rows.append({"idx": i, "text_a": " ".join(words),
                     "text_b": " ".join(rng.choice(FILLER, size=4)) if pair else None, "label": label})
    return pd.DataFrame(rows)


def _setup(model_dir, task="sst2", n_train=96, n_eval=64, seed=0):
    from bertology.models.loading import load_classifier, load_tokenizer
    from bertology.models.encoding import encode_split

    spec = get_task(task)
    tok = load_tokenizer(str(model_dir))
    pair = spec.is_pair
    train_enc = encode_split(tok, keyword_frame(n_train, seed, pair), spec, 32)
    eval_enc = encode_split(tok, keyword_frame(n_eval, seed + 1, pair), spec, 32)
    model = load_classifier(str(model_dir), spec.num_labels, init="pretrained", seed=3, id2label=spec.id2label,
                            regression=spec.is_regression)
    return spec, tok, model, train_enc, eval_enc


# ------------------------------------------------------------------------------------------- metrics


def test_accuracy_by_hand():
    assert compute_metrics("sst2", np.array([1, 0, 0, 1]), np.array([1, 0, 1, 1])) == {"accuracy": 0.75}


def test_f1_accuracy_by_hand():
    # TP=2, FP=0, FN=1: precision 1, recall 2/3, F1 = 2 * (2/3) / (1 + 2/3) = 0.8; accuracy 3/4
    m = compute_metrics("mrpc", np.array([1, 0, 0, 1]), np.array([1, 0, 1, 1]))
    assert m == pytest.approx({"f1": 0.8, "accuracy": 0.75})
    assert list(m) == ["f1", "accuracy"]  # the paper's F1/Acc order
    # all-negative predictions (an untrained head): F1 0, accuracy = share of negatives (the paper's 0/31.6)
    m = compute_metrics("qqp", np.zeros(4, int), np.array([1, 0, 1, 1]))
    assert m == pytest.approx({"f1": 0.0, "accuracy": 0.25})


def test_mcc_by_hand():
    # TP=1 TN=2 FP=0 FN=1: (1*2 - 0*1) / sqrt((1+0)(1+1)(2+0)(2+1)) = 2 / sqrt(12)
    m = compute_metrics("cola", np.array([1, 0, 0, 0]), np.array([1, 1, 0, 0]))
    assert m["mcc"] == pytest.approx(2 / math.sqrt(12))
    assert m["accuracy"] == pytest.approx(0.75)
    assert compute_metrics("cola", np.array([1, 1, 0, 0]), np.array([1, 1, 0, 0]))["mcc"] == pytest.approx(1.0)
    assert compute_metrics("cola", np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0]))["mcc"] == pytest.approx(-1.0)


def test_correlations_by_hand():
    # x = 1 2 3, y = 1 3 2: deviations (-1 0 1) . (-1 1 0) = 1, norms sqrt 2 each -> 0.5; ranks equal values
    m = compute_metrics("stsb", np.array([1.0, 3.0, 2.0]), np.array([1.0, 2.0, 3.0]))
    assert m == pytest.approx({"pearson": 0.5, "spearman": 0.5})
    labels = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    m = compute_metrics("stsb", np.exp(labels), labels)  # monotone, not linear
    assert m["spearman"] == pytest.approx(1.0) and 0.8 < m["pearson"] < 1.0
    assert compute_metrics("stsb", np.full(5, 2.5), labels) == {"pearson": 0.0, "spearman": 0.0}
    # (E, 1) regression outputs are read as scores
    assert compute_metrics("stsb", (2 * labels + 1)[:, None], labels)["pearson"] == pytest.approx(1.0)


def test_metrics_from_logits_and_bad_lengths():
    logits = np.array([[0.1, 2.0], [3.0, -1.0], [0.0, 0.5]])  # argmax 1 0 1
    assert compute_metrics("rte", logits, np.array([1, 0, 0]))["accuracy"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        compute_metrics("rte", logits, np.array([1, 0]))


# ------------------------------------------------------------------------------------ batches, precision


def test_train_batches_cover_every_example_once_and_are_seeded():
    from bertology.models.batching import eval_batches, train_batches

    lengths = np.random.default_rng(0).integers(3, 60, size=1001)
    b = train_batches(lengths, 32, seed=7, epoch=0)
    assert len(b) == math.ceil(1001 / 32)
    assert sorted(np.concatenate(b).tolist()) == list(range(1001))
    assert all(len(x) <= 32 for x in b)
    again = train_batches(lengths, 32, seed=7, epoch=0)
    assert all(np.array_equal(x, y) for x, y in zip(b, again))
    other = train_batches(lengths, 32, seed=7, epoch=1)
    assert not all(np.array_equal(x, y) for x, y in zip(b, other))
    e = eval_batches(lengths, 100)
    flat = np.concatenate(e)
    assert sorted(flat.tolist()) == list(range(1001)) and np.all(np.diff(lengths[flat]) >= 0)
    with pytest.raises(ValueError, match="batch size"):
        train_batches(lengths, 0, seed=0, epoch=0)


def test_total_steps_and_precision():
    import torch

    from bertology.models.batching import total_steps
    from bertology.models.training import autocast_dtype

    assert total_steps(100, 32, 3) == 12
    assert total_steps(100, 32, 0.5) == 2
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("no", cpu) is None
    assert autocast_dtype("bf16", cpu) == torch.bfloat16
    with pytest.raises(ValueError, match="fp16 needs a CUDA GPU"):
        autocast_dtype("fp16", cpu)


# ------------------------------------------------------------------------------------------ training


def test_tiny_model_learns_keyword_task(tiny_model_dir):
    """Accuracy must rise from chance to clearly above it on a task a tiny random BERT can learn."""
    from bertology.models.training import evaluate, train

    spec, tok, model, train_enc, eval_enc = _setup(tiny_model_dir, n_train=160)
    before = evaluate(model, tok, eval_enc, spec, batch_size=64, device=model.device)["accuracy"]
    cfg = train_config(epochs=6, batch_size=16, learning_rate=3e-3, warmup_ratio=0.1, seed=1)
    calls = []
    history = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, progress=False,
                    on_metrics=lambda values, step: calls.append((step, dict(values))))
    after = evaluate(model, tok, eval_enc, spec, batch_size=64, device=model.device)["accuracy"]
    seen = [step for step, values in calls if "train_loss" in values]
    assert seen == list(range(1, 61)) and history.steps == seen
    assert [values["train_loss"] for step, values in calls if "train_loss" in values] == history.losses
    assert [values["learning_rate"] for step, values in calls if "train_loss" in values] == history.lrs
    evals = [(step, values) for step, values in calls if "train_loss" not in values]
    assert [step for step, _ in evals] == [1, 2, 3, 4, 5, 6]  # eval metrics at step = epoch
    assert [v["eval_accuracy"] for _, v in evals] == [e["metrics"]["accuracy"] for e in history.evals]
    # each epoch's eval follows the train metrics of its last step (sent after the epoch's checkpoint)
    assert [calls[i - 1][0] for i, c in enumerate(calls) if "train_loss" not in c[1]] == [10, 20, 30, 40, 50, 60]
    assert [e["epoch"] for e in history.evals] == [1, 2, 3, 4, 5, 6]
    assert history.evals[-1]["metrics"]["accuracy"] == pytest.approx(after)
    assert np.mean(history.losses[-10:]) < np.mean(history.losses[:10])
    assert after >= 0.9 and after > before + 0.2, (before, after)


def test_regression_task_trains(tiny_model_dir):
    """STS-B: one output, MSE loss, Pearson/Spearman; the score must correlate after training."""
    from bertology.models.training import evaluate, train

    spec, tok, model, train_enc, eval_enc = _setup(tiny_model_dir, task="stsb", n_train=96)
    assert model.config.num_labels == 1 and train_enc.labels.dtype == np.float32
    train(model, tok, train_enc, spec, train_config(epochs=6, batch_size=16, learning_rate=3e-3, seed=1),
          progress=False)
    m = evaluate(model, tok, eval_enc, spec, batch_size=64, device=model.device)
    assert set(m) == {"pearson", "spearman"} and m["pearson"] > 0.5


def _weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_interrupted_run_resumes_to_the_same_weights(dropout_model_dir, tmp_path):
    """Stop in step 3 (checkpoint at 2, mid-epoch), re-run: it resumes at 2 and ends with the uninterrupted weights."""
    from bertology.models.checkpoint import STATE_FILE
    from bertology.models.training import train

    cfg = train_config(epochs=2, batch_size=16, learning_rate=1e-3, seed=5, checkpoint_steps=2)

    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)
    full = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, progress=False)
    reference = _weights(model)
    assert full.steps == list(range(1, 11))

    class Interrupt(Exception):
        pass

    def stop_at_3(values, step):
        if step == 3 and "train_loss" in values:  # step 3 is not due for a checkpoint: its state is lost
            raise Interrupt

    ckpt = tmp_path / "ckpt"
    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)
    with pytest.raises(Interrupt):
        train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt, resume_key="k",
              progress=False, on_metrics=stop_at_3)
    assert (ckpt / STATE_FILE).exists()

    spec, tok, model, train_enc, eval_enc = _setup(dropout_model_dir, n_train=80)  # a fresh process's model
    seen = []
    resumed = train(model, tok, train_enc, spec, cfg, eval_enc=eval_enc, checkpoint_dir=ckpt, resume_key="k",
                    progress=False, on_metrics=lambda values, step: seen.append(step) if "train_loss" in values else None)
    assert resumed.resumed_from == [2] and seen == list(range(3, 11))
    assert resumed.steps == full.steps
    np.testing.assert_allclose(resumed.losses, full.losses, rtol=1e-5)
    assert [e["epoch"] for e in resumed.evals] == [1, 2]
    for name, value in reference.items():
        assert np.allclose(model.state_dict()[name].numpy(), value.numpy(), atol=1e-6), name


def test_sigterm_saves_the_state_and_a_rerun_resumes(tiny_model_dir, tmp_path):
    """SLURM's SIGTERM (or Snakemake cancelling) in step 3: the step finishes, its state is saved, re-run resumes."""
    import os
    import signal

    from bertology.models.training import TrainingInterrupted, train

    cfg = train_config(epochs=1, batch_size=8, learning_rate=1e-3, seed=5, checkpoint_steps=100)
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=48)

    def term_at_3(values, step):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(TrainingInterrupted, match="stopped by SIGTERM after step 3 of 6.*resume"):
        train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="k", progress=False,
              on_metrics=term_at_3)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is removed again
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=48)
    h = train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="k", progress=False)
    assert h.resumed_from == [3] and h.steps == list(range(1, 7))


def test_time_based_checkpoint(tiny_model_dir, tmp_path):
    """With checkpoint_minutes elapsed after every step, a crash in step 3 resumes at step 3."""
    from bertology.models.training import train

    cfg = train_config(epochs=1, batch_size=8, learning_rate=1e-3, seed=5, checkpoint_steps=1000,
                       checkpoint_minutes=1e-9)
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=48)

    def crash_at_3(values, step):
        if step == 3:
            raise MemoryError("killed")

    with pytest.raises(MemoryError):
        train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="k", progress=False,
              on_metrics=crash_at_3)
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=48)
    h = train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="k", progress=False)
    # the time-based save of step 3 is written before its metrics are sent (where the crash happened);
    # only the time-based saves exist here (checkpoint_steps 1000, the epoch does not end before step 6)
    assert h.resumed_from == [3]


def test_checkpoint_of_other_settings_is_ignored(tiny_model_dir, tmp_path):
    from bertology.models.training import train

    cfg = train_config(epochs=1, batch_size=16, learning_rate=1e-3, seed=5)
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=32)
    train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="old", progress=False)
    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=32)
    h = train(model, tok, train_enc, spec, cfg, checkpoint_dir=tmp_path, resume_key="new", progress=False)
    assert h.resumed_from == [] and h.steps == [1, 2]


def test_nan_loss_stops_with_a_clear_error(tiny_model_dir):
    import torch

    from bertology.models.training import TrainingDivergedError, train

    spec, tok, model, train_enc, _ = _setup(tiny_model_dir, n_train=32)
    with torch.no_grad():
        model.classifier.weight[0, 0] = float("nan")
    with pytest.raises(TrainingDivergedError, match=r"step 1 of 2 .*learning rate .*Lower train.learning_rate"):
        train(model, tok, train_enc, spec, train_config(epochs=1, batch_size=16), progress=False)


def test_saved_model_reloads_with_labels(tiny_model_dir, tmp_path):
    from bertology.models.loading import load_classifier, load_tokenizer
    from bertology.models.training import History, predict, save_model

    spec, tok, model, _, eval_enc = _setup(tiny_model_dir, task="rte")
    out = save_model(model, tok, tmp_path / "models" / "rte" / "pretrained", History(steps=[1], losses=[0.5]))
    assert {"config.json", "model.safetensors", "tokenizer.json", "training.json"} <= {p.name for p in out.iterdir()}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["id2label"] == {"0": "entailment", "1": "not_entailment"}
    assert cfg["label2id"] == {"entailment": 0, "not_entailment": 1}
    again = load_classifier(str(out), 2, init="pretrained", seed=99, id2label=spec.id2label)
    tok2 = load_tokenizer(str(out))
    a = predict(model, tok, eval_enc, batch_size=16, device=model.device)
    b = predict(again, tok2, eval_enc, batch_size=16, device=again.device)
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert not list(out.parent.glob(".*.tmp"))


# -------------------------------------------------------------------------------------------- Table 1


def _scores():
    return [
        {"task": "rte", "variant": "finetuned", "metrics": {"accuracy": 0.646}, "n": 277},
        {"task": "mrpc", "variant": "pretrained", "metrics": {"f1": 0.0, "accuracy": 0.316}, "n": 408},
        {"task": "mrpc", "variant": "finetuned", "metrics": {"f1": 0.879, "accuracy": 0.823}, "n": 408},
        {"task": "mrpc", "variant": "random-finetuned", "metrics": {"f1": 0.812, "accuracy": 0.683}, "n": 408},
        {"task": "rte", "variant": "pretrained", "metrics": {"accuracy": 0.527}, "n": 277},
    ]


def test_table1_long_frame_and_markdown():
    from bertology.models.table1 import aggregate_seeds, scores_frame, table1_markdown, variant_tests

    per_seed = scores_frame(_scores())
    assert list(per_seed.columns) == ["task", "variant", "seed", "metric", "value", "n"]
    assert set(per_seed["seed"]) == {-1}  # records without a seed: one seed (-1)
    df = aggregate_seeds(per_seed)
    assert list(df.columns) == ["task", "variant", "metric", "value", "n", "std", "n_seeds"]
    assert df[["task", "variant", "metric"]].values.tolist() == [
        ["mrpc", "pretrained", "f1"], ["mrpc", "pretrained", "accuracy"],
        ["mrpc", "random-finetuned", "f1"], ["mrpc", "random-finetuned", "accuracy"],
        ["mrpc", "finetuned", "f1"], ["mrpc", "finetuned", "accuracy"],
        ["rte", "pretrained", "accuracy"], ["rte", "finetuned", "accuracy"]]
    assert (df["n_seeds"] == 1).all() and df["std"].isna().all()
    tests = variant_tests(per_seed, alpha=0.05)
    assert (tests["test"] == "none").all() and not tests["significant"].any()
    md = table1_markdown(df, {"mrpc": 3668, "rte": 2490}, tests, alpha=0.05)
    lines = md.splitlines()
    assert lines[0].startswith("| Dataset | Pre-trained | Fine-tuned, initialized with normal distr. | "
                               "Fine-tuned, initialized with pre-trained | Metric | Size")
    assert lines[2] == "| MRPC | 0.0/31.6 | 81.2/68.3 | 87.9/82.3 | F1/Acc | 3.7K | 408 | 1 |"
    assert lines[3] == "| RTE | 52.7 | – | 64.6 | Acc | 2.5K | 277 | 1 |"  # no random-init score given
    assert "One seed per cell: no test" in md


def _seeded(task: str, variant: str, values: list[float], n: int = 100) -> list[dict]:
    metric = get_task(task).metrics
    return [{"task": task, "variant": variant, "seed": 42 + i, "n": n, "metrics": {m: v for m in metric}}
            for i, v in enumerate(values)]


def test_table1_mean_std_and_welch_tests_over_seeds():
    """Known by construction: means, sample stds, and Welch's t, df and p computed from their formulas."""
    from scipy import stats as st

    from bertology.models.table1 import aggregate_seeds, scores_frame, table1_markdown, variant_tests

    fin, rnd, pre = [0.90, 0.91, 0.92], [0.50, 0.52, 0.54], [0.5, 0.5, 0.5]
    records = [*_seeded("rte", "finetuned", fin), *_seeded("rte", "random-finetuned", rnd),
               *_seeded("rte", "pretrained", pre), *_seeded("sst2", "finetuned", [0.8]),
               *_seeded("sst2", "pretrained", [0.6]),
               *_seeded("mrpc", "finetuned", [0.7, 0.7]), *_seeded("mrpc", "pretrained", [0.6, 0.6])]
    per_seed = scores_frame(records[::-1])
    assert per_seed[per_seed.task == "rte"]["seed"].tolist() == [42, 43, 44] * 3
    df = aggregate_seeds(per_seed).set_index(["task", "variant", "metric"])
    row = df.loc[("rte", "finetuned", "accuracy")]
    assert row["value"] == pytest.approx(0.91) and row["std"] == pytest.approx(0.01) and row["n_seeds"] == 3
    assert row["n"] == 100
    assert df.loc[("rte", "random-finetuned", "accuracy"), "std"] == pytest.approx(0.02)
    assert df.loc[("rte", "pretrained", "accuracy"), "std"] == 0
    assert math.isnan(df.loc[("sst2", "finetuned", "accuracy"), "std"])
    assert df.loc[("mrpc", "finetuned", "f1"), "n_seeds"] == 2

    tests = variant_tests(per_seed, alpha=0.05).set_index(["task", "metric", "variant_a", "variant_b"])

    def welch(a, b):
        va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
        t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
        dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        return t, dof, 2 * st.t.sf(abs(t), dof)

    for a, b, xa, xb in (("finetuned", "random-finetuned", fin, rnd), ("finetuned", "pretrained", fin, pre),
                         ("random-finetuned", "pretrained", rnd, pre)):
        got = tests.loc[("rte", "accuracy", a, b)]
        t, dof, p = welch(xa, xb)
        assert got["test"] == "welch_t" and got["n_a"] == 3 and got["n_b"] == 3
        assert got["difference"] == pytest.approx(np.mean(xa) - np.mean(xb))
        assert (got["statistic"], got["df"], got["p"]) == pytest.approx((t, dof, p))
        assert got["significant"] == (p < 0.05)
    # by construction: fine-tuned vs random is huge (t = 30, df = 2.9), random vs the constant 0.5 is not
    assert tests.loc[("rte", "accuracy", "finetuned", "random-finetuned"), "significant"]
    assert not tests.loc[("rte", "accuracy", "random-finetuned", "pretrained"), "significant"]
    # one seed, or no variance on either side: no test
    assert tests.loc[("sst2", "accuracy", "finetuned", "pretrained"), "test"] == "none"
    assert tests.loc[("mrpc", "f1", "finetuned", "pretrained"), "test"] == "none"
    assert math.isnan(tests.loc[("mrpc", "f1", "finetuned", "pretrained"), "p"])

    md = table1_markdown(aggregate_seeds(per_seed), {}, variant_tests(per_seed, 0.05), alpha=0.05)
    rte = next(line for line in md.splitlines() if line.startswith("| RTE |"))
    assert rte == "| RTE | 50.0 ± 0.0 | 52.0 ± 2.0 | 91.0 ± 1.0†‡ | Acc | – | 100 | 3 |"
    assert "| SST-2 | 60.0 | – | 80.0 | Acc | – | 100 | 1 |" in md
    assert "Welch's two-sided t-test" in md and "p < 0.05" in md
    # a level between the two p values drops the mark of the weaker difference (fine-tuned vs pretrained:
    # df 2 against df 2.9 for fine-tuned vs random)
    p_pre = tests.loc[("rte", "accuracy", "finetuned", "pretrained"), "p"]
    p_rnd = tests.loc[("rte", "accuracy", "finetuned", "random-finetuned"), "p"]
    assert p_rnd < p_pre
    level = math.sqrt(p_rnd * p_pre)
    strict = table1_markdown(aggregate_seeds(per_seed), {}, variant_tests(per_seed, level), alpha=level)
    assert "| 91.0 ± 1.0‡ |" in strict


def test_table1_rejects_a_seed_twice_and_seeds_on_different_examples():
    from bertology.models.table1 import aggregate_seeds, scores_frame

    with pytest.raises(ValueError, match="two scores of rte/finetuned with seed 42"):
        scores_frame([*_seeded("rte", "finetuned", [0.5]), *_seeded("rte", "finetuned", [0.6])])
    mixed = scores_frame([*_seeded("rte", "finetuned", [0.5], n=10), *_seeded("rte", "finetuned", [0.6, 0.7])[1:]])
    with pytest.raises(ValueError, match="different numbers of examples"):
        aggregate_seeds(mixed)


def test_table1_rejects_incomplete_scores():
    from bertology.models.table1 import scores_frame

    with pytest.raises(ValueError, match="lacks metric 'accuracy'"):
        scores_frame([{"task": "mrpc", "variant": "finetuned", "metrics": {"f1": 0.5}, "n": 3}])
    with pytest.raises(ValueError, match="unknown variant"):
        scores_frame([{"task": "rte", "variant": "tuned", "metrics": {"accuracy": 0.5}, "n": 3}])


def _write_scores(root: Path) -> list[str]:
    paths = []
    for s in _scores():
        p = root / "scores" / s["task"] / f"{s['variant']}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(s))
        paths.append(str(p))
    return paths


def _table1(scores: list[str], train: list[str], out: Path, options=()) -> int:
    return run_step("table1", step_config("table1", model="minilm-l6"), inputs={"scores": scores, "train": train},
                    outputs={name: out / file for name, file in (("csv", "t.csv"), ("md", "t.md"),
                                                                 ("tests", "tests.csv"), ("figure", "t.png"))},
                    options=options)


def test_table1_step_writes_csv_md_and_figure(tmp_path, monkeypatch):
    import mlflow

    from bertology.models.table1 import aggregate_seeds, scores_frame

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    train = []
    for task, n in (("mrpc", 3668), ("rte", 2490)):
        path = tmp_path / "data" / task / "train.parquet"
        path.parent.mkdir(parents=True)
        keyword_frame(n, 0, pair=True).to_parquet(path)
        train.append(str(path))
    out = tmp_path / "out"
    rc = _table1(_write_scores(tmp_path), train, out, options=())
    assert rc == 0
    df = pd.read_csv(out / "t.csv")
    assert len(df) == 8 and df["value"].between(0, 1).all()
    pd.testing.assert_frame_equal(df, aggregate_seeds(scores_frame(_scores())), check_dtype=False)
    assert (out / "t.png").stat().st_size > 10_000
    md = (out / "t.md").read_text().splitlines()
    assert "| MRPC | 0.0/31.6 | 81.2/68.3 | 87.9/82.3 | F1/Acc | 3.7K | 408 | 1 |" in md
    assert "| RTE | 52.7 | – | 64.6 | Acc | 2.5K | 277 | 1 |" in md
    tests = pd.read_csv(out / "tests.csv")
    assert len(tests) == 7 and (tests["test"] == "none").all()  # mrpc: 3 pairs x 2 metrics; rte: 1 pair

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert run.data.tags["rule"] == "table1" and run.data.params["model"] == "minilm-l6"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"t.csv", "t.md", "tests.csv", "t.png"}
    assert run.data.metrics["mrpc.finetuned.f1"] == pytest.approx(0.879) and len(run.data.metrics) == 8


def test_table1_step_names_a_broken_score_file(tmp_path, capsys):
    scores = _write_scores(tmp_path)
    Path(scores[0]).write_text("{")
    rc = _table1(scores, [], tmp_path / "out", options=("--no-mlflow",))
    assert rc == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"bertology table1: error: {scores[0]} is not valid JSON (Expecting property name "
                            f"enclosed in double quotes: line 1 column 2 (char 1)); delete it and re-run the "
                            f"score rule\n")


def test_table1_step_reads_the_task_of_a_train_split_from_its_path(tmp_path, capsys):
    path = tmp_path / "data" / "rte" / "validation.parquet"   # not a train split of the layout
    path.parent.mkdir(parents=True)
    keyword_frame(4, 0, pair=True).to_parquet(path)
    rc = _table1(_write_scores(tmp_path), [str(path)], tmp_path / "out", options=("--no-mlflow",))
    assert rc == 1
    assert capsys.readouterr().err == (f"bertology table1: error: --input train={path} is not a prepared train split "
                                       f"(results/data/{{task}}/train.parquet)\n")


# --------------------------------------------------------------------------------- steps and MLflow


def test_train_and_score_steps_log_to_mlflow(tiny_model_dir, tmp_path, monkeypatch):
    """train_model / score: model dir, score JSON, MLflow loss per step, eval per epoch, tags."""
    import mlflow

    from bertology.pipeline.layout import checkpoint

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "t")
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    data = tmp_path / "results" / "data" / "sst2"
    data.mkdir(parents=True)
    keyword_frame(64, 0).to_parquet(data / "train.parquet")
    keyword_frame(32, 1).to_parquet(data / "validation.parquet")
    settings = dict(model=str(tiny_model_dir), data={"max_length": 32},
                    train={"epochs": 2, "batch_size": 16, "learning_rate": 3e-3, "seed": 1})
    out, ckpt = "results/models/sst2/pretrained", Path(checkpoint("sst2", "pretrained"))
    assert ckpt == Path("results/checkpoints/sst2/pretrained")
    rc = run_step("train_model", step_config("train_model", **settings), {"task": "sst2", "init": "pretrained"},
                  inputs={"train": data / "train.parquet", "validation": data / "validation.parquet"},
                  outputs={"model": out}, options=("--no-progress",))
    assert rc == 0
    assert (tmp_path / out / "model.safetensors").exists() and not (tmp_path / ckpt).exists()
    info = json.loads((tmp_path / out / "training.json").read_text())
    assert info["history"]["steps"] == list(range(1, 9)) and info["init"] == "pretrained"
    assert info["train"]["learning_rate"] == 3e-3 and "inits" not in info["train"]

    rc = run_step("score", step_config("score", **settings), {"task": "sst2", "variant": "finetuned"},
                  inputs={"validation": data / "validation.parquet", "model": out},
                  outputs={"score": "results/scores/sst2/finetuned.json"}, options=("--no-progress",))
    assert rc == 0
    score = json.loads((tmp_path / "results/scores/sst2/finetuned.json").read_text())
    assert score["variant"] == "finetuned" and score["n"] == 32 and set(score["metrics"]) == {"accuracy"}
    assert score["model_path"] == out
    assert score["metrics"]["accuracy"] == pytest.approx(info["history"]["evals"][-1]["metrics"]["accuracy"])

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = {r.data.tags["rule"]: r for r in client.search_runs([client.get_experiment_by_name("t").experiment_id])}
    train_run = runs["train_model"]
    assert train_run.data.tags["checkpoint_path"] == str((tmp_path / out).resolve())
    assert train_run.data.tags["resume_dir"] == str((tmp_path / ckpt).resolve())
    assert train_run.data.tags["variant"] == "finetuned" and train_run.data.params["train.learning_rate"] == "0.003"
    loss = client.get_metric_history(train_run.info.run_id, "train_loss")
    assert sorted(m.step for m in loss) == list(range(1, 9))
    assert [m.value for m in sorted(loss, key=lambda m: m.step)] == pytest.approx(info["history"]["losses"])
    lr = client.get_metric_history(train_run.info.run_id, "learning_rate")
    assert sorted(m.step for m in lr) == list(range(1, 9))
    acc = client.get_metric_history(train_run.info.run_id, "eval_accuracy")
    assert sorted(m.step for m in acc) == [1, 2]
    assert train_run.data.metrics["train_steps"] == 8
    assert client.list_artifacts(train_run.info.run_id) == []  # checkpoints stay on disk
    assert runs["score"].data.metrics["eval_accuracy"] == pytest.approx(score["metrics"]["accuracy"])
    assert runs["score"].data.metrics["eval_n"] == 32
    assert runs["score"].data.tags["evaluation"] == "reused from training"


@pytest.mark.parametrize("task", ["sst2", "stsb"])
def test_score_of_a_fine_tuned_model_reuses_its_last_training_evaluation(tiny_model_dir, tmp_path, monkeypatch, task):
    """A fine-tuned variant's score is its training's last evaluation when that was made with the score's settings
    on the saved weights: the same record, bit for bit, as evaluating the saved model again (here forced by
    taking the record away, and by another eval_batch_size, which re-evaluates)."""
    from bertology.pipeline.outputcache import record_digest
    from bertology.models.training import HISTORY_FILE

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    keyword_frame(48, 0, pair=task == "stsb").to_parquet(data / "train.parquet")
    keyword_frame(20, 1, pair=task == "stsb").to_parquet(data / "validation.parquet")
    settings = dict(model=str(tiny_model_dir), data={"max_length": 32},
                    train={"epochs": 1, "batch_size": 16, "learning_rate": 3e-3, "seed": 1, "eval_batch_size": 8})
    quiet = ("--no-progress", "--no-mlflow")
    assert run_step("train_model", step_config("train_model", **settings), {"task": task, "init": "pretrained"},
                    inputs={"train": data / "train.parquet", "validation": data / "validation.parquet"},
                    outputs={"model": "model"}, options=quiet) == 0

    def score(name: str, model: str = "model", **train) -> dict:
        cfg = dict(settings, train={**settings["train"], **train})
        assert run_step("score", step_config("score", **cfg), {"task": task, "variant": "finetuned"},
                        inputs={"validation": data / "validation.parquet", "model": model},
                        outputs={"score": name}, options=quiet) == 0
        record = json.loads(Path(name).read_text())
        record.pop("seconds")
        return record

    info = json.loads(Path("model", HISTORY_FILE).read_text())
    last = info["history"]["evals"][-1]
    assert len(last["predictions"]) == 20 and info["evaluation"]["eval_batch_size"] == 8
    reused = score("reused.json")
    assert reused["metrics"] == last["metrics"] and reused["predictions"]["prediction"] == last["predictions"]
    shutil.copytree("model", "plain")
    del info["evaluation"]
    Path("plain", HISTORY_FILE).write_text(json.dumps(info))
    record_digest("plain")
    evaluated = score("evaluated.json", model="plain")
    assert {**evaluated, "model_path": "model"} == reused                       # evaluated again: the same record
    rebatched = score("rebatched.json", eval_batch_size=3)                      # other settings: evaluated
    assert rebatched["n"] == 20 and rebatched["predictions"]["label"] == reused["predictions"]["label"]


def _score(tmp_path: Path, model_name: str, variant: str, **inputs) -> int:
    keyword_frame(8, 0).to_parquet(tmp_path / "v.parquet")
    return run_step("score", step_config("score", model=model_name, data={"max_length": 32}),
                    {"task": "sst2", "variant": variant}, inputs={"validation": tmp_path / "v.parquet", **inputs},
                    outputs={"score": tmp_path / "score.json"}, options=("--no-mlflow", "--no-progress"))


def test_score_step_errors_clearly(tiny_model_dir, tmp_path, capsys):
    model = str(tiny_model_dir)
    assert _score(tmp_path, model, "finetuned") == 1
    assert capsys.readouterr().err == ("bertology score: error: variant 'finetuned' needs --input "
                                       "model=results/models/sst2/pretrained (the train_model rule's output)\n")
    assert _score(tmp_path, model, "random-finetuned", model=tmp_path / "nope") == 1
    assert capsys.readouterr().err == (f"bertology score: error: {tmp_path / 'nope'} holds no fine-tuned model; run "
                                       f"the train_model rule first (`snakemake --cores 2 results/models/sst2/random`)\n")
    assert _score(tmp_path, model, "tuned") == 1
    assert capsys.readouterr().err == ("bertology score: error: unknown variant 'tuned'; use one of pretrained, "
                                       "finetuned, random-finetuned\n")
    assert _score(tmp_path, model, "pretrained") == 0
    pre = json.loads((tmp_path / "score.json").read_text())
    assert pre["variant"] == "pretrained" and pre["n"] == 8 and 0 <= pre["metrics"]["accuracy"] <= 1
    assert pre["model_path"] == str(tiny_model_dir.resolve())


@pytest.mark.parametrize("task", ["sst2", "stsb"])
def test_score_step_writes_the_predictions_its_metrics_come_from(tiny_model_dir, tmp_path, task):
    """The score record's ``predictions``: the validation split's idx, gold labels and the model's predictions (class
    ids; floats for regression), from which its metrics recompute exactly."""
    from bertology.models.metrics import compute_metrics

    frame = keyword_frame(12, 2, pair=task == "stsb")
    frame["idx"] = np.arange(100, 112)[::-1]                            # idx is the prepared data's, not the row
    frame.to_parquet(tmp_path / "v.parquet")
    rc = run_step("score", step_config("score", model=str(tiny_model_dir), data={"max_length": 32}),
                  {"task": task, "variant": "pretrained"}, inputs={"validation": tmp_path / "v.parquet"},
                  outputs={"score": tmp_path / "score.json"}, options=("--no-mlflow", "--no-progress"))
    assert rc == 0
    score = json.loads((tmp_path / "score.json").read_text())
    pred = score["predictions"]
    assert pred["idx"] == frame["idx"].tolist() and pred["label"] == frame["label"].tolist()
    labels, preds = np.array(pred["label"]), np.array(pred["prediction"])
    assert len(preds) == score["n"] == 12
    if task == "sst2":
        assert all(isinstance(p, int) for p in pred["prediction"])
        assert score["metrics"]["accuracy"] == float(np.mean(preds == labels))
    else:
        assert all(isinstance(p, float) for p in pred["prediction"])
    assert compute_metrics(task, preds, labels) == score["metrics"]


# --------------------------------------------------------------------------------- seeds, end to end


def test_seed_tags_name_every_seed_but_the_first():
    from bertology.pipeline.errors import UserError
    from bertology.pipeline.seedtags import SEED_TAG_REGEX, configured_seeds, seed_from_tag, seed_tags

    assert configured_seeds(validated()["train"]) == [42]  # seeds: null -> train.seed alone
    assert configured_seeds(validated(train={"seed": 7})["train"]) == [7]
    assert configured_seeds(validated(train={"seeds": [42, 43, 44]})["train"]) == [42, 43, 44]
    assert seed_tags([42, 43, 44]) == ["", "-seed43", "-seed44"] and seed_tags([7]) == [""]
    assert [seed_from_tag(t, 42) for t in seed_tags([42, 43, 44])] == [42, 43, 44]
    assert all(re.fullmatch(SEED_TAG_REGEX, t) for t in seed_tags([42, 43, 44]))
    assert re.fullmatch(SEED_TAG_REGEX, "seed43") is None
    with pytest.raises(UserError, match="neither empty"):
        seed_from_tag("_s43", 42)


def test_the_first_of_train_seeds_is_train_seed():
    """Every step that reads train.seed (the first model, the untrained head) uses the first of seeds."""
    from bertology.pipeline.config import ConfigError

    assert validated(train={"seed": 1, "seeds": [7, 3]})["train"]["seed"] == 7
    assert validated(train={"seed": 1})["train"]["seed"] == 1
    assert train_config(seeds=[7, 3]).seed == 7
    for bad in ([], [3, 3], [-1]):
        with pytest.raises(ConfigError, match="train.seeds"):
            validated(train={"seeds": bad})


@pytest.mark.slow
def test_two_seeds_train_two_models_each_and_table1_aggregates_them(tmp_path, tiny_model_dir, config_file,
                                                                    snakemake_run):
    """train.seeds: null -> [42, 43] adds the seed-43 model and scores without re-training the first seed; Table 1
    holds the mean, std and n of the two seeds' scores (one init, to keep the run small)."""
    import os

    from safetensors.numpy import load_file

    config_file(tmp_path, model=str(tiny_model_dir), tasks=["sst2"],
                train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8, "learning_rate": 1e-3,
                        "seed": 42})
    target = "results/tables/table1.csv"
    snakemake_run(tmp_path, "--cores", "2", target)
    models = tmp_path / "results" / "models" / "sst2"
    first = models / "pretrained" / "model.safetensors"
    before = os.stat(first).st_mtime_ns
    assert not (models / "pretrained-seed43").exists()
    assert (pd.read_csv(tmp_path / target)["n_seeds"] == 1).all()

    config_file(tmp_path, model=str(tiny_model_dir), tasks=["sst2"],
                train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8, "learning_rate": 1e-3,
                        "seeds": [42, 43]})
    dry = snakemake_run(tmp_path, "-n", target).stdout
    assert "results/models/sst2/pretrained-seed43" in dry and "results/models/sst2/pretrained\n" not in dry
    snakemake_run(tmp_path, "--cores", "2", target)
    assert os.stat(first).st_mtime_ns == before  # the first seed's model is kept, not re-trained

    seeds = [json.loads((models / f"pretrained{tag}" / "training.json").read_text())["train"]["seed"]
             for tag in ("", "-seed43")]
    assert seeds == [42, 43]
    w42, w43 = (load_file(models / f"pretrained{tag}" / "model.safetensors") for tag in ("", "-seed43"))
    assert not np.array_equal(w42["classifier.weight"], w43["classifier.weight"])  # heads drawn by the seed

    scores = tmp_path / "results" / "scores" / "sst2"
    table = pd.read_csv(tmp_path / target).set_index(["variant", "metric"])
    assert set(table.index.get_level_values("variant")) == {"pretrained", "finetuned"}
    for variant in ("pretrained", "finetuned"):
        runs = [json.loads((scores / f"{variant}{tag}.json").read_text()) for tag in ("", "-seed43")]
        assert [r["seed"] for r in runs] == [42, 43]
        acc = [r["metrics"]["accuracy"] for r in runs]
        row = table.loc[(variant, "accuracy")]
        assert row["n_seeds"] == 2 and row["n"] == runs[0]["n"]
        assert row["value"] == pytest.approx(np.mean(acc))
        assert row["std"] == pytest.approx(np.std(acc, ddof=1), abs=1e-12)
    tests = pd.read_csv(tmp_path / "results" / "tables" / "table1_tests.csv")
    assert len(tests) == 1 and set(tests["n_a"]) == {2} and set(tests["test"]) <= {"welch_t", "none"}
    md = (tmp_path / "results" / "tables" / "table1.md").read_text()
    assert "| SST-2 |" in md and "| 2 |" in md and "Welch's two-sided t-test" in md
