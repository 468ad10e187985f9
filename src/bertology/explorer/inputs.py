"""What the explorer reads: its inputs under the results root, every path from :mod:`bertology.pipeline.layout`.

:func:`explorer_inputs` lists them for the rule; :class:`Inputs` is what the readers of this package get: the
results root and the files declared to the explorer (the rule's inputs), so the page shows its declared inputs
and nothing else it happens to find under results/. One CSV reader notes what is absent or empty.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from bertology.pipeline import layout
from bertology.analyses import REGISTRY
from bertology.analyses.norms import FAITHFULNESS, FAITHFULNESS_EXAMPLES, IMPORTANCE_FILE, SCORES_FILE
from bertology.analyses.sieve import SIEVE_SCORES_FILE
from bertology.registry import Statistic, Table
from bertology.pipeline.tasks import SPLITS

VARIANTS = ("pretrained", "finetuned")
#: a decoder's induction-probe stores, by the page's variant (rules/decoders.smk)
PROBE_STORES = {v: f"probe-{v}" for v in VARIANTS}
# the fine-tuned model's token importance and the per-example agreement of each view with it (norms_faithfulness)
TOKEN_VIEW_FILES = (IMPORTANCE_FILE, FAITHFULNESS, FAITHFULNESS_EXAMPLES)
#: the norm analyses' per-variant token scores (token views of the example view)
TOKEN_SCORES = SCORES_FILE


def statistic_files(st: Statistic, task: str, variants: Sequence[str] = VARIANTS) -> list[str]:
    """The files (under the results root) a registry statistic reads for a task: one per variant or one."""
    if st.per_variant:
        return [layout.fill(st.table, task=task, variant=v) for v in variants]
    return [layout.fill(st.table, task=task)]


def task_templates(off: frozenset[str] = frozenset()) -> list[tuple[str, str, Table]]:
    """(section title, template under results/, its declared table) of every per-task table a report section
    shows that is not per head (a table with both ``layer`` and ``head`` columns), in the report's order; `off`:
    the settings switched off (:data:`bertology.registry.CONDITIONS`), whose tables are left out."""
    out = []
    for section in REGISTRY.report_sections():
        for template in section.tables:
            table = REGISTRY.table(template)
            if table is None or "{task}" not in template or not template.endswith(".csv"):
                continue
            if {"layer", "head"} <= set(table.columns) or (table.when and table.when in off):
                continue
            out.append((section.title, template, table))
    return out


def table_files(task: str, template: str, variants: Sequence[str] = VARIANTS) -> list[tuple[str, str]]:
    """(variant, path under results/) of a template for a task: one per variant where the path has one."""
    if "{variant}" in template:
        return [(v, layout.fill(template, task=task, variant=v)) for v in variants]
    return [("", layout.fill(template, task=task))]


def explorer_inputs(tasks: Sequence[str], results: str | Path = layout.ROOT, *, norms: bool = False,
                    seeds: bool = False, decoder: bool = False, finetuned: bool = True) -> dict[str, list[str]]:
    """Paths the explorer reads, for a Snakemake rule (under `results`, the results root).

    ``required``: what the workflow produces for these settings, to declare as the rule's input: the stores,
    their words, the fine-tuned model (its tokenizer), the data splits, the sieve scores and the source table of
    every statistic of the registry's catalogue; with ``norms`` (analysis.norms.enabled) the norm analyses'
    tables and token views too, with ``seeds`` (two or more train.seeds) the tables over seeds, with ``decoder``
    (a decoder model) the decoder probe's per-head tables and its stores of the induction probe's maps; without
    ``finetuned`` (train.inits: []) the pretrained model's files only.
    ``optional``: what the explorer also reads when declared and present (those the settings switched off)."""
    off = {c for c, on in (("norms", norms), ("seeds", seeds), ("decoder", decoder)) if not on}  # settings (registry.CONDITIONS) off
    variants = VARIANTS if finetuned else VARIANTS[:1]
    req: list[str] = []
    opt: list[str] = []
    for t in tasks:
        fine: list[str] = []  # the fine-tuned model's files
        req += [layout.rel("store", task=t, variant=v) for v in variants]
        req += [layout.rel("words", task=t)]
        fine += [layout.rel("store", task=t, variant="finetuned"), layout.variant_model(t, "finetuned", root=None)]
        req += [layout.rel("data", task=t, split=s) for s in SPLITS]
        req += [layout.rel("variant_stat", task=t, variant=v, file=SIEVE_SCORES_FILE) for v in variants]
        for st in REGISTRY.statistics():
            if not finetuned and REGISTRY.fine_tuned_only(st):
                fine.extend(statistic_files(st, t))
                continue
            (opt if REGISTRY.when(st) in off else req).extend(statistic_files(st, t, variants))
        views = [layout.rel("variant_stat", task=t, variant=v, file=TOKEN_SCORES) for v in variants]
        views += [layout.rel("variant_stat", task=t, variant="finetuned", file=f) for f in TOKEN_VIEW_FILES
                  if finetuned]
        (req if norms else opt).extend(views)
        (req if decoder else opt).extend(layout.rel("store", task=t, variant=PROBE_STORES[v]) for v in variants)
        for _, template, table in task_templates():
            files = [rel for _, rel in table_files(t, template, variants)]
            if not finetuned and "{seedtag}" in table.path:
                fine.extend(files)
                continue
            (opt if table.when in off else req).extend(files)
        (req if finetuned else opt).extend(fine)
    return {"required": [layout.join(results, p) for p in dict.fromkeys(req)],
            "optional": [layout.join(results, p) for p in dict.fromkeys(opt) if p not in req]}


@dataclass(frozen=True)
class Inputs:
    """The results root the explorer reads and the files it may read there: `declared` (paths under the root, a
    declared directory covering what it holds), or every file when None (notebooks, tests)."""

    root: Path
    declared: frozenset[str] | None = None

    @classmethod
    def of(cls, root: str | Path, declared: Collection[str] | None = None) -> Inputs:
        """Inputs under `root`; declared: paths under it (e.g. :func:`bertology.pipeline.layout.under` of a rule's inputs)."""
        return cls(Path(root), None if declared is None else frozenset(str(PurePosixPath(p)) for p in declared))

    def path(self, key: str, /, **values: object) -> Path:
        """The file of layout template `key` under the root, every field filled."""
        return Path(layout.path(key, root=self.root, **values))

    def file(self, relative: str) -> Path:
        """A path under the root (e.g. a registry statistic's table, filled)."""
        return Path(layout.join(self.root, relative))

    def stat(self, task: str, variant: str, file: str) -> Path:
        """A per-variant statistics file: results/stats/{task}/{variant}/{file}."""
        return self.path("variant_stat", task=task, variant=variant, file=file)

    def is_declared(self, path: Path) -> bool:
        """Whether the explorer may read `path`: everything when nothing is declared, a path outside the root
        (a model's files), or a declared path or one inside a declared directory."""
        if self.declared is None:
            return True
        try:
            relative = PurePosixPath(path.resolve().relative_to(self.root.resolve()).as_posix())
        except ValueError:
            return True
        return any(str(p) in self.declared for p in (relative, *relative.parents))

    def readable(self, path: Path) -> bool:
        """`path` exists and is declared."""
        return path.exists() and self.is_declared(path)

    def name(self, path: Path) -> str:
        """`path` as the page names it: under the root's own name (``results/stats/...``)."""
        try:
            return str(Path(self.root.name) / path.relative_to(self.root))
        except ValueError:
            return str(path)

    def expected(self, path: Path) -> bool:
        """Whether the run makes `path`: it is there, or declared (every path when nothing is declared). A file the
        run neither declares nor makes (a fine-tuned model's table in a run that fine-tunes nothing) is no note."""
        return path.exists() or self.is_declared(path)

    def absent(self, path: Path) -> str:
        """Why a file is not read: absent, or there but not declared to the explorer."""
        if path.exists():
            return f"{self.name(path)} not declared as an input of the explorer"
        return f"{self.name(path)} absent"

    def read_csv(self, path: Path, notes: list[str]) -> pd.DataFrame | None:
        """A table, or None with a note in `notes` when it is absent (and expected, :meth:`expected`), undeclared or
        empty."""
        if not self.readable(path):
            if self.expected(path):
                notes.append(self.absent(path))
            return None
        df = pd.read_csv(path)
        if df.empty:
            notes.append(f"{self.name(path)} is empty")
            return None
        return df
