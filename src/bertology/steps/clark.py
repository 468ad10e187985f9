"""Steps of rules/clark.smk (Clark et al. 2019): gold CoNLL-U trees through the attention store, heads as
dependency parsers on them, and the figures of entropy and parsing.

- ``demo_trees``: results/data/syntax/demo.conllu, gold trees of the demo grammar's sentences (data.source demo);
- ``syntax_sentences``: the gold CoNLL-U files -> results/data/syntax/sample.parquet (one single-segment
  example per sentence), words.parquet (the gold words, same columns as the spaCy words), sentences.csv
  (idx, file, sent_id, words) and counts.json (files, sentences, words, multiword tokens, empty nodes);
- ``extract_syntax``: results/attention/syntax/{model}.zarr, the attention store of those sentences (the same
  schema and extraction as every store); model = ``pretrained`` (the config ``model``) or ``{task}-finetuned``;
- ``syntax_parser``: one pass over that store -> results/stats/syntax/{model}.csv (+ {model}.json: arcs scored,
  skipped, truncation);
- (entropy.csv and parser.csv of the task stores come from the Clark kernel in ``store_stats``,
  :mod:`bertology.steps.stores`);
- ``clark_figures``: entropy-{task}.png and parser-{task}.png (spaCy arcs) from entropy.csv / parser.csv of
  both variants;
- ``syntax_figures``: parser-syntax.png and results/stats/syntax/best_heads.csv, every model on the gold trees.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from bertology.steps.context import StepContext
from bertology.clark import clark_figures as cfig
from bertology.clark import parser as prs
from bertology.clark import reduce as clred
from bertology.pipeline.daskutil import compute_kwargs
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_json, write_text
from bertology.pipeline.io import write_csv
from bertology.steps.tables import by_variant, read_table

def demo_trees(ctx: StepContext) -> None:
    """results/data/syntax/demo.conllu: data.demo.validation sentences of the demo grammar with their gold trees
    (seeded by data.seed), the gold syntax of a demo run."""
    from bertology.demo.trees import gold_treebank

    write_text(gold_treebank(ctx.config.data.demo.validation, ctx.config.data.seed), ctx.output.conllu)


def syntax_sentences(ctx: StepContext) -> None:
    """Gold CoNLL-U files (list input `conllu`) -> sample.parquet, words.parquet, sentences.csv, counts.json."""
    from bertology.attention.annotate import write_words
    from bertology.clark.conllu import read_treebanks
    from bertology.data import write_prepared

    paths = ctx.input.all("conllu")
    if not paths:
        raise UserError("syntax_sentences needs at least one --input conllu=FILE (analysis.syntax.conllu)")
    bank = read_treebanks(paths)
    write_prepared(bank.sample, ctx.output.sample)
    write_words(bank.words, ctx.output.words)
    write_csv(bank.sentences, ctx.output.sentences)
    counts = {k: int(v) for k, v in sorted(bank.counts.items())}
    write_json(counts, ctx.output.counts)
    ctx.tracker.metrics({f"conllu.{k}": float(v) for k, v in counts.items()})
    ctx.log.info("gold trees: %s", counts)


def extract_syntax(ctx: StepContext) -> None:
    """results/attention/syntax/{model}.zarr: the attention of every gold sentence (all of them: attention.examples
    does not sample gold trees), through the same extraction as any store."""
    import torch

    from bertology.data import read_prepared
    from bertology.attention.store_size import store_space
    from bertology.attention.extract import extract_store
    from bertology.models.loading import resolve_model
    from bertology.attention.annotate import SPAN_COLUMNS

    from bertology.pipeline.layout import syntax_model

    cfg, model = ctx.config, ctx.wildcards.get("model")
    wanted = syntax_model(model)  # TASK-finetuned[-seedN] -> its model dir (bertology.pipeline.layout); None: pretrained
    if wanted is None:
        if ctx.input.get("model") is not None:
            raise UserError("model `pretrained` runs the config `model`; it takes no --input model")
        model_path = resolve_model(cfg.model)
    else:
        if ctx.input.get("model") is None:
            raise UserError(f"model {model} needs --input model={wanted}")
        model_path = str(ctx.input.model)
    torch.set_num_threads(ctx.threads)
    frame = read_prepared(ctx.input.sample)
    words = pd.read_parquet(ctx.input.words, columns=SPAN_COLUMNS)
    attention = dataclasses.replace(cfg.attention, examples=None, split="gold")  # recorded in the attributes
    with store_space(ctx.output.store, frame, model_path, cfg.data.max_length):
        stats = extract_store(ctx.output.store, frame=frame, words=words, model=cfg.model, model_path=model_path,
                              variant=model, task="syntax", attention=attention, seed=cfg.data.seed,
                              max_length=cfg.data.max_length, device=ctx.device, progress=ctx.progress)
    ctx.tracker.metrics({"examples": stats["n_examples"], "seconds": stats["seconds"], "bytes": stats["bytes"]})


def syntax_parser(ctx: StepContext) -> None:
    """One pass over a gold-syntax store -> results/stats/syntax/{model}.csv and {model}.json (scored and skipped
    arcs, sentences and words cut off by data.max_length)."""
    from bertology.clark.conllu import truncation
    from bertology.store import expected_attrs, open_store, read_words

    words = read_words(ctx.input.words)
    # the gold-syntax store: every sentence (no sampling), split `gold` (see extract_syntax)
    expect = dict(expected_attrs(ctx.config, "syntax", ctx.wildcards.get("model")), examples=None, split="gold")
    counts, layers, heads = clred.store_parser(ctx.input.store, words, expect=expect,
                                             compute_kwargs=compute_kwargs(ctx.config.analysis.dask, ctx.threads))
    table = prs.parser_table(counts, layers, heads)
    write_csv(table, ctx.output.table)
    ds = open_store(ctx.input.store, check_rows=False)
    summary = {"arcs_scored": int(sum(counts.n.values())), "arcs_skipped": int(counts.skipped),
               "relations": len(counts.n), "sentences": int(ds.sizes["example"]),
               **truncation(words, ds["word_ids"].values, ds["length"].values, ds["example_idx"].values)}
    write_json(summary, ctx.output.summary)
    for metrics, step in clred.clark_metrics(None, table, skipped=counts.skipped):
        ctx.tracker.metrics(metrics, step=step)
    ctx.tracker.metrics({k: float(v) for k, v in summary.items()})
    ctx.log.info("%s: %s", ctx.input.store, summary)


def clark_figures(ctx: StepContext) -> None:
    """entropy-{task}.png and parser-{task}.png; list inputs `entropy` and `parser`, one per variant."""
    task = ctx.task
    entropy = {v: read_table(p) for v, p in by_variant(ctx, "entropy").items()}
    parser = {v: read_table(p) for v, p in by_variant(ctx, "parser").items()}
    for p in (cfig.entropy_figure(entropy, f"Attention entropy by layer — {task} (Clark et al. §3.3)",
                                  ctx.output.entropy),
              cfig.parser_figure(parser, f"Best head per relation vs fixed offset — {task}, spaCy parses "
                                         f"(Clark et al. §4.2)", ctx.output.parser)):
        ctx.tracker.artifact(p, "figures")


def syntax_figures(ctx: StepContext) -> None:
    """parser-syntax.png and best_heads.csv (model, then the columns of parser.csv: the best head of every relation
    and direction): every model (list input `tables`, named by their file stems) on the gold trees."""
    tables = {Path(p).stem: pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in ctx.input.all("tables")}
    best = [prs.best_heads(t).assign(model=model) for model, t in tables.items()]
    best = pd.concat(best, ignore_index=True)[["model", *prs.COLUMNS]] if best else pd.DataFrame()
    write_csv(best, ctx.output.best)
    path = cfig.parser_figure(tables, "Best head per relation vs fixed offset — gold CoNLL-U trees "
                                      "(Clark et al. §4.2, Fig. 5)", ctx.output.figure)
    ctx.tracker.artifact(path, "figures")
