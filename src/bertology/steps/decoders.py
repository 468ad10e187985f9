"""Step of rules/decoders.smk: the decoder probe of one task (a decoder model only).

For each model of the task: the config's pretrained model, its random initialisation (the model's own
initialiser, seeded with train.seed, untrained), the fine-tuned model and, where train.inits has it, the model
fine-tuned from the random initialisation:

- Gu et al.'s alpha_0 per head on the task's attention sample (its first 64 tokens per example,
  :func:`bertology.decoders.probe.sink_units`) -> stats/{task}/decoder_sink.csv;
- TransformerLens' induction, previous-token and duplicate-token scores per head on the seeded induction probe
  (a BOS token and 50 random tokens repeated twice, 10 sequences; :func:`bertology.decoders.probe.induction_units`)
  -> stats/{task}/decoder_induction.csv;
- per head of the pretrained and the fine-tuned model, the means (:func:`bertology.decoders.probe.head_summary`)
  -> stats/{task}/{variant}/decoder_heads.csv, read by the explorer's head grid;
- the figure figures/decoder-{task}.png.
"""

from __future__ import annotations

from bertology.io import write_csv
from bertology.steps.context import StepContext

def _text_batches(tokenizer, frame, max_length: int, tokens: int, batch_size: int):
    from bertology.encoding import encode

    enc = encode(tokenizer, frame, min(max_length, tokens), padding="longest")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    for start in range(0, len(ids), batch_size):
        yield ids[start:start + batch_size], mask[start:start + batch_size]


def decoder_probe(ctx: StepContext) -> None:
    """--input sample=attention/{task}/sample.parquet finetuned=models/{task}/pretrained
    [random_finetuned=models/{task}/random]; --output sink=..., induction=..., pretrained=..., finetuned=...,
    figure=figures/decoder-{task}.png."""
    import pandas as pd
    import torch

    from bertology.decoders import probe
    from bertology.decoders.heads import SINK_EPSILON
    from bertology.models import load_classifier, load_encoder, load_tokenizer, resolve_model
    from bertology.tasks import get_task

    cfg = ctx.config
    task = ctx.wildcards["task"]
    torch.set_num_threads(ctx.threads)
    base = resolve_model(cfg.model)
    tokenizer = load_tokenizer(base)
    frame = pd.read_parquet(ctx.input.sample)
    spec = get_task(task)
    models = {"pretrained": lambda: load_encoder(base),
              "random-init": lambda: load_classifier(base, max(spec.num_labels, 1), init="random",
                                                     seed=int(cfg.train.seed)).eval(),
              "finetuned": lambda: load_encoder(str(ctx.input.finetuned))}
    if "random_finetuned" in ctx.input:
        models["random-finetuned"] = lambda: load_encoder(str(ctx.input.random_finetuned))
    texts = list(_text_batches(tokenizer, frame, cfg.data.max_length, probe.SINK_TOKENS, probe.SINK_BATCH))
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    sink, induction = {}, {}
    for variant, load in models.items():
        model = load()
        s = probe.sink_units(model, texts)
        tokens, maps = probe.induction_probe(model, seed=int(cfg.data.seed), bos_id=bos)
        i = probe.induction_units(tokens, maps, probe.INDUCTION_SEQ_LEN)
        sink[variant], induction[variant] = s, i
        rate = float((s["alpha_0"] > SINK_EPSILON).mean())
        best = i.groupby(["layer", "head"])["induction"].mean()
        ctx.log.info("%s %s: sink rate %.1f%% of example x head (alpha_0 > 0.3); best induction head %s score %.3f",
                     task, variant, 100 * rate, best.idxmax(), float(best.max()))
        if ctx.tracker is not None:
            ctx.tracker.metrics({f"decoder.{variant}.sink_rate": rate,
                                 f"decoder.{variant}.induction_max": float(best.max())})
        del model, maps
    sink_df, induction_df = probe.probe_tables(sink, induction)
    write_csv(sink_df, ctx.output.sink)
    write_csv(induction_df, ctx.output.induction)
    for variant in ("pretrained", "finetuned"):
        write_csv(probe.head_summary(sink_df[sink_df["variant"] == variant],
                                     induction_df[induction_df["variant"] == variant]), ctx.output.get(variant))
    from bertology.decoders.figures import probe_figure

    probe_figure(sink_df, induction_df, ctx.output.figure, task=task)
