"""Benchmark on a GPU (or the CPU): extraction and fine-tuning as a ratio to a plain forward and a plain training
step, in one run, on a BERT-base-sized model with random weights (12 layers x 12 heads, hidden 768; no hub).

Extraction (inference, float32 weights, the same length-sorted batches for every variant, lengths 30-110 of
max_length 128 as MRPC pairs):
  sdpa        a plain forward: sdpa attention, no attention output
  eager       an eager forward that returns the attention (the floor for reading attention at all)
  eager+copy  the same, each layer's maps cast to float16 and copied to the host (what any store needs)
  bertology   bertology.attention.extract.run_batches: eager forward, float16 maps into the chunk buffer, no value norms
  bertology+norms  the same with the value norms (bertology.norms.values.Capture: hooks in the same forward)
Fine-tuning (BertForSequenceClassification, AdamW, batch 32, dynamic padding, the same batches):
  plain       a plain training step: sdpa, forward + backward + clip + step, full precision
  plain-eager the same with eager attention (what bertology loads, for the attention it reads later)
  bertology   bertology.models.training.train on the same examples (mixed_precision as the config's default, auto:
              bf16 autocast on a GPU that has it), per step; also with mixed_precision: no

Each variant: a warm-up, then `--repeats` rounds interleaved, the median. Writes $OUT/bench_gpu.json (or
bench/out/) and prints it. Self-contained: puts ./src (this checkout's, or a copy beside the script) on the
path, stubs packages a device may lack (zarr, numcodecs, scipy, mlflow, spacy) that these code paths never call.

    .venv/bin/python bench/bench_gpu.py --examples 512 --steps 20        # quick, CPU
    python3 .devcarry/bench_gpu.py                                       # on the device (see README)
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
for candidate in (HERE / "src", HERE.parent / "src"):
    if (candidate / "bertology").is_dir():
        sys.path.insert(0, str(candidate))
        break

STUBBED = ("zarr", "numcodecs", "crc32c", "scipy", "mlflow", "spacy", "sklearn", "statsmodels", "dask")


class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Modules that are not installed become empty placeholders (any attribute: a placeholder too)."""

    def __init__(self, missing: set[str]):
        self.missing = missing

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.missing:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: type(attr, (), {"__init__": lambda self, *a, **k: None})
        return module

    def exec_module(self, module):
        pass


