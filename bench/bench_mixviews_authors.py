"""How far GlobEnc's and DecompX's named variants, and the remaining departures from the authors' arithmetic, move the
views on a real model (docs/reference.md#newer-mixing-views, "Departures").

Real GLUE pairs (/work/shared/data/glue, dev split, file order; --task mrpc or rte, --examples N), a classifier:
--model DIR (a fine-tuned checkpoint) or the embedded MiniLM with a seeded untrained head (biases 0). Per example, the top [CLS] row of each
view under bertology's default (the authors') against each variant:

  globenc_rows=normalised            GlobEnc with each layer's rows normalised before the rollout
  decompx_bias_split=attention       DecompX's attention bias split as the paper's eq. 5-7 text writes it
  decompx_first_layer_value_bias=split    b_V split in the first layer too
  decompx_epsilon=0                  exact bias shares and slopes (no 1e-12)
  alti_authors_eps                   ALTI with the authors' F.pairwise_distance eps = 1e-6 and std without LN eps
  float64                            the whole model and every view in float64 (bertology's float32 pass: rounding)

Reported per variant: the max over examples of max_j |a_j - b_j| / max_j |b_j| (GlobEnc rows scaled to sum 1 first:
the raw rollout's scale is arbitrary), and the min and median over examples of Spearman's rho between the two rows.

    PYTHONPATH=src .venv/bin/python bench/bench_mixviews_authors.py --examples 16
    PYTHONPATH=src .venv/bin/python bench/bench_mixviews_authors.py --task rte --examples 48 --only decompx_bias_split

--only NAME: the variants whose name starts with NAME alone (no float64 pass). Writes
bench/out/bench_mixviews_authors[_<task>].json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

GLUE = Path(os.environ.get("BERTOLOGY_GLUE", Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"))
OUT = Path(__file__).resolve().parent / "out"


def glue_dev(n: int, task: str = "mrpc"):
    from bertology.data import normalise, read_glue_split
    from bertology.pipeline.tasks import get_task

    folder = {"mrpc": "MRPC", "rte": "RTE"}[task]
    if not (GLUE / folder / "dev.tsv").exists():
        sys.exit(f"{GLUE}/{folder}/dev.tsv not found: set BERTOLOGY_GLUE to a GLUE-layout directory")
    spec = get_task(task)
    return normalise(read_glue_split(GLUE, spec, "validation"), spec).iloc[:n].reset_index(drop=True)


def alti_authors(dec, y_parts_sum_rest, pre, norm, eps_pd: float = 1e-6):
    """ALTI as mt-upc/transformer-contributions computes it: the resultant from the parts (not the real LN output),
    1 / std(pre) without LN's eps, -F.pairwise_distance(T, y, p=1, eps=1e-6) = -||T - y + eps||_1, min_sum."""

    std = pre.double().std(-1, unbiased=False)
    var_eps = (pre.double().var(-1, unbiased=False) + norm.eps).sqrt()
    t = dec.ln * (var_eps / std)[:, None, None]                    # bertology's g1 is at sqrt(var + eps)
    y = t.sum(1) + (y_parts_sum_rest - norm.bias.double()) * (var_eps / std)[:, None] + norm.bias.double()
    dist = (t - y[:, None, :] + eps_pd).abs().sum(-1)
    c = (y.abs().sum(-1)[:, None] - dist).clamp(min=0)
    return c / c.sum(-1, keepdim=True)


