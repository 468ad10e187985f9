"""What the explorer reads: the paths of its inputs under results/ (for the rule's input declaration and for the
readers of this package) and the one CSV reader that notes what is absent or empty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

VARIANTS = ("pretrained", "finetuned")
# the fine-tuned model's token importance and the per-example agreement of each view with it (norms_faithfulness)
TOKEN_VIEW_FILES = ("importance.parquet", "faithfulness.csv", "faithfulness_examples.csv")


def store_path(results: Path, task: str, variant: str) -> Path:
    """The attention store of a task's variant."""
    return results / "attention" / task / f"{variant}.zarr"


def words_path(results: Path, task: str) -> Path:
    """The words table of a task's store sample (dependency arcs)."""
    return results / "attention" / task / "words.parquet"


def variant_path(results: Path, task: str, variant: str, name: str) -> Path:
    """A per-variant statistics file, e.g. ``stats/{task}/{variant}/sieve.csv``."""
    return results / "stats" / task / variant / name


def data_path(results: Path, task: str, split: str) -> Path:
    """A task's data split (the examples' texts and labels)."""
    return results / "data" / task / f"{split}.parquet"


def tokenizer_path(results: Path, task: str) -> Path:
    """The tokenizer saved beside the task's pretrained model."""
    return results / "models" / task / "pretrained" / "tokenizer.json"


def explorer_inputs(tasks: Sequence[str], results: str | Path = "results") -> dict[str, list[str]]:
    """Paths the explorer reads, for a Snakemake rule: ``required`` (declare them as input) and ``optional``
    (read when present: declare those your workflow produces, e.g. once entropy/importance rules exist)."""
    r = Path(results)
    req: list[str] = []
    opt: list[str] = []
    for t in tasks:
        req += [str(store_path(r, t, v)) for v in VARIANTS]
        req += [str(words_path(r, t)), str(r / f"stats/{t}/cosine.csv"),
                str(r / f"ablation/{t}/heads.csv"), str(r / f"models/{t}/pretrained")]
        for v in VARIANTS:
            req += [str(variant_path(r, t, v, name)) for name in
                    ("sieve.csv", "sieve_scores.npz", "patterns.csv", "features.csv", "cls.csv", "relations.csv")]
            opt += [str(variant_path(r, t, v, name)) for name in
                    ("entropy.csv", "parser.csv", "norms.csv", "token_scores.parquet")]
        opt += [str(variant_path(r, t, "finetuned", name)) for name in TOKEN_VIEW_FILES]
        opt += [str(r / f"ablation/{t}/importance.csv"), str(data_path(r, t, "validation")),
                str(data_path(r, t, "train"))]
    return {"required": req, "optional": opt}


def rel(path: Path, results: Path) -> str:
    """`path` as the page names it: relative to the parent of results/ (``results/stats/...``)."""
    try:
        return str(Path(results.name) / path.relative_to(results))
    except ValueError:
        return str(path)


def read_csv(path: Path, notes: list[str], results: Path) -> pd.DataFrame | None:
    """A table, or None with a note in `notes` when it is absent or empty."""
    if not path.exists():
        notes.append(f"{rel(path, results)} absent")
        return None
    df = pd.read_csv(path)
    if df.empty:
        notes.append(f"{rel(path, results)} is empty")
        return None
    return df


def variant_tables(results: Path, task: str, name: str, notes: list[str]) -> dict[str, pd.DataFrame]:
    """A per-variant table of both variants, {variant: frame} for those present and not empty (the others noted)."""
    out = {}
    for v in VARIANTS:
        df = read_csv(variant_path(results, task, v, name), notes, results)
        if df is not None:
            out[v] = df
    return out
