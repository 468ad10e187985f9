"""Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT": Table 1 and sections 4.1-4.5, declared once.

Patterns, relations, features and [CLS] come from the Kovaleva kernel in the one read of a store
(:class:`bertology.kovaleva.reduce.KovalevaKernel`); the cosine from the pair of stores (rule ``kovaleva_cosine``);
Table 1 from the scores (rule ``table1``). Disabling heads (section 4.6) is in :mod:`bertology.analyses.ablation`.
"""

from __future__ import annotations

from bertology.kovaleva.reduce import KovalevaKernel
from bertology.layout import rel
from bertology.registry import MOMENTS, AcrossSeeds, Analysis, Section, Statistic, Table, variant_table

RELATIONS = ("layer", "head", "source", "mean", "std", "n", "flagged")

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="table1", config=("train.alpha",),
        tables=(Table(rel("table1"), ("task", "variant", "metric", "value", "n", "std", "n_seeds")),
                Table(rel("table1_tests"), ("task", "metric", "variant_a", "variant_b", "mean_a", "mean_b",
                                            "difference", "n_a", "n_b", "test", "statistic", "df", "p",
                                            "significant"))),
        section=Section(
            key="table1", title="Table 1 — what fine-tuning buys",
            measures="Validation scores of the pretrained encoder with an untrained classification head, the same "
            "architecture fine-tuned from a random (normal) initialisation, and the pretrained encoder fine-tuned.",
            finding="Kovaleva et al. (Table 1): fine-tuning the pretrained model wins on every task (35.9 points on "
            "average over the untrained head); random initialisation is consistently worse than pretrained.",
            figure_prefixes=("table1",), tables=(rel("table1"),))),
    Analysis(
        name="patterns", config=("analysis.patterns",), kernel=KovalevaKernel,
        tables=(Table(variant_table("patterns.csv"), ("layer", "head", "class", "fraction", "n"), output="patterns"),),
        section=Section(
            key="patterns", title="Attention patterns (Kovaleva §4.1, Fig. 2)",
            measures="Every (example, layer, head) map is classified as vertical, diagonal, vertical+diagonal, block "
            "or heterogeneous; bars give the share of each class.",
            finding="Vertical maps (attention to [CLS]/[SEP]) are the most frequent class; the heterogeneous share, "
            "the only one likely to carry linguistic structure, is at most about half and varies by task.",
            figure_prefixes=("patterns",)),
        statistics=(
            Statistic(id="patterns", group="Pattern classes (Kovaleva 4.1)", label="fraction {k}",
                      desc="Share of the head's maps classified as {k}.", table=variant_table("patterns.csv"),
                      column="fraction",
                      key=("class",)),
        )),
    Analysis(
        name="relations", config=("analysis.relations",), kernel=KovalevaKernel,
        tables=(Table(variant_table("relations.csv"), RELATIONS, output="relations",
                      seeds=AcrossSeeds("relations", ("layer", "head", "source"))),
                Table(variant_table("relations_framenet.csv"), RELATIONS, when="framenet"),
                Table(rel("framenet_links"), ("item", "sentence_id", "doc", "text", "n_tokens", "frame", "fe",
                                              "fe_tokens", "target_tokens", "distance"), when="framenet"),
                Table(rel("framenet_counts"), ("sentences", "annotation_sets", "short_sentences_sets",
                                               "short_sentences_sentences", "with_core_fe_sets",
                                               "with_core_fe_sentences", "short_core_fes_sets",
                                               "short_core_fes_sentences", "links_2_apart_sets",
                                               "links_2_apart_sentences", "core_links", "close_links", "links",
                                               "surviving_sets", "surviving_sentences"), when="framenet")),
        section=Section(
            key="relations", title="Relation-specific heads (Kovaleva §4.2, Fig. 3)",
            measures="Mean over examples of the maximum attention between linked words (FrameNet: from the "
            "frame-evoking target to its core frame elements, the target's wordpieces being the queries; dependency "
            "arcs: from the dependent to its head), per head; heads above the 99th percentile are flagged.",
            finding="Only a couple of heads of 144 in BERT-base attend to FrameNet-linked words more than the rest.",
            figure_prefixes=("relations",)),
        statistics=(
            Statistic(id="relations", group="Relation attention (Kovaleva 4.2)", label="{k} links",
                      desc="Max attention between {k}-linked words, mean over examples; dots: above the 99th "
                      "percentile.",
                      table=variant_table("relations.csv"), key=("source",), mark="flagged",
                      mark_label="flagged (> 99th percentile)"),
        )),
    Analysis(
        name="cosine", config=("analysis.features",),
        tables=(Table(rel("cosine"), ("layer", "head", "mean", "std", "n"),
                      seeds=AcrossSeeds("cosine", ("layer", "head"))),
                Table(rel("features_diff"), MOMENTS)),
        section=Section(
            key="cosine", title="Change with fine-tuning (Kovaleva §4.3, Fig. 5)",
            measures="Per-head cosine similarity between the pretrained and fine-tuned attention maps of the same "
            "examples (padding excluded), averaged over examples; low values mean fine-tuning changed the head.",
            finding="The last two layers change most with fine-tuning on every task but QQP: they encode "
            "task-specific features, earlier layers keep the pretrained ones.",
            figure_prefixes=("cosine",)),
        statistics=(
            Statistic(id="cosine", group="Change with fine-tuning (Kovaleva 4.3)",
                      label="cosine pretrained vs fine-tuned",
                      desc="Mean over examples of the cosine similarity of the pretrained and fine-tuned maps.",
                      table=rel("cosine", seedtag=""), across_seeds=True),
        )),
    Analysis(
        name="features", config=("analysis.features",), kernel=KovalevaKernel,
        tables=(Table(variant_table("features.csv"), MOMENTS, output="features",
                      seeds=AcrossSeeds("features", ("layer", "head", "feature"))),),
        section=Section(
            key="features", title="Attention to linguistic features (Kovaleva §4.4, Fig. 6)",
            measures="Per head, the attention a token type receives (summed over queries, divided by length, maximum "
            "over tokens of the type), averaged over examples, for both variants and their difference.",
            finding="Vertical attention is mostly to [CLS] and [SEP]; heads attending to nouns, objects or negation "
            "exist but their weights are small next to the special tokens, and they come from pre-training.",
            figure_prefixes=("features",)),
        statistics=(
            Statistic(id="features", group="Feature attention (Kovaleva 4.4)", label="attention to {k}",
                      desc="Attention the {k} tokens receive (summed over queries, / n, max over tokens), mean over "
                      "examples.", table=variant_table("features.csv"), key=("feature",)),
        )),
    Analysis(
        name="cls", config=("analysis.features",), kernel=KovalevaKernel,
        tables=(Table(variant_table("cls.csv"), MOMENTS, output="cls",
                      seeds=AcrossSeeds("cls", ("layer", "head", "feature"))),),
        section=Section(
            key="cls", title="[CLS] attention in the last layer (Kovaleva §4.5, Fig. 7)",
            measures="The last layer's [CLS] row: how much of its attention each token type gets, per head.",
            finding="[SEP] gets most of [CLS]'s attention on most tasks; punctuation is attended about as much as "
            "[SEP] on some.",
            figure_prefixes=("cls",)),
        statistics=(
            Statistic(id="cls", group="[CLS] attention, last layer (Kovaleva 4.5)", label="[CLS] → {k}",
                      desc="The last layer's [CLS] row: attention to {k} tokens.", table=variant_table("cls.csv"),
                      key=("feature",)),
        )),
)
