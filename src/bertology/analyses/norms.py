"""Beyond attention weights: value norms (Kobayashi et al. 2020), context mixing (Kobayashi et al. 2021), rollout,
flow and their faithfulness (Abnar & Zuidema 2020), declared once. Written by ``rules/norms.smk``
(:mod:`bertology.steps.norms`) when analysis.norms.enabled and the model is supported."""

from __future__ import annotations

from bertology.layout import rel
from bertology.registry import AcrossSeeds, Analysis, Section, Statistic, Table, variant_table

TOKEN_SCORES = ("example_idx", "position", "word", "method", "score")


def _finetuned(file: str) -> str:
    """A table of the fine-tuned model only (one per fine-tuning seed): stats/{task}/finetuned{seedtag}/{file}."""
    return rel("variant_stat", variant="finetuned{seedtag}", file=file)


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="norms", config=("analysis.norms",),
        tables=(Table(variant_table("norms.csv"), ("layer", "head", "category", "measure", "mean", "std", "n"),
                      when="norms", seeds=AcrossSeeds("norms", ("layer", "head", "category", "measure"))),),
        section=Section(
            key="norms", title="Beyond attention weights: value norms (Kobayashi et al. 2020)",
            measures="A head passes on alpha_ij f(x_j), not alpha_ij: per layer, the share of the attention each "
            "token category ([CLS], [SEP], punctuation, other) receives by weight (solid) and by norm-weighted "
            "attention alpha ||f(x)|| (dashed), pooled over the layer's heads, for the pretrained and fine-tuned "
            "model (analysis.norms.examples examples). norms.csv adds per-head shares, the mean ||f(x)|| per "
            "category and Spearman correlations of alpha with ||f(x)|| and of ||f(x)|| with token frequency.",
            finding="In BERT-base the heavy attention to [CLS], [SEP] and punctuation carries vectors of small norm: "
            "by norm-weighted attention their share shrinks sharply (attention to [SEP] is largely a no-op), "
            "alpha and ||f(x)|| are negatively correlated for them, and frequent tokens have smaller ||f(x)||. "
            "This run finds what the dashed lines show against the solid ones: the gap is this model's no-op "
            "attention.",
            figure_prefixes=("norms",)),
        statistics=(
            Statistic(id="norms", group="Value norms (Kobayashi et al.)", label="{k}",
                      desc="norms.csv, {k}: weight_share / norm_share = share of the attention weight / of alpha "
                      "||f(x)|| the category's keys receive (mean over examples); value_norm = mean ||f(x)||; spearman_* = "
                      "Spearman's rho (docs/reference.md#norms).", table=variant_table("norms.csv"),
                      key=("measure", "category"), notna="head", optional=True),
        )),
    Analysis(
        name="mixing", config=("analysis.norms",),
        tables=(Table(variant_table("mixing.csv"), ("layer", "measure", "mean", "std", "n"), when="norms"),),
        section=Section(
            key="mixing", title="Context mixing with the residual and LayerNorm (Kobayashi et al. 2021)",
            measures="Per layer, the share of a token's new representation that comes from the other tokens "
            "(context-mixing ratio, mean ± std over tokens) under attention alone (by weights and by norms), "
            "attention + residual, and attention + residual + LayerNorm (the paper's decomposition of LayerNorm into "
            "per-token terms). Pre-LN models (ModernBERT) have no LayerNorm after the residual and no such line.",
            finding="In BERT and RoBERTa the residual connection and LayerNorm shrink the mixing far below what "
            "attention alone suggests: most of a token's representation after the attention block is the token "
            "itself. The tables give this run's ratios.",
            figure_prefixes=("mixing",), tables=(variant_table("mixing.csv"),))),
    Analysis(
        name="token_scores", config=("analysis.norms", "analysis.flow"),
        tables=(Table(variant_table("token_scores.parquet"), TOKEN_SCORES, when="norms"),)),
    Analysis(
        name="faithfulness", config=("analysis.flow",),
        tables=(Table(_finetuned("faithfulness.csv"), ("view", "importance", "mean", "std", "n", "ci_low", "ci_high"),
                      when="norms"),
                Table(_finetuned("faithfulness_examples.csv"), ("example_idx", "view", "importance", "rho"),
                      when="norms"),
                Table(_finetuned("importance.parquet"), TOKEN_SCORES, when="norms")),
        section=Section(
            key="faithfulness", title="Rollout, flow and how faithful each view is (Abnar & Zuidema 2020)",
            measures="Token views from the last layer's [CLS]: raw attention (heads averaged), norm-weighted "
            "attention, rollout (attention mixed half and half with the identity, multiplied through the layers) and "
            "flow (max flow from each input token to the top [CLS]). Each is compared, per example of the fine-tuned "
            "model, with two importance scores (drop in the predicted class's probability when the token is masked; "
            "input x gradient) by Spearman's rho: mean over examples with a bootstrap interval "
            "(analysis.flow.examples examples). token_scores.parquet holds every score.",
            finding="Raw attention of the top layer correlates weakly with both importances; rollout and flow "
            "correlate clearly better (the paper's Table 2). The table below is this run's: whether rollout and flow "
            "beat raw attention here, and by how much given the interval.",
            figure_prefixes=("faithfulness",),
            tables=(rel("variant_stat", variant="finetuned", file="faithfulness.csv"),))),
)
