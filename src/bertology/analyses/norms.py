"""Beyond attention weights: value norms (Kobayashi et al. 2020), context mixing (Kobayashi et al. 2021), rollout,
flow and their faithfulness (Abnar & Zuidema 2020), declared once. Written by ``rules/norms.smk``
(:mod:`bertology.steps.norms`) when analysis.norms.enabled and the model is supported."""

from __future__ import annotations

from bertology.claims import beyond as claims_beyond
from bertology.pipeline.layout import rel
from bertology.norms.concentration import COLUMNS as CONCENTRATION_COLUMNS
from bertology.norms.concentration import token_concentration
from bertology.pipeline.config import EXPECT_SECTIONS
from bertology.registry import AcrossSeeds, Analysis, Claim, Section, Statistic, Step, Table, Want, figure, variant_table

TOKEN_SCORES = ("example_idx", "position", "word", "method", "score")
#: the tables' files: per store variant, and of the fine-tuned model only
NORMS, MIXING = variant_table("norms.csv"), variant_table("mixing.csv")
SCORES_FILE, IMPORTANCE_FILE = "token_scores.parquet", "importance.parquet"
SCORES, LAYERS = variant_table(SCORES_FILE), variant_table("mixing_layers.parquet")
#: ALTI-Logit's parts of each example's logit per layer, part and head (norms_views; bertology.norms.alti_logit)
DECISION = variant_table("decision.parquet")
DECISION_COLUMNS = ("example", "layer", "part", "head", "logit", "contrast", "predicted", "runner_up")
FAITHFULNESS, FAITHFULNESS_EXAMPLES = "faithfulness.csv", "faithfulness_examples.csv"
FAITHFULNESS_PAIRS = "faithfulness_pairs.csv"
CONCENTRATION = variant_table("concentration.csv")
#: what the run wants of a per-variant table: every store of the first seed; with seeds, the further seeds' models
STORES = Want((("task", "tasks"), ("variant", "stores")))
EXTRA_SEEDS = Want((("task", "tasks"), ("variant", "extra_finetuned")), when="seeds")
FIRST = Want((("task", "tasks"), ("seedtag", "first_seed")))


def _finetuned(file: str) -> str:
    """A table of the fine-tuned model only (one per fine-tuning seed): stats/{task}/finetuned{seedtag}/{file}."""
    return rel("variant_stat", variant="finetuned{seedtag}", file=file)

