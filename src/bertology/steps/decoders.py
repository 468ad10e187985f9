"""Steps of rules/decoders.smk: the decoder probe of one task (a decoder model only).

The probe measures, per head of a model:

- Gu et al.'s alpha_0 on the task's attention sample (its first 64 tokens per example,
  :func:`bertology.decoders.probe.sink_units`) -> ``decoder_sink.csv``;
- TransformerLens' induction, previous-token and duplicate-token scores on the seeded induction probe (a BOS token
  and 50 random tokens repeated twice, 10 sequences; :func:`bertology.decoders.probe.induction_units`)
  -> ``decoder_induction.csv``;
- their per-head means (:func:`bertology.decoders.probe.head_summary`) -> ``decoder_heads.csv``, read by the
  explorer's head grid;
- the induction probe's maps as an attention store, attention/{task}/probe-{model}.zarr
  (:func:`bertology.attention.extract.write_probe_store`: split ``probe``, read like any store; the explorer shows them).

Three steps, so that nothing is probed twice and every fine-tuning seed is:

- :func:`decoder_probe` (once per task): the config's pretrained model and its random initialisation (the model's
  own initialiser, seeded with train.seed, untrained) -> stats/{task}/decoder_{sink,induction}.csv and
  stats/{task}/pretrained/decoder_heads.csv;
- :func:`decoder_probe_finetuned` (per task and fine-tuning seed): the fine-tuned model and, where train.inits
  has it, the model fine-tuned from the random initialisation -> stats/{task}/finetuned{seedtag}/decoder_*.csv;
- :func:`decoder_figure` (per task): figures/decoder-{task}.png from the first two (the first seed).
"""

from __future__ import annotations

from bertology.pipeline.io import write_csv
from bertology.steps.context import StepContext


def _text_batches(tokenizer, frame, max_length: int, tokens: int, batch_size: int):
    from bertology.models.encoding import encode

    enc = encode(tokenizer, frame, min(max_length, tokens), padding="longest")
    ids, mask, types = enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")
    for start in range(0, len(ids), batch_size):
        part = slice(start, start + batch_size)
        yield ids[part], mask[part], None if types is None else types[part]


def _probe(ctx: StepContext, models: dict, tokenizer, model_paths: dict) -> tuple:
    """Probe each model of `models` (name -> a function that loads it; model_paths: name -> what it is loaded
    from) -> decoder_sink.csv and decoder_induction.csv's frames (:func:`bertology.decoders.probe.probe_tables`),
    the MLflow metrics and the log line of each, and its probe store where the rule names one
    (``probe_{name}``)."""
    from pathlib import Path

    import pandas as pd
    import torch

    from bertology.decoders import probe
    from bertology.decoders.heads import SINK_EPSILON
    from bertology.attention.extract import write_probe_store
    from bertology.models.encoding import gives_token_type_ids
    from bertology.models.kinds import attention_geometry

    cfg = ctx.config
    task = ctx.wildcards["task"]
    torch.set_num_threads(ctx.threads)
    frame = pd.read_parquet(ctx.input.sample)
    texts = list(_text_batches(tokenizer, frame, cfg.data.max_length, probe.SINK_TOKENS, probe.SINK_BATCH))
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    sink, induction = {}, {}
    for variant, load in models.items():
        model = load()
        s = probe.sink_units(model, texts)
        tokens, maps = probe.induction_probe(model, seed=int(cfg.data.seed), bos_id=bos,
                                             token_types=gives_token_type_ids(tokenizer))
        store = ctx.output.get(f"probe_{variant.replace('-', '_')}")
        if store is not None:
            write_probe_store(store, tokens=tokens, maps=maps, model=str(cfg.model), model_path=str(model_paths[variant]),
                              variant=Path(store).stem, task=task, seed=int(cfg.data.seed), tokenizer=tokenizer,
                              geometry=attention_geometry(model.config))
        i = probe.induction_units(tokens, maps, probe.INDUCTION_SEQ_LEN)
        sink[variant], induction[variant] = s, i
        rate = float((s["alpha_0"] > SINK_EPSILON).mean())
        best = i.groupby(["layer", "head"])["induction"].mean()
        layer, head = (int(x) for x in best.idxmax())
        ctx.log.info("%s %s: sink rate %.1f%% of example x head (alpha_0 > 0.3); best induction head: layer %d "
                     "head %d (0-based), score %.3f", task, variant, 100 * rate, layer, head, float(best.max()))
        if ctx.tracker is not None:
            ctx.tracker.metrics({f"decoder.{variant}.sink_rate": rate,
                                 f"decoder.{variant}.induction_max": float(best.max())})
        del model, maps
    return probe.probe_tables(sink, induction)


