"""Benchmark: the fast disabling sweep against the naive one, in one run, on real RTE dev (277 examples).

    .venv/bin/python bench/bench_ablation.py [--model results/models/rte/pretrained] [--threads 2]

Naive = one full forward pass over the eval set per configuration (baseline + 72 heads + 6 layers for
MiniLM-L6). Fast = bertology.ablation.fast_sweep. The two are *interleaved batch by batch* (for each batch:
the fast sweep's work on it, then every configuration's full forward pass on it, the order alternating
between batches) so that load from other processes on a shared machine hits both alike; each side's time
is the sum over batches. Both use the same length-grouped batches. The script checks that every
configuration gives the same predictions and metrics, prints the timings and writes them (JSON), the
tables and the Figs. 8/9 to --out.

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

from bertology.ablation import heads
from bertology.ablation import ablation_figures as fig
from bertology.ablation import significance as ast
from bertology.ablation import sweep as ab
from bertology.ablation import sweep_fast
from bertology.data import normalise
from bertology.data.glue_dir import read_glue_split
from bertology.models.metrics import compute_metrics
from bertology.pipeline.tasks import get_task
from rte_model import load_rte_classifier

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="fine-tuned RTE model directory (optional)")
    ap.add_argument("--glue", default=str(GLUE), help="GLUE-layout directory holding RTE/dev.tsv")
    ap.add_argument("--examples", type=int, default=None, help="first N examples only (default: all 277)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--config-batch", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--out", default=str(REPO / "results" / "bench" / "ablation"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    spec = get_task("rte")
    df = normalise(read_glue_split(Path(args.glue), spec, "validation"), spec)
    if args.examples:
        df = df.head(args.examples)
    model, tok, what = load_rte_classifier(args.model, device, heads.enable_heads)
    batches = ab.encode_batches(tok, df, args.max_length, args.batch_size)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    configs = ab.sweep_configurations(n_layers, n_heads)
    masks = [c.mask(n_layers, n_heads).to(device) for c in configs]
    e, k = len(df), model.config.num_labels
    print(f"RTE dev: {e} examples, {len(batches)} batches of <= {args.batch_size}; {what}; {len(configs)} "
          f"configurations ({n_layers} layers x {n_heads} heads + {n_layers} layers + baseline); device {device}, "
          f"torch threads {torch.get_num_threads()}")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    fast = np.zeros((len(configs), e, k))
    naive = np.zeros((len(configs), e, k))
    t_fast = t_naive = 0.0
    with torch.no_grad():  # warm-up (allocator, kernels) outside the timings
        b0 = batches[-1].to(device)
        model(input_ids=b0.input_ids, attention_mask=b0.attention_mask, token_type_ids=b0.token_type_ids)
        sweep_fast.fast_batch_logits(model, b0, args.config_batch)
    from tqdm.auto import tqdm

    for i, batch in enumerate(tqdm(batches, desc="interleaved fast/naive", unit="batch")):
        b = batch.to(device)

        def run_fast():
            sync()
            t = time.perf_counter()
            fast[:, batch.rows] = sweep_fast.fast_batch_logits(model, b, args.config_batch).numpy()
            sync()
            return time.perf_counter() - t

        def run_naive():
            sync()
            t = time.perf_counter()
            with torch.no_grad():
                for c, m in enumerate(masks):
                    kw = {heads.DISABLED_KWARG: m} if m.any() else {}
                    naive[c, batch.rows] = model(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                                 token_type_ids=b.token_type_ids, **kw).logits.double().cpu().numpy()
            sync()
            return time.perf_counter() - t

        if i % 2 == 0:
            t_fast += run_fast()
            t_naive += run_naive()
        else:
            t_naive += run_naive()
            t_fast += run_fast()

    labels = df["label"].to_numpy()
    preds_fast, preds_naive = fast.argmax(-1), naive.argmax(-1)
    same_preds = bool((preds_fast == preds_naive).all())
    same_metrics = all(compute_metrics("rte", preds_fast[c], labels) == compute_metrics("rte", preds_naive[c], labels)
                       for c in range(len(configs)))
    max_diff = float(np.abs(fast - naive).max())
    ratio = t_fast / t_naive
    result = {
        "task": "rte", "examples": e, "configurations": len(configs), "model": what, "device": str(device),
        "threads": torch.get_num_threads(), "batch_size": args.batch_size, "config_batch": args.config_batch,
        "naive_seconds": t_naive, "fast_seconds": t_fast, "fast_over_naive": ratio, "speedup": t_naive / t_fast,
        "identical_predictions": same_preds, "identical_metrics": same_metrics, "max_abs_logit_diff": max_diff,
        "target": "fast <= 0.5 x naive", "met": ratio <= 0.5, "host": platform.node(),
        "timing": "interleaved batch by batch in one process, order alternating",
    }
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    tables = ast.sweep_tables("rte", labels, fast, n_layers, n_heads, n_boot=args.bootstrap, seed=42, alpha=0.05)
    for frame, name in ((tables.heads, "heads.csv"), (tables.layers, "layers.csv"), (tables.summary, "summary.csv")):
        frame.to_csv(out / name, index=False)
    fig.plot_heads(tables.heads, "rte", out / "ablation-heads-rte.png")
    fig.plot_layers(tables.layers, "rte", out / "ablation-layers-rte.png")
    print(fig.verdict(tables.summary_info))
    print(f"wrote {out}/bench.json, heads.csv, layers.csv, summary.csv and the two figures")
    return 0 if same_metrics else 1


if __name__ == "__main__":
    raise SystemExit(main())