def _beats_raw_claim(view: str) -> Claim:
    """Abnar & Zuidema: the token view (rollout, flow) agrees with the ablation importance better than raw
    attention (faithfulness.csv of the fine-tuned model)."""
    return Claim(f"abnar_{view}_raw", "Abnar & Zuidema 2020", "4",
                 f"{view.capitalize()} agrees with the ablation importance better than raw attention.",
                 f"faithfulness.csv: mean, view {view} - view raw, importance ablation",
                 claims_beyond.view_beats_raw,
                 (("faithfulness", variant_table(FAITHFULNESS), "analysis.norms.enabled"),
                  ("faithfulness_examples", variant_table(FAITHFULNESS_EXAMPLES), "analysis.norms.enabled")),
                 unit="examples", params=(("view", view),), config="analysis.norms.enabled", anchor="faithfulness",
                 figure="faithfulness", paper_value="Table 2: higher Spearman than raw for both importances",
                 sentence="We show that these methods give complementary views on the flow of information, and "
                          "compared to raw attention, both yield higher correlations with importance scores of input "
                          "tokens obtained using an ablation method and input gradients.")


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="norms",
        claims=(
            Claim("kobayashi_specials_norm", "Kobayashi et al. 2020", "4",
                  "[CLS] and [SEP] take a larger share of the attention weight than of the norm-weighted attention.",
                  "norms.csv (finetuned): weight_share - norm_share, categories cls + sep, per head",
                  claims_beyond.specials_norm, (("norms", NORMS, "analysis.norms.enabled"),),
                  config="analysis.norms.enabled", anchor="norms", figure="norms",
                  sentence="The findings of our norm-based analyses of BERT and a Transformer-based neural machine "
                           "translation system include the following: (i) contrary to previous studies, BERT pays poor "
                           "attention to special tokens."),
        ),
        steps=(Step("norms_views", "norms", ("data.short_split", "analysis.norms.examples", "analysis.norms.batch_size",
                                             "analysis.flow.examples", "analysis.mixing_views", *EXPECT_SECTIONS),
                    "value norms, mixing, token views and the newer mixing views of one variant -> norms.csv, "
                    "mixing.csv, token_scores.parquet, mixing_layers.parquet, decision.parquet", threads=2, mem_mb=4000, runtime=60),
               Step("norms_figures", "norms", (),
                    "weight vs norm-weighted shares, mixing ratios and faithfulness of one task")),
        tables=(Table(NORMS, ("layer", "head", "category", "measure", "mean", "std", "n"),
                      when="norms", seeds=AcrossSeeds("norms", ("layer", "head", "category", "measure")),
                      rule="norms_views", output="norms", wanted=(STORES, EXTRA_SEEDS)),),
        outputs=(figure("norms_figures", "norms", "norms", when="norms"),
                 figure("norms_figures", "mixing", "mixing", when="norms"),
                 # the fine-tuned model's faithfulness: not drawn without fine-tuning
                 figure("norms_figures", "faithfulness", "faithfulness", when="norms", wanted_when="finetuned",
                        only="finetuned")),
        section=Section(
            key="norms", paper="Kobayashi et al. 2020", title="Beyond attention weights: value norms (Kobayashi et al. 2020)",
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
                      "Spearman's rho (docs/reference.md#norms).", table=NORMS,
                      key=("measure", "category"), notna="head", optional=True),
        )),
    Analysis(
        name="mixing",
        claims=(
            Claim("kobayashi_mixing_residual", "Kobayashi et al. 2021", "5",
                  "With the residual, each token keeps most of itself (context-mixing ratio below one half).",
                  "mixing.csv (pretrained): mean, measure attnres_n, per layer", claims_beyond.mixing_residual,
                  (("mixing", MIXING, "analysis.norms.enabled"),), side="<", null=0.5, unit="layers",
                  variant="pretrained", config="analysis.norms.enabled", anchor="mixing", figure="mixing",
                  sentence="Our analysis of Transformer-based masked language models shows that the token-to-token "
                           "interaction performed via attention has less impact on the intermediate representations than "
                           "previously assumed."),
        ),
        tables=(Table(MIXING, ("layer", "measure", "mean", "std", "n"), when="norms", rule="norms_views",
                      output="mixing", wanted=(STORES, EXTRA_SEEDS)),),
        section=Section(
            key="mixing", paper="Kobayashi et al. 2021", title="Context mixing with the residual and LayerNorm (Kobayashi et al. 2021)",
            measures="Per layer, the share of a token's new representation that comes from the other tokens "
            "(context-mixing ratio, mean ± std over tokens) under attention alone (by weights and by norms), "
            "attention + residual, and attention + residual + LayerNorm (the paper's decomposition of LayerNorm into "
            "per-token terms). Pre-LN models (ModernBERT) have no LayerNorm after the residual and no such line.",
            finding="In BERT and RoBERTa the residual connection and LayerNorm shrink the mixing far below what "
            "attention alone suggests: most of a token's representation after the attention block is the token "
            "itself. The tables give this run's ratios.",
            figure_prefixes=("mixing",), tables=(MIXING,))),
    Analysis(
        name="token_scores",
        tables=(Table(SCORES, TOKEN_SCORES, when="norms", rule="norms_views", output="scores",
                      wanted=(STORES, EXTRA_SEEDS)),
                Table(LAYERS, ("example_idx", "layer", "position", "method", "score"), when="norms",
                      rule="norms_views", output="layers", wanted=(STORES,)),
                Table(DECISION, DECISION_COLUMNS, when="norms", rule="norms_views", output="decision",
                      wanted=(STORES, EXTRA_SEEDS)))),
    Analysis(
        name="faithfulness",
        claims=(
            *(_beats_raw_claim(view) for view in ("rollout", "flow")),
            Claim("newer_beat_rollout", "Ferrando et al. 2022; Modarressi et al. 2022, 2023; Mohebbi et al. 2023",
                  "results",
                  "The newer decompositions (ALTI, GlobEnc, DecompX, Value Zeroing) agree with the ablation importance "
                  "better than rollout.",
                  "faithfulness_examples.csv: per example, mean rho of alti, globenc, decompx, value_zeroing - rho of "
                  "rollout, importance ablation",
                  claims_beyond.newer_beat_rollout,
                  (("faithfulness_examples", variant_table(FAITHFULNESS_EXAMPLES), "analysis.norms.enabled"),),
                  unit="examples", config="analysis.mixing_views.examples", anchor="faithfulness",
                  figure="faithfulness",
                  paper_value="each paper: its own view above rollout on its own benchmark",
                  sentence="Each of the four papers reports its view as more faithful than attention rollout "
                           "(ALTI, GlobEnc, DecompX and Value Zeroing against rollout on their own benchmarks; "
                           "our summary, not one paper's sentence)."),
        ),
        steps=(Step("norms_faithfulness", "norms",
                    ("data.max_length", "data.seed", "analysis.norms.copy_tokens", "analysis.flow"),
                    "token importance of the fine-tuned model and faithfulness of each view -> faithfulness.csv, "
                    "faithfulness_examples.csv, importance.parquet", threads=2, mem_mb=4000, runtime=60),),
        tables=(Table(_finetuned(FAITHFULNESS), ("view", "importance", "mean", "std", "n", "ci_low", "ci_high"),
                      when="norms", rule="norms_faithfulness", output="table",
                      wanted=(FIRST, Want((("task", "tasks"), ("seedtag", "extra_seedtags")), when="seeds"))),
                Table(_finetuned(FAITHFULNESS_EXAMPLES), ("example_idx", "view", "importance", "rho"),
                      when="norms", rule="norms_faithfulness", output="examples"),
                Table(_finetuned(FAITHFULNESS_PAIRS), ("importance", "view_a", "view_b", "difference", "ci_low",
                                                             "ci_high", "n", "separated"), when="norms",
                      rule="norms_faithfulness", output="pairs", wanted=(FIRST,)),
                Table(_finetuned(IMPORTANCE_FILE), TOKEN_SCORES, when="norms", rule="norms_faithfulness",
                      output="importance")),
        section=Section(
            key="faithfulness", paper="Abnar & Zuidema 2020 and the newer token views",
            title="Which token view can be trusted: rollout, flow, ALTI, GlobEnc, DecompX, Value Zeroing",
            measures="Token views from the last layer's [CLS]: raw attention (heads averaged), norm-weighted "
            "attention, rollout (attention mixed half and half with the identity, multiplied through the layers), "
            "flow (max flow from each input token to the top [CLS]), and the newer decompositions of the whole layer "
            "on analysis.mixing_views.examples examples: ALTI (Ferrando et al. 2022), GlobEnc (Modarressi et al. "
            "2022), DecompX (Modarressi et al. 2023, through the FFN and the classifier head, the predicted class's "
            "signed part) and Value Zeroing (Mohebbi et al. 2023). Each is compared, per example of the fine-tuned "
            "model, with two importance scores (drop in the predicted class's probability when the token is masked; "
            "input x gradient) by Spearman's rho, and by AOPC (the mean drop of that probability when the view's top "
            "10%, ..., 50% of the tokens are masked; 'random': a seeded random order): mean over examples with a "
            "bootstrap interval (analysis.flow.examples examples). The figure ranks the views with their intervals; "
            "faithfulness_pairs.csv gives every pair's paired difference and whether its interval excludes 0 "
            "(separated). token_scores.parquet holds every score.",
            finding="Raw attention of the top layer correlates weakly with both importances, rollout and flow clearly "
            "better (Abnar & Zuidema, Table 2). Ferrando et al. (ALTI), Modarressi et al. (GlobEnc, DecompX) "
            "and Mohebbi et al. (Value Zeroing) each find their view more faithful than rollout on their own "
            "benchmark. The tables below are this run's: which differences the intervals separate (separated = "
            "true) and which they leave open.",
            figure_prefixes=("faithfulness",),
            tables=(rel("variant_stat", variant="finetuned", file=FAITHFULNESS),
                    rel("variant_stat", variant="finetuned", file=FAITHFULNESS_PAIRS)))),
    Analysis(
        name="concentration",
        steps=(Step("token_concentration", "functions", (),
                    "how concentrated each token view's scores are: top-token share and normalised entropy",
                    function=token_concentration, inputs=(("scores", SCORES),)),),
        tables=(Table(CONCENTRATION, CONCENTRATION_COLUMNS, when="norms",
                      rule="token_concentration", output="table", wanted=(STORES,)),),
        section=Section(
            key="concentration", paper="Abnar & Zuidema 2020 and the newer token views",
            title="How concentrated each token view is",
            measures="Per token view, over the examples of token_scores.parquet: the share of the score mass "
            "(absolute values) on the top token, and the entropy of the scores divided by ln n (1: uniform, 0: one "
            "token).",
            finding="A description of the views, not a paper's claim: a view whose scores sit on one token (high "
            "top share, low entropy) ranks the other tokens on small differences, which bears on how far its "
            "faithfulness (a Spearman correlation over the tokens) can be trusted.",
            tables=(CONCENTRATION,))),
)
