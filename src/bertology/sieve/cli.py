"""``bertology sieve``, ``sieve-figures``, ``sieve-delta``, ``sieve-summary``: the commands of rules/sieve.smk."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bertology.io import write_csv as _write_csv

log = logging.getLogger(__name__)


def _compute_kwargs(dask_cfg: dict, threads: int | None) -> dict[str, Any]:
    from bertology.daskutil import compute_kwargs

    return compute_kwargs(dask_cfg, threads)


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sieve table at {path}; run `snakemake {path}` first")
    return pd.read_csv(path)


def _log_role_metrics(table: pd.DataFrame) -> None:
    import mlflow

    n_heads = len(table[["layer", "head"]].drop_duplicates())
    for role, sub in table.groupby("role", sort=False):
        mlflow.log_metric(f"heads.{role}", int(sub["assigned"].sum()))
        mlflow.log_metric(f"share.{role}", float(sub["assigned"].sum()) / max(n_heads, 1))
        for layer, lsub in sub.groupby("layer"):
            mlflow.log_metric(f"heads_by_layer.{role}", int(lsub["assigned"].sum()), step=int(layer))
            mlflow.log_metric(f"mean_bias_by_layer.{role}", float(lsub["mean"].mean()), step=int(layer))


def sieve_cmd(argv: list[str]) -> int:
    """One store -> sieve.csv and the per-example scores."""
    from bertology.cli import parse_json
    from bertology.tracking import job_run

    from .reduce import run_sieve, save_scores, sieve_params

    ap = argparse.ArgumentParser(prog="bertology sieve", description=sieve_cmd.__doc__)
    ap.add_argument("--store", required=True, help="results/attention/{task}/{variant}.zarr")
    ap.add_argument("--words", required=True, help="results/attention/{task}/words.parquet")
    ap.add_argument("--task", default=None, help="GLUE task (default: the store's `task` attribute)")
    ap.add_argument("--variant", default=None, help="pretrained | finetuned (for tracking)")
    ap.add_argument("--params", default="{}", help="analysis.sieve as JSON")
    ap.add_argument("--dask", default="{}", help="analysis.dask as JSON")
    ap.add_argument("--threads", type=int, default=None, help="local Dask workers")
    ap.add_argument("--batch", type=int, default=8, help="examples per sub-batch inside a store chunk")
    ap.add_argument("--out", required=True, help="sieve.csv")
    ap.add_argument("--scores", required=True, help="per-example scores (.npz)")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    params = sieve_params(parse_json(args.params))
    dask_cfg = parse_json(args.dask)
    with job_run("sieve", task=args.task, variant=args.variant, params={"sieve": params, "dask": dask_cfg}):
        import mlflow

        t0 = time.perf_counter()
        table, scores = run_sieve(args.store, args.words, task=args.task, params=params,
                                  compute_kwargs=_compute_kwargs(dask_cfg, args.threads), batch=args.batch)
        seconds = time.perf_counter() - t0
        _write_csv(table, args.out)
        save_scores(args.scores, scores, **scores.attrs)
        log.info("sieve: %d examples x %d layers x %d heads x %d roles in %.1f s; %d (head, role) assigned",
                 scores.sizes["example"], scores.sizes["layer"], scores.sizes["head"], scores.sizes["role"],
                 seconds, int(table["assigned"].sum()))
        mlflow.log_metric("examples", scores.sizes["example"])
        mlflow.log_metric("seconds", seconds)
        _log_role_metrics(table)
        mlflow.log_artifact(args.out)
    return 0


def figures_cmd(argv: list[str]) -> int:
    """Figures 3-5 of one task from the sieve tables and the per-example scores."""
    from bertology.cli import parse_json
    from bertology.tracking import job_run

    from .figures import plot_overlap, plot_roles, plot_scores
    from .reduce import load_scores, sieve_params

    ap = argparse.ArgumentParser(prog="bertology sieve-figures", description=figures_cmd.__doc__)
    ap.add_argument("--task", required=True)
    ap.add_argument("--sieve", nargs="+", required=True, metavar="VARIANT=CSV",
                    help="sieve tables, e.g. pretrained=results/stats/rte/pretrained/sieve.csv")
    ap.add_argument("--scores", required=True, help="per-example scores of the variant of Fig. 3 (.npz)")
    ap.add_argument("--params", default="{}", help="analysis.sieve as JSON")
    ap.add_argument("--out-scores", required=True)
    ap.add_argument("--out-overlap", required=True)
    ap.add_argument("--out-roles", required=True)
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    params = sieve_params(parse_json(args.params))
    tables = {}
    for item in args.sieve:
        if "=" not in item:
            raise ValueError(f"--sieve takes VARIANT=CSV items, got {item!r}")
        variant, path = item.split("=", 1)
        tables[variant] = read_table(path)
    scores = load_scores(args.scores)
    overlap_variant = "finetuned" if "finetuned" in tables else next(iter(tables))
    with job_run("sieve_figures", task=args.task, params={"sieve": params}):
        import mlflow

        paths = [plot_scores(scores, tables, args.out_scores, task=args.task, tau=float(params["tau"]),
                             alpha=float(params["alpha"])),
                 plot_overlap(tables[overlap_variant], args.out_overlap, task=args.task, variant=overlap_variant),
                 plot_roles(tables, args.out_roles, task=args.task)]
        for p in paths:
            mlflow.log_artifact(str(p), artifact_path="figures")
    return 0


def delta_cmd(argv: list[str]) -> int:
    """results/stats/sieve_delta.csv and Fig. 6 from every task's pretrained and fine-tuned sieve tables."""
    from bertology.tracking import job_run

    from .figures import plot_delta
    from .summary import sieve_delta

    ap = argparse.ArgumentParser(prog="bertology sieve-delta", description=delta_cmd.__doc__)
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--stats-dir", default="results/stats")
    ap.add_argument("--out", required=True, help="results/stats/sieve_delta.csv")
    ap.add_argument("--figure", required=True, help="results/figures/sieve-delta.png")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    stats_dir = Path(args.stats_dir)
    frames = [sieve_delta(read_table(stats_dir / t / "pretrained" / "sieve.csv"),
                          read_table(stats_dir / t / "finetuned" / "sieve.csv"), t) for t in args.tasks]
    delta = pd.concat(frames, ignore_index=True)
    with job_run("sieve_delta", params={"tasks": ",".join(args.tasks)}):
        import mlflow

        _write_csv(delta, args.out)
        plot_delta(delta, args.figure)
        for row in delta.itertuples():
            mlflow.log_metric(f"delta.{row.task}.{row.role}.{row.layer_group}", float(row.delta))
        mlflow.log_artifact(args.out)
        mlflow.log_artifact(args.figure, artifact_path="figures")
    return 0


