"""Pande et al. 2021, "The heads hypothesis": sieve bias and functional roles of heads, declared once. The per-head
tests and scores come from the sieve kernel in the one read of a store (:class:`bertology.sieve.reduce.SieveKernel`);
the tables across tasks from ``rules/sieve.smk``."""

from __future__ import annotations

from bertology.claims import pande as claims_pande
from bertology.pipeline.layout import rel
from bertology.pipeline.layout import fill
from bertology.registry import (ONCE, AcrossSeeds, Analysis, Claim, Output, Section, Statistic, Step, Table, Want, figure,
                                variant_table)

SIEVE_SCORES_FILE = "sieve_scores.npz"
SIEVE, SIEVE_SCORES = variant_table("sieve.csv"), variant_table(SIEVE_SCORES_FILE)

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="sieve", config=("analysis.sieve",), kernel="bertology.sieve.reduce:SieveKernel",
        claims=(
            Claim("pande_local_syntactic", "Pande et al. 2021", "5 (local vs syntactic)",
                  "Local and syntactic sieve biases of the heads correlate strongly.",
                  "sieve.csv (finetuned): mean, roles local and syntactic, per head", claims_pande.local_syntactic,
                  (("sieve", SIEVE, ""),), null=0.5, config="analysis.sieve", anchor="sieve", figure="sieve",
                  paper_value="Spearman 0.73 (SST-2) to 0.85 (MRPC)",
                  sentence="We observe a very high correlation score of 0.78, 0.81, 0.85, 0.73 scores for QNLI, QQP, "
                           "MRPC, SST-2 tasks respectively, with a p-value of 0."),
            Claim("pande_multiskilled_middle", "Pande et al. 2021", "5 (multi-skilled heads across layers)",
                  "Multi-skilled heads (two or more roles) are most numerous in the middle layers.",
                  "sieve.csv (finetuned): assigned, fine roles, per head; layer thirds", claims_pande.multiskilled_middle,
                  (("sieve", SIEVE, ""),), config="analysis.sieve", anchor="sieve", figure="sieve",
                  paper_value="layers 5-9 on MRPC, QNLI, SST-2 (not QQP)",
                  sentence="The number of multi-skilled heads is higher in the middle layers (layers 5 to 9) for MRPC, "
                           "QNLI and SST-2 tasks."),
            Claim("pande_delimiter_last", "Pande et al. 2021", "5 (distribution of delimiter heads)",
                  "Delimiter heads are common in the last layers and rare in the first.",
                  "sieve.csv (finetuned): assigned, role delimiter, per head; last vs first third of the layers",
                  claims_pande.delimiter_last, (("sieve", SIEVE, ""),), config="analysis.sieve",
                  anchor="sieve", figure="sieve", paper_value="often the only functional heads in the last three layers",
                  sentence="In fact, such delimiter heads are often the only functional heads in the last three layers "
                           "across different tasks. Interestingly, the first layer contains very few (if any) delimiter heads."),
            Claim("pande_delimiter_delta_final", "Pande et al. 2021", "6 (fine-tuning)",
                  "Fine-tuning lowers the delimiter bias most in the final layers.",
                  "sieve.csv finetuned - pretrained: mean, role delimiter, per head; last third vs the rest",
                  claims_pande.delimiter_delta_final,
                  (("sieve", SIEVE, ""), ("sieve_pretrained", fill(SIEVE, variant="pretrained"), "")),
                  side="<", config="analysis.sieve", anchor="sieve", figure="sieve-delta",
                  sentence="We observe that in the final layers, there is a decrease in the average delimiter bias score."),
        ),
        tables=(Table(SIEVE, ("layer", "head", "role", "n", "mean", "std", "t", "p_value",
                                                   "assigned", "tau", "p_adjusted", "alpha", "correction"),
                      output="sieve", seeds=AcrossSeeds("sieve", ("layer", "head", "role"))),
                Table(SIEVE_SCORES, ("scores", "example_idx", "layer", "head", "role", "attrs"),
                      output="sieve_scores")),
        steps=(Step("sieve_figures", "sieve", ("analysis.sieve",), "Pande Figs. 3-5 of one task", mem_mb=3000),),
        outputs=tuple(figure("sieve_figures", output, f"sieve-{output}") for output in ("scores", "overlap", "roles")),
        section=Section(
            key="sieve", paper="Pande et al. 2021", title="Functional roles of heads (Pande et al. 2021)",
            measures="Sieve bias: for each role (local, block, delimiter, syntactic, ...) how much more attention a "
            "head puts on the role's tokens than uniform attention would (n × mean attention); a one-sided t-test "
            "over examples (H0: bias ≤ τ) assigns the role.",
            finding="Most heads are multi-skilled; delimiter heads are common, syntactic heads overlap heavily with "
            "local ones, and fine-tuning changes the bias of the final layers most.",
            figure_prefixes=("sieve",), tables=(rel("sieve_summary"), rel("sieve_delta", seedtag=""))),
        statistics=(
            Statistic(id="sieve:count", group="Sieve roles (Pande)", label="number of roles assigned",
                      desc="Roles whose one-sided t-test rejects H0: mean bias <= tau (p < alpha).",
                      table=SIEVE, count="assigned", fmt="int"),
            Statistic(id="sieve", group="Sieve bias per role (Pande)", label="bias: {k}",
                      desc="Mean over examples of the {k} sieve bias n * mean attention to the sieve (1 = uniform); "
                      "dots: role assigned (p < alpha); tau = {ref}.", table=SIEVE, key=("role",),
                      mark="assigned", mark_label="role assigned", ref="tau", across_seeds=True),
        )),
    Analysis(
        name="sieve_delta",
        steps=(Step("sieve_delta", "sieve", ("tasks",),
                    "Pande Fig. 6: fine-tuned minus pretrained bias -> results/stats/sieve_delta.csv"),),
        tables=(Table(rel("sieve_delta"), ("task", "role", "layer_group", "pretrained", "finetuned", "delta",
                                           "n_heads"), rule="sieve_delta", output="table",
                      wanted=(Want((("seedtag", "first_seed"),)), Want((("seedtag", "extra_seedtags"),), when="seeds"))),),
        outputs=(Output(rel("sieve_delta_figure"), rule="sieve_delta", output="figure", report="sieve-delta",
                        wanted=(Want((("seedtag", "first_seed"),)),
                                Want((("seedtag", "extra_seedtags"),), when="seeds"))),)),
    Analysis(
        name="sieve_summary",
        tables=(Table(rel("sieve_summary"), ("task", "variant", "n_heads", "delimiter_heads", "share_delimiter",
                                             "no_role_heads", "share_no_role", "multi_skilled_heads",
                                             "syntactic_heads", "local_heads", "syntactic_and_local",
                                             "overlap_syntactic_local", "jaccard_syntactic_local", "spearman_rho",
                                             "spearman_p", "spearman_n_heads", "spearman_rho_examples",
                                             "spearman_p_examples", "spearman_n_pairs", "heads_local",
                                             "heads_prev_local", "heads_next_local", "heads_block", "heads_delimiter",
                                             "heads_cls", "heads_sep", "heads_nsubj", "heads_dobj", "heads_amod",
                                             "heads_advmod", "heads_syntactic"), rule="sieve_summary", output="table",
                      wanted=(ONCE,)),),
        steps=(Step("sieve_summary", "sieve", ("tasks",), "role shares, overlaps, Spearman -> results/stats/sieve_summary.csv",
                    mem_mb=4000),)),
)
