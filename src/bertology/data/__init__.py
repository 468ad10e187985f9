"""Data sources: the project's demo generator, the Hugging Face hub, and GLUE-layout directories.

Every source yields the same frame: ``idx`` (int64, the row's index in its split), ``text_a``,
``text_b`` (None for single-sentence tasks) and ``label`` (int64 class id in the hub's order, float32
score for STS-B), written to ``results/data/{task}/{split}.parquet``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.data.glue_dir import read_glue_split
from bertology.data.hub import load_hub_split
from bertology.tasks import SPLITS, TaskSpec, get_task

log = logging.getLogger(__name__)

COLUMNS = ["idx", "text_a", "text_b", "label"]


class DataError(ValueError):
    """Input data is missing or malformed; the message names the file and the fix."""


def subsample(df: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    """A seeded sample of n rows (all rows when n is None or >= len), kept in idx order."""
    if n is None or n >= len(df):
        return df.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(df), size=n, replace=False))
    return df.iloc[keep].reset_index(drop=True)


def normalise(df: pd.DataFrame, spec: TaskSpec) -> pd.DataFrame:
    """Coerce dtypes and check labels against the task's label set."""
    n = len(df)
    out = pd.DataFrame({
        "idx": df["idx"].astype("int64").to_numpy(),
        "text_a": df["text_a"].astype(str).to_numpy(),
        "text_b": df["text_b"].astype(str).to_numpy() if spec.is_pair else np.full(n, None, dtype=object),
        "label": df["label"].astype("float32" if spec.is_regression else "int64").to_numpy(),
    })
    if not spec.is_regression:
        bad = ~out["label"].between(0, spec.num_labels - 1)
        if bad.any():
            raise DataError(f"{spec.name}: label(s) {sorted(out.loc[bad, 'label'].unique())[:5]} outside the "
                            f"task's label ids 0..{spec.num_labels - 1} ({', '.join(spec.label_names)})")
    return out[COLUMNS]


def load_split(task: str, split: str, data_cfg: dict) -> pd.DataFrame:
    """One split of one task from the configured source, subsampled as configured."""
    spec = get_task(task)
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; use one of {SPLITS}")
    source = data_cfg.get("source", "demo")
    seed = int(data_cfg.get("seed", 42))
    if source == "demo":
        from bertology.demo import generate

        sizes = data_cfg.get("demo") or {}
        n = int(sizes.get(split, 600 if split == "train" else 200))
        df = generate(task, split, n=n, seed=seed)
    elif source == "hub":
        df = load_hub_split(spec, split)
    else:
        df = read_glue_split(Path(source), spec, split)
    df = normalise(df, spec)
    limit = data_cfg.get("max_train_examples" if split == "train" else "max_eval_examples")
    return subsample(df, limit, seed)


def prepare_cmd(argv: list[str]) -> int:
    """bertology prepare-data --task T --split S --params JSON(data config) --output PATH"""
    from bertology.cli import parse_json

    ap = argparse.ArgumentParser(prog="bertology prepare-data")
    ap.add_argument("--task", required=True)
    ap.add_argument("--split", required=True, choices=SPLITS)
    ap.add_argument("--params", required=True, help="the `data:` config section as JSON")
    ap.add_argument("--output", required=True)
    args = ap.parse_args(argv)
    from bertology.tracking import job_run

    params = parse_json(args.params)
    with job_run("prepare_data", task=args.task, variant=args.split, params={"data": params}) as _:
        import mlflow

        df = load_split(args.task, args.split, params)
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(out, index=False)
        spec = get_task(args.task)
        labels = df["label"].describe().to_dict() if spec.is_regression else df["label"].value_counts().to_dict()
        log.info("%s/%s: %d rows -> %s; labels: %s", args.task, args.split, len(df), out, labels)
        mlflow.log_metric("rows", len(df))
        if not spec.is_regression:
            for label_id, count in sorted(labels.items()):
                mlflow.log_metric(f"label_{spec.label_names[int(label_id)]}", count)
    return 0


def read_prepared(path: str | Path) -> pd.DataFrame:
    """Read results/data/{task}/{split}.parquet, checking its columns."""
    df = pd.read_parquet(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path} lacks column(s) {missing}; re-create it with `snakemake --forcerun prepare_data`")
    return df
