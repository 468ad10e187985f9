"""Reader of GLUE's original download-script layout (``glue_data/MRPC/dev.tsv`` and friends).

Quirks handled: a UTF-8 byte-order mark (MRPC), header-less CoLA (source, label, star, sentence),
STS-B's 10 and MNLI's 12/16 columns (read by header name), quoting off (a `"` is text, fields split on
tabs only), line breaks only on "\\n" (texts may hold other Unicode line separators), string labels
(RTE, QNLI, MNLI). A row with the wrong number of fields (QQP's files have a few) is an error naming the file
and every such line, or, with ``data.bad_rows: skip``, dropped and recorded (file and line) by the data rule.
A lone surrogate (U+D800..U+DFFF encoded as if it were a character, as CESU-8/WTF-8 writers do: no Unicode
text) is an error naming file and line.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bertology.pipeline.tasks import TaskSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Layout:
    text_a: str
    text_b: str | None
    label: str
    header: tuple[str, ...] | None = None  # None: the file's first line is the header


LAYOUTS: dict[str, Layout] = {
    "cola": Layout("sentence", None, "label", header=("source", "label", "star", "sentence")),
    "sst2": Layout("sentence", None, "label"),
    "mrpc": Layout("#1 String", "#2 String", "Quality"),
    "stsb": Layout("sentence1", "sentence2", "score"),
    "qqp": Layout("question1", "question2", "is_duplicate"),
    "mnli": Layout("sentence1", "sentence2", "gold_label"),
    "qnli": Layout("question", "sentence", "label"),
    "rte": Layout("sentence1", "sentence2", "label"),
}

BAD_ROWS = ("error", "skip")  # data.bad_rows
MAX_LISTED = 20  # malformed lines named in an error message (all of them are in the skipped-rows table)


@dataclass(frozen=True)
class SkippedRow:
    """A malformed row of a GLUE file (dropped under ``data.bad_rows: skip``): its file, 1-based line, field count,
    the header's, and the problem: ``fields`` (another number of fields than the header's) or ``blank <column>``
    (a text without a visible character, :func:`blank_text`: there is nothing to train on or analyse)."""

    file: str
    line: int
    fields: int
    expected: int
    problem: str = "fields"


@dataclass(frozen=True)
class GlueSplit:
    frame: pd.DataFrame  # idx, text_a, text_b, label
    skipped: tuple[SkippedRow, ...]


def blank_text(text: str) -> bool:
    """A text with no visible character: empty, or only separators (Unicode categories Z*: spaces, line and
    paragraph separators), controls (Cc: tabs, newlines) and format characters (Cf: zero-width spaces and joiners,
    the byte-order mark, direction marks). A tokenizer leaves nothing of it: the model would see ``[CLS] [SEP]``."""
    return all(unicodedata.category(c)[0] == "Z" or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def _glue_error(msg: str):
    from bertology.pipeline.errors import DataError

    return DataError(msg)


def find_file(root: Path, spec: TaskSpec, split: str) -> Path:
    if not root.is_dir():
        raise _glue_error(f"GLUE directory {root} does not exist; set data.source to a directory in the layout of "
                          f"GLUE's download script (holding e.g. {spec.glue_dir}/{spec.glue_files[split]}), "
                          f"or to 'demo' or 'hub'")
    names = [spec.glue_dir, spec.glue_dir.lower(), spec.glue_dir.replace("-", ""), spec.name]
    for name in names:
        path = root / name / spec.glue_files[split]
        if path.is_file():
            return path
    raise _glue_error(f"{spec.display} {split} file not found: expected {root / spec.glue_dir / spec.glue_files[split]} "
                      f"(GLUE download-script layout). Present in {root}: "
                      f"{', '.join(sorted(p.name for p in root.iterdir())) or 'nothing'}")


def _decode(path: Path) -> str:
    """The file's text (UTF-8, a byte-order mark dropped); a byte that is not UTF-8 is an error naming the
    file, line and byte, with what it would be in Latin-1 and how to re-encode."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        byte = raw[err.start]
        try:  # a surrogate code point encoded as a character (CESU-8/WTF-8 writers): not Unicode text
            surrogate = ord(raw[err.start:err.start + 3].decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, TypeError):
            surrogate = None
        if surrogate is not None and 0xD800 <= surrogate <= 0xDFFF:
            raise _glue_error(
                f"{path}:{line}:{column}: a lone surrogate (U+{surrogate:04X}, bytes "
                f"{raw[err.start:err.start + 3].hex(' ')}) is not Unicode text: the file was written from broken "
                f"text (an unpaired \\u{surrogate:04x} escape, CESU-8); fix or delete that line") from None
        raise _glue_error(
            f"{path}:{line}:{column}: byte 0x{byte:02x} is not UTF-8 (it would be {bytes([byte]).decode('cp1252', 'replace')!r} "
            f"in Latin-1/cp1252); GLUE files are UTF-8: re-encode the file, e.g. iconv -f cp1252 -t utf-8 "
            f"{path} > fixed.tsv && mv fixed.tsv {path}") from None


