"""Steps of rules/attention.smk: the attention sample, its spaCy words, and the attention store."""

from __future__ import annotations

import time

import pandas as pd

from bertology.attention.annotate import SPAN_COLUMNS, annotate_frame, blank_spacy, load_spacy, write_words
from bertology.steps.context import StepContext
from bertology.data import COLUMNS, read_prepared, sample_rows, write_prepared
from bertology.pipeline.errors import UserError
from bertology.pipeline.seedtags import split_variant
from bertology.pipeline.tasks import VARIANT_INIT, get_task


def attention_sample(ctx: StepContext) -> None:
    """results/data/{task}/sample.parquet: the seeded sample of the attention split, in store order."""
    att = ctx.config.attention
    frame = read_prepared(ctx.input.data)
    sample = sample_rows(frame, att.examples, ctx.config.data.seed, what=f"{ctx.task}/{att.split}",
                         key="attention.examples", short_split=ctx.config.data.short_split)
    write_prepared(sample[COLUMNS], ctx.output.sample)
    ctx.log.info("%s: %d of %d %s examples -> %s", ctx.task, len(sample), len(frame), att.split, ctx.output.sample)
    ctx.tracker.metrics({"examples": len(sample), "split_rows": len(frame)})


def annotate_words(ctx: StepContext) -> None:
    """results/data/{task}/words.parquet: spaCy words of every example of the sample, each text only as far
    as the model sees it at data.max_length (annotate.visible_texts); in a run of several models
    (attention.word_models), as far as the farthest-seeing one sees it, so that all share the words."""
    from bertology.models.loading import load_tokenizer, resolve_model

    sample = read_prepared(ctx.input.sample)
    tokenizer = load_tokenizer(resolve_model(ctx.config.model))
    seen = [(load_tokenizer(resolve_model(m["model"])), int(m["max_length"]))
            for m in ctx.config.attention.word_models]
    t0 = time.perf_counter()
    spec = get_task(ctx.task)
    if not spec.declared:
        nlp = load_spacy(ctx.config.attention.spacy_model)
    elif spec.spacy_pipeline is not None:  # the pipeline of the task's language (spacy_pipelines)
        nlp = load_spacy(spec.spacy_pipeline)
    else:  # none installed: words from spaCy's rule-based tokenizer, no tags or parses (said at start)
        nlp = blank_spacy(spec.language)
        ctx.log.info("%s: no spaCy pipeline for language %r: words are tokenised only", ctx.task, spec.language)
    words = annotate_frame(sample, nlp, progress=ctx.progress, tokenizer=tokenizer,
                           max_length=ctx.config.data.max_length, seen=seen)
    seconds = time.perf_counter() - t0
    write_words(words, ctx.output.words)
    ctx.log.info("%s: %d examples, %d words annotated in %.1f s (%.0f examples/s) -> %s", ctx.task, len(sample),
                 len(words), seconds, len(sample) / max(seconds, 1e-9), ctx.output.words)
    ctx.tracker.metrics({"examples": len(sample), "words": len(words), "seconds": seconds})


def extract_attention(ctx: StepContext) -> None:
    """results/attention/{task}/{variant}.zarr: the attention store (resumes an interrupted extraction).

    The pretrained variant runs the config `model`; a fine-tuned one the model directory of input `model`.
    """
    import torch

    from bertology.attention.store_size import store_space
    from bertology.pipeline.diskspace import human
    from bertology.attention.extract import extract_store
    from bertology.models.loading import check_max_length, resolve_model
    from bertology.pipeline.outputcache import check_cache_writable

    check_cache_writable()  # under --cache: the store could not be cached (Snakemake would then delete it)
    cfg, variant = ctx.config, ctx.variant
    if split_variant(variant)[0] in VARIANT_INIT:  # finetuned or finetuned-seedN (bertology.pipeline.seedtags)
        model_path = str(ctx.input.model)  # the fine-tuned model; one path is required
    else:
        if ctx.input.get("model") is not None:
            raise UserError(f"variant {variant} runs the config `model`; it takes no --input model")
        model_path = resolve_model(cfg.model)
    check_max_length(model_path, cfg.data.max_length, cfg.model)
    torch.set_num_threads(ctx.threads)
    frame = read_prepared(ctx.input.sample)
    words = pd.read_parquet(ctx.input.words, columns=SPAN_COLUMNS)
    with store_space(ctx.output.store, frame, model_path, cfg.data.max_length) as needed:
        ctx.log.info("%s: the store needs about %s on disk (estimate)", ctx.output.store, human(needed))
        stats = extract_store(ctx.output.store, frame=frame, words=words, model=cfg.model, model_path=model_path,
                              variant=variant, task=ctx.task, attention=cfg.attention, seed=cfg.data.seed,
                              max_length=cfg.data.max_length, device=ctx.device, progress=ctx.progress,
                              value_norms=cfg.analysis.norms.enabled)
    metrics = {"examples": stats["n_examples"], "chunks_computed": stats["chunks_computed"],
               "seconds": stats["seconds"], "bytes": stats["bytes"],
               "bytes_per_example": stats["bytes"] / max(stats["n_examples"], 1)}
    if stats["examples_per_s"] == stats["examples_per_s"]:  # NaN when an existing store was reused
        metrics["examples_per_s"] = stats["examples_per_s"]
    ctx.tracker.metrics(metrics)
