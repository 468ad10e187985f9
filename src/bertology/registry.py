"""Every analysis, declared once: what it reads, computes, writes, shows and says.

One :class:`Analysis` per analysis names

- ``config``: the config sections it reads;
- ``kernel``: for an analysis over the attention store, its :class:`StoreKernel` (the pure kernel, per example or
  per chunk with its combine, :mod:`bertology.onepass`, and the step functions that build it for a job and write
  its outputs). Every store analysis runs in the ONE read of a store of the rule ``store_stats``
  (:mod:`bertology.steps.stores`), whose outputs and config sections come from here; analyses sharing a kernel
  (Kovaleva's four, Clark's two) share its work;
- ``tables``: its output tables (path under ``results/``, columns; ``tests/test_reference.py`` checks them against
  docs/reference.md and against what the code writes);
- ``figures``: the file-name prefixes of its figures (``results/figures/{prefix}-*.png``);
- ``section``: its report section (title, what it measures, what the paper found), built into
  ``results/report.html`` by :mod:`bertology.report` in :data:`REPORT_ORDER`;
- ``statistics``: what it offers the explorer's layer x head grid (label, source table and column, colour scale,
  diverging or not), built into the page by :mod:`bertology.explorer` in the order of :data:`ANALYSES`.

Adding an analysis that reads a store is one kernel module, one entry here and its tests (CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bertology.layout import ROOT, join, rel


@dataclass(frozen=True)
class Table:
    """An output table: its path under results/ (with {task}, {variant}, ...) and its columns (for .npz the
    arrays it holds, for .json its keys)."""

    path: str
    columns: tuple[str, ...]
    #: the rule output's name, for a table the one-pass rule writes
    output: str = ""


@dataclass(frozen=True)
class Section:
    """A section of results/report.html. tables: path templates under results/ (bertology.layout; a field left
    open matches any value) of the tables it shows: every input declared to the report rule that one matches."""

    key: str
    title: str
    measures: str
    paper: str
    figure_prefixes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Statistic:
    """A per-head statistic the explorer offers (one, or one per distinct value of `key`).

    id: the statistic's id (``id:key`` per key); group, label, desc: what the page shows (``{k}``: the key,
    ``{ref}``: the reference value); table: its source under results/ (``{task}``, and ``{variant}`` for one table
    per variant: pretrained, fine-tuned and their difference; without it one table for the task); column: the
    value; key: the column (or columns, joined by a space) whose values each make a statistic; where: rows kept
    (column, value); notna: rows kept where this column has a value; top: keep the keys with the 12 largest
    maxima of this column; diverging: a colour scale centred on 0 (else sequential); mark: a boolean column
    whose true cells get a dot (mark_label says what it means); ci: (low, high) interval columns; ref: a
    column whose first value is the reference (drawn on the scale, ``{ref}`` in desc); count: count, per head,
    the rows where this boolean column is true (instead of `column`); fmt: ``int`` for counts; optional: an
    absent table is no note on the page; per_seed: the table is a statistic over fine-tuning seeds
    (:func:`bertology.seedstats.seed_moments`) whose ``seed{N}`` columns, each seed's value, the head view lists.
    """

    id: str
    group: str
    label: str
    desc: str
    table: str
    column: str = "mean"
    key: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    notna: str = ""
    top: str = ""
    diverging: bool = False
    mark: str = ""
    mark_label: str = ""
    ci: tuple[str, str] | None = None
    ref: str = ""
    count: str = ""
    fmt: str = ""
    optional: bool = False
    per_seed: bool = False

    @property
    def scale(self) -> str:
        return "div" if self.diverging else "seq"

    @property
    def per_variant(self) -> bool:
        return "{variant}" in self.table


@dataclass(frozen=True)
class StoreKernel:
    """How a store analysis runs in the one-pass rule: ``make`` builds its kernel for a job
    (``(ctx, opened store) -> bertology.onepass.Kernel``), ``write`` writes its outputs and metrics from the
    kernel's result (``(ctx, result, opened store) -> None``); both "module:function". Analyses that share a
    kernel name the same StoreKernel; it runs once."""

    name: str
    make: str
    write: str

    def load(self, what: str) -> Callable[..., Any]:
        module, func = getattr(self, what).split(":")
        return getattr(importlib.import_module(module), func)


@dataclass(frozen=True)
class Claim:
    """A paper's claim checked on the run's own tables (results/claims.csv, :mod:`bertology.claims`).

    id: stable id (a column of the ledger, MLflow ``claims.{id}.{task}``); paper, section: where the paper says
    it; statement: the claim in one sentence, our words; sentence: the paper's own sentence (docs/reference.md);
    paper_value: the paper's figure where it gives one; statistic: the table and columns the effect is computed
    from; compute: "module:function", the pure function ``(tables, boot, *, side, null, **params) -> Result``;
    inputs: (name, template under results/, gate) triples: the tables the function gets by name (``{task}``,
    ``{variant}`` and ``{seedtag}`` filled per fine-tuning seed; several triples of one name are alternatives,
    the first the run has wins; gate: a config key that must be on for that input to exist); side, null: the
    paper's side of the null value (``>`` above, ``<`` below); unit: what the bootstrap resamples; variant: the
    model the claim is about (pretrained: one; finetuned: every fine-tuning seed); config: the config key that
    computes its inputs (named when the run lacks them); params: keyword arguments of `compute`; anchor: its
    report section; figure: the prefix of its figure (``results/figures/{figure}-{task}.png``).
    """

    id: str
    paper: str
    section: str
    statement: str
    statistic: str
    compute: str
    inputs: tuple[tuple[str, str, str], ...]
    sentence: str = ""
    paper_value: str = ""
    side: str = ">"
    null: float = 0.0
    unit: str = "heads"
    variant: str = "finetuned"
    config: str = ""
    params: tuple[tuple[str, Any], ...] = ()
    anchor: str = ""
    figure: str = ""

    def load(self) -> Callable[..., Any]:
        module, func = self.compute.split(":")
        return getattr(importlib.import_module(module), func)


@dataclass(frozen=True)
class Analysis:
    name: str
    config: tuple[str, ...]
    tables: tuple[Table, ...] = ()
    figures: tuple[str, ...] = ()
    section: Section | None = None
    statistics: tuple[Statistic, ...] = ()
    kernel: StoreKernel | None = None
    paper: str = ""
    #: the papers' claims computed from this analysis's tables (the ledger, bertology.claims)
    claims: tuple[Claim, ...] = ()


# --------------------------------------------------------------------------------------------------
# statistics over fine-tuning seeds (issue 26: results/stats/{task}/seeds/, two or more train.seeds)

OVER_SEEDS = "Across fine-tuning seeds"


def over_seeds(name: str, what: str, key: tuple[str, ...] = (), diverging: bool = False) -> tuple[Statistic, ...]:
    """The explorer's statistics of one table over fine-tuning seeds (``stats/{task}/seeds/{name}.csv``, written by
    :func:`bertology.seedstats.seed_moments` with two or more train.seeds; absent with one): the mean over seeds,
    with each seed's value, then the std over seeds. what: the per-head statistic (``{k}``: the key)."""
    table = rel("seed_stat", name=name)
    return (Statistic(f"seeds:{name}", OVER_SEEDS, f"{what}, mean over seeds",
                      f"{what}: mean over the fine-tuning seeds; the head view lists each seed's value.", table,
                      key=key, diverging=diverging, optional=True, per_seed=True),
            Statistic(f"seeds:{name}:std", OVER_SEEDS, f"{what}, std over seeds",
                      f"{what}: standard deviation over the fine-tuning seeds (ddof 1).", table, column="std", key=key,
                      optional=True))


