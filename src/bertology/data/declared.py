"""Declared tasks: a split of your own data set, read through ``datasets`` itself.

A declaration (an entry of ``tasks:`` that is a mapping, docs/reference.md#declared-tasks) names its source:

- a local file: ``.csv`` / ``.tsv`` (load_dataset's packaged ``csv`` builder, tab-separated for .tsv), ``.jsonl`` /
  ``.json`` (``json``: JSON Lines), ``.parquet`` (``parquet``); one file is one split, ``train``;
- a local directory: a ``save_to_disk`` dataset (``load_from_disk``: a DatasetDict, or one Dataset = split
  ``train``), or one file per split named ``{split}.{csv,tsv,jsonl,json,parquet}``;
- else a datasets hub id (``load_dataset(id, config, revision=...)``).

:func:`read_declared` gives the same frame as every source (``idx, text_a, text_b, label``; ``idx`` = the row's
position in its source split) and the label names (class names in id order; empty for regression), which the data
step records in the prepared parquet (``label_names`` of its metadata, :func:`bertology.data.read_label_names`).

Bad input is a one-line :class:`bertology.errors.DataError`: a column not there (file, column, columns found), a
label outside the declared names (file and row), a missing or blank text (row; or the row dropped and recorded
under ``data.bad_rows: skip``), an empty split, a split not in the source (naming the splits found), one class
only in the training split, a hub id while offline.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.data.glue_dir import SkippedRow
from bertology.errors import DataError

#: file suffix -> (load_dataset's packaged builder, its extra arguments)
BUILDERS: dict[str, tuple[str, dict[str, Any]]] = {
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"sep": "\t"}),
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".parquet": ("parquet", {}),
}
#: files of a save_to_disk directory (a DatasetDict, or one Dataset)
DISK_MARKERS = ("dataset_dict.json", "state.json")


@dataclass(frozen=True)
class Source:
    """Where a declared task's rows are: kind is "file", "dir" (one file per split), "disk" or "hub"."""

    kind: str
    where: str
    files: dict[str, Path]  # split -> file (kind file/dir)

    def describe(self, split: str) -> str:
        """The file (or hub id) a split's rows come from, for messages."""
        if self.kind in ("file", "dir") and split in self.files:
            return str(self.files[split])
        return self.where


def locate(decl: dict) -> Source:
    """The kind of a declaration's source (no data read)."""
    source = str(decl["source"])
    path = Path(source)
    if path.is_file():
        if path.suffix.lower() not in BUILDERS:
            raise DataError(f"task {decl['name']}: source {source} has suffix {path.suffix!r}; give a "
                            f"{', '.join(BUILDERS)} file, a save_to_disk directory or a datasets hub id")
        return Source("file", source, {"train": path})
    if path.is_dir():
        if any((path / m).is_file() for m in DISK_MARKERS):
            return Source("disk", source, {})
        files = {p.stem: p for p in sorted(path.iterdir()) if p.is_file() and p.suffix.lower() in BUILDERS}
        if not files:
            raise DataError(f"task {decl['name']}: directory {source} holds neither a save_to_disk dataset "
                            f"({' or '.join(DISK_MARKERS)}) nor files named <split>{{{','.join(BUILDERS)}}}; "
                            f"found: {', '.join(sorted(p.name for p in path.iterdir())) or 'nothing'}")
        if len({str(BUILDERS[p.suffix.lower()]) for p in files.values()}) > 1:
            raise DataError(f"task {decl['name']}: directory {source} mixes file formats "
                            f"({', '.join(p.name for p in files.values())}); keep one format")
        return Source("dir", source, files)
    if path.suffix.lower() in BUILDERS or source.startswith((".", "/", "~")):
        raise DataError(f"task {decl['name']}: source file {source} does not exist (relative to {Path.cwd()}); "
                        f"give the path of a {', '.join(BUILDERS)} file or a save_to_disk directory")
    return Source("hub", source, {})