def rows(model, tok, df, max_length: int, options_list):
    """[{variant: (n,) row}] per example."""
    import torch

    from bertology.models.encoding import encode
    from bertology.norms import alti_globenc as ag
    from bertology.norms import mixparts as mp
    from bertology.norms import mixviews as mv
    from bertology.norms.mixing import decompose
    from bertology.norms.values import Capture, transformed_vectors

    parts, head = mp.layer_parts(model), mp.head_linears(model)
    out_rows = []
    for r in range(len(df)):
        enc = encode(tok, df.iloc[r:r + 1], max_length, padding="longest")
        inputs = {k: torch.tensor(v) for k, v in enc.items()}   # the tokenizer's model inputs
        n = int(inputs["input_ids"].shape[1])
        got = {}
        with torch.no_grad(), Capture(model, vectors=True, norms=False) as cap, mp.PartsCapture(model, parts, head) as pc:
            out = model(**inputs, output_attentions=True)
            for name, opts in options_list:
                ev = mv.example_views(model, parts, head, cap, pc, out.attentions, 0, n, out.logits[0], {},
                                      options=opts)
                got[name] = ev.scores
            mats = []
            for p in parts:
                b = p.block
                f = transformed_vectors(b, cap.values[b.index][0:1, :n])[0]
                dec = decompose(out.attentions[b.index][0, :, :n, :n], f, cap.residual[b.index][0, :n],
                                b.output.bias, b.post_norm)
                mats.append(alti_authors(dec, dec.ln_rest, cap.sum_in[b.index][0, :n], b.post_norm))
            got["alti_authors_eps"] = {"alti": ag.rollout(torch.stack(mats))[0].numpy()}
        out_rows.append(got)
    return out_rows


def compare(a: np.ndarray, b: np.ndarray, scale: bool) -> tuple[float, float]:
    from scipy.stats import spearmanr

    if scale:
        a, b = a / a.sum(), b / b.sum()
    return float(np.abs(a - b).max() / np.abs(b).max()), float(spearmanr(a, b)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=16)
    ap.add_argument("--task", choices=("mrpc", "rte"), default="mrpc")
    ap.add_argument("--only", default=None, help="only the variants whose name starts with this")
    ap.add_argument("--model", default=None, help="a fine-tuned checkpoint directory (default: MiniLM + seeded head)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    from bertology.models.loading import load_classifier, load_encoder, load_tokenizer, resolve_model
    from bertology.norms import mixviews as mv

    torch.set_num_threads(args.threads)
    if args.model:
        model, tok, what = load_encoder(args.model, classifier=True), load_tokenizer(args.model), args.model
    else:
        path = resolve_model("minilm-l6")
        model = load_classifier(path, 2, init="pretrained", seed=0).eval()
        tok, what = load_tokenizer(path), "minilm-l6 + seeded untrained head"
    df = glue_dev(args.examples, args.task)
    from functools import partial

    from bertology.pipeline.config import schema_section

    O = partial(schema_section, "analysis.mixing_views")  # the schema's defaults, some keys changed
    variants = [("default", O()), ("globenc_rows=normalised", O(globenc_rows="normalised")),
                ("decompx_bias_split=attention", O(decompx_bias_split="attention")),
                ("decompx_first_layer_value_bias=split", O(decompx_first_layer_value_bias="split")),
                ("decompx_epsilon=0", O(decompx_epsilon=0.0))]
    checks = [("globenc_rows=normalised", "globenc", True), ("decompx_bias_split=attention", "decompx", False),
              ("decompx_first_layer_value_bias=split", "decompx", False), ("decompx_epsilon=0", "decompx", False),
              ("alti_authors_eps", "alti", False)]
    if args.only:
        variants = [v for v in variants if v[0] == "default" or v[0].startswith(args.only)]
        checks = [c for c in checks if c[0].startswith(args.only)]
    r32 = rows(model, tok, df, args.max_length, variants)
    r64 = None if args.only else rows(model.double(), tok, df, args.max_length, [("float64", O())])
    report = {"model": what, "task": args.task, "examples": len(df), "tokens_mean": float(np.mean([len(r["default"]["alti"]) for r in r32])),
              "load": os.getloadavg(), "variants": {}}
    for name, view, scale in checks:
        res = [compare(r[name][view], r["default"][view], scale) for r in r32]
        report["variants"][f"{name} ({view})"] = {"max_rel": max(x for x, _ in res),
                                                  "rho_min": min(x for _, x in res),
                                                  "rho_median": float(np.median([x for _, x in res]))}
    for view in mv.VIEWS[:3] if r64 else ():
        res = [compare(r32[k]["default"][view], r64[k]["float64"][view], view == "globenc") for k in range(len(df))]
        report["variants"][f"float32 pass vs float64 ({view})"] = {"max_rel": max(x for x, _ in res),
                                                                  "rho_min": min(x for _, x in res),
                                                                  "rho_median": float(np.median([x for _, x in res]))}
    OUT.mkdir(exist_ok=True)
    name = "bench_mixviews_authors" + ("" if args.task == "mrpc" else f"_{args.task}")
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
