"""results/explorer.html: an interactive head explorer that opens from disk, built from what the pipeline computed.

Two functions, one for each side of the file system:

- :func:`load_explorer_data` reads the per-head CSVs, the per-example sieve scores, the words table, the token
  views of the norm analyses and a sample of examples from each attention store (lazily, one example at a
  time: a store is never loaded whole) into a plain dict;
- :func:`render_explorer` turns that dict into one self-contained HTML page (inline CSS and JavaScript from
  ``explorer_assets/``, the data as inline JSON; no server, no network request).

Nothing is recomputed: every number on the page is a CSV value or a store value. Attention maps are
quantised for display only, to uint8 (``round(a * 255)``, error <= 1/510), and each example's maps are
zlib-compressed and base64-encoded (the page inflates them with the browser's ``DecompressionStream``).
Statistics keep 6 significant digits.

Views: an overview (layer x head grid of any statistic, pretrained / fine-tuned / difference), a head view
(the head's maps on the sampled examples as a heatmap, a bertviz-style line view and dependency arcs drawn
over the attention, its sieve-score distributions against tau and its roles with p-values) and an example
view (every head's map, pretrained next to fine-tuned, and the example's tokens coloured by each token view of
token_scores.parquet, with the fine-tuned model's importance and the per-example Spearman rho of
faithfulness_examples.csv). The examples are those with token scores first (:func:`pick_examples`), so the
token views shown are never of examples the page left out. Layers and heads are numbered from 1 on the page,
as in the papers; the CSVs and the store count from 0.

Shapes: E examples in a store, L layers, H heads, R sieve roles, n an example's real length.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import logging
import math
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology import __version__
from bertology.data import sample_positions
from bertology.io import write_text
from bertology.registry import Statistic, analysis, statistics
from bertology.store import check_block

log = logging.getLogger(__name__)

DEFAULT_EXAMPLES = 16  # sampled examples per task shown on the page
DEFAULT_BUDGET_BYTES = 8_000_000  # embedded attention maps, all tasks together (the page stays under 10 MB)
QUANT = 255  # display quantisation of attention: uint8 levels
HIST_BINS = 30  # bins of the per-head sieve-score histograms
SIG = 6  # significant digits kept for statistics
VARIANTS = ("pretrained", "finetuned")
# the fine-tuned model's token importance and the per-example agreement of each view with it (norms_faithfulness)
TOKEN_VIEW_FILES = ("importance.parquet", "faithfulness.csv", "faithfulness_examples.csv")


# --------------------------------------------------------------------------------------------------
# what the page reads (for the rule's input declaration)


def explorer_inputs(tasks: Sequence[str], results: str | Path = "results") -> dict[str, list[str]]:
    """Paths the explorer reads, for a Snakemake rule: ``required`` (declare them as input) and ``optional``
    (read when present: declare those your workflow produces, e.g. once entropy/importance rules exist)."""
    r = Path(results)
    req: list[str] = []
    opt: list[str] = []
    for t in tasks:
        req += [str(r / f"attention/{t}/{v}.zarr") for v in VARIANTS]
        req += [str(r / f"attention/{t}/words.parquet"), str(r / f"stats/{t}/cosine.csv"),
                str(r / f"ablation/{t}/heads.csv"), str(r / f"models/{t}/pretrained")]
        for v in VARIANTS:
            req += [str(r / f"stats/{t}/{v}/{name}") for name in
                    ("sieve.csv", "sieve_scores.npz", "patterns.csv", "features.csv", "cls.csv", "relations.csv")]
            opt += [str(r / f"stats/{t}/{v}/entropy.csv"), str(r / f"stats/{t}/{v}/parser.csv"),
                    str(r / f"stats/{t}/{v}/norms.csv"), str(r / f"stats/{t}/{v}/token_scores.parquet")]
        opt += [str(r / f"stats/{t}/finetuned/{name}") for name in TOKEN_VIEW_FILES]
        opt += [str(r / f"ablation/{t}/importance.csv"), str(r / f"data/{t}/validation.parquet"),
                str(r / f"data/{t}/train.parquet")]
    return {"required": req, "optional": opt}


# --------------------------------------------------------------------------------------------------
# small helpers


def _num(v: Any) -> float | None:
    """A JSON-safe float with SIG significant digits (None for NaN/inf/missing)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return float(f"{f:.{SIG}g}")


