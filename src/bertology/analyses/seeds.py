"""Robustness across fine-tuning seeds (McCoy et al. 2020; Sellam et al. 2022, the MultiBERTs), declared once.

The per-head tables over seeds (``stats/{task}/seeds/{name}.csv``) are not declared here: every table with
``seeds=`` (:class:`bertology.registry.AcrossSeeds`) gets one, and every statistic with ``across_seeds`` its mean
and std on the explorer's grid (:meth:`bertology.registry.Registry.statistics`). Written by ``rules/seeds.smk``
(:mod:`bertology.steps.seeds`) with two or more train.seeds."""

from __future__ import annotations

from bertology.pipeline.layout import rel
from bertology.registry import OVER_SEEDS, PER_TASK, Analysis, Section, Statistic, Step, Table, figure

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="seeds",
        tables=(Table(rel("seed_stat", name="roles"), ("layer", "head", "role", "assigned", "n_seeds", "share"),
                      when="seeds", rule="seed_stats", output="roles", wanted=(PER_TASK,)),
                Table(rel("seed_stat", name="role_agreement"), ("role", "layer", "fleiss_kappa", "jaccard",
                                                                "heads_assigned", "n_heads", "n_seeds"), when="seeds",
                      rule="seed_stats", output="role_agreement", wanted=(PER_TASK,)),
                Table(rel("seed_stat", name="multibootstrap"), ("quantity", "metric", "role", "layer", "head", "mean",
                                                                "ci_low", "ci_high", "n_seeds", "n_examples",
                                                                "resamples", "confidence"), when="seeds",
                      rule="seed_stats", output="multibootstrap", wanted=(PER_TASK,)),
                Table(rel("seed_stat", name="findings"), ("finding", "paper", "statement", "holds", "seeds",
                                                          "holding", "n_seeds", "verdict"), when="seeds",
                      rule="claims", output="findings", expand=(("task", "tasks"),), only="seeds",
                      wanted=(PER_TASK,))),
        steps=(Step("seed_stats", "seeds", ("train.seed", "train.seeds", "data.seed", "analysis.seeds"),
                    "every per-head statistic of a task across fine-tuning seeds -> results/stats/{task}/seeds/",
                    mem_mb=4000, runtime=30),),
        outputs=(figure("seed_stats", "stability", "seeds-stability", when="seeds"),
                 figure("seed_stats", "role_figure", "seeds-roles", when="seeds")),
        section=Section(
            key="seeds", paper="Across fine-tuning seeds", title="Robust across seeds",
            measures="With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed (the pretrained "
            "model once). findings.csv: which of the papers' findings hold in every seed, in most, in some, in one "
            "only or in none (head identities compared with the first seed's). Stability maps: each per-head "
            "statistic's mean and std over seeds. Role agreement: Fleiss' kappa (seeds as raters) and mean pairwise "
            "Jaccard of the heads each sieve role is assigned to, per layer. stats/{task}/seeds/multibootstrap.csv "
            "gives every fine-tuned - pretrained difference (cosine, sieve bias, disabling delta) with a "
            "Multi-Bootstrap interval.",
            finding="The papers fine-tuned once. McCoy et al. 2020 and Sellam et al. 2022 (The MultiBERTs) show that "
            "fine-tuning and pre-training seeds alone move results, so a per-head finding is a property of "
            "fine-tuning only where it holds in every seed; the Multi-Bootstrap (seeds and examples resampled "
            "together) gives intervals that carry both sources of variance.",
            figure_prefixes=("seeds",), tables=(rel("seed_stat", name="findings"),
                                                rel("seed_stat", name="role_agreement"))),
        statistics=(
            Statistic(id="seeds:roles", group=OVER_SEEDS, label="seeds assigning {k}",
                      desc="Share of the fine-tuning seeds whose sieve test assigns the {k} role to the head.",
                      table=rel("seed_stat", name="roles"), column="share", key=("role",), optional=True),
        )),
)