def _write(ctx: StepContext, sink_df, induction_df, variant: str) -> None:
    from bertology.decoders import probe

    write_csv(sink_df, ctx.output.sink)
    write_csv(induction_df, ctx.output.induction)
    write_csv(probe.head_summary(sink_df[sink_df["variant"] == variant],
                                 induction_df[induction_df["variant"] == variant]), ctx.output.heads)


def decoder_probe(ctx: StepContext) -> None:
    """--input sample=data/{task}/sample.parquet; --output sink=stats/{task}/decoder_sink.csv,
    induction=stats/{task}/decoder_induction.csv, heads=stats/{task}/pretrained/decoder_heads.csv,
    probe_pretrained=, probe_random_init= (attention/{task}/probe-*.zarr): the pretrained model and its random
    initialisation."""
    from bertology.models.loading import load_classifier, load_encoder, load_tokenizer, resolve_model
    from bertology.pipeline.tasks import get_task

    cfg = ctx.config
    base = resolve_model(cfg.model)
    spec = get_task(ctx.wildcards["task"])
    models = {"pretrained": lambda: load_encoder(base),
              "random-init": lambda: load_classifier(base, max(spec.num_labels, 1), init="random",
                                                     seed=int(cfg.train.seed)).eval()}
    sink_df, induction_df = _probe(ctx, models, load_tokenizer(base), {"pretrained": base, "random-init": base})
    _write(ctx, sink_df, induction_df, "pretrained")


def decoder_probe_finetuned(ctx: StepContext) -> None:
    """--input sample=data/{task}/sample.parquet finetuned=models/{task}/pretrained{seedtag}
    [random_finetuned=models/{task}/random{seedtag}]; --output sink=, induction=, heads= under
    stats/{task}/finetuned{seedtag}/, probe_finetuned= [probe_random_finetuned=] (attention/{task}/probe-*.zarr): the model fine-tuned with one seed (rows ``finetuned``) and the one fine-tuned
    from the random initialisation with the same seed (rows ``random-finetuned``)."""
    from bertology.models.loading import load_encoder, load_tokenizer, resolve_model

    models = {"finetuned": lambda: load_encoder(str(ctx.input.finetuned))}
    paths = {"finetuned": str(ctx.input.finetuned)}
    if "random_finetuned" in ctx.input:
        models["random-finetuned"] = lambda: load_encoder(str(ctx.input.random_finetuned))
        paths["random-finetuned"] = str(ctx.input.random_finetuned)
    sink_df, induction_df = _probe(ctx, models, load_tokenizer(resolve_model(ctx.config.model)), paths)
    _write(ctx, sink_df, induction_df, "finetuned")


def decoder_figure(ctx: StepContext) -> None:
    """--input sink=, induction= (the pretrained model's and its random initialisation's),
    finetuned_sink=, finetuned_induction= (the first fine-tuning seed's, where the run fine-tunes); --output
    figure=figures/decoder-{task}.png: one column per model of the probe."""
    import pandas as pd

    from bertology.decoders.probe_figures import probe_figure

    def both(name: str) -> pd.DataFrame:  # the pretrained model's table, then the fine-tuned one's where there is one
        fine = ctx.input.all(f"finetuned_{name}") if f"finetuned_{name}" in ctx.input else []
        return pd.concat([pd.read_csv(p) for p in (*ctx.input.all(name), *fine)], ignore_index=True)

    sink, induction = both("sink"), both("induction")
    probe_figure(sink, induction, ctx.output.figure, task=ctx.wildcards["task"])