def _grid(df: pd.DataFrame, column: str, L: int, H: int) -> list[float | None]:
    """Values of `column` on the (layer, head) grid, row-major (layer * H + head); None where absent."""
    out: list[float | None] = [None] * (L * H)
    for lay, head, v in zip(df["layer"].to_numpy(), df["head"].to_numpy(), df[column].to_numpy()):
        lay, head = int(lay), int(head)
        if 0 <= lay < L and 0 <= head < H:
            out[lay * H + head] = _num(v)
    return out


def _flags(df: pd.DataFrame, column: str, L: int, H: int) -> list[int]:
    out = [0] * (L * H)
    for lay, head, v in zip(df["layer"].to_numpy(), df["head"].to_numpy(), df[column].to_numpy()):
        if 0 <= int(lay) < L and 0 <= int(head) < H:
            out[int(lay) * H + int(head)] = int(str(v).strip().lower() in ("true", "1", "1.0"))
    return out


def _read_csv(path: Path, notes: list[str], results: Path) -> pd.DataFrame | None:
    if not path.exists():
        notes.append(f"{_rel(path, results)} absent")
        return None
    df = pd.read_csv(path)
    if df.empty:
        notes.append(f"{_rel(path, results)} is empty")
        return None
    return df


def _rel(path: Path, results: Path) -> str:
    try:
        return str(Path(results.name) / path.relative_to(results))
    except ValueError:
        return str(path)


def _metric(mid: str, group: str, label: str, desc: str, source: str, *, scale: str = "seq",
            variants: dict[str, list] | None = None, single: list | None = None, marks: dict[str, list] | None = None,
            mark_label: str = "", ci: dict[str, list] | None = None, ref: float | None = None,
            fmt: str = "") -> dict[str, Any]:
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
    return m


# --------------------------------------------------------------------------------------------------
# statistics (the overview's catalogue)


def _variant_tables(results: Path, task: str, name: str, notes: list[str]) -> dict[str, pd.DataFrame]:
    out = {}
    for v in VARIANTS:
        df = _read_csv(results / "stats" / task / v / name, notes, results)
        if df is not None:
            out[v] = df
    return out


