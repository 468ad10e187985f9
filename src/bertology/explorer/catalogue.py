"""The overview's catalogue: every per-head statistic of the registry (:meth:`bertology.registry.Registry.statistics`), in
its order, as the page's metrics, read from the tables the run wrote. Nothing here is written by hand beside the
registry: a statistic's label, description, source table and column, key, colour scale, marks, interval and
reference all come from its :class:`bertology.registry.Statistic`.

A page metric is a dict: id, group, label, desc, source (the table under results/), scale ("seq" or "div") and
its values on the (L * H,) layer x head grid (:mod:`bertology.explorer.cells`): ``variants`` {variant: grid} for
a table per variant, else ``single``; optionally marks {variant or "single": 0/1 grid} with mark_label, ci {low,
high}, ref, fmt and, for a statistic over fine-tuning seeds, ``seeds`` {seed: grid}.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bertology.pipeline import layout
from bertology.explorer.cells import counts, flags, grid
from bertology.explorer.inputs import VARIANTS, Inputs, statistic_files
from bertology.analyses import REGISTRY
from bertology.registry import Statistic

TOP_KEYS = 12  # a statistic with `top` keeps this many keys


def metric(mid: str, group: str, label: str, desc: str, source: str, *, scale: str = "seq",
           variants: dict[str, list] | None = None, single: list | None = None, marks: dict[str, list] | None = None,
           mark_label: str = "", ci: dict[str, list] | None = None, ref: float | None = None, fmt: str = "",
           seeds: dict[str, list] | None = None) -> dict[str, Any]:
    """One metric of the page (keys left out where they have no value)."""
    m: dict[str, Any] = {"id": mid, "group": group, "label": label, "desc": desc, "source": source, "scale": scale}
    if variants is not None:
        m["variants"] = variants
    if single is not None:
        m["single"] = single
    if marks:
        m["marks"] = marks
        m["mark_label"] = mark_label
    if ci:
        m["ci"] = ci
    if ref is not None:
        m["ref"] = ref
    if fmt:
        m["fmt"] = fmt
    if seeds is not None:
        m["seeds"] = seeds
    return m


def statistic_tables(src: Inputs, task: str, st: Statistic, notes: list[str],
                     read: dict[str, dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """The source tables of a registry statistic: {variant: frame} (tables per variant) or {"single": frame};
    `read` caches the tables already read (by source template), so each is read (and noted) once."""
    if st.table not in read:
        quiet: list[str] = []  # an optional table's absence is no note
        where = quiet if st.optional else notes
        keys = VARIANTS if st.per_variant else ("single",)
        frames = {k: src.read_csv(src.file(f), where) for k, f in zip(keys, statistic_files(st, task))}
        read[st.table] = {k: df for k, df in frames.items() if df is not None}
    return read[st.table]


def with_key(df: pd.DataFrame, st: Statistic) -> pd.DataFrame:
    """The rows a statistic keeps (where, notna), with its key as the column `_key` (key columns joined by a space)."""
    for column, value in st.where:
        df = df[df[column] == value]
    if st.notna:
        df = df[df[st.notna].notna()]
    if st.key:
        key = df[st.key[0]].astype(str)
        for c in st.key[1:]:
            key = key + " " + df[c].astype(str)
        df = df.assign(_key=key)
    return df


def keys(tables: dict[str, pd.DataFrame], st: Statistic) -> list[str]:
    """The statistic's keys: values of its key column(s) in order of appearance across the tables (after
    :func:`with_key`), or (top) the TOP_KEYS keys whose maximum of the `top` column is largest in the first table."""
    if st.top:
        first = next(iter(tables.values()))
        return first.groupby(st.key[0])[st.top].max().sort_values(ascending=False).head(TOP_KEYS).index.tolist()
    found: list[str] = []
    for df in tables.values():
        for k in df["_key"].unique():
            if k not in found:
                found.append(k)
    return found


def seed_grids(df: pd.DataFrame, L: int, H: int) -> dict[str, list[float | None]]:
    """Each fine-tuning seed's values of a table over seeds (its ``seed{N}`` columns): {N: grid}."""
    return {c[4:]: grid(df, c, L, H) for c in df.columns if c.startswith("seed") and c[4:].isdigit()}


def statistic_metrics(st: Statistic, tables: dict[str, pd.DataFrame], task: str, L: int, H: int) -> list[dict]:
    """The page's metrics of one registry statistic (one per key) from its source tables."""
    if not tables:
        return []
    source = layout.fill(st.table, task=task)
    if st.count:  # how many rows per head have the flag
        grids = {v: counts(df, st.count, L, H) for v, df in tables.items()}
        return [metric(st.id, st.group, st.label, st.desc, source, scale=st.scale, variants=grids, fmt=st.fmt)]
    ref = float(next(iter(tables.values()))[st.ref].iloc[0]) if st.ref else None
    kept = {v: with_key(df, st) for v, df in tables.items()}
    out = []
    for k in (keys(kept, st) if st.key else [None]):
        vals, marks, ci, seeds = {}, {}, None, None
        for v, df in kept.items():
            sub = df if k is None else df[(df["_key"] == str(k)) & (df["layer"] >= 0)]
            vals[v] = grid(sub, st.column, L, H)
            if st.mark and st.mark in sub.columns:
                marks[v] = flags(sub, st.mark, L, H)
            if st.ci and set(st.ci) <= set(sub.columns):
                ci = {"low": grid(sub, st.ci[0], L, H), "high": grid(sub, st.ci[1], L, H)}
            if st.per_seed:
                seeds = seed_grids(sub, L, H)
        fill = {"k": k, "ref": f"{ref:g}" if ref is not None else ""}
        values = {"variants": vals} if st.per_variant else {"single": vals["single"]}
        out.append(metric(st.id if k is None else f"{st.id}:{k}", st.group, st.label.format(**fill),
                          st.desc.format(**fill), source, scale=st.scale, marks=marks or None,
                          mark_label=st.mark_label, ci=ci, ref=ref, fmt=st.fmt, seeds=seeds, **values))
    return out


def catalogue(src: Inputs, task: str, L: int, H: int, notes: list[str],
              read: dict[str, dict[str, pd.DataFrame]] | None = None) -> list[dict]:
    """The overview's catalogue of a task: the metrics of every registry statistic, in registry order, from the
    tables of `src` (absent tables are skipped, with a note in `notes` unless the statistic is optional).
    read: tables already read, by the registry's source template (e.g. the sieve tables), reused."""
    read = {} if read is None else read
    ms: list[dict] = []
    for st in REGISTRY.statistics():
        ms += statistic_metrics(st, statistic_tables(src, task, st, notes, read), task, L, H)
    return ms
