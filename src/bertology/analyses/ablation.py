"""Disabling heads and layers (Kovaleva et al. 2019, section 4.6), head importance and pruning (Michel et al.
2019), declared once. The tables come from the rules of ``rules/ablation.smk`` (:mod:`bertology.steps.ablation`)."""

from __future__ import annotations

from bertology.layout import rel
from bertology.registry import AcrossSeeds, Analysis, Section, Statistic, Table

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="disabling", config=("ablation",),
        tables=(Table(rel("ablation", name="heads"), ("layer", "head", "metric", "value", "baseline", "delta",
                                                      "ci_low", "ci_high", "p_value", "p_adj", "significant", "test",
                                                      "n"),
                      seeds=AcrossSeeds("disabling", ("layer", "head", "metric"), value="delta")),
                Table(rel("ablation", name="layers"), ("layer", "metric", "value", "baseline", "delta", "ci_low",
                                                       "ci_high", "p_value", "p_adj", "significant", "test", "n")),
                Table(rel("ablation", name="summary"), ("task", "metric", "finding", "layer", "head", "value",
                                                        "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                                                        "n"))),
        section=Section(
            key="ablation", title="Disabling heads and layers (Kovaleva §4.6, Figs. 8–9)",
            measures="The fine-tuned model's score with one head (or one whole layer) attending uniformly to all "
            "real tokens, against the intact baseline, with paired bootstrap intervals and p-values over the same "
            "examples.",
            finding="Disabling single heads or whole layers often changes little, and some disabled heads or layers "
            "even improve the score; the paper gave no uncertainty, so check which gains survive here.",
            figure_prefixes=("ablation",), tables=(rel("ablation", name="summary", seedtag=""),)),
        statistics=(
            Statistic(id="ablation", group="Disabling heads (Kovaleva 4.6)", label="disabling Δ {k}",
                      desc="Fine-tuned model's {k} with this head attending uniformly, minus the intact model's; "
                      "interval: paired bootstrap; dots: significant.", table=rel("ablation", name="heads", seedtag=""),
                      column="delta", key=("metric",), diverging=True, ci=("ci_low", "ci_high"), mark="significant",
                      mark_label="significant", across_seeds=True),
        )),
    Analysis(
        name="importance", config=("ablation.pruning",),
        tables=(Table(rel("ablation", name="importance"), ("layer", "head", "importance", "raw", "n", "split"),
                      seeds=AcrossSeeds("importance", ("layer", "head"), value="importance")),),
        section=Section(
            key="pruning", title="Head importance and pruning (Michel et al. 2019)",
            measures="Importance of a head = mean over examples of |dL/dξ|, the loss's sensitivity to a gate ξ on "
            "the head's output (ξ = 1 is the intact model), normalised per layer (l2), computed on the split named in "
            "each map's title (ablation.pruning.importance_split; the paper and the default: training data). "
            "Pruning curves: the validation score with 0, 10, ..., 100% of all heads removed, least important "
            "first, against random orders (mean, ±1 std, range); removal zeroes the head's output (the paper) or, "
            "with ablation.pruning.mode: uniform, makes it attend uniformly (as the disabling above).",
            finding="Michel et al.: most heads can be removed at test time; pruning by importance, 20% (WMT) and 40% "
            "(BERT on MNLI) of the heads go without a noticeable loss, after which the score drops sharply. Their "
            "curves have no random baseline; the gap to the random orders here says how much the importance order "
            "buys.",
            figure_prefixes=("importance", "pruning")),
        statistics=(
            Statistic(id="importance", group="Head importance (Michel et al.)", label="importance",
                      desc="E|dL/dξ| of a gate on the head's output, normalised per layer.",
                      table=rel("ablation", name="importance", seedtag=""), column="importance", optional=True,
                      across_seeds=True),
        )),
    Analysis(
        name="pruning", config=("ablation.pruning",),
        tables=(Table(rel("ablation", name="pruning"), ("order", "seed", "fraction", "n_pruned", "metric", "value",
                                                        "mode")),)),
)
