"""Cost of the norm analyses (docs/reference.md#value-norms ff.): value norms in the forward pass, and rollout, flow,
mixing and token importance per example.

Real MRPC train pairs (/work/shared/data/glue, file order; --examples N takes the first N), the embedded MiniLM
(6 layers x 12 heads), max_length 128, torch threads --threads (default 2), batches of --batch-size in file order,
each padded to its longest. Interleaved --repeats times (best and median reported):

  eager     the eager forward with output_attentions=True (what extraction runs; maps discarded): the reference
  norms     the same inside ``Capture(model)``: value norms ||f_h(x_j)|| of every layer, head and token taken
            through forward hooks, then ``value_norms(lengths)`` (what extraction would add)
  vectors   the same inside ``Capture(model, vectors=True)`` (also keeps values, residuals, LayerNorm in/out: the
            norms_views pass)

Speed is reported as eager time / other time (1.0 = free; extraction's target is >= 0.85).

Per example, on the first --per-example examples (one at a time, after the batched forward): raw, rollout,
flow (scipy max flow per token), the mixing decomposition of every layer, ablation importance (one
forward per --ablation-batch ablated copies) and input x gradient, on MiniLM with a classification head
(untrained: the cost is the same as a fine-tuned one's); and the newer mixing views (docs/reference.md#newer-mixing-views)
from the classifier's forward: ALTI, GlobEnc, DecompX (through the head), Value Zeroing (one intact forward plus
one forward of n copies per layer), and AOPC of one view (5 masked copies).

    PYTHONPATH=src .venv/bin/python bench/bench_norms.py --examples 128 --per-example 8

Writes bench/out/bench_norms.json and bench/out/bench_norms.md (load averages included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

GLUE = Path(os.environ.get("BERTOLOGY_GLUE", Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"))
OUT = Path(__file__).resolve().parent / "out"


def mrpc_train(n: int | None):
    from bertology.data import normalise, read_glue_split
    from bertology.pipeline.tasks import get_task

    if not (GLUE / "MRPC" / "train.tsv").exists():
        sys.exit(f"{GLUE}/MRPC/train.tsv not found: set BERTOLOGY_GLUE to a GLUE-layout directory")
    spec = get_task("mrpc")
    df = normalise(read_glue_split(GLUE, spec, "train"), spec)
    return df.iloc[:n].reset_index(drop=True) if n else df


def batches(tok, df, batch_size: int, max_length: int):
    from bertology.models.encoding import encode

    out = []
    for start in range(0, len(df), batch_size):
        enc = encode(tok, df.iloc[start:start + batch_size], max_length, padding="longest")
        out.append({k: __import__("torch").tensor(v) for k, v in enc.items()})
    return out


def timed_pass(model, data, mode: str) -> float:
    import torch

    from bertology.norms.values import Capture

    t0 = time.perf_counter()
    with torch.inference_mode():
        for b in data:
            kwargs = b                     # the tokenizer's model inputs (token_type_ids where it produces them)
            if mode == "eager":
                model(**kwargs, output_attentions=True)
            else:
                with Capture(model, vectors=(mode == "vectors")) as cap:
                    model(**kwargs, output_attentions=True)
                    cap.value_norms(b["attention_mask"].sum(1))
    return time.perf_counter() - t0


def per_example(model, clf, tok, df, n: int, ablation_batch: int, max_length: int) -> dict[str, float]:
    import torch

    from bertology.norms import faithful as ff
    from bertology.norms import flow as fl
    from bertology.norms.analysis import encode_frame
    from bertology.norms.mixing import mixing_ratios
    from bertology.norms.tokens import TokenKinds
    from bertology.norms.values import Capture

    enc = encode_frame(tok, df.iloc[:n], max_length)
    kinds = TokenKinds(tok)
    secs = dict.fromkeys(("raw", "rollout", "flow", "mixing", "ablation", "gradient"), 0.0)
    tokens = 0
    for r in range(n):
        ids = torch.from_numpy(enc.input_ids[r])
        tts = None if enc.token_type_ids is None else torch.from_numpy(enc.token_type_ids[r])
        mask = torch.ones_like(ids)
        tokens += len(ids)
        with torch.no_grad(), Capture(model, vectors=True) as cap:
            out = model(input_ids=ids[None], attention_mask=mask[None], token_type_ids=None if tts is None else tts[None],
                        output_attentions=True)
            t0 = time.perf_counter()
            mixing_ratios(cap, out.attentions, torch.tensor([len(ids)]))
            secs["mixing"] += time.perf_counter() - t0
        alpha = torch.stack(out.attentions, 1)[0].double().numpy()
        t0 = time.perf_counter()
        fl.raw_scores(alpha)
        t1 = time.perf_counter()
        fl.rollout_scores(alpha)
        t2 = time.perf_counter()
        fl.flow_scores(alpha)
        t3 = time.perf_counter()
        secs["raw"] += t1 - t0
        secs["rollout"] += t2 - t1
        secs["flow"] += t3 - t2
        ordinary = np.flatnonzero(kinds.categories(enc.input_ids[r][None], np.array([len(ids)]))[0] >= 2)
        t0 = time.perf_counter()
        ff.ablation_importance(clf, ids, mask, ordinary, ff.replacement_token_id(tok), token_type_ids=tts,
                               batch_size=ablation_batch)
        t1 = time.perf_counter()
        ff.gradient_importance(clf, ids, mask, token_type_ids=tts)
        secs["gradient"] += time.perf_counter() - t1
        secs["ablation"] += t1 - t0
    res = {f"{k}_s_per_example": v / n for k, v in secs.items()}
    res["mean_tokens"] = tokens / n
    return res


def mixing_per_example(clf, tok, df, n: int, ablation_batch: int, max_length: int) -> dict[str, float]:
    """Seconds per example of ALTI, GlobEnc, DecompX, Value Zeroing and one view's AOPC (classifier, batch 1)."""
    import torch

    from bertology.norms import faithful as ff
    from bertology.norms import mixparts as mp
    from bertology.norms import mixviews as mv
    from bertology.norms import value_zeroing as vz
    from bertology.norms.analysis import encode_frame
    from bertology.norms.tokens import TokenKinds
    from bertology.norms.values import Capture

    enc = encode_frame(tok, df.iloc[:n], max_length)
    kinds = TokenKinds(tok)
    parts, head = mp.layer_parts(clf), mp.head_linears(clf)
    secs: dict[str, float] = dict.fromkeys((*mv.VIEWS, "capture_forward", "aopc"), 0.0)
    for r in range(n):
        ids = torch.from_numpy(enc.input_ids[r])
        tts = None if enc.token_type_ids is None else torch.from_numpy(enc.token_type_ids[r])
        mask = torch.ones_like(ids)
        inputs = {"input_ids": ids[None], "attention_mask": mask[None]}
        if tts is not None:
            inputs["token_type_ids"] = tts[None]
        t0 = time.perf_counter()
        with torch.no_grad(), Capture(clf, vectors=True, norms=False) as cap, mp.PartsCapture(clf, parts, head) as pc:
            out = clf(**inputs, output_attentions=True)
            secs["capture_forward"] += time.perf_counter() - t0
            ev = mv.example_views(clf, parts, head, cap, pc, out.attentions, 0, len(ids), out.logits[0], secs)
        vz.value_zeroing_view(clf, parts, inputs, secs)
        ordinary = np.flatnonzero(kinds.categories(enc.input_ids[r][None], np.array([len(ids)]))[0] >= 2)
        t0 = time.perf_counter()
        ff.aopc(clf, ids, mask, {"alti": ff.top_first(ev.scores["alti"], ordinary)}, ff.replacement_token_id(tok),
                batch_size=ablation_batch, token_type_ids=tts)
        secs["aopc"] += time.perf_counter() - t0
    return {f"{k}_s_per_example": v / n for k, v in secs.items()}


