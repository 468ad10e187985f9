"""Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT": Table 1 and sections 4.1-4.5, declared once.

Patterns, relations, features and [CLS] come from the Kovaleva kernel in the one read of a store
(:class:`bertology.kovaleva.reduce.KovalevaKernel`); the cosine from the pair of stores (rule ``kovaleva_cosine``);
Table 1 from the scores (rule ``table1``). Disabling heads (section 4.6) is in :mod:`bertology.analyses.ablation`.
"""

from __future__ import annotations

from bertology.claims import clark as claims_clark
from bertology.claims import kovaleva as claims_kovaleva
from bertology.pipeline.config import EXPECT_SECTIONS
from bertology.pipeline.layout import rel
from bertology.registry import (FIRST_SEED, MOMENTS, ONCE, AcrossSeeds, Analysis, Claim, Output, Section, Statistic,
                                Step, Table, figure, variant_table)

RELATIONS = ("layer", "head", "source", "mean", "std", "n", "flagged")
PATTERNS = variant_table("patterns.csv")
RELATIONS_TABLE = variant_table("relations.csv")
FEATURES = variant_table("features.csv")
CLS = variant_table("cls.csv")
#: the figures of one task (rule kovaleva_figures): output name = figure name
TASK_FIGURES = ("patterns", "relations", "cosine", "features", "cls")

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="table1",
        claims=(
            Claim("kovaleva_table1_pretrained", "Kovaleva et al. 2019", "Table 1 (4.3)",
                  "The fine-tuned model beats the pretrained encoder with an untrained head.",
                  "table1.csv: value (the task's first metric), finetuned - pretrained",
                  claims_kovaleva.table1_gain,
                  (("table1", rel("table1"), ""), ("score_finetuned", rel("score", variant="finetuned"), ""),
                   ("score_pretrained", rel("score", variant="pretrained"), "")),
                  unit="examples", params=(("baseline", "pretrained"),), config="train.inits", anchor="table1",
                  figure="table1", paper_value="35.9 points on average",
                  sentence="At the same time, Table 1 shows that fine-tuned BERT outperforms pre-trained BERT by a "
                           "significant margin on all the tasks (with an average of 35.9 points of absolute difference)."),
            Claim("kovaleva_table1_random", "Kovaleva et al. 2019", "Table 1 (4.3)",
                  "The fine-tuned model beats the same architecture fine-tuned from a random initialisation.",
                  "table1.csv: value (the task's first metric), finetuned - random-finetuned",
                  claims_kovaleva.table1_gain,
                  (("table1", rel("table1"), ""), ("score_finetuned", rel("score", variant="finetuned"), ""),
                   ("score_random-finetuned", rel("score", variant="random-finetuned"), "train.inits")),
                  unit="examples", params=(("baseline", "random-finetuned"),), config="train.inits", anchor="table1",
                  figure="table1", paper_value="e.g. RTE 64.6 vs 52.7, QNLI 84.4 vs 49.5",
                  sentence="BERT with weights initialized from normal distribution and further fine-tuned for a given task "
                           "consistently produces lower scores than the ones achieved with pre-trained BERT."),
        ),
        steps=(Step("table1", "train", ("model", "train.alpha"),
                    "Kovaleva Table 1 over seeds: table1.csv, table1.md, table1_tests.csv and the figure"),),
        tables=(Table(rel("table1"), ("task", "variant", "metric", "value", "n", "std", "n_seeds"), rule="table1",
                      output="csv", report="table1", when="finetuned", wanted=(ONCE,)),
                Table(rel("table1_tests"), ("task", "metric", "variant_a", "variant_b", "mean_a", "mean_b",
                                            "difference", "n_a", "n_b", "test", "statistic", "df", "p",
                                            "significant"), rule="table1", output="tests", when="finetuned",
                      wanted=(ONCE,))),
        outputs=(Output(rel("table1_md"), rule="table1", output="md", when="finetuned", wanted=(ONCE,)),
                 figure("table1", "figure", "table1", per_task=False, when="finetuned")),
        section=Section(
            key="table1", paper="Kovaleva et al. 2019", title="Table 1 — what fine-tuning buys",
            measures="Validation scores of the pretrained encoder with an untrained classification head, the same "
            "architecture fine-tuned from a random (normal) initialisation, and the pretrained encoder fine-tuned.",
            finding="Kovaleva et al. (Table 1): fine-tuning the pretrained model wins on every task (35.9 points on "
            "average over the untrained head); random initialisation is consistently worse than pretrained.",
            figure_prefixes=("table1",), tables=(rel("table1"),))),
    Analysis(
        name="patterns", config=("analysis.patterns",), kernel="bertology.kovaleva.reduce:KovalevaKernel",
        claims=(
            Claim("kovaleva_patterns_repeat", "Kovaleva et al. 2019", "4.1",
                  "Most attention maps follow one of a few repeated patterns (not heterogeneous).",
                  "patterns.csv (finetuned): 1 - fraction of class heterogeneous, per head", claims_kovaleva.patterns_repeat,
                  (("patterns", PATTERNS, ""),), null=0.5, config="analysis.patterns", anchor="patterns",
                  figure="patterns", paper_value="heterogeneous 32% (MRPC) to 61% (QQP)",
                  sentence="Our findings suggest that there is a limited set of attention patterns that are repeated across "
                           "different heads, indicating the overall model overparametrization."),
        ),
        tables=(Table(PATTERNS, ("layer", "head", "class", "fraction", "n"), output="patterns"),),
        steps=(Step("kovaleva_figures", "kovaleva", (), "Kovaleva Figs. 2, 3, 5, 6, 7 of one task"),
               Step("kovaleva_overview", "kovaleva", ("tasks",), "Kovaleva Figs. 2 and 5 across tasks"),
               Step("patterns_sheet", "kovaleva", (), "a sample of attention maps as PNGs + a label sheet to annotate",
                    runtime=20),
               Step("patterns_train", "kovaleva", (),
                    "train the 8-conv-layer pattern CNN from a label sheet (example, layer, head, label)")),
        # the cosine figure compares the fine-tuned model with the pretrained one: not drawn without fine-tuning
        outputs=(*(figure("kovaleva_figures", name, name, **({"when": "finetuned", "only": "finetuned"}
                                                              if name == "cosine" else {}))
                   for name in TASK_FIGURES),
                 figure("kovaleva_overview", "patterns", "patterns-tasks", per_task=False),
                 figure("kovaleva_overview", "cosine", "cosine-tasks", per_task=False, when="finetuned",
                        only="finetuned"),
                 Output(rel("patterns_labels"), rule="patterns_sheet", output="sheet"),
                 Output(rel("patterns_images"), rule="patterns_sheet", output="images", directory=True)),
        section=Section(
            key="patterns", paper="Kovaleva et al. 2019", title="Attention patterns (Kovaleva §4.1, Fig. 2)",
            measures="Every (example, layer, head) map is classified as vertical, diagonal, vertical+diagonal, block "
            "or heterogeneous; bars give the share of each class.",
            finding="Vertical maps (attention to [CLS]/[SEP]) are the most frequent class; the heterogeneous share, "
            "the only one likely to carry linguistic structure, is at most about half and varies by task.",
            figure_prefixes=("patterns",)),
        statistics=(
            Statistic(id="patterns", group="Pattern classes (Kovaleva 4.1)", label="fraction {k}",
                      desc="Share of the head's maps classified as {k}.", table=PATTERNS,
                      column="fraction",
                      key=("class",)),
        )),
    Analysis(
        name="relations", config=("analysis.relations",), kernel="bertology.kovaleva.reduce:KovalevaKernel",
        tables=(Table(RELATIONS_TABLE, RELATIONS, output="relations",
                      seeds=AcrossSeeds("relations", ("layer", "head", "source"))),
                Table(variant_table("relations_framenet.csv"), RELATIONS, when="framenet",
                      rule="framenet_relations", output="table"),
                Table(rel("framenet_links"), ("item", "sentence_id", "doc", "text", "n_tokens", "frame", "fe",
                                              "fe_tokens", "target_tokens", "distance"), when="framenet",
                      rule="framenet_links", output="links"),
                Table(rel("framenet_counts"), ("sentences", "annotation_sets", "short_sentences_sets",
                                               "short_sentences_sentences", "with_core_fe_sets",
                                               "with_core_fe_sentences", "short_core_fes_sets",
                                               "short_core_fes_sentences", "links_2_apart_sets",
                                               "links_2_apart_sentences", "core_links", "close_links", "links",
                                               "surviving_sets", "surviving_sentences"), when="framenet",
                      rule="framenet_links", output="counts", wanted=(ONCE,))),
        steps=(Step("framenet_links", "kovaleva", ("analysis.relations.framenet_filter",),
                    "FrameNet release -> filtered sentences and target -> frame-element links", runtime=20),
               Step("framenet_relations", "kovaleva", ("model", "data.max_length", "analysis.relations.percentile"),
                    "run a model on the FrameNet sentences -> relation rows with source=framenet (target -> FE) and "
                    "framenet_fe_target", threads=2, mem_mb=4000, runtime=30, gpu=0)),
        section=Section(
            key="relations", paper="Kovaleva et al. 2019", title="Relation-specific heads (Kovaleva §4.2, Fig. 3)",
            measures="Mean over examples of the maximum attention between linked words (FrameNet: from the "
            "frame-evoking target to its core frame elements, the target's wordpieces being the queries; dependency "
            "arcs: from the dependent to its head), per head; heads above the 99th percentile are flagged.",
            finding="Only a couple of heads of 144 in BERT-base attend to FrameNet-linked words more than the rest.",
            figure_prefixes=("relations",)),
        statistics=(
            Statistic(id="relations", group="Relation attention (Kovaleva 4.2)", label="{k} links",
                      desc="Max attention between {k}-linked words, mean over examples; dots: above the 99th "
                      "percentile.",
                      table=RELATIONS_TABLE, key=("source",), mark="flagged",
                      mark_label="flagged (> 99th percentile)"),
        )),
    Analysis(
        name="cosine",
        claims=(
            Claim("kovaleva_cosine_last_layers", "Kovaleva et al. 2019", "4.3",
                  "Fine-tuning changes the attention of the last two layers most.",
                  "cosine.csv: mean per head, last two layers minus the other layers", claims_kovaleva.cosine_last_layers,
                  (("cosine", rel("cosine"), ""),), side="<", config="analysis.features", anchor="cosine", figure="cosine",
                  paper_value="last two layers on every task but QQP",
                  sentence="Figure 5 shows that for all the tasks except QQP, it is the last two layers that undergo the "
                           "largest changes compared to the pre-trained BERT model."),
        ),
        steps=(Step("kovaleva_cosine", "kovaleva", ("analysis.features", "analysis.dask", *EXPECT_SECTIONS),
                    "pretrained vs fine-tuned cosine per head and feature differences", task="words",
                    threads=2, mem_mb=6000, runtime=60),),
        tables=(Table(rel("cosine"), ("layer", "head", "mean", "std", "n"),
                      seeds=AcrossSeeds("cosine", ("layer", "head")), rule="kovaleva_cosine", output="cosine",
                      wanted=(FIRST_SEED,)),
                Table(rel("features_diff"), MOMENTS, rule="kovaleva_cosine", output="features_diff",
                      wanted=(FIRST_SEED,))),
        outputs=(Output(rel("cosine_examples"), rule="kovaleva_cosine", output="examples"),),
        section=Section(
            key="cosine", paper="Kovaleva et al. 2019", title="Change with fine-tuning (Kovaleva §4.3, Fig. 5)",
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
        name="features", config=("analysis.features",), kernel="bertology.kovaleva.reduce:KovalevaKernel",
        claims=(
            Claim("kovaleva_special_tokens", "Kovaleva et al. 2019", "4.4",
                  "Vertical attention goes to [CLS] and [SEP], not to linguistic features.",
                  "features.csv (finetuned): max(cls, sep) - max(noun, verb, pronoun, subject, object, negation), per head",
                  claims_kovaleva.special_features, (("features", FEATURES, ""),),
                  config="analysis.features", anchor="features", figure="features",
                  sentence="Contrary to our initial hypothesis that the vertical attention pattern may be motivated by "
                           "linguistically meaningful features, we found that it is associated predominantly, if not "
                           "exclusively, with attention to [CLS] and [SEP] tokens."),
            Claim("kovaleva_cls_early_sep_late", "Kovaleva et al. 2019", "4.4",
                  "Earlier layers attend to [CLS], later layers to [SEP].",
                  "features.csv (finetuned): Spearman rho of layer and (sep - cls), over heads",
                  claims_kovaleva.cls_early_sep_late, (("features", FEATURES, ""),),
                  config="analysis.features", anchor="features", figure="features",
                  sentence="There is also a clear tendency for earlier layers to pay attention to [CLS] and for later "
                           "layers to [SEP], and this trend is consistent across all the tasks."),
            Claim("clark_sep_middle", "Clark et al. 2019", "3.2",
                  "Attention to [SEP] peaks in the middle layers.",
                  "features.csv (pretrained): mean, feature sep, per head; middle third minus the rest",
                  claims_clark.sep_middle, (("features", FEATURES, ""),), variant="pretrained",
                  config="analysis.features", anchor="features", figure="features",
                  paper_value="over half of the attention in layers 6-10 of BERT-base",
                  sentence="In particular, we find that more than half of BERT's attention in layers 6-10 focuses on [SEP]."),
        ),
        tables=(Table(FEATURES, MOMENTS, output="features",
                      seeds=AcrossSeeds("features", ("layer", "head", "feature"))),),
        section=Section(
            key="features", paper="Kovaleva et al. 2019", title="Attention to linguistic features (Kovaleva §4.4, Fig. 6)",
            measures="Per head, the attention a token type receives (summed over queries, divided by length, maximum "
            "over tokens of the type), averaged over examples, for both variants and their difference.",
            finding="Vertical attention is mostly to [CLS] and [SEP]; heads attending to nouns, objects or negation "
            "exist but their weights are small next to the special tokens, and they come from pre-training.",
            figure_prefixes=("features",)),
        statistics=(
            Statistic(id="features", group="Feature attention (Kovaleva 4.4)", label="attention to {k}",
                      desc="Attention the {k} tokens receive (summed over queries, / n, max over tokens), mean over "
                      "examples.", table=FEATURES, key=("feature",)),
        )),
    Analysis(
        name="cls", config=("analysis.features",), kernel="bertology.kovaleva.reduce:KovalevaKernel",
        claims=(
            Claim("kovaleva_cls_to_sep", "Kovaleva et al. 2019", "4.5",
                  "In the last layer, [CLS] attends to [SEP] more than to any other token type.",
                  "cls.csv (finetuned): sep - max(other features), per head of the last layer",
                  claims_kovaleva.cls_to_sep, (("cls", CLS, ""),), config="analysis.features",
                  anchor="cls", figure="cls", paper_value="[SEP] most on all tasks but STS-B, RTE and QNLI",
                  sentence="Our investigation of attention distribution for the [CLS] token in the output layer suggests "
                           "that for most tasks, with the exception of STS-B, RTE and QNLI, the [SEP] gets attended the most."),
        ),
        tables=(Table(CLS, MOMENTS, output="cls",
                      seeds=AcrossSeeds("cls", ("layer", "head", "feature"))),),
        section=Section(
            key="cls", paper="Kovaleva et al. 2019", title="[CLS] attention in the last layer (Kovaleva §4.5, Fig. 7)",
            measures="The last layer's [CLS] row: how much of its attention each token type gets, per head.",
            finding="[SEP] gets most of [CLS]'s attention on most tasks; punctuation is attended about as much as "
            "[SEP] on some.",
            figure_prefixes=("cls",)),
        statistics=(
            Statistic(id="cls", group="[CLS] attention, last layer (Kovaleva 4.5)", label="[CLS] → {k}",
                      desc="The last layer's [CLS] row: attention to {k} tokens.", table=CLS,
                      key=("feature",)),
        )),
)
