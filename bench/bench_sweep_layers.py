"""Benchmark: the prefix disabling sweep against the naive one on a tiny-but-not-trivial random Llama, in one run.

    PYTHONDONTWRITEBYTECODE=1 .venv/bin/python bench/bench_sweep_layers.py [--layers 8] [--heads 8] [--threads 1]

Model: a random-weight LlamaForSequenceClassification (hidden 256, 8 layers, 8 query heads sharing 2 key/value
heads, intermediate 512, vocabulary 1000, 2 labels), eager attention through enable_heads; 16 random examples of
64 tokens (a few shorter, so the batches are padded), batches of 16, so 1 + L*H + L = 73 configurations.
Naive = bertology.ablation.sweep.naive_sweep (one full forward per configuration); prefix =
bertology.ablation.sweep_prefix.prefix_sweep (one kept forward per batch, then each layer's H + 1 configurations
stacked along the batch with the layers below replayed). The two alternate over --repeats rounds (order
swapped each round) so that load from other processes on a shared machine hits both alike; each side's
time is its median round. Prints the timings, the measured ratio, the counted floor (layer passes,
:func:`bertology.ablation.sweep_prefix.prefix_layer_passes`) and the largest logit difference (JSON).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
import torch

from bertology.ablation import heads
from bertology.ablation import stacking
from bertology.ablation import sweep as sw
from bertology.ablation import sweep_prefix as swp


def build(args):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    config = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, intermediate_size=2 * args.hidden, vocab_size=1000,
                         max_position_embeddings=max(128, args.length), num_labels=2, pad_token_id=0,
                         attention_dropout=0.0, initializer_range=0.1)
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config).eval()
    model.set_attn_implementation("eager")
    return heads.enable_heads(model)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--examples", type=int, default=16)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--config-batch", type=int, default=8, help="the config's ablation.config_batch (CPU-capped)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = build(args)
    rng = np.random.default_rng(0)
    lengths = [args.length] * (args.examples - args.examples // 4) + \
        list(rng.integers(args.length // 2, args.length, args.examples // 4))
    ids = [rng.integers(1, 1000, int(n)).tolist() for n in lengths]
    batches = sw.make_batches(ids, [[0] * len(x) for x in ids], 0, args.batch_size)
    L, H = args.layers, args.heads
    configs = sw.sweep_configurations(L, H)
    k = stacking.effective_config_batch(args.config_batch, min(args.batch_size, args.examples), args.length,
                                  torch.device("cpu"))
    print(f"random Llama: hidden {args.hidden}, {L} layers x {H} heads ({args.kv_heads} kv heads); "
          f"{args.examples} examples of <= {args.length} tokens in {len(batches)} batches; {len(configs)} "
          f"configurations; config_batch {args.config_batch} -> {k} stacked on the CPU; torch threads "
          f"{torch.get_num_threads()}", flush=True)
    swp.prefix_sweep(model, batches[:1], args.examples, args.config_batch, progress=False)   # warm-up

    times = {"naive": [], "prefix": []}
    out = {}

    def run(name):
        t = time.perf_counter()
        if name == "naive":
            out[name] = sw.naive_sweep(model, batches, configs, args.examples, progress=False)
        else:
            out[name] = swp.prefix_sweep(model, batches, args.examples, args.config_batch, progress=False)
        times[name].append(time.perf_counter() - t)

    for r in range(args.repeats):
        for name in (("naive", "prefix") if r % 2 == 0 else ("prefix", "naive")):
            run(name)
    naive_s, prefix_s = statistics.median(times["naive"]), statistics.median(times["prefix"])
    naive_passes, prefix_passes = swp.prefix_layer_passes(L, H)
    diff = float(np.abs(out["naive"] - out["prefix"]).max())
    result = {
        "model": f"random Llama hidden {args.hidden}, {L}x{H} heads, {args.kv_heads} kv heads",
        "examples": args.examples, "length": args.length, "configurations": len(configs), "stacked": k,
        "threads": torch.get_num_threads(), "naive_seconds": naive_s, "prefix_seconds": prefix_s,
        "rounds": {name: [round(t, 3) for t in ts] for name, ts in times.items()},
        "prefix_over_naive": prefix_s / naive_s, "speedup": naive_s / prefix_s,
        "counted_layer_passes": {"naive": naive_passes, "prefix": prefix_passes,
                                 "floor": prefix_passes / naive_passes},
        "max_abs_logit_diff": diff, "max_abs_change_from_baseline": float(np.abs(out["naive"][1:]
                                                                                  - out["naive"][0]).max()), "identical_predictions": bool((out["naive"].argmax(-1)
                                                                    == out["prefix"].argmax(-1)).all()),
        "host": platform.node(), "timing": "median of alternating rounds in one process",
    }
    print(json.dumps(result, indent=2))
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
