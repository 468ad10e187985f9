"""The ledger: every claim of the registry (:meth:`bertology.registry.Registry.claims`) checked on one run's tables.

:func:`build_ledger` reads, for each claim and task, the tables the claim declares (one set per fine-tuning seed
for a claim about the fine-tuned model), calls the claim's pure function, applies the verdict rule
(:func:`bertology.claims.bootstrap.verdict`) and Holm's correction over every test of the run, and returns
results/claims.csv as a DataFrame (:data:`COLUMNS`). With two or more seeds each seed's verdict comes beside the
pooled one. :func:`findings_view` is stats/{task}/seeds/findings.csv, a view of the ledger.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bertology.pipeline import layout
from bertology.claims.bootstrap import HOLDS, NOT_COMPUTED, Boot, Result, verdict
from bertology.pipeline.errors import InputError
from bertology.stats.moments import adjust_p

#: a claim as the registry declares it (bertology.registry.Claim: id, inputs, compute, side, null, ...); the ledger
#: takes the claims as an argument, so this science module imports no registry
Claim = Any

#: results/claims.csv's columns (declared with its table in bertology.analyses.ledger)
COLUMNS = ("model", "claim", "paper", "section", "statement", "paper_value", "statistic", "task", "variant", "effect", "ci_low",
           "ci_high", "null", "side", "unit", "test", "p", "p_holm", "n", "n_seeds", "verdict", "caveat",
           "seed_verdicts", "seeds", "seeds_agree", "note", "heads", "anchor", "figure", "rests_on")
#: the claim whose interval says whether a task's fine-tuned model beats chance: the fine-tuned model's headline
#: metric minus that of the pretrained encoder with an untrained (randomly initialised) head, a classifier at chance,
#: its interval over the validation examples (Table 1; :func:`bertology.claims.kovaleva.table1_gain`)
CHANCE_CLAIM = "kovaleva_table1_pretrained"
#: the `caveat` of every row of a task whose fine-tuned model does not beat chance (followed by the interval)
AT_CHANCE = "fine-tuned model not above chance"
#: the task of a task-free claim's one row (its inputs do not depend on the task: Claim.task_free)
ALL = "all"
#: the note of a claim about a fine-tuned model in a run that fine-tunes nothing (no fine-tuning seed)
NO_FINETUNING = "needs a fine-tuned model: train.inits is [] (this run fine-tunes nothing)"
#: stats/{task}/seeds/findings.csv's columns (the view of the ledger over seeds)
FINDINGS_COLUMNS = ("finding", "paper", "statement", "holds", "seeds", "holding", "n_seeds", "verdict")


def seed_variants(claim: Claim, tags: Sequence[str]) -> list[tuple[str, str]]:
    """(store variant, seed tag) per seed the claim reads: one per fine-tuning seed for a claim about the
    fine-tuned model (``finetuned``, ``finetuned-seed43``, ...), the one pretrained model otherwise."""
    if claim.variant == "pretrained":
        return [("pretrained", "")]
    return [(f"{claim.variant}{tag}", tag) for tag in tags]


def claim_tasks(claim: Claim, tasks: Sequence[str], off: Collection[str] = ()) -> list[str]:
    """The tasks a claim has a row for: [:data:`ALL`] for a task-free claim (``Claim.task_free``: its inputs in a
    run whose config keys `off` are off do not depend on the task), else every task of the run."""
    return [ALL] if claim.task_free(off) else list(tasks)


def input_paths(claim: Claim, task: str, tags: Sequence[str],
                off: Collection[str] = ()) -> list[dict[str, list[tuple[str, str]]]]:
    """Per seed: table name -> its alternatives, each (path under results/, gate), in declaration order (a task-free
    claim's alternatives without ``{task}`` only, ``Claim.task_inputs``)."""
    out = []
    for variant, tag in seed_variants(claim, tags):
        alts: dict[str, list[tuple[str, str]]] = {}
        for name, template, gate in claim.task_inputs(off):
            values = {k: v for k, v in (("task", task), ("variant", variant), ("seedtag", tag))
                      if "{" + k + "}" in template}
            alts.setdefault(name, []).append((layout.fill(template, **values), gate))
        out.append(alts)
    return out


def required_inputs(claims: Sequence[Claim], tasks: Iterable[str], tags: Sequence[str],
                    off: Collection[str] = ()) -> list[str]:
    """Every table the ledger of `claims` (the registry's) reads for `tasks` and the seeds' `tags`, as paths under
    results/ (the claims rule's inputs): each claim's inputs whose gate is not in `off` (config keys that are off in
    this run, e.g. ``analysis.norms.enabled``)."""
    out: dict[str, None] = {}
    for claim in claims:
        for task in claim_tasks(claim, list(tasks), off):
            for alts in input_paths(claim, task, tags, off):
                for options in alts.values():
                    for path, gate in options:
                        if not gate or gate not in off:
                            out[path] = None
    return list(out)


def read_table(path: Path) -> pd.DataFrame:
    """A table the claims read: CSV, or a JSON record (a score) flattened to one row (``metrics.accuracy``)."""
    if path.suffix == ".json":
        return pd.json_normalize(json.loads(path.read_text()))
    return pd.read_csv(path)


def ordered_claims(claims: Sequence[Claim], order: Sequence[str] = ()) -> list[Claim]:
    """The claims in the order of the report's sections `order` (their keys; Table 1 first), declaration order
    within a section; a claim whose section is not in `order` after the others."""
    keys = list(order)
    return sorted(claims, key=lambda c: keys.index(c.anchor) if c.anchor in keys else len(keys))


def _base_row(claim: Claim, task: str) -> dict:
    return {"claim": claim.id, "paper": claim.paper, "section": claim.section, "statement": claim.statement,
            "paper_value": claim.paper_value, "statistic": claim.statistic, "task": task, "variant": claim.variant,
            "null": claim.null, "side": claim.side, "unit": claim.unit, "anchor": claim.anchor,
            "figure": (claim.figure_all or claim.figure) if task == ALL else claim.figure}


def _not_computed(claim: Claim, task: str, why: str) -> dict:
    nan = float("nan")
    return {**_base_row(claim, task), "effect": nan, "ci_low": nan, "ci_high": nan, "test": "", "p": nan, "n": 0,
            "n_seeds": 0, "verdict": NOT_COMPUTED, "seed_verdicts": "", "seeds": "", "seeds_agree": pd.NA,
            "note": why, "heads": "", "rests_on": f"nothing: {why}"}


def run_claim(claim: Claim, tables: Sequence[Mapping[str, pd.DataFrame]], boot: Boot, task: str) -> Result:
    """Call the claim's pure function on one mapping of tables per seed."""
    import inspect

    params = dict(claim.params)
    fn = claim.compute
    if "task" in inspect.signature(fn).parameters:
        params["task"] = task
    return fn(list(tables), boot, side=claim.side, null=claim.null, **params)


def evaluate(claim: Claim, task: str, tables: Sequence[Mapping[str, pd.DataFrame]], boot: Boot,
             seeds: Sequence[int] = ()) -> dict:
    """One ledger row (without p_holm) of a claim on one mapping of tables per seed; `seeds`: their seeds (two or
    more: each seed's verdict too). A claim computed on no unit (n = 0, no effect: its tables lack what it reads)
    is `not computed`, its note saying why."""
    res = run_claim(claim, tables, boot, task)
    if not res.computed or (res.n == 0 and not math.isfinite(res.effect)):
        return _not_computed(claim, task, res.note or "its tables hold no unit to compute it on")
    row = {**_base_row(claim, task), "effect": res.effect, "ci_low": res.ci_low, "ci_high": res.ci_high,
           "test": res.test, "p": res.p, "n": res.n, "n_seeds": len(tables), "note": res.note,
           "heads": ";".join(f"{l}-{h}" for l, h in res.heads)}
    row["verdict"] = verdict(res.ci_low, res.ci_high, side=claim.side, null=claim.null)
    if len(tables) > 1:
        per = [run_claim(claim, [t], boot, task) for t in tables]
        verdicts = [verdict(r.ci_low, r.ci_high, side=claim.side, null=claim.null) for r in per]
        row["seed_verdicts"] = ";".join(verdicts)
        row["seeds"] = ";".join(str(s) for s in seeds)
        row["seeds_agree"] = sum(v == row["verdict"] for v in verdicts)
    else:
        row["seed_verdicts"], row["seeds"], row["seeds_agree"] = "", "", pd.NA
    row["rests_on"] = rests_on(claim.unit, res, len(tables))
    return row


def rests_on(unit: str, res: Result, n_seeds: int) -> str:
    """What a claim's interval rests on, in words: ``"n = 144 heads"`` (``x 3 seeds`` with several, the
    Multi-Bootstrap), or, without an interval, ``"no interval: n = 1 seeds; ..."`` and the claim's own reason
    (its note: what would give one)."""
    seeds = f" x {n_seeds} seeds" if n_seeds > 1 and unit != "seeds" else ""
    what = f"n = {res.n} {unit}{seeds}"
    if math.isfinite(res.ci_low) and math.isfinite(res.ci_high):
        return what
    return f"no interval: {what}" + (f"; {res.note}" if res.note else "")


def build_ledger(results: Path, claims: Sequence[Claim], tasks: Sequence[str], seeds: Sequence[int], boot: Boot, *,
                 order: Sequence[str] = (), declared: Collection[str] | None = None,
                 off: Collection[str] = (), model: str = "") -> pd.DataFrame:
    """results/claims.csv of the run under `results` (its results root).

    claims: the registry's (:meth:`bertology.registry.Registry.claims`); order: the report's section keys (rows in
    that order, :func:`ordered_claims`); tasks: the run's tasks; seeds: its fine-tuning seeds (train.seeds, or [train.seed]); boot: resamples,
    confidence, seed; declared: the paths under results/ the step may read (the rule's inputs; None: any that
    exists); off: config keys that are off in this run (a claim whose inputs they gate is `not computed`,
    naming the key). No seeds (train.inits: [], nothing fine-tuned): every claim about a fine-tuned model is `not
    computed` (:data:`NO_FINETUNING`). Rows in the report's order, then by task (a task-free claim,
    ``Claim.task_free``, has one row, task :data:`ALL`, and is one test); p_holm over every finite p of the ledger.
    model: the model's short name, every row's ``model`` (:func:`bertology.pipeline.modelset.model_name`).
    """
    from bertology.pipeline.seedtags import seed_tags

    tags = seed_tags(list(seeds))
    rows = []
    for claim in ordered_claims(claims, order):
        for task in claim_tasks(claim, tasks, off):
            if not seed_variants(claim, tags):
                rows.append(_not_computed(claim, task, NO_FINETUNING))
                continue
            per_seed, missing = [], None
            for alts in input_paths(claim, task, tags, off):
                tables = {}
                for name, options in alts.items():
                    usable = [p for p, gate in options if (not gate or gate not in off)
                              and (declared is None or p in declared) and (results / p).exists()]
                    if not usable:
                        gates = [g for _, g in options if g and g in off]
                        missing = (f"needs {gates[0] if gates else claim.config}: "
                                   f"{options[-1][0]} not in this run")
                        break
                    tables[name] = read_table(results / usable[0])
                if missing:
                    break
                per_seed.append(tables)
            if missing:
                rows.append(_not_computed(claim, task, missing))
                continue
            used = [s for s, _ in zip(seeds, per_seed)] if len(per_seed) > 1 else []
            try:
                rows.append(evaluate(claim, task, per_seed, boot, used))
            except (KeyError, IndexError) as err:
                raise InputError(f"claim {claim.id} ({task}): a table it reads lacks {err}; re-run the rule that "
                                 f"writes {', '.join(sorted({n for n, _, _ in claim.inputs}))}") from err
    ledger = pd.DataFrame(rows)
    if ledger.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    ledger["model"] = model
    ledger["p_holm"] = adjust_p(ledger["p"].to_numpy(float), "holm")
    ledger["seeds_agree"] = ledger["seeds_agree"].astype("Int64")
    ledger["caveat"] = chance_caveats(ledger)
    return ledger.reindex(columns=list(COLUMNS))


def chance_caveats(ledger: pd.DataFrame) -> pd.Series:
    """The ledger's ``caveat`` column: per row, empty, or for every row of a task whose fine-tuned model does not
    beat chance :data:`AT_CHANCE` with the evidence ("fine-tuned model not above chance: kovaleva_table1_pretrained
    0.0125 [-0.0125, 0.05]").

    Decided from the task's :data:`CHANCE_CLAIM` row alone: its interval computed (finite) and not wholly on the
    claim's side of its null (the verdict rule, :func:`bertology.claims.bootstrap.verdict`, is not `holds`). A task
    without that row or without an interval (fewer than MIN_UNITS examples, not computed) gets no caveat: the ledger
    cannot tell. The verdict of a claim about a fine-tuned model (:func:`verdict_marked`) then describes a classifier
    that learned nothing of its task."""
    out = pd.Series([""] * len(ledger), index=ledger.index, dtype=object)
    chance = ledger[ledger["claim"] == CHANCE_CLAIM]
    for r in chance.to_dict("records"):
        lo, hi = float(r["ci_low"]), float(r["ci_high"])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        if verdict(lo, hi, side=r["side"], null=float(r["null"])) == HOLDS:
            continue
        out[ledger["task"] == r["task"]] = f"{AT_CHANCE}: {CHANCE_CLAIM} {effect_text(r)}"
    return out


def verdict_marked(row: Mapping) -> bool:
    """Whether a ledger row's verdict is marked as describing a model that learned nothing: its task's fine-tuned
    model does not beat chance (a ``caveat``) and the claim is about a fine-tuned model (variant not
    ``pretrained``)."""
    caveat = row.get("caveat")
    return isinstance(caveat, str) and bool(caveat) and row.get("variant") != "pretrained"


def findings_view(ledger: pd.DataFrame, task: str) -> pd.DataFrame:
    """stats/{task}/seeds/findings.csv from the ledger: per claim of the fine-tuned model, 1/0 per seed (its verdict
    is `holds` or not), the seeds, how many hold, and in words every | most | some | one | none
    (:func:`bertology.stats.across_seeds.verdict`); `not computed` where the ledger did not compute it."""
    from bertology.stats.across_seeds import verdict as in_words

    rows = []
    for r in ledger[ledger["task"].isin([task, ALL]) & (ledger["variant"] != "pretrained")].itertuples():
        per = [v for v in str(r.seed_verdicts).split(";") if v] if isinstance(r.seed_verdicts, str) else []
        holds = [int(v == "holds") for v in per]
        rows.append({"finding": r.claim, "paper": f"{r.paper}, {r.section}", "statement": r.statement,
                     "holds": ";".join(str(h) for h in holds), "seeds": r.seeds if isinstance(r.seeds, str) else "",
                     "holding": sum(holds), "n_seeds": len(holds),
                     "verdict": in_words(sum(holds), len(holds)) if holds else NOT_COMPUTED})
    return pd.DataFrame(rows, columns=list(FINDINGS_COLUMNS))


def _text(x) -> str:
    """A cell's text: '' for a missing value (None, or the NaN a ledger read back from its CSV holds for '')."""
    return "" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x)