# --------------------------------------------------------------------------------------------------
# the kernels over a store (one read of a store runs them all)

KOVALEVA = StoreKernel("kovaleva", "bertology.steps.kovaleva:kovaleva_kernel", "bertology.steps.kovaleva:kovaleva_outputs")
CLARK = StoreKernel("clark", "bertology.steps.clark:clark_kernel", "bertology.steps.clark:clark_outputs")
SIEVE = StoreKernel("sieve", "bertology.steps.sieve:sieve_kernel", "bertology.steps.sieve:sieve_outputs")

MOMENTS = ("layer", "head", "feature", "mean", "std", "n")
PARSER = ("relation", "direction", "layer", "head", "accuracy", "n", "baseline_offset", "baseline_accuracy")


def _var(file: str) -> str:
    """A per-variant table, results/stats/{task}/{variant}/{file} (bertology.layout), relative to the results root."""
    return rel("variant_stat", file=file)


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        "sieve", ("analysis.sieve",), kernel=SIEVE, paper="Pande 2021",
        claims=(
            Claim("pande_local_syntactic", "Pande et al. 2021", "5 (local vs syntactic)",
                  "Local and syntactic sieve biases of the heads correlate strongly.",
                  "sieve.csv (finetuned): mean, roles local and syntactic, per head", "bertology.claims.pande:local_syntactic",
                  (("sieve", _var("sieve.csv"), ""),), null=0.5, config="analysis.sieve", anchor="sieve", figure="sieve",
                  paper_value="Spearman 0.73 (SST-2) to 0.85 (MRPC)",
                  sentence="We observe a very high correlation score of 0.78, 0.81, 0.85, 0.73 scores for QNLI, QQP, "
                           "MRPC, SST-2 tasks respectively, with a p-value of 0."),
            Claim("pande_multiskilled_middle", "Pande et al. 2021", "5 (multi-skilled heads across layers)",
                  "Multi-skilled heads (two or more roles) are most numerous in the middle layers.",
                  "sieve.csv (finetuned): assigned, fine roles, per head; layer thirds", "bertology.claims.pande:multiskilled_middle",
                  (("sieve", _var("sieve.csv"), ""),), config="analysis.sieve", anchor="sieve", figure="sieve",
                  paper_value="layers 5-9 on MRPC, QNLI, SST-2 (not QQP)",
                  sentence="The number of multi-skilled heads is higher in the middle layers (layers 5 to 9) for MRPC, "
                           "QNLI and SST-2 tasks."),
            Claim("pande_delimiter_last", "Pande et al. 2021", "5 (distribution of delimiter heads)",
                  "Delimiter heads are common in the last layers and rare in the first.",
                  "sieve.csv (finetuned): assigned, role delimiter, per head; last vs first third of the layers",
                  "bertology.claims.pande:delimiter_last", (("sieve", _var("sieve.csv"), ""),), config="analysis.sieve",
                  anchor="sieve", figure="sieve", paper_value="often the only functional heads in the last three layers",
                  sentence="In fact, such delimiter heads are often the only functional heads in the last three layers "
                           "across different tasks. Interestingly, the first layer contains very few (if any) delimiter heads."),
            Claim("pande_delimiter_delta_final", "Pande et al. 2021", "6 (fine-tuning)",
                  "Fine-tuning lowers the delimiter bias most in the final layers.",
                  "sieve.csv finetuned - pretrained: mean, role delimiter, per head; last third vs the rest",
                  "bertology.claims.pande:delimiter_delta_final",
                  (("sieve", _var("sieve.csv"), ""), ("sieve_pretrained", rel("variant_stat", variant="pretrained", file="sieve.csv"), "")),
                  side="<", config="analysis.sieve", anchor="sieve", figure="sieve-delta",
                  sentence="We observe that in the final layers, there is a decrease in the average delimiter bias score."),
        ),
        tables=(Table(_var("sieve.csv"), ("layer", "head", "role", "n", "mean", "std", "t", "p_value", "assigned",
                                               "tau", "p_adjusted", "alpha", "correction"), output="sieve"),
                Table(_var("sieve_scores.npz"), ("scores", "example_idx", "layer", "head", "role", "attrs"),
                      output="sieve_scores")),
        figures=("sieve",),
        section=Section(
            "sieve", "Functional roles of heads (Pande et al. 2021)",
            "Sieve bias: for each role (local, block, delimiter, syntactic, ...) how much more attention a head "
            "puts on the role's tokens than uniform attention would (n × mean attention); a one-sided t-test "
            "over examples (H0: bias ≤ τ) assigns the role.",
            "Most heads are multi-skilled; delimiter heads are common, syntactic heads overlap heavily with local "
            "ones, and fine-tuning changes the bias of the final layers most.",
            ("sieve",), (rel("sieve_summary"), rel("sieve_delta", seedtag=""))),
        statistics=(
            Statistic("sieve:count", "Sieve roles (Pande)", "number of roles assigned",
                      "Roles whose one-sided t-test rejects H0: mean bias <= tau (p < alpha).",
                      _var("sieve.csv"), count="assigned", fmt="int"),
            Statistic("sieve", "Sieve bias per role (Pande)", "bias: {k}",
                      "Mean over examples of the {k} sieve bias n * mean attention to the sieve (1 = uniform); dots: "
                      "role assigned (p < alpha); tau = {ref}.", _var("sieve.csv"), key=("role",),
                      mark="assigned", mark_label="role assigned", ref="tau"),
        )),
    Analysis(
        "sieve_delta", ("tasks",), paper="Pande 2021",
        tables=(Table(rel("sieve_delta"), ("task", "role", "layer_group", "pretrained", "finetuned", "delta",
                                                "n_heads")),)),
    Analysis(
        "sieve_summary", ("tasks",), paper="Pande 2021",
        tables=(Table(rel("sieve_summary"), ("task", "variant", "n_heads", "delimiter_heads", "share_delimiter",
                                                  "no_role_heads", "share_no_role", "multi_skilled_heads",
                                                  "syntactic_heads", "local_heads", "syntactic_and_local",
                                                  "overlap_syntactic_local", "jaccard_syntactic_local",
                                                  "spearman_rho", "spearman_p", "spearman_n_heads",
                                                  "spearman_rho_examples", "spearman_p_examples", "spearman_n_pairs",
                                                  "heads_local", "heads_prev_local", "heads_next_local",
                                                  "heads_block", "heads_delimiter", "heads_cls", "heads_sep",
                                                  "heads_nsubj", "heads_dobj", "heads_amod", "heads_advmod",
                                                  "heads_syntactic")),)),
    Analysis(
        "cosine", ("analysis.features",), paper="Kovaleva 4.3",
        claims=(
            Claim("kovaleva_cosine_last_layers", "Kovaleva et al. 2019", "4.3",
                  "Fine-tuning changes the attention of the last two layers most.",
                  "cosine.csv: mean per head, last two layers minus the other layers", "bertology.claims.kovaleva:cosine_last_layers",
                  (("cosine", rel("cosine"), ""),), side="<", config="analysis.features", anchor="cosine", figure="cosine",
                  paper_value="last two layers on every task but QQP",
                  sentence="Figure 5 shows that for all the tasks except QQP, it is the last two layers that undergo the "
                           "largest changes compared to the pre-trained BERT model."),
        ),
        tables=(Table(rel("cosine"), ("layer", "head", "mean", "std", "n")),
                Table(rel("features_diff"), MOMENTS)),
        figures=("cosine",),
        section=Section(
            "cosine", "Change with fine-tuning (Kovaleva §4.3, Fig. 5)",
            "Per-head cosine similarity between the pretrained and fine-tuned attention maps of the same "
            "examples (padding excluded), averaged over examples; low values mean fine-tuning changed the head.",
            "The last two layers change most with fine-tuning on every task but QQP: they encode task-specific "
            "features, earlier layers keep the pretrained ones.",
            ("cosine",)),
        statistics=(
            Statistic("cosine", "Change with fine-tuning (Kovaleva 4.3)", "cosine pretrained vs fine-tuned",
                      "Mean over examples of the cosine similarity of the pretrained and fine-tuned maps.",
                      rel("cosine", seedtag="")),
        )),
    Analysis(
        "patterns", ("analysis.patterns",), kernel=KOVALEVA, paper="Kovaleva 4.1",
        claims=(
            Claim("kovaleva_patterns_repeat", "Kovaleva et al. 2019", "4.1",
                  "Most attention maps follow one of a few repeated patterns (not heterogeneous).",
                  "patterns.csv (finetuned): 1 - fraction of class heterogeneous, per head", "bertology.claims.kovaleva:patterns_repeat",
                  (("patterns", _var("patterns.csv"), ""),), null=0.5, config="analysis.patterns", anchor="patterns",
                  figure="patterns", paper_value="heterogeneous 32% (MRPC) to 61% (QQP)",
                  sentence="Our findings suggest that there is a limited set of attention patterns that are repeated across "
                           "different heads, indicating the overall model overparametrization."),
        ),
        tables=(Table(_var("patterns.csv"), ("layer", "head", "class", "fraction", "n"), output="patterns"),),
        figures=("patterns",),
        section=Section(
            "patterns", "Attention patterns (Kovaleva §4.1, Fig. 2)",
            "Every (example, layer, head) map is classified as vertical, diagonal, vertical+diagonal, block or "
            "heterogeneous; bars give the share of each class.",
            "Vertical maps (attention to [CLS]/[SEP]) are the most frequent class; the heterogeneous share, the "
            "only one likely to carry linguistic structure, is at most about half and varies by task.",
            ("patterns",)),
        statistics=(
            Statistic("patterns", "Pattern classes (Kovaleva 4.1)", "fraction {k}",
                      "Share of the head's maps classified as {k}.", _var("patterns.csv"), column="fraction",
                      key=("class",)),
        )),
    Analysis(
        "features", ("analysis.features",), kernel=KOVALEVA, paper="Kovaleva 4.4",
        claims=(
            Claim("kovaleva_special_tokens", "Kovaleva et al. 2019", "4.4",
                  "Vertical attention goes to [CLS] and [SEP], not to linguistic features.",
                  "features.csv (finetuned): max(cls, sep) - max(noun, verb, pronoun, subject, object, negation), per head",
                  "bertology.claims.kovaleva:special_features", (("features", _var("features.csv"), ""),),
                  config="analysis.features", anchor="features", figure="features",
                  sentence="Contrary to our initial hypothesis that the vertical attention pattern may be motivated by "
                           "linguistically meaningful features, we found that it is associated predominantly, if not "
                           "exclusively, with attention to [CLS] and [SEP] tokens."),
            Claim("kovaleva_cls_early_sep_late", "Kovaleva et al. 2019", "4.4",
                  "Earlier layers attend to [CLS], later layers to [SEP].",
                  "features.csv (finetuned): Spearman rho of layer and (sep - cls), over heads",
                  "bertology.claims.kovaleva:cls_early_sep_late", (("features", _var("features.csv"), ""),),
                  config="analysis.features", anchor="features", figure="features",
                  sentence="There is also a clear tendency for earlier layers to pay attention to [CLS] and for later "
                           "layers to [SEP], and this trend is consistent across all the tasks."),
            Claim("clark_sep_middle", "Clark et al. 2019", "3.2",
                  "Attention to [SEP] peaks in the middle layers.",
                  "features.csv (pretrained): mean, feature sep, per head; middle third minus the rest",
                  "bertology.claims.clark:sep_middle", (("features", _var("features.csv"), ""),), variant="pretrained",
                  config="analysis.features", anchor="features", figure="features",
                  paper_value="over half of the attention in layers 6-10 of BERT-base",
                  sentence="In particular, we find that more than half of BERT's attention in layers 6-10 focuses on [SEP]."),
        ),
        tables=(Table(_var("features.csv"), MOMENTS, output="features"),),
        figures=("features",),
        section=Section(
            "features", "Attention to linguistic features (Kovaleva §4.4, Fig. 6)",
            "Per head, the attention a token type receives (summed over queries, divided by length, maximum over "
            "tokens of the type), averaged over examples, for both variants and their difference.",
            "Vertical attention is mostly to [CLS] and [SEP]; heads attending to nouns, objects or negation exist "
            "but their weights are small next to the special tokens, and they come from pre-training.",
            ("features",)),
        statistics=(
            Statistic("features", "Feature attention (Kovaleva 4.4)", "attention to {k}",
                      "Attention the {k} tokens receive (summed over queries, / n, max over tokens), mean over "
                      "examples.", _var("features.csv"), key=("feature",)),
        )),
    Analysis(
        "cls", ("analysis.features",), kernel=KOVALEVA, paper="Kovaleva 4.5",
        claims=(
            Claim("kovaleva_cls_to_sep", "Kovaleva et al. 2019", "4.5",
                  "In the last layer, [CLS] attends to [SEP] more than to any other token type.",
                  "cls.csv (finetuned): sep - max(other features), per head of the last layer",
                  "bertology.claims.kovaleva:cls_to_sep", (("cls", _var("cls.csv"), ""),), config="analysis.features",
                  anchor="cls", figure="cls", paper_value="[SEP] most on all tasks but STS-B, RTE and QNLI",
                  sentence="Our investigation of attention distribution for the [CLS] token in the output layer suggests "
                           "that for most tasks, with the exception of STS-B, RTE and QNLI, the [SEP] gets attended the most."),
        ),
        tables=(Table(_var("cls.csv"), MOMENTS, output="cls"),),
        figures=("cls",),
        section=Section(
            "cls", "[CLS] attention in the last layer (Kovaleva §4.5, Fig. 7)",
            "The last layer's [CLS] row: how much of its attention each token type gets, per head.",
            "[SEP] gets most of [CLS]'s attention on most tasks; punctuation is attended about as much as [SEP] "
            "on some.",
            ("cls",)),
        statistics=(
            Statistic("cls", "[CLS] attention, last layer (Kovaleva 4.5)", "[CLS] → {k}",
                      "The last layer's [CLS] row: attention to {k} tokens.", _var("cls.csv"), key=("feature",)),
        )),
    Analysis(
        "relations", ("analysis.relations",), kernel=KOVALEVA, paper="Kovaleva 4.2",
        tables=(Table(_var("relations.csv"), ("layer", "head", "source", "mean", "std", "n", "flagged"),
                      output="relations"),
                Table(_var("relations_framenet.csv"), ("layer", "head", "source", "mean", "std", "n", "flagged")),
                Table(rel("framenet_links"), ("item", "sentence_id", "doc", "text", "n_tokens", "frame",
                                                       "fe", "fe_tokens", "target_tokens", "distance")),
                Table(rel("framenet_counts"), ("sentences", "annotation_sets", "short_sentences_sets",
                                                     "short_sentences_sentences", "with_core_fe_sets",
                                                     "with_core_fe_sentences", "short_core_fes_sets",
                                                     "short_core_fes_sentences", "links_2_apart_sets",
                                                     "links_2_apart_sentences", "core_links", "close_links", "links",
                                                     "surviving_sets", "surviving_sentences"))),
        figures=("relations",),
        section=Section(
            "relations", "Relation-specific heads (Kovaleva §4.2, Fig. 3)",
            "Mean over examples of the maximum attention between linked words (FrameNet: from the frame-evoking "
            "target to its core frame elements, the target's wordpieces being the queries; dependency arcs: from "
            "the dependent to its head), per head; heads above the 99th percentile are flagged.",
            "Only a couple of heads of 144 in BERT-base attend to FrameNet-linked words more than the rest.",
            ("relations",)),
        statistics=(
            Statistic("relations", "Relation attention (Kovaleva 4.2)", "{k} links",
                      "Max attention between {k}-linked words, mean over examples; dots: above the 99th percentile.",
                      _var("relations.csv"), key=("source",), mark="flagged",
                      mark_label="flagged (> 99th percentile)"),
        )),
    Analysis(
        "entropy", (), kernel=CLARK, paper="Clark 3.3",
        claims=(
            Claim("clark_broad_lower", "Clark et al. 2019", "3.3",
                  "Heads in the lower layers attend broadly (entropy near uniform).",
                  "entropy.csv (pretrained): all / uniform per head; first third of the layers minus the rest",
                  "bertology.claims.clark:broad_lower", (("entropy", _var("entropy.csv"), ""),), variant="pretrained",
                  config="analysis.features", anchor="entropy", figure="entropy",
                  paper_value="at most 10% of the mass on any single word",
                  sentence="We find that some attention heads, especially in lower layers, have very broad attention."),
        ),
        tables=(Table(_var("entropy.csv"), MOMENTS, output="entropy"),),
        figures=("entropy",),
        section=Section(
            "entropy", "Attention entropy (Clark et al. 2019, §3.3)",
            "Per head, the mean entropy (nats) of its attention rows over every real query of the sampled "
            "examples, and of the [CLS] row alone; the dashed line is uniform attention over the same examples "
            "(ln n). Low entropy = focused attention, near the line = broad, bag-of-words attention.",
            "Some heads in the lower layers attend very broadly (entropy close to uniform, at most about 10% of "
            "the mass on any single word); in the last layer the [CLS] row has high entropy, i.e. broad attention.",
            ("entropy",)),
        statistics=(
            Statistic("entropy", "Entropy (Clark et al.)", "entropy: {k}",
                      "Mean attention entropy ({k}) in nats; uniform attention = ln n.", _var("entropy.csv"),
                      key=("feature",), optional=True),
        )),
    Analysis(
        "norms", ("analysis.norms",), paper="Kobayashi 2020",
        claims=(
            Claim("kobayashi_specials_norm", "Kobayashi et al. 2020", "4",
                  "[CLS] and [SEP] take a larger share of the attention weight than of the norm-weighted attention.",
                  "norms.csv (finetuned): weight_share - norm_share, categories cls + sep, per head",
                  "bertology.claims.beyond:specials_norm", (("norms", _var("norms.csv"), "analysis.norms.enabled"),),
                  config="analysis.norms.enabled", anchor="norms", figure="norms",
                  sentence="The findings of our norm-based analyses of BERT and a Transformer-based neural machine "
                           "translation system include the following: (i) contrary to previous studies, BERT pays poor "
                           "attention to special tokens."),
        ),
        tables=(Table(_var("norms.csv"), ("layer", "head", "category", "measure", "mean", "std", "n")),),
        figures=("norms",),
        section=Section(
            "norms", "Beyond attention weights: value norms (Kobayashi et al. 2020)",
            "A head passes on alpha_ij f(x_j), not alpha_ij: per layer, the share of the attention each token "
            "category ([CLS], [SEP], punctuation, other) receives by weight (solid) and by norm-weighted attention "
            "alpha ||f(x)|| (dashed), pooled over the layer's heads, for the pretrained and fine-tuned model "
            "(analysis.norms.examples examples). norms.csv adds per-head shares, the mean ||f(x)|| per category and "
            "Spearman correlations of alpha with ||f(x)|| and of ||f(x)|| with token frequency.",
            "In BERT-base the heavy attention to [CLS], [SEP] and punctuation carries vectors of small norm: "
            "by norm-weighted attention their share shrinks sharply (attention to [SEP] is largely a no-op), "
            "alpha and ||f(x)|| are negatively correlated for them, and frequent tokens have smaller ||f(x)||. "
            "This run finds what the dashed lines show against the solid ones: the gap is this model's no-op "
            "attention.",
            ("norms",)),
        statistics=(
            Statistic("norms", "Value norms (Kobayashi et al.)", "{k}",
                      "norms.csv, {k}: weight_share / norm_share = share of the attention weight / of alpha ||f(x)|| "
                      "the category's keys receive (mean over examples); value_norm = mean ||f(x)||; spearman_* = "
                      "Spearman's rho (docs/reference.md#norms).", _var("norms.csv"),
                      key=("measure", "category"), notna="head", optional=True),
        )),
    Analysis(
        "parser", (), kernel=CLARK, paper="Clark 4.2",  # the gold trees' rules read analysis.syntax
        claims=(
            Claim("clark_parser_nsubj", "Clark et al. 2019", "4.2",
                  "Some head finds the nsubj head word more often than the relation's best fixed offset.",
                  "syntax/pretrained.csv (gold trees) or parser.csv (spaCy): max accuracy - baseline_accuracy, relation nsubj",
                  "bertology.claims.clark:parser_beats_baseline",
                  (("parser", rel("syntax_stat", model="pretrained"), "analysis.syntax.conllu"), ("parser", _var("parser.csv"), "")),
                  variant="pretrained", params=(("relation", "nsubj"),), config="analysis.syntax.conllu", anchor="parser",
                  figure="parser", paper_value="",
                  sentence="For example, we find heads that attend to the direct objects of verbs, determiners of nouns, "
                           "objects of prepositions, and coreferent mentions with remarkably high accuracy."),
            Claim("clark_parser_obj", "Clark et al. 2019", "4.2",
                  "Some head finds the obj head word more often than the relation's best fixed offset.",
                  "syntax/pretrained.csv (gold trees) or parser.csv (spaCy): max accuracy - baseline_accuracy, relation obj",
                  "bertology.claims.clark:parser_beats_baseline",
                  (("parser", rel("syntax_stat", model="pretrained"), "analysis.syntax.conllu"), ("parser", _var("parser.csv"), "")),
                  variant="pretrained", params=(("relation", "obj"),), config="analysis.syntax.conllu", anchor="parser",
                  figure="parser", paper_value="86.8% vs 40.0% (head 8-10)",
                  sentence="For example, we find heads that attend to the direct objects of verbs, determiners of nouns, "
                           "objects of prepositions, and coreferent mentions with remarkably high accuracy."),
            Claim("clark_parser_det", "Clark et al. 2019", "4.2",
                  "Some head finds the det head word more often than the relation's best fixed offset.",
                  "syntax/pretrained.csv (gold trees) or parser.csv (spaCy): max accuracy - baseline_accuracy, relation det",
                  "bertology.claims.clark:parser_beats_baseline",
                  (("parser", rel("syntax_stat", model="pretrained"), "analysis.syntax.conllu"), ("parser", _var("parser.csv"), "")),
                  variant="pretrained", params=(("relation", "det"),), config="analysis.syntax.conllu", anchor="parser",
                  figure="parser", paper_value="94.3% (head 8-11)",
                  sentence="For example, we find heads that attend to the direct objects of verbs, determiners of nouns, "
                           "objects of prepositions, and coreferent mentions with remarkably high accuracy."),
        ),
        tables=(Table(_var("parser.csv"), PARSER, output="parser"),
                Table(rel("syntax_stat"), PARSER),
                Table(rel("syntax_best"), ("model",) + PARSER)),
        figures=("parser",),
        section=Section(
            "parser", "Heads as dependency parsers (Clark et al. 2019, §4.2, Fig. 5)",
            "For each relation and head, how often the word a word attends to most (dep → head), or the word that "
            "attends most to it (head → dep), is its syntactic head; word-level attention sums over the wordpieces "
            "attended to and averages over those attending. Bars: the best head per relation; black marks: the "
            "fixed-offset baseline (always the relation's most common relative position). Gold CoNLL-U trees "
            "(`parser-syntax`, analysis.syntax.conllu and the demo's own trees) and each task's spaCy parses.",
            "No single head does well at syntax overall, but in BERT-base specific heads track specific relations "
            "far above the baseline: direct objects attend to their verbs (head 8-10, 86.8% vs 40.0%), determiners "
            "to their nouns (8-11, 94.3%), prepositions to their objects (9-6, 76.3%), passive auxiliaries to their "
            "verbs (82.5%) and possessives to the head of their NP (80.5%), all learnt without syntactic "
            "supervision.",
            ("parser",), (rel("syntax_best"),)),
        statistics=(
            Statistic("parser", "Heads as parsers (Clark et al.)", "parser accuracy: {k}",
                      "Share of {k} dependents whose most attended word is their head.", _var("parser.csv"),
                      column="accuracy", key=("relation",), where=(("direction", "dep_to_head"),), top="n",
                      optional=True),
        )),
    Analysis(
        "disabling", ("ablation",), paper="Kovaleva 4.6",
        claims=(
            Claim("kovaleva_disable_head", "Kovaleva et al. 2019", "4.6",
                  "Disabling some single head improves the fine-tuned model.",
                  "ablation heads.csv: largest delta of the headline metric, its ci_low, ci_high, p_adj",
                  "bertology.claims.kovaleva:disabling_gain", (("heads", rel("ablation", name="heads"), ""),),
                  unit="examples (the sweep's paired bootstrap)", params=(("table", "heads"),), config="ablation",
                  anchor="ablation", figure="ablation", paper_value="+0.1% (STS-B) to +1.2% (MRPC)",
                  sentence="However, it is important to note that across all tasks and datasets, disabling some heads "
                           "leads to an increase in performance."),
            Claim("kovaleva_disable_layer", "Kovaleva et al. 2019", "4.6",
                  "Disabling some whole layer improves the fine-tuned model.",
                  "ablation layers.csv: largest delta of the headline metric, its ci_low, ci_high, p_adj",
                  "bertology.claims.kovaleva:disabling_gain",
                  (("layers", rel("ablation", name="layers"), ""), ("heads", rel("ablation", name="heads"), "")),
                  unit="examples (the sweep's paired bootstrap)", params=(("table", "layers"),), config="ablation",
                  anchor="ablation", figure="ablation", paper_value="up to +3.2% (RTE, first layer)",
                  sentence="Furthermore, disabling a whole layer, that is, all 12 heads in a given layer, also improves "
                           "the results."),
        ),
        tables=(Table(rel("ablation", name="heads"), ("layer", "head", "metric", "value", "baseline", "delta", "ci_low",
                                                    "ci_high", "p_value", "p_adj", "significant", "test", "n")),
                Table(rel("ablation", name="layers"), ("layer", "metric", "value", "baseline", "delta", "ci_low",
                                                     "ci_high", "p_value", "p_adj", "significant", "test", "n")),
                Table(rel("ablation", name="summary"), ("task", "metric", "finding", "layer", "head", "value",
                                                      "baseline", "delta", "ci_low", "ci_high", "p_value", "p_adj",
                                                      "n"))),
        figures=("ablation",),
        section=Section(
            "ablation", "Disabling heads and layers (Kovaleva §4.6, Figs. 8–9)",
            "The fine-tuned model's score with one head (or one whole layer) attending uniformly to all real "
            "tokens, against the intact baseline, with paired bootstrap intervals and p-values over the same "
            "examples.",
            "Disabling single heads or whole layers often changes little, and some disabled heads or layers "
            "even improve the score; the paper gave no uncertainty, so check which gains survive here.",
            ("ablation",), (rel("ablation", name="summary", seedtag=""),)),
        statistics=(
            Statistic("ablation", "Disabling heads (Kovaleva 4.6)", "disabling Δ {k}",
                      "Fine-tuned model's {k} with this head attending uniformly, minus the intact model's; "
                      "interval: paired bootstrap; dots: significant.", rel("ablation", name="heads", seedtag=""), column="delta",
                      key=("metric",), diverging=True, ci=("ci_low", "ci_high"), mark="significant",
                      mark_label="significant"),
        )),
    Analysis(
        "importance", ("ablation.pruning",), paper="Michel 4.1",
        tables=(Table(rel("ablation", name="importance"), ("layer", "head", "importance", "raw", "n", "split")),),
        figures=("importance", "pruning"),
        section=Section(
            "pruning", "Head importance and pruning (Michel et al. 2019)",
            "Importance of a head = mean over examples of |dL/dξ|, the loss's sensitivity to a gate ξ on the "
            "head's output (ξ = 1 is the intact model), normalised per layer (l2), computed on the split named in "
            "each map's title (ablation.pruning.importance_split; the paper and the default: training data). "
            "Pruning curves: the validation score with 0, 10, ..., 100% of all heads removed, least important "
            "first, against random orders (mean, ±1 std, range); removal zeroes the head's output (the paper) or, "
            "with ablation.pruning.mode: uniform, makes it attend uniformly (as the disabling above).",
            "Michel et al.: most heads can be removed at test time; pruning by importance, 20% (WMT) and 40% (BERT "
            "on MNLI) of the heads go without a noticeable loss, after which the score drops sharply. Their curves "
            "have no random baseline; the gap to the random orders here says how much the importance order buys.",
            ("importance", "pruning")),
        statistics=(
            Statistic("importance", "Head importance (Michel et al.)", "importance",
                      "E|dL/dξ| of a gate on the head's output, normalised per layer.",
                      rel("ablation", name="importance", seedtag=""), column="importance", optional=True),
        )),
    Analysis(
        "pruning", ("ablation.pruning",), paper="Michel 4",
        claims=(
            Claim("michel_importance_order", "Michel et al. 2019", "4",
                  "Pruning heads in order of importance costs less than pruning them in a random order.",
                  "pruning.csv: value (headline metric), order importance minus the mean of the random orders, per fraction",
                  "bertology.claims.michel:importance_order", (("pruning", rel("ablation", name="pruning"), ""),),
                  unit="pruning fractions", config="ablation.pruning", anchor="pruning", figure="pruning",
                  sentence="Based on this observation, we further propose a simple algorithm that greedily and iteratively "
                           "prunes away attention heads that seem to be contributing less to the model."),
            Claim("michel_prunable_share", "Michel et al. 2019", "4",
                  "A share of the heads can be pruned by importance with the metric within one point of the intact model.",
                  "pruning.csv: largest fraction (order importance) whose every step keeps value >= intact - 0.01",
                  "bertology.claims.michel:prunable_share", (("pruning", rel("ablation", name="pruning"), ""),),
                  null=0.05, unit="seeds", config="ablation.pruning", anchor="pruning", figure="pruning",
                  paper_value="20% (WMT), 40% (BERT on MNLI)",
                  sentence="In practice, a large percentage of attention heads can be removed at test time without "
                           "significantly impacting performance."),
        ),
        tables=(Table(rel("ablation", name="pruning"), ("order", "seed", "fraction", "n_pruned", "metric", "value",
                                                      "mode")),)),
    Analysis(
        "mixing", ("analysis.norms",), paper="Kobayashi 2021",
        claims=(
            Claim("kobayashi_mixing_residual", "Kobayashi et al. 2021", "5",
                  "With the residual, each token keeps most of itself (context-mixing ratio below one half).",
                  "mixing.csv (pretrained): mean, measure attnres_n, per layer", "bertology.claims.beyond:mixing_residual",
                  (("mixing", _var("mixing.csv"), "analysis.norms.enabled"),), side="<", null=0.5, unit="layers",
                  variant="pretrained", config="analysis.norms.enabled", anchor="mixing", figure="mixing",
                  sentence="Our analysis of Transformer-based masked language models shows that the token-to-token "
                           "interaction performed via attention has less impact on the intermediate representations than "
                           "previously assumed."),
        ),
        tables=(Table(_var("mixing.csv"), ("layer", "measure", "mean", "std", "n")),),
        figures=("mixing",),
        section=Section(
            "mixing", "Context mixing with the residual and LayerNorm (Kobayashi et al. 2021)",
            "Per layer, the share of a token's new representation that comes from the other tokens (context-mixing "
            "ratio, mean ± std over tokens) under attention alone (by weights and by norms), attention + residual, "
            "and attention + residual + LayerNorm (the paper's decomposition of LayerNorm into per-token terms). "
            "Pre-LN models (ModernBERT) have no LayerNorm after the residual and no such line.",
            "In BERT and RoBERTa the residual connection and LayerNorm shrink the mixing far below what attention "
            "alone suggests: most of a token's representation after the attention block is the token itself. "
            "The tables give this run's ratios.",
            ("mixing",), (_var("mixing.csv"),))),
    Analysis(
        "token_scores", ("analysis.norms", "analysis.flow"), paper="Abnar 2020",
        tables=(Table(_var("token_scores.parquet"), ("example_idx", "position", "word", "method", "score")),)),
    Analysis(
        "faithfulness", ("analysis.flow",), paper="Abnar 2020",
        claims=(
            Claim("abnar_rollout_raw", "Abnar & Zuidema 2020", "4",
                  "Rollout agrees with the ablation importance better than raw attention.",
                  "faithfulness.csv: mean, view rollout - view raw, importance ablation",
                  "bertology.claims.beyond:view_beats_raw",
                  (("faithfulness", _var("faithfulness.csv"), "analysis.norms.enabled"),
                   ("faithfulness_examples", _var("faithfulness_examples.csv"), "analysis.norms.enabled")),
                  unit="examples", params=(("view", "rollout"),), config="analysis.norms.enabled", anchor="faithfulness",
                  figure="faithfulness", paper_value="Table 2: higher Spearman than raw for both importances",
                  sentence="We show that these methods give complementary views on the flow of information, and compared "
                           "to raw attention, both yield higher correlations with importance scores of input tokens "
                           "obtained using an ablation method and input gradients."),
            Claim("abnar_flow_raw", "Abnar & Zuidema 2020", "4",
                  "Flow agrees with the ablation importance better than raw attention.",
                  "faithfulness.csv: mean, view flow - view raw, importance ablation",
                  "bertology.claims.beyond:view_beats_raw",
                  (("faithfulness", _var("faithfulness.csv"), "analysis.norms.enabled"),
                   ("faithfulness_examples", _var("faithfulness_examples.csv"), "analysis.norms.enabled")),
                  unit="examples", params=(("view", "flow"),), config="analysis.norms.enabled", anchor="faithfulness",
                  figure="faithfulness", paper_value="Table 2: higher Spearman than raw for both importances",
                  sentence="We show that these methods give complementary views on the flow of information, and compared "
                           "to raw attention, both yield higher correlations with importance scores of input tokens "
                           "obtained using an ablation method and input gradients."),
        ),
        tables=(Table(rel("variant_stat", variant="finetuned{seedtag}", file="faithfulness.csv"), ("view", "importance", "mean", "std", "n", "ci_low",
                                                                  "ci_high")),
                Table(rel("variant_stat", variant="finetuned{seedtag}", file="faithfulness_examples.csv"), ("example_idx", "view", "importance",
                                                                             "rho")),
                Table(rel("variant_stat", variant="finetuned{seedtag}", file="importance.parquet"), ("example_idx", "position", "word", "method",
                                                                    "score"))),
        figures=("faithfulness",),
        section=Section(
            "faithfulness", "Rollout, flow and how faithful each view is (Abnar & Zuidema 2020)",
            "Token views from the last layer's [CLS]: raw attention (heads averaged), norm-weighted attention, "
            "rollout (attention mixed half and half with the identity, multiplied through the layers) and flow (max "
            "flow from each input token to the top [CLS]). Each is compared, per example of the fine-tuned model, "
            "with two importance scores (drop in the predicted class's probability when the token is masked; "
            "input x gradient) by Spearman's rho: mean over examples with a bootstrap interval "
            "(analysis.flow.examples examples). token_scores.parquet holds every score.",
            "Raw attention of the top layer correlates weakly with both importances; rollout and flow correlate "
            "clearly better (the paper's Table 2). The table below is this run's: whether rollout and flow beat "
            "raw attention here, and by how much given the interval.",
            ("faithfulness",), (rel("variant_stat", variant="finetuned", file="faithfulness.csv"),))),
    Analysis(
        "seeds", ("analysis.seeds",), paper="Sellam 2022",
        tables=(Table(rel("seed_stat", name="roles"), ("layer", "head", "role", "assigned", "n_seeds", "share")),
                Table(rel("seed_stat", name="role_agreement"), ("role", "layer", "fleiss_kappa", "jaccard",
                                                                "heads_assigned", "n_heads", "n_seeds")),
                Table(rel("seed_stat", name="multibootstrap"), ("quantity", "metric", "role", "layer", "head", "mean",
                                                                "ci_low", "ci_high", "n_seeds", "n_examples",
                                                                "resamples", "confidence")),
                Table(rel("seed_stat", name="findings"), ("finding", "paper", "statement", "holds", "seeds", "holding",
                                                          "n_seeds", "verdict"))),
        figures=("seeds",),
        section=Section(
            "seeds", "Robust across seeds",
            "With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed (the pretrained model once). "
            "findings.csv: which of the papers' findings hold in every seed, in most, in some, in one only or in none "
            "(head identities compared with the first seed's). Stability maps: each per-head statistic's mean and "
            "std over seeds. Role agreement: Fleiss' kappa (seeds as raters) and mean pairwise Jaccard of the heads "
            "each sieve role is assigned to, per layer. stats/{task}/seeds/multibootstrap.csv gives every fine-tuned "
            "- pretrained difference (cosine, sieve bias, disabling delta) with a Multi-Bootstrap interval.",
            "The papers fine-tuned once. McCoy et al. 2020 and Sellam et al. 2022 (The MultiBERTs) show that "
            "fine-tuning and pre-training seeds alone move results, so a per-head finding is a property of fine-tuning "
            "only where it holds in every seed; the Multi-Bootstrap (seeds and examples resampled together) gives "
            "intervals that carry both sources of variance.",
            ("seeds",), (rel("seed_stat", name="findings"), rel("seed_stat", name="role_agreement"))),
        statistics=(
            *over_seeds("cosine", "cosine pretrained vs fine-tuned"),
            *over_seeds("disabling", "disabling Δ {k}", key=("metric",), diverging=True),
            *over_seeds("importance", "importance"),
            *over_seeds("entropy", "entropy: {k}", key=("feature",)),
            *over_seeds("sieve", "bias: {k}", key=("role",)),
            Statistic("seeds:roles", OVER_SEEDS, "seeds assigning {k}",
                      "Share of the fine-tuning seeds whose sieve test assigns the {k} role to the head.",
                      rel("seed_stat", name="roles"), column="share", key=("role",), optional=True),
        )),
    Analysis(
        "table1", ("train.alpha",), paper="Kovaleva Table 1",
        claims=(
            Claim("kovaleva_table1_pretrained", "Kovaleva et al. 2019", "Table 1 (4.3)",
                  "The fine-tuned model beats the pretrained encoder with an untrained head.",
                  "table1.csv: value (the task's first metric), finetuned - pretrained",
                  "bertology.claims.kovaleva:table1_gain",
                  (("table1", rel("table1"), ""), ("score_finetuned", rel("score", variant="finetuned"), ""),
                   ("score_pretrained", rel("score", variant="pretrained"), "")),
                  unit="seeds", params=(("baseline", "pretrained"),), config="train.seeds", anchor="table1",
                  figure="table1", paper_value="35.9 points on average",
                  sentence="At the same time, Table 1 shows that fine-tuned BERT outperforms pre-trained BERT by a "
                           "significant margin on all the tasks (with an average of 35.9 points of absolute difference)."),
            Claim("kovaleva_table1_random", "Kovaleva et al. 2019", "Table 1 (4.3)",
                  "The fine-tuned model beats the same architecture fine-tuned from a random initialisation.",
                  "table1.csv: value (the task's first metric), finetuned - random-finetuned",
                  "bertology.claims.kovaleva:table1_gain",
                  (("table1", rel("table1"), ""), ("score_finetuned", rel("score", variant="finetuned"), ""),
                   ("score_random-finetuned", rel("score", variant="random-finetuned"), "train.inits")),
                  unit="seeds", params=(("baseline", "random-finetuned"),), config="train.inits", anchor="table1",
                  figure="table1", paper_value="e.g. RTE 64.6 vs 52.7, QNLI 84.4 vs 49.5",
                  sentence="BERT with weights initialized from normal distribution and further fine-tuned for a given task "
                           "consistently produces lower scores than the ones achieved with pre-trained BERT."),
        ),
        tables=(Table(rel("table1"), ("task", "variant", "metric", "value", "n", "std", "n_seeds")),
                Table(rel("table1_tests"), ("task", "metric", "variant_a", "variant_b", "mean_a", "mean_b",
                                                  "difference", "n_a", "n_b", "test", "statistic", "df", "p",
                                                  "significant"))),
        figures=("table1",),
        section=Section(
            "table1", "Table 1 — what fine-tuning buys",
            "Validation scores of the pretrained encoder with an untrained classification head, the same "
            "architecture fine-tuned from a random (normal) initialisation, and the pretrained encoder fine-tuned.",
            "Kovaleva et al. (Table 1): fine-tuning the pretrained model wins on every task (35.9 points on "
            "average over the untrained head); random initialisation is consistently worse than pretrained.",
            ("table1",), (rel("table1"),))),
)