def source_files(decl: dict) -> list[Path]:
    """The local files a declared task is read from (the data rule's input, so editing one re-runs it); none for a
    hub id (its revision is a param). Bad sources give none here: the data step says what is wrong."""
    try:
        src = locate(decl)
    except DataError:
        return []
    if src.kind in ("file", "dir"):
        return list(src.files.values())
    if src.kind == "disk":
        return sorted(p for p in Path(src.where).rglob("*") if p.is_file())
    return []


def _quiet() -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def load_splits(decl: dict, src: Source, cache_dir: str | None) -> dict[str, Any]:
    """Every split of the source: name -> datasets.Dataset."""
    import datasets

    _quiet()
    if src.kind in ("file", "dir"):
        builder, kwargs = BUILDERS[next(iter(src.files.values())).suffix.lower()]
        data_files = {split: str(p) for split, p in src.files.items()}
        try:
            return dict(datasets.load_dataset(builder, data_files=data_files, cache_dir=cache_dir, **kwargs))
        except Exception as err:  # noqa: BLE001 - a file the builder cannot read: say which and why
            raise DataError(f"task {decl['name']}: datasets could not read {src.where} as {builder}: "
                            f"{type(err).__name__}: {' '.join(str(err).split())[:300]}") from None
    if src.kind == "disk":
        loaded = datasets.load_from_disk(src.where)
        return dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"train": loaded}
    return _load_hub(decl)


def _load_hub(decl: dict) -> dict[str, Any]:
    import datasets

    from bertology.models import hub_reachable

    try:
        loaded = datasets.load_dataset(decl["source"], decl.get("config"), revision=decl.get("revision"))
    except Exception as err:  # noqa: BLE001 - offline, not cached, or a hub error
        if not hub_reachable():
            raise DataError(
                f"task {decl['name']}: source {decl['source']!r} is no local file or directory, so it was read as a "
                f"datasets hub id, but the hub cannot be reached from here (offline or HF_HUB_OFFLINE=1) and it is "
                f"not in the local datasets cache; save it where the hub is reachable (save_to_disk, or to "
                f"CSV/JSON Lines/Parquet) and set source to that path") from None
        raise DataError(f"task {decl['name']}: could not load {decl['source']!r} from the datasets hub: "
                        f"{type(err).__name__}: {' '.join(str(err).split())[:300]}") from None
    return dict(loaded)


def _find_split(decl: dict, splits: dict[str, Any], name: str, key: str) -> Any:
    if name not in splits:
        raise DataError(f"task {decl['name']}: split {name!r} ({key}) is not in {decl['source']}; splits found: "
                        f"{', '.join(splits) or 'none'}. Set {key} to one of them"
                        + (", or splits.validation to a share such as 0.1 of the train split"
                           if key == "splits.validation" else ""))
    return splits[name]


def _check_columns(decl: dict, ds: Any, where: str) -> None:
    wanted = [(k, decl[k]) for k in ("text", "pair", "label") if decl.get(k) is not None]
    columns = list(ds.column_names)
    for key, column in wanted:
        if column not in columns:
            raise DataError(f"task {decl['name']}: {where} has no column {column!r} ({key}); columns found: "
                            f"{', '.join(columns)}. Set {key} to the right column")


def _class_names(ds: Any, column: str) -> list[str] | None:
    """The names of a ClassLabel feature, else None."""
    import datasets

    feature = ds.features.get(column)
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def _plain(value: Any) -> Any:
    """A label value as compared with names: integral floats as ints (CSV columns with nulls are float)."""
    if isinstance(value, (float, np.floating)) and not math.isnan(value) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _sort_key(value: Any) -> tuple:
    return (0, float(value), "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0.0,
                                                                                                     str(value))


def label_names(decl: dict, frames: list[tuple[Any, pd.DataFrame]]) -> list[str]:
    """The class names in id order: declared, else a ClassLabel feature's, else the sorted distinct values of the
    label column over `frames` ((dataset, frame) of the train and validation source splits). [] for regression."""
    if decl["kind"] == "regression":
        return []
    if decl.get("labels"):
        return [str(x) for x in decl["labels"]]
    ds = frames[0][0]
    names = _class_names(ds, decl["label"])
    if names is not None:
        return names
    values = {_plain(v) for _, df in frames for v in df[decl["label"]] if not _missing(v)}
    return [str(v) for v in sorted(values, key=_sort_key)]


