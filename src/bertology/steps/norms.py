"""Steps of rules/norms.smk: value norms, mixing, token views and their faithfulness (docs/reference.md#norms).

- ``norms_views``: one task and variant; one pass of the model over the seeded sample of the attention sample
  (``analysis.norms.examples`` rows) -> norms.csv, mixing.csv, token_scores.parquet (flow on the first
  ``analysis.flow.examples`` of them, ALTI, GlobEnc, DecompX and Value Zeroing on the first
  ``analysis.mixing_views.examples``, their per-layer [CLS] rows in mixing_layers.parquet);
- ``norms_faithfulness``: the fine-tuned classifier's token importance on the flow examples -> importance.parquet,
  faithfulness.csv and the per-example Spearman rhos (and AOPCs) behind it (faithfulness_examples.csv, which the
  explorer shows), and every pair of views' paired difference (faithfulness_pairs.csv: which the intervals separate);
- ``norms_figures``: norms-{task}.png, mixing-{task}.png, faithfulness-{task}.png.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertology.steps.context import StepContext
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_csv, write_parquet
from bertology.pipeline.layout import variant_model
from bertology.steps.tables import by_variant, read_table


def _sample(ctx: StepContext) -> pd.DataFrame:
    from bertology.data import read_prepared, sample_rows

    cfg = ctx.config
    frame = read_prepared(ctx.input.sample)
    n = cfg.analysis.norms.examples
    if n is not None and n > len(frame):  # a sub-sample of the attention sample: never more than it holds
        ctx.log.warning("analysis.norms.examples = %d but the attention sample of %s has %d examples: all of them are "
                        "used", n, ctx.task, len(frame))
        n = None
    return sample_rows(frame, n, cfg.data.seed, what=f"{ctx.task}/attention sample", key="analysis.norms.examples",
                       short_split=cfg.data.short_split)


def _model_path(ctx: StepContext) -> str:
    from bertology.models.loading import resolve_model

    variant = ctx.wildcards.get("variant")
    wanted = variant_model(ctx.task, variant)  # None for pretrained; one model per fine-tuning seed (bertology.pipeline.layout)
    if wanted is None:
        return resolve_model(ctx.config.model)
    if ctx.input.get("model") is None:
        raise UserError(f"variant {variant} needs --input model={wanted}")
    return str(ctx.input.model)


def _stored_norms(ctx: StepContext, frame: pd.DataFrame) -> dict[int, np.ndarray] | None:
    """The value norms (L, H, n) of `frame`'s examples from input `store` (its `value_norm`, written by the
    extraction), or None when no store is given or it holds none (then the forward pass computes them)."""
    from bertology import store as st

    if ctx.input.get("store") is None:
        return None
    ds = st.open_store(ctx.input.store, expect=st.expected_attrs(ctx.config, ctx.task, ctx.wildcards.get("variant")))
    if "value_norm" not in ds.variables:
        ctx.log.info("%s holds no value norms: the forward pass computes them", ctx.input.store)
        return None
    where = pd.Index(ds["example_idx"].values)
    pos = where.get_indexer(frame["idx"].to_numpy(np.int64))
    if (pos < 0).any():
        raise UserError(f"{ctx.input.store} lacks examples {frame['idx'].to_numpy()[pos < 0][:5].tolist()} of the "
                        f"norms sample: it is not this task's attention store")
    order = np.sort(pos)
    norms = ds["value_norm"].isel(example=order).values                       # (e, L, H, Q), e small
    length = ds["length"].isel(example=order).values
    idx = ds["example_idx"].values[order]
    return {int(i): norms[k, :, :, :int(length[k])] for k, i in enumerate(idx)}


def norms_views(ctx: StepContext) -> None:
    """norms.csv, mixing.csv and token_scores.parquet of one task and variant."""
    import torch

    from bertology.data import read_prepared
    from bertology.models.loading import load_encoder, load_tokenizer
    from bertology.norms.analysis import run_views
    from bertology.norms.tokens import token_frequencies

    torch.set_num_threads(ctx.threads)
    cfg = ctx.config
    frame = _sample(ctx)
    path = _model_path(ctx)
    tokenizer = load_tokenizer(path)
    device = ctx.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # a fine-tuned variant is read as its classifier: DecompX runs through the head (the encoder is the same)
    classifier = variant_model(ctx.task, ctx.wildcards.get("variant")) is not None
    model = load_encoder(path, device=device, classifier=classifier)
    freq = token_frequencies(tokenizer, read_prepared(ctx.input.train), cfg.data.max_length)
    stored = _stored_norms(ctx, frame)
    res = run_views(model, tokenizer, frame, max_length=cfg.data.max_length, batch_size=cfg.analysis.norms.batch_size,
                    flow_examples=cfg.analysis.flow.examples, frequencies=freq, device=device, stored_norms=stored,
                    mixing_examples=cfg.analysis.mixing_views.examples,
                    mixing_options=cfg.analysis.mixing_views)
    write_csv(res.norms, ctx.output.norms)
    write_csv(res.mixing, ctx.output.mixing)
    write_parquet(res.scores, ctx.output.scores)
    write_parquet(res.layers, ctx.output.layers)
    write_parquet(res.decision, ctx.output.decision)
    if res.mixing_note:
        ctx.log.warning("%s/%s: %s", ctx.task, ctx.wildcards.get("variant"), res.mixing_note)
    _views_metrics(ctx, res)
    ctx.log.info("%s/%s: %d examples (flow on %d, newer mixing views on %d); seconds %s", ctx.task,
                 ctx.wildcards.get("variant"), res.examples, res.flow_examples, res.mixing_examples,
                 {k: round(v, 3) for k, v in res.seconds.items()})


def _views_metrics(ctx: StepContext, res) -> None:
    t = res.norms[res.norms["head"].isna()]
    for measure in ("weight_share", "norm_share"):
        for cat in ("cls", "sep", "punctuation"):
            s = t[(t["measure"] == measure) & (t["category"] == cat)]
            for _, row in s.iterrows():
                if np.isfinite(row["mean"]):
                    ctx.tracker.metric(f"norms.{measure}.{cat}", float(row["mean"]), step=int(row["layer"]))
    for _, row in res.mixing.iterrows():
        ctx.tracker.metric(f"mixing.{row['measure']}", float(row["mean"]), step=int(row["layer"]))
    metrics = {"examples": res.examples, "flow_examples": res.flow_examples}
    metrics.update({f"seconds.{k}": v for k, v in res.seconds.items()})
    if res.flow_examples:
        metrics["seconds_per_example.flow"] = res.seconds["flow"] / res.flow_examples
    metrics["mixing_examples"] = res.mixing_examples
    if res.mixing_examples and "decompx" in res.mixing_views:
        metrics["decompx_max_relative_error"] = res.decompx_error
        if res.decompx_error > 1e-3:
            ctx.log.warning("%s/%s: DecompX's parts miss the real hidden states by up to %.2g of their size: this "
                            "layer layout is not the one DecompX follows (docs/reference.md#newer-mixing-views)",
                            ctx.task, ctx.wildcards.get("variant"), res.decompx_error)
    if res.mixing_examples and "alti_logit" in res.mixing_views:
        metrics["alti_logit_max_relative_error"] = res.logit_error
        if res.logit_error > 1e-3:
            ctx.log.warning("%s/%s: ALTI-Logit's parts miss the logits by up to %.2g of their size: this layer layout "
                            "is not the one ALTI-Logit follows (docs/reference.md#newer-mixing-views)", ctx.task,
                            ctx.wildcards.get("variant"), res.logit_error)
    if res.mixing_examples and res.alti_error > 1e-3:
        ctx.log.warning("%s/%s: pre-norm ALTI's x + attention + b_O misses the real residual sum by up to %.2g of its "
                        "size (docs/reference.md#newer-mixing-views)", ctx.task, ctx.wildcards.get("variant"),
                        res.alti_error)
    if res.mixing_examples:
        metrics.update({f"seconds_per_example.{v}": res.seconds[v] / res.mixing_examples for v in res.mixing_views})
    ctx.tracker.metrics(metrics)


def norms_faithfulness(ctx: StepContext) -> None:
    """faithfulness.csv, faithfulness_examples.csv, faithfulness_pairs.csv and importance.parquet of the fine-tuned
    classifier on the flow examples."""
    import torch

    from bertology.models.loading import load_encoder, load_tokenizer

    from bertology.norms.analysis import run_faithfulness

    torch.set_num_threads(ctx.threads)
    cfg = ctx.config
    path = str(ctx.input.model)
    tokenizer = load_tokenizer(path)
    device = ctx.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_encoder(path, classifier=True, device=device)
    from bertology.data import read_prepared

    frame = read_prepared(ctx.input.sample)
    scores = pd.read_parquet(ctx.input.scores)
    flow = cfg.analysis.flow
    res = run_faithfulness(model, tokenizer, frame, scores, max_length=cfg.data.max_length,
                           batch_size=cfg.analysis.norms.batch_size, confidence=flow.confidence,
                           resamples=flow.bootstrap, seed=cfg.data.seed, device=device,
                           copy_tokens=cfg.analysis.norms.copy_tokens)
    from bertology.norms.ranking import paired_differences

    write_csv(res.table, ctx.output.table)
    write_csv(res.rhos, ctx.output.examples)
    pairs = paired_differences(res.rhos, confidence=flow.confidence, resamples=flow.bootstrap, seed=cfg.data.seed)
    # the report shows the first rows: per importance, the pairs the intervals separate first
    order = pairs.assign(_imp=pd.Categorical(pairs["importance"], list(dict.fromkeys(pairs["importance"]))))
    pairs = pairs.loc[order.sort_values(["_imp", "separated"], ascending=[True, False], kind="stable").index]
    write_csv(pairs.reset_index(drop=True), ctx.output.pairs)
    sep = pairs[pairs["separated"]]
    ctx.log.info("%s: pairs of views the intervals separate: %s", ctx.task,
                 "; ".join(f"{r.importance}: {r.view_a} {'>' if r.difference > 0 else '<'} {r.view_b}"
                           for r in sep.itertuples()) or "none")
    write_parquet(res.importance, ctx.output.importance)
    metrics = {f"faithfulness.{r.view}.{r.importance}": float(r.mean) for r in res.table.itertuples()
               if np.isfinite(r.mean)}
    metrics.update({"examples": res.examples, **{f"seconds.{k}": v for k, v in res.seconds.items()}})
    if res.examples:
        metrics.update({f"seconds_per_example.{k}": v / res.examples for k, v in res.seconds.items()})
    ctx.tracker.metrics(metrics)
    ctx.log.info("%s: faithfulness on %d examples\n%s", ctx.task, res.examples, res.table.to_string(index=False))


def norms_figures(ctx: StepContext) -> None:
    """norms-{task}.png, mixing-{task}.png (both variants; the pretrained one alone in a run that fine-tunes nothing)
    and, where the run fine-tunes, faithfulness-{task}.png."""
    from bertology.norms import norms_figures as nf

    norms = {v: read_table(p) for v, p in by_variant(ctx, "norms").items()}
    mixing = {v: read_table(p) for v, p in by_variant(ctx, "mixing").items()}
    nf.plot_shares(norms, ctx.output.norms)
    nf.plot_mixing(mixing, ctx.output.mixing)
    if "faithfulness" in ctx.output:
        nf.plot_faithfulness(read_table(ctx.input.faithfulness), ctx.output.faithfulness)