#: results/claims.csv's columns (bertology.claims.ledger.COLUMNS)
CLAIMS_COLUMNS = ("claim", "paper", "section", "statement", "paper_value", "statistic", "task", "variant", "effect",
                  "ci_low", "ci_high", "null", "side", "unit", "test", "p", "p_holm", "n", "n_seeds", "verdict",
                  "seed_verdicts", "seeds", "seeds_agree", "note", "heads", "anchor", "figure")
#: the ledger: every analysis's claims checked on the run (rule claims; the report opens with it)
ANALYSES = ANALYSES + (Analysis("claims", ("analysis.claims",), paper="the ledger",
                                tables=(Table(rel("claims"), CLAIMS_COLUMNS),)),)

#: the report's sections, in this order (every analysis with a section, once)
REPORT_ORDER: tuple[str, ...] = ("table1", "patterns", "relations", "cosine", "features", "cls", "disabling",
                                 "entropy", "parser", "norms", "mixing", "faithfulness", "importance", "sieve",
                                 "seeds")


def analysis(name: str) -> Analysis:
    """The analysis named `name`."""
    for a in ANALYSES:
        if a.name == name:
            return a
    raise KeyError(f"no analysis {name!r}; analyses: {', '.join(a.name for a in ANALYSES)}")


def store_analyses() -> tuple[Analysis, ...]:
    """The analyses computed in the one read of a store (rule ``store_stats``), in registry order."""
    return tuple(a for a in ANALYSES if a.kernel is not None)