def _row_where(src: Source, split: str, position: int) -> tuple[str, int, str]:
    """(file, line or row number, how to say it) of a source row at 0-based `position`."""
    path = src.describe(split)
    suffix = Path(path).suffix.lower()
    if src.kind in ("file", "dir") and suffix in (".csv", ".tsv"):
        return path, position + 2, f"{path}: row {position + 1} (line {position + 2})"
    if src.kind in ("file", "dir") and suffix in (".jsonl", ".json"):
        return path, position + 1, f"{path}: row {position + 1} (line {position + 1})"
    return path, position + 1, f"{path} split {split!r}: row {position + 1}"


def _label_ids(decl: dict, names: list[str], df: pd.DataFrame, src: Source, split: str,
               keep: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Label ids (classification) or float scores (regression) of the rows kept (df's row i is the source split's
    row positions[i])."""
    column = decl["label"]
    values = df[column].tolist()
    if decl["kind"] == "regression":
        out = np.zeros(len(values), dtype=np.float32)
        for i, v in enumerate(values):
            if not keep[i]:
                continue
            try:
                out[i] = float(v)
                if math.isnan(out[i]):
                    raise ValueError
            except (TypeError, ValueError):
                raise DataError(f"{_row_where(src, split, int(positions[i]))[2]}: label {v!r} in column {column!r} is not a number "
                                f"(task {decl['name']} is a regression task)") from None
        return out
    index = {n: k for k, n in enumerate(names)}
    out = np.zeros(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if not keep[i]:
            continue
        v = _plain(v)
        if str(v) in index:
            out[i] = index[str(v)]
        elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(names):
            out[i] = v
        else:
            raise DataError(f"{_row_where(src, split, int(positions[i]))[2]}: label {v!r} in column {column!r} is not one of the "
                            f"labels of task {decl['name']} ({', '.join(names)}, or their ids 0..{len(names) - 1}); "
                            f"fix the row or the task's `labels`")
    return out


def _blank(value: Any) -> bool:
    return _missing(value) or not isinstance(value, str) or not value.strip()


@dataclass(frozen=True)
class DeclaredSplit:
    frame: pd.DataFrame  # idx, text_a, text_b, label
    label_names: tuple[str, ...]
    skipped: tuple[SkippedRow, ...]


def _frame(decl: dict, ds: Any, df: pd.DataFrame, names: list[str], src: Source, split: str, positions: np.ndarray,
           bad_rows: str) -> tuple[pd.DataFrame, list[SkippedRow]]:
    """The rows at `positions` of a source split as idx/text_a/text_b/label; bad rows raise or are skipped."""
    df = df.iloc[positions].reset_index(drop=True)
    text_cols = [decl["text"]] + ([decl["pair"]] if decl.get("pair") else [])
    needed = [*text_cols, decl["label"]]
    bad = np.zeros(len(df), dtype=bool)
    for column in text_cols:
        bad |= np.array([_blank(v) for v in df[column].tolist()], dtype=bool)
    bad |= np.array([_missing(v) for v in df[decl["label"]].tolist()], dtype=bool)
    skipped: list[SkippedRow] = []
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        row = df.iloc[first]
        what = [c for c in text_cols if _blank(row[c])]
        col_text = (f"text column(s) {', '.join(repr(c) for c in what)} empty or missing" if what
                    else f"label column {decl['label']!r} missing")
        if bad_rows != "skip":
            raise DataError(f"{_row_where(src, split, int(positions[first]))[2]}: {col_text} ({int(bad.sum())} such "
                            f"row(s) in this split); fix the rows, or set data.bad_rows: skip to drop them (listed in "
                            f"results/data/{decl['name']}/<split>.skipped.csv)")
        for i in np.flatnonzero(bad):
            file, line, _ = _row_where(src, split, int(positions[i]))
            filled = sum(not _blank(df.iloc[i][c]) for c in text_cols) + (not _missing(df.iloc[i][decl["label"]]))
            blank = [c for c in text_cols if _blank(df.iloc[i][c])]
            problem = f"blank {blank[0]}" if blank else f"missing {decl['label']}"
            skipped.append(SkippedRow(file, line, int(filled), len(needed), problem))
    keep = ~bad
    labels = _label_ids(decl, names, df, src, split, keep, positions)
    out = pd.DataFrame({
        "idx": positions.astype(np.int64),
        "text_a": df[decl["text"]].astype(object).to_numpy(),
        "text_b": df[decl["pair"]].astype(object).to_numpy() if decl.get("pair") else np.full(len(df), None, object),
        "label": labels,
    })
    return out[keep].reset_index(drop=True), skipped


def validation_share(n_total: int, share: float, seed: int) -> np.ndarray:
    """The positions of the train split drawn as validation: round(share * n), at least 1 and at most n - 1, by
    the project's one sampler (:func:`bertology.data.sample_positions`) with data.seed: (k,) int64, sorted."""
    from bertology.data.sampler import sample_positions

    k = min(max(1, int(round(share * n_total))), n_total - 1)
    return sample_positions(n_total, k, seed)


def read_declared(decl: dict, split: str, *, seed: int, bad_rows: str) -> DeclaredSplit:
    """One split ("train" or "validation") of a declared task: its frame, label names and skipped rows."""
    src = locate(decl)
    with tempfile.TemporaryDirectory(prefix="bertology-datasets-") as cache:
        splits = load_splits(decl, src, cache if src.kind in ("file", "dir") else None)
        train_name, val = decl["splits"]["train"], decl["splits"]["validation"]
        train_ds = _find_split(decl, splits, train_name, "splits.train")
        share = not isinstance(val, str)
        val_ds = train_ds if share else _find_split(decl, splits, val, "splits.validation")
        where_train = src.describe(train_name)
        _check_columns(decl, train_ds, where_train if not src.kind == "hub" else f"{src.where} split {train_name!r}")
        if not share:
            _check_columns(decl, val_ds, src.describe(val) if src.kind != "hub" else f"{src.where} split {val!r}")
        train_df, val_df = train_ds.to_pandas(), (None if share else val_ds.to_pandas())
    frames = [(train_ds, train_df)] + ([] if share else [(val_ds, val_df)])
    for (ds, df), name in zip(frames, [train_name, val]):
        if len(df) == 0:
            raise DataError(f"task {decl['name']}: split {name!r} of {src.describe(str(name))} holds no rows; give "
                            f"a split with examples")
    names = label_names(decl, frames)
    if share:
        n = len(train_df)
        if n < 2:
            raise DataError(f"task {decl['name']}: split {train_name!r} has {n} row(s): too few to draw a "
                            f"validation share from; give more rows or a validation split by name")
        val_pos = validation_share(n, float(val), seed)
        positions = val_pos if split == "validation" else np.setdiff1d(np.arange(n, dtype=np.int64), val_pos)
        source_name, df, ds = train_name, train_df, train_ds
    else:
        source_name, ds, df = (train_name, train_ds, train_df) if split == "train" else (val, val_ds, val_df)
        positions = np.arange(len(df), dtype=np.int64)
    frame, skipped = _frame(decl, ds, df, names, src, str(source_name), positions, bad_rows)
    if len(frame) == 0:
        raise DataError(f"task {decl['name']}: split {split} of {src.describe(str(source_name))} has no usable row "
                        f"({len(skipped)} skipped under data.bad_rows: skip)")
    if split == "train" and decl["kind"] == "classification":
        present = np.unique(frame["label"].to_numpy())
        if len(present) < 2:
            raise DataError(f"task {decl['name']}: the training split ({src.describe(str(source_name))}) holds one "
                            f"class only ({names[int(present[0])]!r} of {', '.join(names)}); a classifier needs two "
                            f"or more: check the label column {decl['label']!r} and the split")
    return DeclaredSplit(frame, tuple(names), tuple(skipped))
