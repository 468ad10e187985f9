"""Pande et al. 2021, "The heads hypothesis": sieve bias and functional roles of heads, declared once. The per-head
tests and scores come from the sieve kernel in the one read of a store (:class:`bertology.sieve.reduce.SieveKernel`);
the tables across tasks from ``rules/sieve.smk``."""

from __future__ import annotations

from bertology.layout import rel
from bertology.registry import AcrossSeeds, Analysis, Section, Statistic, Table, variant_table
from bertology.sieve.reduce import SieveKernel

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="sieve", config=("analysis.sieve",), kernel=SieveKernel,
        tables=(Table(variant_table("sieve.csv"), ("layer", "head", "role", "n", "mean", "std", "t", "p_value",
                                                   "assigned", "tau", "p_adjusted", "alpha", "correction"),
                      output="sieve", seeds=AcrossSeeds("sieve", ("layer", "head", "role"))),
                Table(variant_table("sieve_scores.npz"), ("scores", "example_idx", "layer", "head", "role", "attrs"),
                      output="sieve_scores")),
        section=Section(
            key="sieve", title="Functional roles of heads (Pande et al. 2021)",
            measures="Sieve bias: for each role (local, block, delimiter, syntactic, ...) how much more attention a "
            "head puts on the role's tokens than uniform attention would (n × mean attention); a one-sided t-test "
            "over examples (H0: bias ≤ τ) assigns the role.",
            finding="Most heads are multi-skilled; delimiter heads are common, syntactic heads overlap heavily with "
            "local ones, and fine-tuning changes the bias of the final layers most.",
            figure_prefixes=("sieve",), tables=(rel("sieve_summary"), rel("sieve_delta", seedtag=""))),
        statistics=(
            Statistic(id="sieve:count", group="Sieve roles (Pande)", label="number of roles assigned",
                      desc="Roles whose one-sided t-test rejects H0: mean bias <= tau (p < alpha).",
                      table=variant_table("sieve.csv"), count="assigned", fmt="int"),
            Statistic(id="sieve", group="Sieve bias per role (Pande)", label="bias: {k}",
                      desc="Mean over examples of the {k} sieve bias n * mean attention to the sieve (1 = uniform); "
                      "dots: role assigned (p < alpha); tau = {ref}.", table=variant_table("sieve.csv"), key=("role",),
                      mark="assigned", mark_label="role assigned", ref="tau", across_seeds=True),
        )),
    Analysis(
        name="sieve_delta", config=("tasks",),
        tables=(Table(rel("sieve_delta"), ("task", "role", "layer_group", "pretrained", "finetuned", "delta",
                                           "n_heads")),)),
    Analysis(
        name="sieve_summary", config=("tasks",),
        tables=(Table(rel("sieve_summary"), ("task", "variant", "n_heads", "delimiter_heads", "share_delimiter",
                                             "no_role_heads", "share_no_role", "multi_skilled_heads",
                                             "syntactic_heads", "local_heads", "syntactic_and_local",
                                             "overlap_syntactic_local", "jaccard_syntactic_local", "spearman_rho",
                                             "spearman_p", "spearman_n_heads", "spearman_rho_examples",
                                             "spearman_p_examples", "spearman_n_pairs", "heads_local",
                                             "heads_prev_local", "heads_next_local", "heads_block", "heads_delimiter",
                                             "heads_cls", "heads_sep", "heads_nsubj", "heads_dobj", "heads_amod",
                                             "heads_advmod", "heads_syntactic")),)),
)
