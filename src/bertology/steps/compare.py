"""The step ``compare``: every model's tables read from its results root (the sources the registry declares,
:data:`bertology.analyses.compare.SOURCES`), compared (:mod:`bertology.compare`), written at its declared outputs
(:data:`bertology.analyses.compare.OUTPUTS`: results/compare/{sinks,induction,patterns,roles,depth}.csv and four
figures).

``bertology compare --input roots=results/m/a --input roots=results/m/b --output sinks=... --config JSON``: one
``roots`` input per model (a Snakemake rule's list input gives one each), the model's short name its directory's
name; the tasks from the config's ``tasks``. A table a model lacks is a "not computed" row naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bertology import compare as cmp
from bertology.analyses.compare import OUTPUTS, SOURCES
from bertology.compare import figures
from bertology.pipeline.errors import UserError
from bertology.pipeline.io import write_csv
from bertology.pipeline.layout import fill, join
from bertology.steps.context import StepContext


def _read(file: str) -> pd.DataFrame | None:
    """A table, or None where it is absent or has no rows."""
    if not Path(file).is_file():
        return None
    try:
        table = pd.read_csv(file)
    except pd.errors.EmptyDataError:
        return None
    return table if len(table) else None


#: each source's path text under a model's results root, by name: what the notes of a table lacked name
SOURCE_PATHS = {name: text for name, (text, _) in SOURCES.items()}


def read_model(root: str | Path, tasks: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Every table of SOURCES a model's results root holds, each over every task (a ``task`` column, and a
    ``variant`` column for the per-variant tables); a table no task has is left out."""
    out = {}
    for name, (text, variants) in SOURCES.items():
        frames = []
        for task in tasks:
            if not variants:
                table = _read(join(root, fill(text, task=task)))
                if table is not None:
                    frames.append(table.assign(task=task))
            for variant in variants:
                table = _read(join(root, fill(text, task=task, variant=variant)))
                if table is not None:
                    frames.append(table.assign(task=task, variant=variant))
        if frames:
            out[name] = pd.concat(frames, ignore_index=True)
    return out


def model_kind(tables: Mapping[str, pd.DataFrame]) -> str:
    """decoder where the model has the decoder probe's tables (the probe runs on decoders only), else encoder."""
    return cmp.DECODER if "decoder_sink" in tables or "decoder_induction" in tables else cmp.ENCODER


def compare_tables(models: Mapping[str, Mapping[str, pd.DataFrame]], tasks: Sequence[str],
                   kinds: Mapping[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """The comparison's tables (sinks, induction, patterns, roles, depth) from every model's tables (model ->
    :func:`read_model`'s mapping); kinds: model -> encoder | decoder (default: :func:`model_kind`)."""
    kinds = {m: (kinds or {}).get(m) or model_kind(t) for m, t in models.items()}
    bad = {m: k for m, k in kinds.items() if k not in cmp.KINDS}
    if bad:
        raise UserError(f"model kinds must be {' or '.join(cmp.KINDS)}; got {bad}")

    def by_model(name: str) -> dict[str, pd.DataFrame]:
        return {m: t[name] for m, t in models.items() if name in t}

    src = SOURCE_PATHS
    sinks, sink_layers = cmp.sinks(by_model("decoder_sink"), by_model("features"), kinds, tasks,
                                   store=by_model("sinks"), sources=src)
    curves = cmp.depth([sink_layers, cmp.pattern_layers(by_model("patterns"), kinds, tasks, sources=src),
                        cmp.entropy_layers(by_model("entropy"), kinds, tasks, sources=src),
                        cmp.cosine_layers(by_model("cosine"), kinds, tasks, sources=src)])
    return {"sinks": sinks, "induction": cmp.induction(by_model("decoder_induction"), kinds, tasks, sources=src),
            "patterns": cmp.patterns(by_model("patterns"), kinds, tasks, sources=src),
            "roles": cmp.roles(by_model("sieve"), kinds, tasks, sources=src), "depth": curves}


def write_outputs(tables: Mapping[str, pd.DataFrame], outputs: Mapping[str, str | Path]) -> dict[str, Path]:
    """Write each table of the comparison and its figure at the paths of `outputs` (the step's declared output
    names, :data:`bertology.analyses.compare.OUTPUTS`)."""
    written = {name: write_csv(tables[name], outputs[name]) for name in cmp.COLUMNS}
    draw = {"sinks_figure": (figures.sinks_figure, "sinks"), "depth_figure": (figures.depth_figure, "depth"),
            "patterns_figure": (figures.patterns_figure, "patterns"),
            "roles_figure": (figures.roles_figure, "roles")}
    for name, (function, table) in draw.items():
        written[name] = function(tables[table], outputs[name])
    return written


def tables_of_roots(roots: Mapping[str, str | Path], tasks: Sequence[str],
                    kinds: Mapping[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """The comparison's tables of the models whose results roots are `roots` (short name -> root) on `tasks`."""
    absent = [str(r) for r in roots.values() if not Path(r).is_dir()]
    if absent:
        raise UserError(f"no such model results directory: {', '.join(absent)}")
    return compare_tables({m: read_model(r, tasks) for m, r in roots.items()}, tasks, kinds)


def output_paths(results: str | Path) -> dict[str, Path]:
    """The step's declared outputs (:data:`bertology.analyses.compare.OUTPUTS`) under the results root `results`,
    by output name."""
    return {o.output: Path(join(results, o.path)) for o in OUTPUTS}


def compare_roots(roots: Mapping[str, str | Path], tasks: Sequence[str], results: str | Path,
                  kinds: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Compare the models whose results roots are `roots` (short name -> root) on `tasks`: write the step's
    outputs at their declared paths under the results root `results` (:func:`output_paths`) and return them by
    name."""
    tables = tables_of_roots(roots, tasks, kinds)
    return write_outputs(tables, output_paths(results))


def model_roots(paths: Sequence[Path]) -> dict[str, Path]:
    """Each ``roots`` input by its model's short name, its directory's name (results/m/{name}); two roots of one
    name are an error."""
    names = [Path(p).name for p in paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"two model results directories share the name {', '.join(twice)}: each model's "
                        f"results root is named by its short name")
    return dict(zip(names, map(Path, paths)))


def compare(ctx: StepContext) -> None:
    """Inputs: ``roots`` (one per model, repeatable). Outputs: the step's declared ones, by name
    (:data:`bertology.analyses.compare.OUTPUTS`). The tasks: the config's."""
    roots = model_roots(ctx.input.all("roots"))
    tables = tables_of_roots(roots, ctx.config.tasks)
    written = write_outputs(tables, {o.output: getattr(ctx.output, o.output) for o in OUTPUTS})
    ctx.tracker.metrics({f"compare.{row.model}.{column}": float(getattr(row, column))
                         for row in figures.headline(tables["sinks"]).itertuples()
                         for column in ("sink_rate", "share_heads_over") if np.isfinite(float(getattr(row, column)))})
    for name, file in written.items():
        ctx.tracker.artifact(file, "compare" if name in cmp.COLUMNS else "figures")
    ctx.log.info("compared %d models on %s", len(roots), ", ".join(ctx.config.tasks))