def summary_cmd(argv: list[str]) -> int:
    """results/stats/sieve_summary.csv: role shares, overlaps and Spearman correlations per task and variant."""
    from bertology.tracking import job_run

    from .reduce import load_scores
    from .summary import summarize

    ap = argparse.ArgumentParser(prog="bertology sieve-summary", description=summary_cmd.__doc__)
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--variants", nargs="+", default=["pretrained", "finetuned"])
    ap.add_argument("--stats-dir", default="results/stats")
    ap.add_argument("--out", required=True, help="results/stats/sieve_summary.csv")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    stats_dir = Path(args.stats_dir)
    rows = []
    for task in args.tasks:
        for variant in args.variants:
            table = read_table(stats_dir / task / variant / "sieve.csv")
            scores = load_scores(stats_dir / task / variant / "sieve_scores.npz")
            rows.append(summarize(table, scores, task=task, variant=variant))
    summary = pd.DataFrame(rows)
    with job_run("sieve_summary", params={"tasks": ",".join(args.tasks), "variants": ",".join(args.variants)}):
        import mlflow

        _write_csv(summary, args.out)
        for row in rows:
            for key in ("share_delimiter", "share_no_role", "overlap_syntactic_local", "jaccard_syntactic_local",
                        "spearman_rho", "spearman_rho_examples"):
                value = row[key]
                if value == value:  # not NaN
                    mlflow.log_metric(f"{row['task']}.{row['variant']}.{key}", float(value))
        mlflow.log_artifact(args.out)
    return 0