def _fmt(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


def effect_text(row: Mapping) -> str:
    """'0.12 [0.05, 0.2]' (the effect and its interval), or the effect alone when there is no interval."""
    e, lo, hi = (float(row[k]) if pd.notna(row[k]) else float("nan") for k in ("effect", "ci_low", "ci_high"))
    if not math.isfinite(e):
        return ""
    return f"{_fmt(e)} [{_fmt(lo)}, {_fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else _fmt(e)


def to_markdown(ledger: pd.DataFrame, confidence: float) -> str:
    """results/claims.md: one line per claim and task (verdict, effect [interval], the paper's figure, what the
    interval rests on, the caveat; a verdict about a fine-tuned model that does not beat chance marked,
    :func:`verdict_marked`); a task-free claim's one line has task all."""
    head = (f"# Claims checked on this run\n\nEffect [{confidence:.0%} interval]; a claim holds when the interval lies "
            f"wholly on the paper's side of the null (holds if), is contradicted when wholly on the other side, and is "
            f"inconclusive otherwise. p: one-sided test on the paper's side; p_holm: Holm over every test of the run. "
            f"caveat: every row of a task whose fine-tuned model does not beat chance ({CHANCE_CLAIM}'s interval); "
            f"the verdict of a claim about that fine-tuned model is marked *(model at chance)*: it describes a "
            f"classifier that learned nothing of its task.\n\n"
            "| claim | task | variant | verdict | effect [interval] | holds if | paper | test | p | p_holm | rests on "
            "| seeds | caveat |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in ledger.to_dict("records"):
        seeds = (f"{r['seeds_agree']}/{r['n_seeds']} agree" if _text(r.get("seed_verdicts"))
                 else _text(r["n_seeds"]))
        verdict_ = r["verdict"] + (f" ({r['note']})" if r["verdict"] == NOT_COMPUTED else "")
        if verdict_marked(r):
            verdict_ += " *(model at chance)*"
        caveat = r["caveat"] if isinstance(r.get("caveat"), str) else ""
        lines.append(f"| {r['claim']} | {r['task']} | {r['variant']} | {verdict_} | {effect_text(r)} | "
                     f"{r['side']} {_fmt(float(r['null']))} | {_text(r['paper_value'])} | {_text(r['test'])} | "
                     f"{_fmt(float(r['p']))} | {_fmt(float(r['p_holm']))} | {_text(r.get('rests_on')) or _text(r['n'])} "
                     f"| {seeds} "
                     f"| {caveat} |")
    return head + "\n".join(lines) + "\n"
