"""Disabling heads and layers (Kovaleva et al. 2019, section 4.6), head importance and pruning (Michel et al.
2019), declared once. The tables come from the rules of ``rules/ablation.smk`` (:mod:`bertology.steps.ablation`)."""

from __future__ import annotations

from bertology.claims import kovaleva as claims_kovaleva
from bertology.claims import michel as claims_michel
from bertology.pipeline.layout import fill, rel
from bertology.registry import FIRST_SEED, AcrossSeeds, Analysis, Claim, Output, Section, Statistic, Step, Table, figure

#: the sweep's and pruning's config keys
SWEEP_KEYS = tuple(f"ablation.{k}" for k in ("examples", "batch_size", "seed", "config_batch", "sweep"))
HEADS, LAYERS, SUMMARY = rel("ablation", name="heads"), rel("ablation", name="layers"), rel("ablation", name="summary")
IMPORTANCE, PRUNING = rel("ablation", name="importance"), rel("ablation", name="pruning")

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="disabling",
        claims=(
            Claim("kovaleva_disable_head", "Kovaleva et al. 2019", "4.6",
                  "Disabling some single head improves the fine-tuned model.",
                  "ablation heads.csv: largest delta of the headline metric, its ci_low, ci_high, p_adj",
                  claims_kovaleva.disabling_gain, (("heads", HEADS, ""),),
                  unit="examples (the sweep's paired bootstrap)", params=(("table", "heads"),), config="ablation",
                  anchor="ablation", figure="ablation", paper_value="+0.1% (STS-B) to +1.2% (MRPC)",
                  sentence="However, it is important to note that across all tasks and datasets, disabling some heads "
                           "leads to an increase in performance."),
            Claim("kovaleva_disable_layer", "Kovaleva et al. 2019", "4.6",
                  "Disabling some whole layer improves the fine-tuned model.",
                  "ablation layers.csv: largest delta of the headline metric, its ci_low, ci_high, p_adj",
                  claims_kovaleva.disabling_gain,
                  (("layers", LAYERS, ""), ("heads", HEADS, "")),
                  unit="examples (the sweep's paired bootstrap)", params=(("table", "layers"),), config="ablation",
                  anchor="ablation", figure="ablation", paper_value="up to +3.2% (RTE, first layer)",
                  sentence="Furthermore, disabling a whole layer, that is, all 12 heads in a given layer, also improves "
                           "the results."),
        ),
        tables=(Table(HEADS, ("layer", "head", "metric", "value", "baseline", "delta",
                                                      "ci_low", "ci_high", "p_value", "p_adj", "significant", "test",
                                                      "n"),
                      seeds=AcrossSeeds("disabling", ("layer", "head", "metric"), value="delta"),
                      rule="ablation_sweep", output="heads", wanted=(FIRST_SEED,)),
                Table(LAYERS, ("layer", "metric", "value", "baseline", "delta", "ci_low",
                                                       "ci_high", "p_value", "p_adj", "significant", "test", "n"),
                      rule="ablation_sweep", output="layers", wanted=(FIRST_SEED,)),
                Table(SUMMARY, ("task", "metric", "finding", "layer", "head", "value",
                                                        "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                                                        "n"), rule="ablation_sweep", output="summary",
                      wanted=(FIRST_SEED,))),
        steps=(Step("ablation_sweep", "ablation", (*SWEEP_KEYS, "ablation.bootstrap", "ablation.alpha",
                                                   "data.max_length", "data.short_split"),
                    "disable every head and every layer alone -> results/ablation/{task}/*.csv",
                    threads=4, mem_mb=8000, runtime=240, gpu=0),
               Step("ablation_figures", "ablation", (), "Kovaleva Figs. 8-9 of one task")),
        outputs=(Output(rel("ablation_info"), rule="ablation_sweep", output="info", wanted=(FIRST_SEED,)),
                 Output(rel("ablation_examples"), rule="ablation_sweep", output="examples"),
                 figure("ablation_figures", "heads", "ablation-heads", when="finetuned"),
                 figure("ablation_figures", "layers", "ablation-layers", when="finetuned")),
        section=Section(
            key="ablation", paper="Kovaleva et al. 2019", title="Disabling heads and layers (Kovaleva §4.6, Figs. 8–9)",
            measures="The fine-tuned model's score with one head (or one whole layer) attending uniformly to all "
            "real tokens, against the intact baseline, with paired bootstrap intervals and p-values over the same "
            "examples.",
            finding="Disabling single heads or whole layers often changes little, and some disabled heads or layers "
            "even improve the score; the paper gave no uncertainty, so check which gains survive here.",
            figure_prefixes=("ablation",), tables=(fill(SUMMARY, seedtag=""),)),
        statistics=(
            Statistic(id="ablation", group="Disabling heads (Kovaleva 4.6)", label="disabling Δ {k}",
                      desc="Fine-tuned model's {k} with this head attending uniformly, minus the intact model's; "
                      "interval: paired bootstrap; dots: significant.", table=fill(HEADS, seedtag=""),
                      column="delta", key=("metric",), diverging=True, ci=("ci_low", "ci_high"), mark="significant",
                      mark_label="significant", across_seeds=True),
        )),
    Analysis(
        name="importance",
        tables=(Table(IMPORTANCE, ("layer", "head", "importance", "raw", "n", "split"),
                      seeds=AcrossSeeds("importance", ("layer", "head"), value="importance"),
                      rule="ablation_pruning", output="importance", wanted=(FIRST_SEED,)),),
        steps=(Step("ablation_pruning", "ablation", (*SWEEP_KEYS, "ablation.pruning", "data.max_length",
                                                     "data.short_split"),
                    "head importance and pruning curves (Michel et al.) -> importance.csv, pruning.csv",
                    threads=4, mem_mb=8000, runtime=240, gpu=0),
               Step("pruning_figures", "ablation", (), "importance map and pruning curves of one task")),
        outputs=(figure("pruning_figures", "importance", "importance", when="finetuned"),
                 figure("pruning_figures", "pruning", "pruning", when="finetuned")),
        section=Section(
            key="pruning", paper="Michel et al. 2019", title="Head importance and pruning (Michel et al. 2019)",
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
                      table=fill(IMPORTANCE, seedtag=""), column="importance", optional=True,
                      across_seeds=True),
        )),
    Analysis(
        name="pruning",
        claims=(
            Claim("michel_importance_order", "Michel et al. 2019", "4",
                  "Pruning heads in order of importance costs less than pruning them in a random order.",
                  "pruning.csv: value (headline metric), order importance minus the mean of the random orders, per fraction",
                  claims_michel.importance_order, (("pruning", PRUNING, ""),),
                  unit="pruning fractions", config="ablation.pruning", anchor="pruning", figure="pruning",
                  sentence="Based on this observation, we further propose a simple algorithm that greedily and iteratively "
                           "prunes away attention heads that seem to be contributing less to the model."),
            Claim("michel_prunable_share", "Michel et al. 2019", "4",
                  "A share of the heads can be pruned by importance with the metric within one point of the intact model.",
                  "pruning.csv: largest fraction (order importance) whose every step keeps value >= intact - 0.01",
                  claims_michel.prunable_share, (("pruning", PRUNING, ""),),
                  null=0.05, unit="seeds", config="ablation.pruning", anchor="pruning", figure="pruning",
                  paper_value="20% (WMT), 40% (BERT on MNLI)",
                  sentence="In practice, a large percentage of attention heads can be removed at test time without "
                           "significantly impacting performance."),
        ),
        tables=(Table(PRUNING, ("order", "seed", "fraction", "n_pruned", "metric", "value",
                                                        "mode"), rule="ablation_pruning", output="pruning",
                      wanted=(FIRST_SEED,)),)),
)