def store_kernels() -> tuple[StoreKernel, ...]:
    """The distinct kernels of the store analyses, in order of first use."""
    return tuple(dict.fromkeys(a.kernel for a in store_analyses() if a.kernel is not None))


def store_outputs() -> dict[str, str]:
    """The one-pass rule's outputs: output name -> path under the working directory (results/...)."""
    return {t.output: join(ROOT, t.path) for a in store_analyses() for t in a.tables if t.output}


def store_sections() -> tuple[str, ...]:
    """The config sections the store analyses read (without the store's identity and Dask)."""
    return tuple(dict.fromkeys(s for a in store_analyses() for s in a.config))


def report_sections() -> tuple[Section, ...]:
    """The report's sections in :data:`REPORT_ORDER`."""
    return tuple(analysis(n).section for n in REPORT_ORDER)


def statistics() -> tuple[Statistic, ...]:
    """Every statistic the explorer offers, in registry order."""
    return tuple(s for a in ANALYSES for s in a.statistics)


def claims() -> tuple[Claim, ...]:
    """Every claim of the ledger, in registry order (results/claims.csv)."""
    return tuple(c for a in ANALYSES for c in a.claims)


def tables() -> dict[str, tuple[str, ...]]:
    """Every table of every analysis: path under results/ -> columns."""
    return {t.path: t.columns for a in ANALYSES for t in a.tables}
