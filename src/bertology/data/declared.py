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

Label and text columns are read as the strings they are (a CSV/TSV file as text throughout: a class named
``None``, ``NA`` or ``nan`` is that class); a missing value is only an empty cell or a JSON/Parquet null. Class
identity is one rule for every format (:func:`class_key`): a label that is a number (``1``, ``"1"``, ``"1.0"``,
``1.0``) is the class of that number, any other value the class of its text.

Bad input is a one-line :class:`bertology.pipeline.errors.DataError`: a column not there (file, column, columns found); the
rows of a split that cannot be used, every one found in one pass (a blank text, a missing label, a regression label
that is not a number, a label outside the declared names: the count of each kind and its first rows, each with the
physical line it starts on; dropped and recorded instead under ``data.bad_rows: skip``); an empty split; a split not
in the source (naming the splits found); two files for one split; one class only in the training split; a
validation class that never occurs in training (unless the declaration's ``unseen_labels: allow``); a file that
``datasets`` cannot parse (with the parser's own reason); a hub id while offline.
"""

from __future__ import annotations

import csv
import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.data.glue_dir import SkippedRow, blank_text
from bertology.data.labels import class_index, class_key, is_missing, label_id, label_names, numbers_written_two_ways
from bertology.pipeline.errors import DataError

log = logging.getLogger(__name__)

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
    files: dict[str, Path]  # split -> file (kind file/dir): the splits the task reads that the source holds
    found: tuple[str, ...] = ()  # kind dir: every split a file is named after (for messages)

    def describe(self, split: str) -> str:
        """The file (or hub id) a split's rows come from, for messages."""
        if self.kind in ("file", "dir") and split in self.files:
            return str(self.files[split])
        return self.where


def read_splits(decl: dict) -> list[str]:
    """The source splits a declaration reads: its train split, and its validation split when named."""
    splits = decl.get("splits") or {}
    names = [str(splits.get("train", "train"))]
    val = splits.get("validation", "validation")
    if isinstance(val, str) and val not in names:
        names.append(val)
    return names


def locate(decl: dict) -> Source:
    """The kind of a declaration's source (no data read). A directory's split files are those named after the
    splits the task reads (``{split}.{csv,tsv,jsonl,json,parquet}``, each split in its own format); two files for one
    of them are an error naming both; any other file is not read (and not an input)."""
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
        by_split: dict[str, list[Path]] = {}
        for p in sorted(path.iterdir()):
            if p.is_file() and p.suffix.lower() in BUILDERS:
                by_split.setdefault(p.stem, []).append(p)
        if not by_split:
            raise DataError(f"task {decl['name']}: directory {source} holds neither a save_to_disk dataset "
                            f"({' or '.join(DISK_MARKERS)}) nor files named <split>{{{','.join(BUILDERS)}}}; "
                            f"found: {', '.join(sorted(p.name for p in path.iterdir())) or 'nothing'}")
        files = {}
        for split in read_splits(decl):
            candidates = by_split.get(split, [])
            if len(candidates) > 1:
                raise DataError(f"task {decl['name']}: directory {source} holds {len(candidates)} files for split "
                                f"{split!r} ({', '.join(p.name for p in candidates)}); keep one of them (move the "
                                f"others out of the directory)")
            if candidates:
                files[split] = candidates[0]
        return Source("dir", source, files, tuple(by_split))
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


def _root_cause(err: BaseException) -> BaseException:
    """The innermost exception of a chain (datasets wraps a parser's error in DatasetGenerationError)."""
    seen = {id(err)}
    while True:
        inner = err.__cause__ or err.__context__
        if inner is None or id(inner) in seen:
            return err
        seen.add(id(inner))
        err = inner


def _why(err: BaseException) -> str:
    """An exception and its innermost cause, in one short line."""
    cause = _root_cause(err)
    text = f"{type(err).__name__}: {' '.join(str(err).split())}"
    if cause is not err:
        text = f"{type(cause).__name__}: {' '.join(str(cause).split())} (from {type(err).__name__})"
    return text[:400]


def _csv_columns(path: Path, sep: str) -> list[str]:
    """The header of a CSV/TSV file (its first row)."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return next(csv.reader(fh, delimiter=sep), [])


def _load_file(decl: dict, split: str, path: Path, cache_dir: str | None) -> Any:
    """One split file through load_dataset's packaged builder; a CSV/TSV file read as text throughout (every column
    a string, only an empty cell missing)."""
    import datasets

    builder, kwargs = BUILDERS[path.suffix.lower()]
    kwargs = dict(kwargs)
    try:
        if builder == "csv":
            columns = _csv_columns(path, kwargs.get("sep", ","))
            if len(set(columns)) == len(columns) and columns:
                kwargs.update(features=datasets.Features({c: datasets.Value("string") for c in columns}),
                              keep_default_na=False, na_values=[""])
        return datasets.load_dataset(builder, data_files={split: str(path)}, cache_dir=cache_dir, **kwargs)[split]
    except Exception as err:  # noqa: BLE001 - a file the builder cannot read: say which, why
        raise DataError(f"task {decl['name']}: datasets could not read {path} as {builder}: {_why(err)}; fix the "
                        f"file (or give it another format)") from None


def load_splits(decl: dict, src: Source, cache_dir: str | None) -> dict[str, Any]:
    """The splits of the source the task reads (every split of a save_to_disk dataset or hub id): name ->
    datasets.Dataset."""
    import datasets

    _quiet()
    if src.kind in ("file", "dir"):
        return {split: _load_file(decl, split, path, cache_dir) for split, path in src.files.items()}
    if src.kind == "disk":
        loaded = datasets.load_from_disk(src.where)
        return dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"train": loaded}
    return _load_hub(decl)


def _load_hub(decl: dict) -> dict[str, Any]:
    import datasets

    from bertology.pipeline.hub import hub_reachable

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
                        f"{_why(err)}") from None
    return dict(loaded)


def _find_split(decl: dict, src: Source, splits: dict[str, Any], name: str, key: str) -> Any:
    if name not in splits:
        found = src.found if src.kind == "dir" else tuple(splits)
        raise DataError(f"task {decl['name']}: split {name!r} ({key}) is not in {decl['source']}; splits found: "
                        f"{', '.join(found) or 'none'}. Set {key} to one of them"
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


def _physical_lines(path: str) -> list[int] | None:
    """The 1-based physical line each data row of a CSV/TSV or JSON Lines file starts on (a quoted field may span
    lines; blank lines are no rows, as pandas and pyarrow read them); None for other files."""
    suffix = Path(path).suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            out = []
            with open(path, encoding="utf-8-sig", newline="") as fh:
                reader = csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ",")
                header_seen = False
                while True:
                    start = reader.line_num + 1
                    row = next(reader, None)
                    if row is None:
                        return out
                    if not row:
                        continue
                    if header_seen:
                        out.append(start)
                    header_seen = True
        if suffix in (".jsonl", ".json"):
            with open(path, encoding="utf-8-sig") as fh:
                lines = [(n, line.lstrip()[:1]) for n, line in enumerate(fh, 1) if line.strip()]
            return None if lines and lines[0][1] == "[" else [n for n, _ in lines]  # a JSON array: no line per row
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None


class _Where:
    """Where the rows of one source split are, for messages: file, line (physical, where the row starts)."""

    def __init__(self, src: Source, split: str):
        self.src, self.split = src, split
        self.path = src.describe(split)
        self._lines: list[int] | None | bool = False

    def line(self, position: int) -> int | None:
        if self.src.kind not in ("file", "dir"):
            return None
        if self._lines is False:
            self._lines = _physical_lines(self.path)
        lines = self._lines
        return lines[position] if isinstance(lines, list) and position < len(lines) else None

    def row(self, position: int) -> str:
        line = self.line(position)
        return f"row {position + 1}" + (f" (line {line})" if line is not None else "")

    def prefix(self) -> str:
        return self.path if self.src.kind in ("file", "dir") else f"{self.path} split {self.split!r}"


@dataclass(frozen=True)
class DeclaredSplit:
    frame: pd.DataFrame  # idx, text_a, text_b, label
    label_names: tuple[str, ...]
    skipped: tuple[SkippedRow, ...]
    unseen_labels: tuple[str, ...] = ()  # validation classes that never occur in training (unseen_labels: allow)


MAX_ROWS_NAMED = 3  # rows named per kind of problem in the one-line error (all of them go to skipped.csv)


def _text(value: Any) -> str | None:
    """A text cell as a string; None when missing."""
    if is_missing(value):
        return None
    return value if isinstance(value, str) else str(value)


def row_problems(decl: dict, names: list[str], df: pd.DataFrame) -> tuple[list[list[str]], np.ndarray]:
    """Every problem of every row of a split frame (df: the source split's rows), in one pass: per row a list of
    problems ("blank <text column>", "missing <label column>", "<label column> not a number", "<label column> not a
    class"), and the labels (K-class ids int64, or float32 scores; 0 where the row has a problem; a text-only task,
    ``label: null``: float32 NaN, its texts alone checked)."""
    column = decl["label"]
    text_cols = [decl["text"]] + ([decl["pair"]] if decl.get("pair") else [])
    texts = {c: df[c].tolist() for c in text_cols}
    if column is None:
        return ([[f"blank {c}" for c in text_cols if (t := _text(texts[c][i])) is None or blank_text(t)]
                 for i in range(len(df))], np.full(len(df), np.nan, dtype=np.float32))
    values = df[column].tolist()
    regression = decl["kind"] == "regression"
    labels = np.zeros(len(df), dtype=np.float32 if regression else np.int64)
    index = class_index(names)
    problems: list[list[str]] = []
    for i, value in enumerate(values):
        mine = [f"blank {c}" for c in text_cols if (t := _text(texts[c][i])) is None or blank_text(t)]
        if class_key(value) is None:
            mine.append(f"missing {column}")
        elif regression:
            try:
                x = float(value)
                if not math.isfinite(x):
                    raise ValueError
                labels[i] = x
            except (TypeError, ValueError):
                mine.append(f"{column} not a number")
        else:
            k = label_id(value, index)
            if k is None:
                mine.append(f"{column} not a class")
            else:
                labels[i] = k
        problems.append(mine)
    return problems, labels


def _kind_text(decl: dict, names: list[str], problem: str) -> str:
    column = decl["label"]
    if problem.startswith("blank "):
        return f"text column {problem.removeprefix('blank ')!r} empty, missing or without a visible character"
    if problem == f"missing {column}":
        return f"label column {column!r} missing (an empty cell or null)"
    if problem == f"{column} not a number":
        return f"label in column {column!r} not a number (task {decl['name']} is a regression task)"
    return (f"label in column {column!r} not one of the labels of task {decl['name']} ({', '.join(names)}, or their "
            f"ids 0..{len(names) - 1})")


def _frame(decl: dict, df: pd.DataFrame, names: list[str], where: _Where, positions: np.ndarray,
           bad_rows: str) -> tuple[pd.DataFrame, list[SkippedRow]]:
    """The rows at `positions` of a source split as idx/text_a/text_b/label. Every row is checked in one pass: any
    problem is an error naming each kind (its count, its first rows) or, under bad_rows "skip", the rows are
    dropped and returned."""
    df = df.iloc[positions].reset_index(drop=True)
    text_cols = [decl["text"]] + ([decl["pair"]] if decl.get("pair") else [])
    problems, labels = row_problems(decl, names, df)
    bad = np.array([bool(p) for p in problems], dtype=bool)
    skipped: list[SkippedRow] = []
    if bad.any():
        kinds: dict[str, list[int]] = {}
        for i in np.flatnonzero(bad):
            for problem in problems[i]:
                kinds.setdefault(problem, []).append(int(i))
        if bad_rows != "skip":
            parts = []
            for problem, rows in kinds.items():
                shown = []
                for i in rows[:MAX_ROWS_NAMED]:
                    value = df[decl["label"]].iloc[i]
                    shown.append(where.row(int(positions[i])) + ("" if problem.startswith(("blank ", "missing "))
                                                                 else f" {value!r}"))
                more = f" and {len(rows) - MAX_ROWS_NAMED} more" if len(rows) > MAX_ROWS_NAMED else ""
                parts.append(f"{len(rows)} with {_kind_text(decl, names, problem)}: {', '.join(shown)}{more}")
            raise DataError(f"{where.prefix()}: {int(bad.sum())} of {len(df)} row(s) cannot be used: "
                            f"{'; '.join(parts)}. Fix the rows, or set data.bad_rows: skip to drop them (listed in "
                            f"results/data/{decl['name']}/<split>.skipped.csv)")
        needed = len(text_cols) + (decl["label"] is not None)
        for i in np.flatnonzero(bad):
            row = df.iloc[i]
            filled = sum(_text(row[c]) is not None and not blank_text(_text(row[c])) for c in text_cols)
            filled += decl["label"] is not None and class_key(row[decl["label"]]) is not None
            line = where.line(int(positions[i]))
            skipped.append(SkippedRow(where.path, int(line if line is not None else positions[i] + 1), int(filled),
                                      needed, problems[i][0]))
    keep = ~bad
    out = pd.DataFrame({
        "idx": positions.astype(np.int64),
        "text_a": np.array([_text(v) for v in df[decl["text"]].tolist()], dtype=object),
        "text_b": (np.array([_text(v) for v in df[decl["pair"]].tolist()], dtype=object) if decl.get("pair")
                   else np.full(len(df), None, object)),
        "label": labels,
    })
    return out[keep].reset_index(drop=True), skipped


def validation_share(n_total: int, share: float, seed: int) -> np.ndarray:
    """The positions of the train split drawn as validation: round(share * n), at least 1 and at most n - 1, by
    the project's one sampler (:func:`bertology.data.sample_positions`) with data.seed: (k,) int64, sorted."""
    from bertology.data.sampler import sample_positions

    k = min(max(1, int(round(share * n_total))), n_total - 1)
    return sample_positions(n_total, k, seed)


UNSEEN_LABELS = ("error", "allow")  # a declaration's unseen_labels


def _say_numbers_two_ways(decl: dict, frames: list[tuple[Any, pd.DataFrame]]) -> None:
    if decl["kind"] == "regression" or decl["label"] is None:
        return
    two = numbers_written_two_ways([v for _, df in frames for v in df[decl["label"]].tolist()])
    if two:
        log.warning("task %s: label(s) in column %r that are numbers are written in more than one way (%s); each "
                    "number is one class", decl["name"], decl["label"],
                    "; ".join(f"class {k}: {', '.join(map(repr, s))}" for k, s in sorted(two.items())))


def read_declared(decl: dict, split: str, *, seed: int, bad_rows: str) -> DeclaredSplit:
    """One split ("train" or "validation") of a declared task: its frame, label names and skipped rows."""
    src = locate(decl)
    with tempfile.TemporaryDirectory(prefix="bertology-datasets-") as cache:
        splits = load_splits(decl, src, cache if src.kind in ("file", "dir") else None)
        ignored = sorted(set(src.found) - set(src.files)) if src.kind == "dir" else []
        if ignored:
            log.info("task %s: files of %s for split(s) %s are not read (the task reads %s)", decl["name"],
                     src.where, ", ".join(ignored), ", ".join(read_splits(decl)))
        train_name, val = decl["splits"]["train"], decl["splits"]["validation"]
        train_ds = _find_split(decl, src, splits, train_name, "splits.train")
        share = not isinstance(val, str)
        val_ds = train_ds if share else _find_split(decl, src, splits, val, "splits.validation")
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
    names = [] if decl["label"] is None else label_names(decl, frames)  # a text-only task has none
    _say_numbers_two_ways(decl, frames)
    n = len(train_df)
    if share:
        if n < 2:
            raise DataError(f"task {decl['name']}: split {train_name!r} has {n} row(s): too few to draw a "
                            f"validation share from; give more rows or a validation split by name")
        val_pos = validation_share(n, float(val), seed)
        train_pos = np.setdiff1d(np.arange(n, dtype=np.int64), val_pos)
        positions = val_pos if split == "validation" else train_pos
        source_name, df = train_name, train_df
    else:
        train_pos = np.arange(n, dtype=np.int64)
        source_name, df = (train_name, train_df) if split == "train" else (val, val_df)
        positions = np.arange(len(df), dtype=np.int64)
    where = _Where(src, str(source_name))
    frame, skipped = _frame(decl, df, names, where, positions, bad_rows)
    if len(frame) == 0:
        raise DataError(f"task {decl['name']}: split {split} of {src.describe(str(source_name))} has no usable row "
                        f"({len(skipped)} skipped under data.bad_rows: skip)")
    unseen: tuple[str, ...] = ()
    if decl["kind"] == "classification" and decl["label"] is not None:
        if split == "train" and len(set(frame["label"].tolist())) < 2:
            present = np.unique(frame["label"].to_numpy())
            raise DataError(f"task {decl['name']}: the training split ({src.describe(str(source_name))}) holds one "
                            f"class only ({names[int(present[0])]!r} of {', '.join(names)}); a classifier needs two "
                            f"or more: check the label column {decl['label']!r} and the split")
        if split == "validation":  # the classes of the training rows that are trained on (no problem)
            problems, ids = row_problems(decl, names, train_df.iloc[train_pos].reset_index(drop=True))
            trained = {int(k) for k, p in zip(ids, problems) if not p}
            counts = frame["label"].value_counts()
            new = sorted(int(k) for k in counts.index if int(k) not in trained)
            if new:
                what = ", ".join(f"{names[k]!r} ({int(counts[k])} row(s))" for k in new)
                unseen = tuple(names[k] for k in new)
                if decl.get("unseen_labels", "error") != "allow":
                    raise DataError(f"task {decl['name']}: validation label(s) {what} of "
                                    f"{src.describe(str(source_name))} never occur in the training split: the "
                                    f"classifier is never trained on them. Fix the splits, or set unseen_labels: "
                                    f"allow in the task's declaration to score them anyway (Table 1 then notes it)")
                log.warning("task %s: validation label(s) %s never occur in the training split; scored anyway "
                            "(unseen_labels: allow; noted in Table 1)", decl["name"], what)
    return DeclaredSplit(frame, tuple(names), tuple(skipped), unseen)