def _label_id(value: str, spec: TaskSpec, path: Path, line_no: int) -> float | int:
    value = value.strip()
    try:
        if spec.is_regression:
            return float(value)
        if value in spec.label_names:
            return spec.label_names.index(value)
        number = int(value)
        if 0 <= number < spec.num_labels:
            return number
    except ValueError:
        pass
    allowed = "a number" if spec.is_regression else (
        f"{', '.join(spec.label_names)} or their ids 0..{spec.num_labels - 1}")
    raise _glue_error(f"{path}:{line_no}: label {value!r} is not in the {spec.display} label set ({allowed})")


def _lines_named(lines: list[int]) -> str:
    named = ", ".join(map(str, lines[:MAX_LISTED]))
    return named + (f" and {len(lines) - MAX_LISTED} more" if len(lines) > MAX_LISTED else "")


def _problems(malformed: list[SkippedRow], expected: int) -> str:
    """What is wrong with the malformed rows, in words: the field counts found, the blank texts."""
    parts = []
    counts = sorted({m.fields for m in malformed if m.problem == "fields"})
    if counts:
        parts.append(f"{'/'.join(map(str, counts))} tab-separated field(s) where the header has {expected}")
    blank = sorted({m.problem.removeprefix("blank ") for m in malformed if m.problem.startswith("blank ")})
    if blank:
        parts.append(f"an empty, whitespace-only or invisible {'/'.join(blank)} (nothing to train on or analyse)")
    return "have " + " or ".join(parts)


def read_glue_split(root: Path, spec: TaskSpec, split: str) -> pd.DataFrame:
    """Read one split of a task from a GLUE-layout directory into idx/text_a/text_b/label, strictly: a
    malformed row is an error (:func:`read_glue_rows` with bad_rows="error"; for benchmarks and notebooks)."""
    return read_glue_rows(root, spec, split, bad_rows="error").frame


def read_glue_rows(root: Path, spec: TaskSpec, split: str, *, bad_rows: str) -> GlueSplit:
    """One split of a task from a GLUE-layout directory, and the malformed rows skipped.

    A row whose number of tab-separated fields differs from the header's is malformed, and so is a row whose
    text (either text of a pair) has no visible character (blank_text). bad_rows
    (``data.bad_rows``) "error": any malformed row is an error naming the file and every malformed line;
    "skip": they are dropped and returned (file, line, fields), unless they outnumber the good rows (then the
    file is not the task's file, an error either way).
    """
    if bad_rows not in BAD_ROWS:
        raise ValueError(f"bad_rows must be one of {BAD_ROWS}, got {bad_rows!r}")
    path = find_file(Path(root), spec, split)
    layout = LAYOUTS[spec.name]
    text = _decode(path)
    lines = [line.rstrip("\r") for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if layout.header is None:
        if not lines:
            raise _glue_error(f"{path} is empty")
        header, body, first_line = lines[0].split("\t"), lines[1:], 2
    else:
        header, body, first_line = list(layout.header), lines, 1
    wanted = [c for c in (layout.text_a, layout.text_b, layout.label) if c]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise _glue_error(f"{path}: missing column(s) {missing}; found columns {header}. Is this the "
                          f"{spec.display} file of GLUE's download script?")
    ia, il = header.index(layout.text_a), header.index(layout.label)
    ib = header.index(layout.text_b) if layout.text_b else None
    rows, malformed = [], []
    for offset, line in enumerate(body):
        fields = line.split("\t")
        if len(fields) != len(header):
            malformed.append(SkippedRow(str(path), first_line + offset, len(fields), len(header)))
            continue
        blank = [layout_col for layout_col, i in ((layout.text_a, ia), (layout.text_b, ib))
                 if i is not None and blank_text(fields[i])]
        if blank:
            malformed.append(SkippedRow(str(path), first_line + offset, len(fields), len(header), f"blank {blank[0]}"))
            continue
        label = _label_id(fields[il], spec, path, first_line + offset)
        rows.append((len(rows), fields[ia], fields[ib] if ib is not None else None, label))
    if not rows and not malformed:
        raise _glue_error(f"{path} holds no examples (only its header); give the complete GLUE "
                          f"{spec.display} {split} file")
    if malformed:
        lines_ = [m.line for m in malformed]
        what = (f"{len(malformed)} of {len(body)} rows (line(s) {_lines_named(lines_)}) "
                f"{_problems(malformed, len(header))}")
        if len(malformed) > len(rows):
            raise _glue_error(f"{path}: {what}; is this a GLUE {spec.display} file?")
        if bad_rows == "error":
            raise _glue_error(f"{path}:{lines_[0]}: {what}; fix those lines, or set data.bad_rows: skip to drop "
                              f"them (they are then listed in results/data/<task>/<split>.skipped.csv; GLUE's QQP "
                              f"files need this)")
        log.warning("%s: skipped %s (data.bad_rows: skip)", path, what)
    return GlueSplit(pd.DataFrame(rows, columns=["idx", "text_a", "text_b", "label"]), tuple(malformed))
