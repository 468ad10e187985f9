"""Data sources: the project's demo generator, the Hugging Face hub, and GLUE-layout directories.

Every source yields the same frame: ``idx`` (int64, the row's index in its split), ``text_a``,
``text_b`` (None for single-sentence tasks) and ``label`` (int64 class id in the hub's order, float32
score for STS-B), written to ``results/data/{task}/{split}.parquet``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.data.glue_dir import SkippedRow, read_glue_rows, read_glue_split  # noqa: F401 - bench/ reads it here
from bertology.data.sampler import sample_positions
from bertology.data.hub import load_hub_split
from bertology.pipeline.config import DataConfig
from bertology.pipeline.errors import DataError, snakemake_command
from bertology.pipeline.tasks import SPLITS, TaskSpec, get_task

log = logging.getLogger(__name__)

COLUMNS = ["idx", "text_a", "text_b", "label"]


def sample_rows(df: pd.DataFrame, n: int | None, seed: int, *, short_split: str, what: str = "the sample",
                key: str = "the sample size") -> pd.DataFrame:
    """A seeded sample of n rows kept in frame order (all rows when n is None), by :func:`sample_positions`.

    A pure function of (df, n, seed), so every variant of a task gets the same rows in the same order.
    An empty frame is an error. Asking for more rows than there are is an error naming the split's size
    and the config `key` to change, unless short_split is "all" (data.short_split): then all rows, logged.
    """
    if n is not None and int(n) < 1:
        raise DataError(f"{what}: {key} must be a positive integer or null (all), got {n!r}")
    if len(df) == 0:
        raise DataError(f"{what}: the split is empty: nothing to sample (check data.source and the split)")
    if n is not None and int(n) > len(df):
        if short_split != "all":
            raise DataError(f"{what}: {key} asks for {n} examples but the split has only {len(df)}; set {key} to at "
                            f"most {len(df)}, or to null for all of them, or set data.short_split: all to take a "
                            f"whole split whenever it is smaller")
        log.warning("%s: %s asks for %d examples but the split has only %d: all %d are used (data.short_split: "
                    "all)", what, key, n, len(df), len(df))
    if n is None or int(n) >= len(df):
        return df.reset_index(drop=True)
    return df.iloc[sample_positions(len(df), int(n), seed)].reset_index(drop=True)


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


def load_split(task: str, split: str, data: DataConfig) -> pd.DataFrame:
    """One split of one task from the configured source, subsampled as configured."""
    return load_split_rows(task, split, data)[0]


def load_split_rows(task: str, split: str, data: DataConfig) -> tuple[pd.DataFrame, tuple[SkippedRow, ...]]:
    """:func:`load_split` and the malformed rows of a GLUE file skipped under ``data.bad_rows: skip`` (none
    for the demo and the hub)."""
    spec = get_task(task)
    skipped: tuple[SkippedRow, ...] = ()
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; use one of {SPLITS}")
    if spec.declared:
        return load_declared_rows(task, split, data)
    if data.source == "demo":
        from bertology.demo import generate

        df = generate(task, split, n=getattr(data.demo, split), seed=data.seed)
    elif data.source == "hub":
        df = load_hub_split(spec, split)
    else:
        read = read_glue_rows(Path(data.source), spec, split, bad_rows=data.bad_rows)
        df, skipped = read.frame, read.skipped
    if len(df) == 0:
        raise DataError(f"{task}/{split}: data.source {data.source!r} gives no examples for this split; check the "
                        f"source (a file with a header only?)")
    df = normalise(df, spec)
    key = "data.max_train_examples" if split == "train" else "data.max_eval_examples"
    limit = data.max_train_examples if split == "train" else data.max_eval_examples
    return sample_rows(df, limit, data.seed, what=f"{task}/{split}", key=key, short_split=data.short_split), skipped


def load_declared_rows(task: str, split: str, data: DataConfig) -> tuple[pd.DataFrame, tuple[SkippedRow, ...]]:
    """:func:`load_split_rows` of a declared task (bertology.data.declared), subsampled as configured; the label
    names ride along in ``frame.attrs["label_names"]`` (written into the parquet by :func:`write_prepared`)."""
    from bertology.data.declared import read_declared
    from bertology.pipeline.tasks import declaration

    read = read_declared(declaration(task), split, seed=data.seed, bad_rows=data.bad_rows)
    key = "data.max_train_examples" if split == "train" else "data.max_eval_examples"
    limit = data.max_train_examples if split == "train" else data.max_eval_examples
    df = sample_rows(read.frame[COLUMNS], limit, data.seed, what=f"{task}/{split}", key=key,
                     short_split=data.short_split)
    df.attrs["label_names"] = list(read.label_names)
    if read.unseen_labels:
        df.attrs["unseen_labels"] = list(read.unseen_labels)
    return df, read.skipped


def read_label_names(path: str | Path) -> list[str]:
    """The label names a prepared split records (declared classification tasks; [] otherwise)."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(b"PANDAS_ATTRS")
    if not raw:
        return []
    import json

    return list(json.loads(raw).get("label_names") or [])


def read_unseen_labels(path: str | Path) -> list[str]:
    """The validation classes that never occur in training, which a prepared validation split of a declared task
    records when its declaration allows them (``unseen_labels: allow``); [] otherwise."""
    import json

    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(b"PANDAS_ATTRS")
    return list(json.loads(raw).get("unseen_labels") or []) if raw else []


def skipped_frame(skipped: tuple[SkippedRow, ...]) -> pd.DataFrame:
    """The skipped-rows table of the data rule (file, line, fields, expected, problem; one row per skipped row)."""
    return pd.DataFrame([dataclasses.asdict(s) for s in skipped],
                        columns=["file", "line", "fields", "expected", "problem"])


def source_version(source: str) -> str:
    """What identifies the data of a source beyond the config and its files: the hub dataset's revision
    (a param of the data rule); empty for the demo and GLUE directories (their files are inputs)."""
    if source != "hub":
        return ""
    from bertology.data.hub import HUB_DATASET, hub_revision

    return f"{HUB_DATASET}@{hub_revision()}"


def declared_version(decl: dict) -> str:
    """What identifies a declared task's data beyond its declaration and its files: for a hub id without a pinned
    revision, the hub's current revision (as :func:`source_version`); empty otherwise."""
    from bertology.data.declared import locate

    try:
        kind = locate(decl).kind
    except DataError:
        return ""
    if kind != "hub" or decl.get("revision"):
        return ""
    from bertology.data.hub import hub_revision

    return f"{decl['source']}@{hub_revision(decl['source'])}"


def source_files(source: str, task: str, split: str, declared: dict | None = None) -> list[Path]:
    """The file(s) a split is read from, for the data rule's input (so editing one re-runs it): the split's
    file of a GLUE-layout directory, a declared task's local file(s) (`declared`: its declaration); none for the
    demo and the hub (their identity is a param)."""
    if declared is not None:
        from bertology.data.declared import source_files as declared_files

        return declared_files(declared)
    if source in ("demo", "hub"):
        return []
    from bertology.data.glue_dir import find_file

    try:
        return [find_file(Path(source), get_task(task), split)]
    except DataError:
        return []  # the data step itself says what is missing


def write_prepared(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a prepared split atomically (a killed job never leaves half a parquet)."""
    from bertology.pipeline.io import write_parquet

    return write_parquet(df, path)


def read_prepared(path: str | Path) -> pd.DataFrame:
    """Read results/data/{task}/{split}.parquet, checking its columns."""
    df = pd.read_parquet(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path} lacks column(s) {missing}; re-create it with `{snakemake_command(path, force=True)}`")
    return df
