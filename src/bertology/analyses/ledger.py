"""The claims ledger: every analysis's claims (:class:`bertology.registry.Claim`, declared on the analyses whose
tables they read) checked on the run, results/claims.csv (rule ``claims``, :mod:`bertology.steps.claims`). The report
opens with it; it has no section of its own."""

from __future__ import annotations

from bertology.claims.ledger import COLUMNS as CLAIMS_COLUMNS
from bertology.pipeline.layout import path, rel
from bertology.registry import ONCE, Analysis, Output, Step, Table, figure

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="claims",
        steps=(Step("claims", "claims", ("model", "model_name", "tasks", "data.seed", "data.source", "train.seed", "train.seeds",
                                         "train.inits", "analysis.claims", "analysis.norms.enabled",
                                         "analysis.syntax.conllu"),
                    f"{path('claims')}, claims.md: the papers' claims checked on this run (effect, interval, "
                    f"test, verdict)", runtime=20),),
        tables=(Table(rel("claims"), CLAIMS_COLUMNS, rule="claims", output="ledger", report="claims",
                      wanted=(ONCE,)),),
        outputs=(Output(rel("claims_md"), rule="claims", output="markdown", wanted=(ONCE,)),
                 figure("claims", "forest", "claims", per_task=False))),
    # a run of several models (rules/compare.smk writes their rules): the run's ledger, report and explorer from
    # every model's own under results/m/{name}/ (bertology.steps.models). Their outputs are the one-model claims,
    # report and explorer rules' paths (one run has one or the other) and are wanted by no model's module: the run's
    # targets (rules/models.smk) list them.
    Analysis(
        name="models_ledger",
        steps=(Step("models_ledger", "models", ("analysis.claims",),
                    f"the run's ledger of several models -> {path('claims')}, claims.md, figures/claims.png and "
                    f"{path('models_counts')} (per claim and task, in how many models each verdict)"),
               Step("models_report", "models", ("model", "models", "tasks", "data", "train", "attention", "analysis",
                                                "ablation", "mlflow"),
                    f"{path('report')} of several models: the claims matrix over models x tasks, the counts, the "
                    f"forest plot, the comparisons and each model's own pages"),
               Step("models_explorer", "models", (),
                    f"{path('explorer')} of several models: every model's explorer, one beside another")),
        outputs=(Output(rel("claims"), rule="models_ledger", output="ledger"),
                 Output(rel("claims_md"), rule="models_ledger", output="markdown"),
                 Output(rel("figure", name="claims"), rule="models_ledger", output="forest"),
                 Output(rel("models_counts"), rule="models_ledger", output="counts"),
                 Output(rel("report"), rule="models_report", output="report"),
                 Output(rel("explorer"), rule="models_explorer", output="page"))),
)