def _statistic_tables(results: Path, task: str, st: Statistic, notes: list[str],
                      read: dict[str, dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """The source tables of a registry statistic: {variant: frame} (tables per variant) or {"single": frame};
    `read` caches the tables already read (by source template), so each is read (and noted) once."""
    if st.table not in read:
        quiet: list[str] = []  # an optional table's absence is no note
        where = quiet if st.optional else notes
        if st.per_variant:
            tables = {}
            for v in VARIANTS:
                df = _read_csv(results / st.table.format(task=task, variant=v), where, results)
                if df is not None:
                    tables[v] = df
        else:
            df = _read_csv(results / st.table.format(task=task), where, results)
            tables = {"single": df} if df is not None else {}
        read[st.table] = tables
    return read[st.table]


def _keys(tables: dict[str, pd.DataFrame], st: Statistic) -> list[str]:
    """The statistic's keys: values of its key column(s) in order of appearance across the tables, or (top) the
    12 keys whose maximum of the `top` column is largest in the first table."""
    if st.top:
        first = next(iter(tables.values()))
        return first.groupby(st.key[0])[st.top].max().sort_values(ascending=False).head(12).index.tolist()
    found: list[str] = []
    for df in tables.values():
        for k in df["_key"].unique():
            if k not in found:
                found.append(k)
    return found


def _with_key(df: pd.DataFrame, st: Statistic) -> pd.DataFrame:
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


def _statistic_metrics(st: Statistic, tables: dict[str, pd.DataFrame], task: str, L: int, H: int) -> list[dict]:
    """The page's metrics of one registry statistic (one per key) from its source tables."""
    if not tables:
        return []
    source = st.table.replace("{task}", task)
    if st.count:  # how many rows per head have the flag
        counts = {}
        for v, df in tables.items():
            flagged = df[df[st.count].astype(str).str.lower().isin(["true", "1"])]
            grid = [0] * (L * H)
            for lay, head in zip(flagged["layer"], flagged["head"]):
                grid[int(lay) * H + int(head)] += 1
            counts[v] = grid
        return [_metric(st.id, st.group, st.label, st.desc, source, scale=st.scale, variants=counts, fmt=st.fmt)]
    ref = float(next(iter(tables.values()))[st.ref].iloc[0]) if st.ref else None
    kept = {v: _with_key(df, st) for v, df in tables.items()}
    out = []
    for k in (_keys(kept, st) if st.key else [None]):
        vals, marks, ci = {}, {}, None
        for v, df in kept.items():
            sub = df if k is None else df[(df["_key"] == str(k)) & (df["layer"] >= 0)]
            vals[v] = _grid(sub, st.column, L, H)
            if st.mark and st.mark in sub.columns:
                marks[v] = _flags(sub, st.mark, L, H)
            if st.ci and set(st.ci) <= set(sub.columns):
                ci = {"low": _grid(sub, st.ci[0], L, H), "high": _grid(sub, st.ci[1], L, H)}
        fill = {"k": k, "ref": f"{ref:g}" if ref is not None else ""}
        values = {"variants": vals} if st.per_variant else {"single": vals["single"]}
        out.append(_metric(st.id if k is None else f"{st.id}:{k}", st.group, st.label.format(**fill),
                           st.desc.format(**fill), source, scale=st.scale, marks=marks or None,
                           mark_label=st.mark_label, ci=ci, ref=ref, fmt=st.fmt, **values))
    return out


def _metrics(results: Path, task: str, L: int, H: int, sieve_tables: dict[str, pd.DataFrame],
             notes: list[str]) -> list[dict]:
    """The overview's catalogue: every statistic of the registry (:func:`bertology.registry.statistics`), in its
    order, from the tables this run wrote (sieve_tables: the sieve.csv tables, already read)."""
    read = {analysis("sieve").tables[0].path: sieve_tables}
    ms: list[dict] = []
    for st in statistics():
        ms += _statistic_metrics(st, _statistic_tables(results, task, st, notes, read), task, L, H)
    return ms


# --- issue 26: statistics over fine-tuning seeds (results/stats/{task}/seeds/, two or more train.seeds) ---
#: seed tables shown in the catalogue: file, the key column of one metric per value (None: one metric), value
#: description; each metric is the mean over seeds, with each seed's value (`seeds`) for the head view
SEED_CATALOGUE = (
    ("cosine.csv", None, "cosine pretrained vs fine-tuned"),
    ("disabling.csv", "metric", "disabling Δ {k}"),
    ("importance.csv", None, "importance"),
    ("entropy.csv", "feature", "entropy: {k}"),
    ("sieve.csv", "role", "bias: {k}"),
)


def _seed_metrics(results: Path, task: str, L: int, H: int) -> list[dict]:
    """The 'Across fine-tuning seeds' group: per SEED_CATALOGUE table, the mean over seeds on the grid with each
    seed's values (`seeds`: seed -> grid) and the std over seeds as its own metric; the share of seeds assigning
    each sieve role (roles.csv). Nothing when the run has one seed (no seeds/ tables)."""
    d = results / "stats" / task / "seeds"
    if not d.is_dir():
        return []
    group, ms = "Across fine-tuning seeds", []
    for name, key, label in SEED_CATALOGUE:
        path = d / name
        if not path.exists():
            continue
        df = pd.read_csv(path)
        seed_cols = [c for c in df.columns if c.startswith("seed") and c[4:].isdigit()]
        keys = [None] if key is None else list(dict.fromkeys(df[key].astype(str)))
        for k in keys:
            sub = df if k is None else df[df[key].astype(str) == k]
            text = label.format(k=k)
            source = f"stats/{task}/seeds/{name}"
            m = _metric(f"seeds:{name[:-4]}:{k or ''}", group, f"{text}, mean over seeds",
                        f"{text}: mean over the fine-tuning seeds; the head view lists each seed's value.", source,
                        scale="div" if name == "disabling.csv" else "seq", single=_grid(sub, "mean", L, H))
            m["seeds"] = {c[4:]: _grid(sub, c, L, H) for c in seed_cols}
            ms.append(m)
            ms.append(_metric(f"seeds:{name[:-4]}:{k or ''}:std", group, f"{text}, std over seeds",
                              f"{text}: standard deviation over the fine-tuning seeds (ddof 1).", source,
                              single=_grid(sub, "std", L, H)))
    roles = d / "roles.csv"
    if roles.exists():
        df = pd.read_csv(roles)
        for role in dict.fromkeys(df["role"].astype(str)):
            ms.append(_metric(f"seeds:roles:{role}", group, f"seeds assigning {role}",
                              f"Share of the fine-tuning seeds whose sieve test assigns the {role} role to the head.",
                              f"stats/{task}/seeds/roles.csv", single=_grid(df[df["role"].astype(str) == role],
                                                                            "share", L, H)))
    return ms


# --------------------------------------------------------------------------------------------------
# sieve: the per-head test table and the distribution of per-example scores


def _sieve(results: Path, task: str, L: int, H: int, tables: dict[str, pd.DataFrame],
           notes: list[str]) -> tuple[dict | None, dict[str, Any]]:
    """(sieve block of the page, {variant: scores DataArray}) or (None, {})."""
    from bertology.sieve.scores_io import read_scores as load_scores

    if not tables:
        return None, {}
    roles: list[str] = []
    for df in tables.values():
        roles += [r for r in df["role"].astype(str).unique() if r not in roles]
    R = len(roles)
    first = next(iter(tables.values()))
    block: dict[str, Any] = {"roles": roles, "tau": _num(first["tau"].iloc[0]),
                             "alpha": _num(first["alpha"].iloc[0]), "correction": str(first["correction"].iloc[0]),
                             "stats": {}, "bins": HIST_BINS}
    for v, df in tables.items():
        cols = {c: [None] * (L * H * R) for c in ("n", "mean", "std", "t", "p_value", "p_adjusted")}
        cols["assigned"] = [0] * (L * H * R)
        for row in df.itertuples(index=False):
            rec = row._asdict()
            i = (int(rec["layer"]) * H + int(rec["head"])) * R + roles.index(str(rec["role"]))
            for c in cols:
                if c == "assigned":
                    cols[c][i] = int(str(rec["assigned"]).lower() in ("true", "1"))
                elif c in rec:
                    cols[c][i] = _num(rec[c])
        block["stats"][v] = cols
    scores = {}
    for v in tables:
        path = results / "stats" / task / v / "sieve_scores.npz"
        if path.exists():
            scores[v] = load_scores(path)
        else:
            notes.append(f"{_rel(path, results)} absent: no score distributions for {v}")
    if scores:
        # one shared x range per (layer, head, role) so both variants' histograms share their bins
        arrays = {}
        for v, s in scores.items():
            a = np.full((s.sizes["example"], L, H, R), np.nan, np.float32)
            have = [str(r) for r in s["role"].values]
            for j, role in enumerate(roles):
                if role in have:
                    a[..., j] = s.values[..., have.index(role)]
            arrays[v] = a
        both = np.concatenate(list(arrays.values()), axis=0)
        with np.errstate(all="ignore"):
            top = np.nanmax(np.where(np.isfinite(both), both, -np.inf), axis=0)  # (L, H, R)
        top = np.where(np.isfinite(top), top, 0.0)
        hi = np.maximum(top, 1.5 * float(block["tau"]))
        hi = np.array([_nice(x) for x in hi.ravel()]).reshape(hi.shape)
        block["hi"] = [_num(x) for x in hi.ravel()]
        block["hist"] = {}
        for v, a in arrays.items():
            idx = np.floor(a / hi[None] * HIST_BINS)
            ok = np.isfinite(idx)
            idx = np.clip(np.where(ok, idx, 0), 0, HIST_BINS - 1).astype(np.int64)
            flat = (np.arange(L * H * R).reshape(1, L, H, R) * HIST_BINS + idx)[ok]
            counts = np.bincount(flat, minlength=L * H * R * HIST_BINS)
            block["hist"][v] = counts.astype(int).tolist()
        block["n_scored"] = {v: int(a.shape[0]) for v, a in arrays.items()}
    return block, scores


def _nice(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that is >= x (histogram ranges)."""
    if x <= 0 or not math.isfinite(x):
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= x * (1 - 1e-9):
            return float(m * e)
    return float(10 * e)


# --------------------------------------------------------------------------------------------------
# examples and their maps


def _tokenizer(results: Path, task: str, attrs: dict):
    """A `tokenizers.Tokenizer` to turn input ids into wordpiece strings, or None (labels from words)."""
    candidates = [results / "models" / task / "pretrained" / "tokenizer.json"]
    if attrs.get("model_path"):
        mp = Path(str(attrs["model_path"]))
        candidates += [mp / "tokenizer.json", results.parent / mp / "tokenizer.json"]
    try:
        from bertology.models import EMBEDDED_MODELS, resolve_model

        if attrs.get("model") in EMBEDDED_MODELS:
            candidates.append(Path(resolve_model(str(attrs["model"]))) / "tokenizer.json")
    except Exception:  # noqa: BLE001 - the embedded model is only one candidate
        pass
    for c in candidates:
        if c.exists():
            from tokenizers import Tokenizer

            return Tokenizer.from_file(str(c))
    return None


def quantise(maps: np.ndarray) -> np.ndarray:
    """Attention (..., n, n) in [0, 1] -> uint8 levels round(a * 255) (display only; error <= 1/510)."""
    return np.clip(np.rint(np.nan_to_num(maps.astype(np.float32), nan=0.0) * QUANT), 0, QUANT).astype(np.uint8)


def encode_maps(q: np.ndarray) -> str:
    """uint8 maps -> base64 of their zlib (deflate) stream, as the page's DecompressionStream('deflate') reads."""
    return base64.b64encode(zlib.compress(np.ascontiguousarray(q).tobytes(), 9)).decode("ascii")


def decode_maps(text: str, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`encode_maps` (tests, notebooks)."""
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8).reshape(shape)


def _label_text(task: str, label: Any) -> str:
    try:
        from bertology.tasks import get_task

        names = get_task(task).label_names
        if names and label is not None and not pd.isna(label) and float(label).is_integer() \
                and 0 <= int(label) < len(names):
            return f"{names[int(label)]} ({int(label)})"
    except Exception:  # noqa: BLE001 - an unknown task shows the raw label
        pass
    return "" if label is None or (isinstance(label, float) and math.isnan(label)) else str(label)


def pick_examples(example_idx: np.ndarray, preferred: Sequence[Collection[int]], k: int, seed: int) -> np.ndarray:
    """Store positions of the k examples the page embeds. Pure.

    example_idx: (E,) the store's example_idx. The examples whose example_idx is in preferred[0] come first, then
    those in preferred[1], ..., then the rest of the store; a group that does not fit whole is cut to a seeded
    sample of itself (:func:`bertology.data.sample_positions`, `seed`). Returns (min(k, E),) int64 positions,
    group by group, sorted within each group. With no preferred group this is ``sample_positions(E, k, seed)``,
    the page's plain seeded sample."""
    example_idx = np.asarray(example_idx)
    E = len(example_idx)
    k = min(int(k), E)
    taken = np.zeros(E, bool)
    out: list[np.ndarray] = []
    for group in [*preferred, None]:
        left = k - int(taken.sum())
        if left <= 0:
            break
        member = ~taken if group is None else ~taken & np.isin(example_idx, np.fromiter(group, np.int64))
        cand = np.flatnonzero(member)
        if len(cand) > left:
            cand = cand[sample_positions(len(cand), left, seed)]
        taken[cand] = True
        out.append(cand.astype(np.int64))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _by_example(df: pd.DataFrame) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray, list[str]]]]:
    """A token-score table (example_idx, position, word, method, score) -> {example_idx: {method: (positions,
    scores, words)}}, positions sorted."""
    out: dict[int, dict[str, tuple[np.ndarray, np.ndarray, list[str]]]] = {}
    for (idx, method), g in df.groupby(["example_idx", "method"], sort=False):
        g = g.sort_values("position")
        out.setdefault(int(idx), {})[str(method)] = (g["position"].to_numpy(np.int64), g["score"].to_numpy(float),
                                                     g["word"].astype(str).tolist())
    return out


def _token_views(results: Path, task: str, variants: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token views of the norm analyses (Abnar & Zuidema 2020; docs/reference.md#token-views): (the page's
    block: methods, importances, what is missing and why, faithfulness.csv; the lookups `_examples` attaches per
    example: {"scores": {variant: by example}, "importance": by example, "rho": {example_idx: {view: {importance:
    rho}}}})."""
    from bertology.norms.faithful import IMPORTANCES, VIEWS

    block: dict[str, Any] = {"views": list(VIEWS), "importances": list(IMPORTANCES), "missing": {}, "scored": {},
                             "flow": {}, "faith": {}, "importance_missing": None, "rho_missing": None,
                             "sources": {}}
    look: dict[str, Any] = {"scores": {}, "importance": {}, "rho": {}}
    for v in variants:
        path = results / "stats" / task / v / "token_scores.parquet"
        block["sources"][v] = _rel(path, results)
        if not path.exists():
            block["missing"][v] = (f"{_rel(path, results)} absent: the norm analyses did not run for the {v} model "
                                   "(analysis.norms.enabled: false, or a model whose layers get no value norms; "
                                   "the workflow says which at start)")
            continue
        df = pd.read_parquet(path)
        look["scores"][v] = _by_example(df)
        block["scored"][v] = int(df["example_idx"].nunique())
        block["flow"][v] = int(df.loc[df["method"] == "flow", "example_idx"].nunique())
    fin = results / "stats" / task / "finetuned"
    imp = fin / "importance.parquet"
    if imp.exists():
        look["importance"] = _by_example(pd.read_parquet(imp))
    else:
        block["importance_missing"] = (f"{_rel(imp, results)} absent: the fine-tuned model's token importance "
                                       "(norms_faithfulness) was not computed")
    rhos = fin / "faithfulness_examples.csv"
    if rhos.exists():
        for r in pd.read_csv(rhos).itertuples(index=False):
            look["rho"].setdefault(int(r.example_idx), {}).setdefault(str(r.view), {})[str(r.importance)] = _num(r.rho)
    else:
        block["rho_missing"] = f"{_rel(rhos, results)} absent: no per-example agreement with the importance"
    faith = fin / "faithfulness.csv"
    if faith.exists():
        for r in pd.read_csv(faith).itertuples(index=False):
            block["faith"].setdefault(str(r.view), {})[str(r.importance)] = {
                "mean": _num(r.mean), "std": _num(r.std), "n": int(r.n), "ci_low": _num(r.ci_low),
                "ci_high": _num(r.ci_high)}
    return block, look


def _preferred(look: dict[str, Any]) -> list[set[int]]:
    """The groups :func:`pick_examples` fills the page with: the examples with every view (flow, importance),
    then those with any token score."""
    scored: set[int] = set()
    full: set[int] = set(look["importance"])
    for by in look["scores"].values():
        scored |= set(by)
        full |= {i for i, m in by.items() if "flow" in m}
    return [full, scored] if scored or full else []


def _attach_views(ex: dict[str, Any], look: dict[str, Any]) -> None:
    """ex["views"] {variant: {method: scores (n,)}}, ex["importance"] {importance: scores (n,)}, ex["rho"] {view:
    {importance: rho}} of one example, where its token scores cover exactly its n store positions (with the same
    wordpieces when the page has them); a mismatch is said in ex["views_note"] instead."""
    idx, n = ex["idx"], ex["n"]
    notes: list[str] = []

    def aligned(by: dict, what: str) -> dict[str, list]:
        got = {}
        for method, (positions, scores, words) in by.get(idx, {}).items():
            if not np.array_equal(positions, np.arange(n)) or (ex.get("tokenized") and words != ex["tokens"]):
                notes.append(f"{what} {method}: its {len(positions)} positions are not the store's {n} wordpieces")
                continue
            got[method] = [_num(x) for x in scores]
        return got

    ex["views"] = {v: got for v, by in look["scores"].items() if (got := aligned(by, f"{v} token scores"))}
    ex["importance"] = aligned(look["importance"], "importance")
    ex["rho"] = look["rho"].get(idx, {})
    if notes:
        ex["views_note"] = notes
        log.warning("explorer: example_idx %d: %s", idx, "; ".join(notes))


def _examples(results: Path, task: str, stores: dict[str, Any], words: pd.DataFrame | None, scores: dict,
              sieve_roles: list[str], examples: int, seed: int, budget: int,
              views: dict[str, Any] | None = None) -> tuple[list[dict], int]:
    """The sampled examples with tokens, words, text, their quantised maps (one store read per example) and, from
    `views` (:func:`_token_views`' lookups), their token views. The sample (:func:`pick_examples`) takes the
    examples with token scores first, so the token views of the page are never of examples it left out."""
    ref = next(iter(stores.values()))
    L, H = int(ref.sizes["layer"]), int(ref.sizes["head"])
    look = views or {"scores": {}, "importance": {}, "rho": {}}
    pos = pick_examples(ref["example_idx"].values, _preferred(look), examples, seed)
    tok = _tokenizer(results, task, dict(ref.attrs))
    split = str(ref.attrs.get("split", "validation"))
    data_path = results / "data" / task / f"{split}.parquet"
    texts = pd.read_parquet(data_path).set_index("idx") if data_path.exists() else None
    special = {int(ref.attrs.get(k)) : name for k, name in
               (("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"), ("pad_token_id", "[PAD]"))
               if ref.attrs.get(k) is not None}
    out: list[dict] = []
    used = 0
    dropped = 0
    for p in pos:
        p = int(p)
        n = int(ref["length"][p].values)
        ids = ref["input_ids"][p, :n].values.astype(np.int64)
        wid = ref["word_ids"][p, :n].values.astype(np.int64)
        idx = int(ref["example_idx"][p].values)
        seg = ref["segment"][p, :n].values.astype(int).tolist() if "segment" in ref else \
            ref["token_type_ids"][p, :n].values.astype(int).tolist()
        ex: dict[str, Any] = {"pos": p, "idx": idx, "n": n, "word_ids": wid.tolist(), "segment": seg}
        wrows = words[words["example_idx"] == idx].sort_values("word") if words is not None else None
        if wrows is not None and len(wrows):
            ex["words"] = [[str(r.text), str(getattr(r, "pos", "")), str(r.dep), int(r.head)]
                           for r in wrows.itertuples(index=False)]
        else:
            ex["words"] = []
        ex["tokenized"] = tok is not None
        if tok is not None:
            ex["tokens"] = [tok.id_to_token(int(i)) or f"<{i}>" for i in ids]
        else:  # no tokenizer: label wordpieces by their word (continuations as ##)
            labels, prev = [], None
            for i, w in zip(ids, wid):
                if w < 0:
                    labels.append(special.get(int(i), f"<{int(i)}>"))
                else:
                    text = ex["words"][w][0] if w < len(ex["words"]) else f"w{w}"
                    labels.append(text if w != prev else "##")
                prev = w
            ex["tokens"] = labels
        if texts is not None and idx in texts.index:
            row = texts.loc[idx]
            ex["text_a"] = str(row.get("text_a", ""))
            tb = row.get("text_b")
            ex["text_b"] = None if tb is None or (isinstance(tb, float) and math.isnan(tb)) else str(tb)
            ex["label"] = _label_text(task, row.get("label"))
        ex["maps"] = {}
        for v, ds in stores.items():
            a = ds["attention"][p, :, :, :n, :n].values  # (L, H, n, n): one example, never the store
            path = results / "attention" / task / f"{v}.zarr"
            check_block(a[None], np.array([n]), ds.attrs, where=f"{path} example {p}", padding=False,
                        example_idx=np.array([idx]), store=path)
            ex["maps"][v] = encode_maps(quantise(a))
        ex["sieve"] = {}
        for v, s in scores.items():
            have = [str(r) for r in s["role"].values]
            hit = np.nonzero(s["example_idx"].values == idx)[0]
            if len(hit):
                vals = s.values[int(hit[0])]  # (L, H, R_npz)
                ex["sieve"][v] = [_num(vals[lay, h, have.index(r)]) if r in have else None
                                  for lay in range(L) for h in range(H) for r in sieve_roles]
        _attach_views(ex, look)
        del ex["tokenized"]  # only for that check
        size = sum(len(m) for m in ex["maps"].values())
        if out and used + size > budget:
            dropped += 1
            continue
        used += size
        out.append(ex)
    if dropped:
        log.warning("explorer: %s: %d of %d sampled examples left out to keep the page under its size budget",
                    task, dropped, len(pos))
    return out, dropped


# --------------------------------------------------------------------------------------------------
# the two entry points


def load_explorer_data(results: Path, tasks: list[str], *, examples: int, seed: int, budget_bytes: int = DEFAULT_BUDGET_BYTES,
                       expect: Callable[[str, str], Mapping[str, Any]] | None = None) -> dict:
    """Everything the explorer page shows, read from a results/ directory (nothing recomputed).

    results: the pipeline's results/ directory; tasks: the tasks to include (those without attention
    stores are skipped with a note). examples: examples per task whose maps are embedded (the same store
    positions for both variants: those with token scores first, then a seeded sample; :func:`pick_examples`);
    seed: the sample's seed. budget_bytes: cap on the embedded
    (compressed) maps over all tasks; examples past it are left out and the page says so.
    Reads each store lazily through :func:`bertology.store.open_store`, one sampled example at a time;
    expect(task, variant): the attributes each store must have (:func:`bertology.store.expected_attrs`).
    """
    from bertology.store import open_store
    from bertology.tasks import get_task

    results = Path(results)
    tasks = list(tasks)
    out: dict[str, Any] = {"format": 1, "bertology_version": __version__,
                           "generated": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
                           "results": str(results), "examples": int(examples), "seed": int(seed),
                           "quant": QUANT, "tasks": [], "skipped": []}
    share = max(1, int(budget_bytes) // max(1, len(tasks)))
    for task in tasks:
        notes: list[str] = []
        stores = {}
        for v in VARIANTS:
            path = results / "attention" / task / f"{v}.zarr"
            if path.exists():
                stores[v] = open_store(path, expect=expect(task, v) if expect else None)
            else:
                notes.append(f"{_rel(path, results)} absent")
        if not stores:
            out["skipped"].append({"task": task, "why": "; ".join(notes)})
            log.warning("explorer: %s has no attention store; skipped", task)
            continue
        ref = next(iter(stores.values()))
        L, H = int(ref.sizes["layer"]), int(ref.sizes["head"])
        out.setdefault("model", str(ref.attrs.get("model", "?")))
        words_path = results / "attention" / task / "words.parquet"
        words = pd.read_parquet(words_path, columns=None) if words_path.exists() else None
        if words is None:
            notes.append(f"{_rel(words_path, results)} absent: no dependency arcs")
        sieve_tables = _variant_tables(results, task, "sieve.csv", notes)
        sieve, scores = _sieve(results, task, L, H, sieve_tables, notes)
        metrics = _metrics(results, task, L, H, sieve_tables, notes) + _seed_metrics(results, task, L, H)
        views, look = _token_views(results, task, list(stores))
        exs, dropped = _examples(results, task, stores, words, scores, sieve["roles"] if sieve else [],
                                 examples, seed, share, look)
        try:
            spec = get_task(task)
            display, pair = spec.display, spec.is_pair
        except Exception:  # noqa: BLE001
            display, pair = task, bool(sieve and "block" in sieve["roles"])
        out["tasks"].append({
            "task": task, "display": display, "pair": pair, "layers": L, "heads": H,
            "split": str(ref.attrs.get("split", "")), "store_examples": int(ref.sizes["example"]),
            "variants": list(stores), "stores": {v: f"{results.name}/attention/{task}/{v}.zarr" for v in stores},
            "metrics": metrics, "sieve": sieve, "examples": exs, "dropped": dropped, "notes": notes,
            "token_views": views,
        })
    return out



def _asset(name: str) -> str:
    return resources.files("bertology").joinpath("explorer_assets", name).read_text(encoding="utf-8")


# Characters that JSON leaves as they are but an HTML <script> element does not: "<" starts "</script>" and
# "<!--" (whose "escaped" parser state swallows the page's own script), ">" and "&" are escaped for the same
# reason in other contexts; U+2028/2029 end a line in older JavaScript. Each becomes its JSON \\u escape, so
# JSON.parse gives back exactly the original text.
_SCRIPT_ESCAPES = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_json(data: Any) -> str:
    """JSON that is safe as the text of an HTML <script> element, whatever strings `data` holds: every "<",
    ">", "&", U+2028 and U+2029 is written as its \\uXXXX escape (JSON.parse restores them). Pure."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.translate(_SCRIPT_ESCAPES)



def render_explorer(data: dict) -> str:
    """The whole self-contained explorer page (HTML text) for :func:`load_explorer_data`'s dict. Pure.

    The template's placeholders are filled in one pass, so text inside the data (or the model's name) that
    looks like a placeholder stays text."""
    import re

    title = f"bertology explorer — {html.escape(str(data.get('model', '?')))}"
    js = _asset("explorer.js")
    fills = {"TITLE": title, "CSS": _asset("explorer.css"), "JS": js.replace("</script", "<\\/script"),
             "DATA": script_json(data)}
    return re.sub(r"\{\{(TITLE|CSS|JS|DATA)\}\}", lambda m: fills[m.group(1)], _asset("explorer.html"))


def write_explorer(results: Path, tasks: list[str], output: Path, **kwargs: Any) -> Path:
    """load + render + write (atomically); for notebooks and the command."""
    text = render_explorer(load_explorer_data(Path(results), tasks, **kwargs))
    output = write_text(text, output)
    log.info("explorer: %s (%.2f MB)", output, output.stat().st_size / 1e6)
    return output


__all__ = ["load_explorer_data", "render_explorer", "script_json", "write_explorer", "explorer_inputs", "pick_examples",
           "quantise", "encode_maps", "decode_maps", "DEFAULT_EXAMPLES"]