def main() -> None:
    import torch

    from bertology.models.loading import load_encoder, load_tokenizer, resolve_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--per-example", type=int, default=8)
    ap.add_argument("--ablation-batch", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    df = mrpc_train(args.examples)
    path = resolve_model("minilm-l6")
    tok = load_tokenizer(path)
    model = load_encoder(path)
    data = batches(tok, df, args.batch_size, args.max_length)
    timed_pass(model, data[:1], "eager")  # warm-up
    times: dict[str, list[float]] = {m: [] for m in ("eager", "norms", "vectors")}
    for _ in range(args.repeats):
        for mode in times:
            times[mode].append(timed_pass(model, data, mode))
    clf = load_encoder(path, classifier=True)
    pe = per_example(model, clf, tok, df, args.per_example, args.ablation_batch, args.max_length)
    pe.update(mixing_per_example(clf, tok, df, args.per_example, args.ablation_batch, args.max_length))
    load_after = os.getloadavg()
    res = {"examples": len(df), "batch_size": args.batch_size, "threads": args.threads, "repeats": args.repeats,
           "load_before": load_before, "load_after": load_after,
           "seconds": {m: {"best": min(t), "median": statistics.median(t)} for m, t in times.items()},
           "speed_vs_eager": {m: {"best": min(times["eager"]) / min(t), "median": statistics.median(times["eager"]) /
                                  statistics.median(t)} for m, t in times.items() if m != "eager"},
           "per_example": {"n": args.per_example, "ablation_batch": args.ablation_batch, **pe}}
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_norms.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [f"# bench_norms: MRPC train, first {len(df)} pairs, minilm-l6, {args.threads} torch threads, batch "
          f"{args.batch_size}, {args.repeats} repeats", "",
          f"load average before {load_before}, after {load_after}", "",
          "| pass | best s | median s | speed vs eager (best / median) |", "|---|---|---|---|"]
    for m, t in res["seconds"].items():
        sp = res["speed_vs_eager"].get(m)
        md.append(f"| {m} | {t['best']:.2f} | {t['median']:.2f} | "
                  + (f"{sp['best']:.3f} / {sp['median']:.3f}" if sp else "1 (reference)") + " |")
    md += ["", f"Per example (first {args.per_example} pairs, {pe['mean_tokens']:.1f} tokens on average):", "",
           "| what | ms per example |", "|---|---|"]
    md += [f"| {k.removesuffix('_s_per_example')} | {v * 1e3:.1f} |" for k, v in pe.items() if k.endswith("example")]
    (OUT / "bench_norms.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
