"""Benchmark: head importance and pruning curves (Michel et al. 2019), the project's way against the naive way,
in one run, on real RTE (train for importance, dev for the curves).

    .venv/bin/python bench/bench_pruning.py [--model results/models/rte/pretrained] [--threads 2]

Importance: batched per-example gates (one backward pass per batch gives every example's own gradient)
against the naive way, one example at a time (one forward + backward per example). Pruning curves: the
fast evaluation (bertology.ablation.pruning: the intact layers' inputs cached per batch, each configuration
resumed from its first pruned layer, configurations stacked along the batch, identical ones computed once)
against one full forward pass per configuration. Both pairs are *interleaved batch by batch*, the order
alternating, so load from other processes on a shared machine hits both alike; each side's time is the
sum over batches. The script checks that the two give the same importance and the same predictions, prints
the timings and writes them (JSON), the tables and the two figures to --out.

Model: a fine-tuned RTE model directory if --model exists, otherwise the embedded MiniLM encoder with a
seeded, untrained classification head (the timing is the same; the scores are chance-level).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from bertology.ablation import ablation_figures as fig
from bertology.ablation import heads
from bertology.ablation import importance as imp
from bertology.ablation import pruning as pr
from bertology.ablation import sweep as ab
from bertology.data import normalise, sample_rows
from bertology.data.glue_dir import read_glue_split
from bertology.pipeline.tasks import get_task
from rte_model import load_rte_classifier

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="fine-tuned RTE model directory (optional)")
    ap.add_argument("--glue", default=str(GLUE), help="GLUE-layout directory holding RTE/train.tsv and dev.tsv")
    ap.add_argument("--train-examples", type=int, default=128, help="seeded sample of RTE train for importance")
    ap.add_argument("--examples", type=int, default=None, help="first N dev examples only (default: all 277)")
    ap.add_argument("--random-orders", type=int, default=5)
    ap.add_argument("--step", type=float, default=0.1)
    ap.add_argument("--mode", choices=pr.MODES, default="zero")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--config-batch", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(REPO / "results" / "bench" / "pruning"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    spec = get_task("rte")
    train = sample_rows(normalise(read_glue_split(Path(args.glue), spec, "train"), spec), args.train_examples, 42,
                        short_split="error")
    dev = normalise(read_glue_split(Path(args.glue), spec, "validation"), spec)
    if args.examples:
        dev = dev.head(args.examples)
    model, tok, what = load_rte_classifier(args.model, device, heads.enable_heads)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    from tqdm.auto import tqdm

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(fn):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t

    # ---- importance: batched per-example gates vs one example at a time
    tb = ab.encode_batches(tok, train, args.max_length, args.batch_size)
    labels_tr = train["label"].to_numpy()
    sums = {"batched": np.zeros((n_layers, n_heads)), "one_by_one": np.zeros((n_layers, n_heads))}
    t_imp = {"batched": 0.0, "one_by_one": 0.0}
    imp.head_importance(model, tb[-1:], labels_tr, progress=False)  # warm-up outside the timings
    for i, batch in enumerate(tqdm(tb, desc="importance: batched / one by one", unit="batch")):
        sides = [("batched", False), ("one_by_one", True)]
        for name, per_example in (sides if i % 2 == 0 else sides[::-1]):
            res = {}
            t_imp[name] += timed(lambda: res.setdefault("r", imp.head_importance(
                model, [batch], labels_tr, progress=False, per_example=per_example)))
            sums[name] += res["r"].raw * res["r"].n
    raw_b, raw_n = sums["batched"] / len(train), sums["one_by_one"] / len(train)
    importance = imp.Importance(raw_b, imp.normalise_by_layer(raw_b), len(train))

    # ---- pruning curves: fast vs one full forward pass per configuration
    db = ab.encode_batches(tok, dev, args.max_length, args.batch_size)
    fractions = pr.pruning_fractions(args.step)
    plan, masks = pr.pruning_plan(importance.importance, fractions, seeds=range(1, args.random_orders + 1))
    unique, inverse = np.unique(masks.reshape(len(masks), -1), axis=0, return_inverse=True)
    unique_t = torch.as_tensor(unique.reshape(-1, n_layers, n_heads))
    e, k = len(dev), model.config.num_labels
    fast = np.zeros((len(unique), e, k))
    naive = np.zeros((len(masks), e, k))
    t_fast = t_naive = 0.0
    for i, batch in enumerate(tqdm(db, desc="pruning: fast / naive", unit="batch")):
        b = batch.to(device)

        def run_fast():
            fast[:, batch.rows] = pr.fast_batch_pruned_logits(model, b, unique_t, args.mode, args.config_batch).numpy()

        def run_naive():
            naive[:, batch.rows] = pr.naive_pruned_logits(model, [batch], masks, e, args.mode,
                                                          progress=False)[:, batch.rows]

        if i % 2 == 0:
            t_fast += timed(run_fast)
            t_naive += timed(run_naive)
        else:
            t_naive += timed(run_naive)
            t_fast += timed(run_fast)
    fast = fast[inverse.ravel()]
    labels = dev["label"].to_numpy()
    table_fast = pr.pruning_table(plan, fast, labels, spec.metrics, False, args.mode)
    table_naive = pr.pruning_table(plan, naive, labels, spec.metrics, False, args.mode)
    same = bool((fast.argmax(-1) == naive.argmax(-1)).all()) and table_fast["value"].equals(table_naive["value"])
    result = {
        "task": "rte", "model": what, "device": str(device), "threads": torch.get_num_threads(),
        "host": platform.node(), "timing": "interleaved batch by batch in one process, order alternating",
        "importance": {"examples": len(train), "split": "train", "batch_size": args.batch_size,
                       "one_by_one_seconds": t_imp["one_by_one"], "batched_seconds": t_imp["batched"],
                       "speedup": t_imp["one_by_one"] / t_imp["batched"],
                       "max_rel_diff": float(np.abs(raw_b - raw_n).max() / np.abs(raw_n).max())},
        "pruning": {"examples": e, "configurations": len(masks), "distinct_configurations": len(unique),
                    "mode": args.mode, "config_batch": args.config_batch, "naive_seconds": t_naive,
                    "fast_seconds": t_fast, "speedup": t_naive / t_fast, "identical_predictions": same,
                    "max_abs_logit_diff": float(np.abs(fast - naive).max())},
    }
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    importance.frame("train").to_csv(out / "importance.csv", index=False)
    table_fast.to_csv(out / "pruning.csv", index=False)
    fig.plot_importance(importance.frame("train"), "rte", out / "importance-rte.png")
    fig.plot_pruning(table_fast, "rte", out / "pruning-rte.png")
    print(f"wrote {out}/bench.json, importance.csv, pruning.csv and the two figures")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