def _stub_missing(force: bool = False) -> list[str]:
    missing = {m for m in STUBBED if force or importlib.util.find_spec(m) is None}
    if missing:
        sys.meta_path.insert(0, _Stub(missing))
    return sorted(missing)


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def make_inputs(n: int, max_length: int, vocab: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    length = rng.integers(30, 111, n).clip(max=max_length).astype(np.int16)
    ids = np.zeros((n, max_length), np.int32)
    tt = np.zeros((n, max_length), np.int8)
    for i, m in enumerate(length):
        ids[i, :m] = rng.integers(1000, vocab, m)
        ids[i, 0], ids[i, m - 1] = 101, 102
        tt[i, m // 2:m] = 1
    return {"input_ids": ids, "token_type_ids": tt, "length": length}


def extraction(args, device, results):
    import numpy as np
    import torch
    from transformers import AutoModel

    from bertology.attention.extract import length_batches, run_batches
    from bertology.norms.values import Capture

    cfg = _config(args)
    torch.manual_seed(0)
    # each model its own config: transformers reads the attention implementation from the config at run time
    eager = AutoModel.from_config(copy.deepcopy(cfg), attn_implementation="eager").to(device).eval()
    sdpa = AutoModel.from_config(copy.deepcopy(cfg), attn_implementation="sdpa").to(device).eval()
    sdpa.load_state_dict(eager.state_dict())
    Q, L, H = args.max_length, cfg.num_hidden_layers, cfg.num_attention_heads
    inputs = make_inputs(args.examples, Q, cfg.vocab_size)
    chunk = args.chunk_size
    chunks = [slice(s, min(s + chunk, args.examples)) for s in range(0, args.examples, chunk)]
    out = np.full((chunk, L, H, Q, Q), np.nan, np.float16)
    norms = np.full((chunk, L, H, Q), np.nan, np.float32)

    def plain(model, attentions: bool, copy: bool):
        def run():
            with torch.inference_mode():
                for sl in chunks:
                    length = inputs["length"][sl].astype(np.int64)
                    for pos in length_batches(length, args.batch_size):
                        N = int(length[pos].max())
                        ids = torch.from_numpy(inputs["input_ids"][sl][pos, :N].astype(np.int64)).to(device)
                        tt = torch.from_numpy(inputs["token_type_ids"][sl][pos, :N].astype(np.int64)).to(device)
                        mask = (torch.arange(N)[None, :] < torch.from_numpy(length[pos])[:, None]).long().to(device)
                        res = model(input_ids=ids, attention_mask=mask, token_type_ids=tt,
                                    output_attentions=attentions)
                        if copy:
                            for a in res.attentions:
                                a.to(torch.float16).cpu()
        return run

    def ours(with_norms: bool):
        def run():
            cap = Capture(eager) if with_norms else None
            with (cap if cap is not None else _null()):
                for sl in chunks:
                    part = {k: v[sl] for k, v in inputs.items()}
                    e = len(part["length"])
                    run_batches(eager, part, token_types=True, batch_size=args.batch_size, device=str(device),
                                out=out[:e], capture=cap, norms_out=norms[:e] if with_norms else None)
        return run

    variants = {"sdpa": plain(sdpa, False, False), "eager": plain(eager, True, False),
                "eager+copy": plain(eager, True, True), "bertology": ours(False), "bertology+norms": ours(True)}
    _measure("extraction", variants, args, device, results, per=args.examples, unit="examples/s",
             floor="eager")


def _config(args, **kw):
    from transformers import BertConfig

    if args.tiny:  # a check of the script itself, not a measurement
        return BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          vocab_size=2000, **kw)
    return BertConfig(**kw)  # BERT-base: 12 layers x 12 heads, hidden 768, vocabulary 30522


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def fine_tuning(args, device, results):
    import numpy as np
    import pandas as pd
    import torch
    from transformers import AutoModelForSequenceClassification, BertTokenizerFast

    from bertology.pipeline.config import TrainConfig
    from bertology.pipeline.tasks import get_task
    from bertology.models.batching import collate, train_batches
    from bertology.models.encoding import encode_split
    from bertology.models.training import train

    cfg = _config(args, num_labels=2)
    spec = get_task("mrpc")
    tmp = Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    words = [f"w{i}" for i in range(cfg.vocab_size - 5)]
    (tmp / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(tmp / "vocab.txt"), do_lower_case=False)
    rng = np.random.default_rng(1)
    n = args.steps * args.train_batch
    df = pd.DataFrame({"idx": np.arange(n),
                       "text_a": [" ".join(rng.choice(words, rng.integers(12, 50))) for _ in range(n)],
                       "text_b": [" ".join(rng.choice(words, rng.integers(12, 50))) for _ in range(n)],
                       "label": rng.integers(0, 2, n)})
    enc = encode_split(tok, df, spec, args.max_length)
    torch.manual_seed(0)
    init = AutoModelForSequenceClassification.from_config(copy.deepcopy(cfg), attn_implementation="eager").state_dict()

    def train_cfg(mp):
        return TrainConfig(inits=("pretrained",), epochs=1, batch_size=args.train_batch, learning_rate=2e-5,
                           weight_decay=0.01, warmup_ratio=0.1, mixed_precision=mp, eval_batch_size=64, seed=42,
                           seeds=None, alpha=0.05, max_grad_norm=1.0, checkpoint_steps=0, checkpoint_minutes=0)

    def plain(attn):
        def run():
            model = AutoModelForSequenceClassification.from_config(copy.deepcopy(cfg), attn_implementation=attn).to(device)
            model.load_state_dict(init)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
            for idx in train_batches(enc.lengths, args.train_batch, 42, 0):
                batch = collate(tok, enc, idx, device, False)
                loss = model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                loss.item()
        return run

    def ours(mp):
        def run():
            model = AutoModelForSequenceClassification.from_config(copy.deepcopy(cfg), attn_implementation="eager")
            model.load_state_dict(init)
            train(model, tok, enc, spec, train_cfg(mp), device=device, progress=False)
        return run

    variants = {"plain": plain("sdpa"), "plain-eager": plain("eager"), "bertology (auto)": ours("auto"),
                "bertology (no)": ours("no")}
    _measure("fine_tuning", variants, args, device, results, per=args.steps, unit="steps/s", floor="plain")


def _measure(name, variants, args, device, results, *, per, unit, floor):
    times = {k: [] for k in variants}
    for k, fn in variants.items():
        try:
            fn()  # warm-up
        except Exception as err:  # noqa: BLE001 - report and go on with the others
            times[k] = None
            import traceback

            results.setdefault("errors", {})[f"{name}/{k}"] = f"{type(err).__name__}: {err}: " + \
                " | ".join(traceback.format_exc().splitlines()[-6:])
    for _ in range(args.repeats):
        for k, fn in variants.items():
            if times[k] is not None:
                times[k].append(_timed(fn, device))
    table = {}
    for k, t in times.items():
        if t:
            med = statistics.median(t)
            table[k] = {"seconds": med, unit: per / med, "all_s": t}
    for k in table:
        if floor in table:
            table[k][f"ratio_to_{floor}"] = table[floor]["seconds"] / table[k]["seconds"]
    results[name] = table
    print(json.dumps({name: {k: {kk: (round(vv, 4) if isinstance(vv, float) else vv) for kk, vv in v.items()
                                 if kk != "all_s"} for k, v in table.items()}}, indent=1), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=2048)
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16, help="extraction batch (attention.batch_size)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--steps", type=int, default=40, help="fine-tuning steps per measurement")
    ap.add_argument("--train-batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="extraction,fine_tuning")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model: checks the script, measures nothing")
    ap.add_argument("--stub", action="store_true", help="stub the optional packages even when installed (a test)")
    args = ap.parse_args()
    stubbed = _stub_missing(force=args.stub)
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    import transformers

    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "transformers": transformers.__version__, "stubbed": stubbed,
               "args": vars(args)}
    print(json.dumps({k: results[k] for k in ("date", "device", "torch", "transformers", "stubbed")}), flush=True)
    out = Path(os.environ.get("OUT") or HERE.parent / "bench" / "out")
    out.mkdir(parents=True, exist_ok=True)
    for part in args.parts.split(","):
        try:
            {"extraction": extraction, "fine_tuning": fine_tuning}[part](args, device, results)
        except Exception as err:  # noqa: BLE001 - keep what the other part measured
            results.setdefault("errors", {})[part] = f"{type(err).__name__}: {err}"
            print(f"{part} failed: {type(err).__name__}: {err}", flush=True)
        (out / "bench_gpu.json").write_text(json.dumps(results, indent=1))  # what is measured so far
    print(json.dumps(results.get("errors", {})), flush=True)


if __name__ == "__main__":
    main()
