"""Clark et al. 2019, "What Does BERT Look At?": attention to the previous and next token (section 3.1), attention
entropy (section 3.3) and heads as dependency parsers (section 4.2), declared once. The first from its kernel
(:class:`bertology.clark.offsets.PreviousKernel`), the other two from the Clark kernel
(:class:`bertology.clark.reduce.ClarkKernel`), all in the one read of a store; the gold trees' parser tables from
``rules/clark.smk``."""

from __future__ import annotations

from bertology.claims import clark as claims_clark
from bertology.pipeline.layout import rel
from bertology.pipeline.config import EXPECT_SECTIONS
from bertology.registry import (MOMENTS, ONCE, AcrossSeeds, Analysis, Claim, Output, Section, Statistic, Step, Table,
                                Want, figure, variant_table)

PARSER = ("relation", "direction", "layer", "head", "accuracy", "n", "baseline_offset", "baseline_accuracy")
PARSER_KEYS = ("relation", "direction", "layer", "head")
PREVIOUS = variant_table("previous.csv")
ENTROPY = variant_table("entropy.csv")
PARSER_TABLE = variant_table("parser.csv")

def _parser_claim(relation: str, paper_value: str) -> Claim:
    """Clark 4.2 for one relation: some head beats the relation's best fixed offset (gold trees where the run has
    them, else the task's spaCy parses)."""
    return Claim(f"clark_parser_{relation}", "Clark et al. 2019", "4.2",
                 f"Some head finds the {relation} head word more often than the relation's best fixed offset.",
                 "syntax/pretrained.csv (gold trees) or parser.csv (spaCy): max accuracy - baseline_accuracy, "
                 f"relation {relation}",
                 claims_clark.parser_beats_baseline,
                 (("parser", rel("syntax_stat", model="pretrained"), "analysis.syntax.conllu"),
                  ("parser", PARSER_TABLE, "")),
                 variant="pretrained", unit="arcs", params=(("relation", relation),), config="analysis.syntax.conllu",
                 anchor="parser", figure="parser", figure_all="parser-syntax", paper_value=paper_value,
                 sentence="For example, we find heads that attend to the direct objects of verbs, determiners of "
                          "nouns, objects of prepositions, and coreferent mentions with remarkably high accuracy.")


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="previous", kernel="bertology.clark.offsets:PreviousKernel",
        tables=(Table(PREVIOUS, MOMENTS, output="previous",
                      seeds=AcrossSeeds("previous", ("layer", "head", "feature"))),),
        section=Section(
            key="previous", paper="Clark et al. 2019", title="Attention to the previous and next token (Clark et al. 2019, §3.1)",
            measures="Per head, the attention a token pays to the token before it (previous: mean of A[i, i-1] over "
            "the real query rows i > 0) and after it (next: A[i, i+1], rows i < n-1), averaged over examples, for "
            "the pretrained and the fine-tuned model.",
            finding="Some heads attend almost entirely to the previous or to the next token: in BERT-base four "
            "attention heads put more than 50% of their attention on the previous token and five on the next, "
            "especially in the earlier layers.",
            tables=(PREVIOUS,)),
        statistics=(
            Statistic(id="previous", group="Previous / next token (Clark et al.)", label="attention to the {k} token",
                      desc="Mean over the real query rows of the attention to the {k} token (A[i, i-1] or A[i, i+1]), "
                      "mean over examples.", table=PREVIOUS, key=("feature",), across_seeds=True),
        )),
    Analysis(
        name="entropy", kernel="bertology.clark.reduce:ClarkKernel",
        claims=(
            Claim("clark_broad_lower", "Clark et al. 2019", "3.3",
                  "Heads in the lower layers attend broadly (entropy near uniform).",
                  "entropy.csv (pretrained): all / uniform per head; first third of the layers minus the rest",
                  claims_clark.broad_lower, (("entropy", ENTROPY, ""),), variant="pretrained",
                  config="analysis.features", anchor="entropy", figure="entropy",
                  paper_value="at most 10% of the mass on any single word",
                  sentence="We find that some attention heads, especially in lower layers, have very broad attention."),
        ),
        tables=(Table(ENTROPY, MOMENTS, output="entropy",
                      seeds=AcrossSeeds("entropy", ("layer", "head", "feature"))),),
        section=Section(
            key="entropy", paper="Clark et al. 2019", title="Attention entropy (Clark et al. 2019, §3.3)",
            measures="Per head, the mean entropy (nats) of its attention rows over every real query of the sampled "
            "examples, and of the [CLS] row alone; the dashed line is uniform attention over the same examples "
            "(ln n). Low entropy = focused attention, near the line = broad, bag-of-words attention.",
            finding="Some heads in the lower layers attend very broadly (entropy close to uniform, at most about 10% "
            "of the mass on any single word); in the last layer the [CLS] row has high entropy, i.e. broad "
            "attention.",
            figure_prefixes=("entropy",)),
        statistics=(
            Statistic(id="entropy", group="Entropy (Clark et al.)", label="entropy: {k}",
                      desc="Mean attention entropy ({k}) in nats; uniform attention = ln n.",
                      table=ENTROPY,
                      key=("feature",), optional=True, across_seeds=True),
        )),
    Analysis(
        name="parser", kernel="bertology.clark.reduce:ClarkKernel",  # the gold trees' rules read analysis.syntax
        claims=(
            *(_parser_claim(relation, paper_value)
              for relation, paper_value in (("nsubj", ""), ("obj", "86.8% vs 40.0% (head 8-10)"),
                                            ("det", "94.3% (head 8-11)"))),
        ),
        tables=(Table(PARSER_TABLE, PARSER, output="parser",
                      seeds=AcrossSeeds("parser", PARSER_KEYS, value="accuracy")),
                Table(rel("syntax_stat"), PARSER, when="gold_trees",
                      seeds=AcrossSeeds("syntax", PARSER_KEYS, value="accuracy",
                                        fields=(("model", "{task}-{variant}"),)),
                      rule="syntax_parser", output="table",
                      wanted=(Want((("model", "syntax_models"),)),
                              Want((("model", "extra_syntax_models"),), when="seeds"))),
                Table(rel("syntax_best"), ("model",) + PARSER, when="gold_trees", rule="syntax_figures",
                      output="best", wanted=(ONCE,))),
        steps=(Step("clark_figures", "clark", (), "entropy by layer and best head per relation (spaCy arcs) of one task"),
               Step("demo_trees", "clark", ("data.seed", "data.demo"),
                    "gold CoNLL-U trees of the demo grammar -> results/data/syntax/demo.conllu",
                    mem_mb=1000, runtime=5),
               Step("syntax_sentences", "clark", (),
                    "gold CoNLL-U trees -> results/data/syntax/sample.parquet, words.parquet"),
               Step("extract_syntax", "clark", ("model", "data.max_length", "data.seed", "attention"),
                    "the attention store of the gold sentences, results/attention/syntax/{model}.zarr",
                    threads=4, mem_mb=4000, runtime=120, gpu=0),
               Step("syntax_parser", "clark", ("analysis.dask", *EXPECT_SECTIONS),
                    "heads as dependency parsers on the gold trees -> results/stats/syntax/{model}.csv",
                    threads=2, mem_mb=4000, runtime=60),
               Step("syntax_figures", "clark", (),
                    "best head per relation on the gold trees, every model (Clark et al. Fig. 5)")),
        outputs=(figure("clark_figures", "entropy", "entropy"),
                 figure("clark_figures", "parser", "parser"),
                 Output(rel("demo_trees"), rule="demo_trees", output="conllu"),
                 Output(rel("syntax_sample"), rule="syntax_sentences", output="sample"),
                 Output(rel("syntax_words"), rule="syntax_sentences", output="words"),
                 Output(rel("syntax_sentences"), rule="syntax_sentences", output="sentences"),
                 Output(rel("syntax_counts"), rule="syntax_sentences", output="counts"),
                 Output(rel("syntax_store"), rule="extract_syntax", output="store", directory=True),
                 Output(rel("syntax_summary"), rule="syntax_parser", output="summary"),
                 figure("syntax_figures", "figure", "parser-syntax", per_task=False, when="gold_trees")),
        section=Section(
            key="parser", paper="Clark et al. 2019", title="Heads as dependency parsers (Clark et al. 2019, §4.2, Fig. 5)",
            measures="For each relation and head, how often the word a word attends to most (dep → head), or the "
            "word that attends most to it (head → dep), is its syntactic head; word-level attention sums over the "
            "wordpieces attended to and averages over those attending. Bars: the best head per relation; black "
            "marks: the fixed-offset baseline (always the relation's most common relative position). Gold CoNLL-U "
            "trees (`parser-syntax`, analysis.syntax.conllu and the demo's own trees) and each task's spaCy parses.",
            finding="No single head does well at syntax overall, but in BERT-base specific heads track specific "
            "relations far above the baseline: direct objects attend to their verbs (head 8-10, 86.8% vs 40.0%), "
            "determiners to their nouns (8-11, 94.3%), prepositions to their objects (9-6, 76.3%), passive "
            "auxiliaries to their verbs (82.5%) and possessives to the head of their NP (80.5%), all learnt without "
            "syntactic supervision.",
            figure_prefixes=("parser",), tables=(rel("syntax_best"),)),
        statistics=(
            Statistic(id="parser", group="Heads as parsers (Clark et al.)", label="parser accuracy: {k}",
                      desc="Share of {k} dependents whose most attended word is their head.",
                      table=PARSER_TABLE,
                      column="accuracy", key=("relation",), where=(("direction", "dep_to_head"),), top="n",
                      optional=True),
        )),
)
