"""The types of the analysis registry and its queries; the entries live beside their analyses.

Every analysis is declared once, as an :class:`Analysis`, in the module of its family under
:mod:`bertology.analyses` (``analyses/kovaleva.py``, ``ablation.py``, ``clark.py``, ``norms.py``, ``sieve.py``,
``seeds.py``: each a tuple ``ANALYSES`` of keyword-argument entries); :mod:`bertology.analyses` collects the
families, in its order, into the one :class:`Registry`, ``bertology.analyses.REGISTRY``. Everything else is
built from it:

- the rule ``store_stats`` (``rules/attention.smk``): its outputs (:meth:`Registry.store_outputs`), the config
  sections its step reads (:meth:`Registry.store_sections`, ``cli.STEPS``), the kernels it runs in the ONE read
  of a store (:meth:`Registry.store_kernels`, :mod:`bertology.steps.stores`: each kernel builds itself from the
  job, :meth:`bertology.attention.onepass.Kernel.build`, and turns its result into its tables,
  :meth:`bertology.attention.onepass.Kernel.outputs`; the step writes them after checking their columns against the
  declared ones) and the run's final outputs of those tables (:meth:`Registry.store_targets`);
- the report (:mod:`bertology.report.page`): one section per :class:`Section`, in the order of declaration; it shows
  the tables its ``tables`` templates match among the run's targets and the figures named by its
  ``figure_prefixes``;
- the explorer's layer x head grid (:mod:`bertology.explorer`): one entry per :class:`Statistic`, in the order of
  declaration, and its inputs (:func:`bertology.explorer.explorer_inputs`); a statistic with ``across_seeds``
  also gets its mean and std over fine-tuning seeds;
- the statistics over fine-tuning seeds (rule ``seed_stats``, ``rules/seeds.smk``, :mod:`bertology.steps.seeds`):
  every :class:`Table` with ``seeds`` (:class:`AcrossSeeds`: the keys of a row and the value compared) becomes
  ``stats/{task}/seeds/{name}.csv`` (:meth:`Registry.seed_tables`);
- the column check of ``docs/reference.md#columns`` (``tests/test_reference.py``).

Dependencies go one way (``tests/test_hygiene.py``: no import cycle, imports by name included, and the layers):
this module imports only :mod:`bertology.pipeline.layout`; the family modules import it and the science they declare
(kernels under ``kovaleva/``, ``clark/``, ``sieve/``...); :mod:`bertology.analyses` imports the families; the
consumers (rules, steps, CLI, report, explorer) import :mod:`bertology.analyses`. A kernel is named by its
``"module:Class"`` (imported when first asked for, so that the Snakefile reads the registry without importing the
science); nothing else is named by a string.

Adding an analysis: CONTRIBUTING.md, "Adding an analysis" (a store statistic is four files: its kernel, its
entry, its section of docs/reference.md and its test).
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from bertology.pipeline.layout import ROOT, expand, fill, join, rel

#: the settings without which some tables are not written (:attr:`Table.when`): ``norms``
#: (analysis.norms.enabled and a supported model), ``gold_trees`` (analysis.syntax.conllu, or the demo's own
#: trees), ``seeds`` (two or more train.seeds), ``framenet`` (analysis.relations.framenet), ``decoder`` (the
#: model is a decoder: the decoder probe), ``random`` (train.inits has random), ``finetuned`` (train.inits is not
#: empty: some model is fine-tuned; without it the run studies the pretrained model only)
CONDITIONS = ("norms", "gold_trees", "seeds", "framenet", "decoder", "random", "finetuned")

#: the rule of the one read of a store, and its outputs' targets: every task and store variant
STORE_RULE = "store_stats"
STORE_WANT_OVER = (("task", "tasks"), ("variant", "stores"))
#: the rule of the statistics over fine-tuning seeds (its per-head outputs come from the tables' ``seeds``)
SEED_RULE = "seed_stats"

#: the explorer's group of the statistics over fine-tuning seeds
OVER_SEEDS = "Across fine-tuning seeds"

#: the columns of a per-head table of running moments by feature (:func:`bertology.stats.moments.feature_moments_table`)
MOMENTS = ("layer", "head", "feature", "mean", "std", "n")


def variant_table(file: str) -> str:
    """A per-variant table, ``stats/{task}/{variant}/{file}`` (:mod:`bertology.pipeline.layout`), under the results root."""
    return rel("variant_stat", file=file)


@dataclass(frozen=True)
class AcrossSeeds:
    """How a per-head table is compared across fine-tuning seeds: :func:`bertology.stats.across_seeds.seed_moments` of
    each seed's table -> ``stats/{task}/seeds/{name}.csv`` (keys, mean, std, n, then ``seed{N}`` per seed).

    name: the seed table's name; keys: the columns that identify a row; value: the column compared; fields:
    values of the table path's other fields for a seed, where ``{variant}`` is the seed's fine-tuned variant
    (e.g. ``(("model", "{task}-{variant}"),)`` for the gold trees' tables, one per fine-tuned model)."""

    name: str
    keys: tuple[str, ...]
    value: str = "mean"
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Want:
    """When an output is one of the run's final targets (rule ``all``, :meth:`Registry.targets`): one target per
    combination of the values of `over`, when the setting `when` is on (one of :data:`CONDITIONS`; empty: always).

    over: (field, values) pairs, the last varying fastest; values is the name of one of the run's value sets
    (:meth:`Run.values`: ``tasks``, ``stores``, ``first_seed``, ...) or a tuple of the values themselves."""

    over: tuple[tuple[str, str | tuple[str, ...]], ...] = ()
    when: str = ""


@dataclass(frozen=True)
class Output:
    """An output of a rule: its path under results/ (a :mod:`bertology.pipeline.layout` template text, with {task},
    {variant}, ...), the rule that writes it and when the run wants it.

    rule: the rule (= step) that writes it; output: its name among the rule's outputs (``--output NAME=PATH``);
    fill: fields the rule's output pattern fixes (``(("variant", "finetuned{seedtag}"),)``: the fine-tuned
    models only, one per seed); expand: fields the rule writes one file per value of (a list output, e.g. one
    per task); only: the setting without which the rule does not write it (one of :data:`CONDITIONS`);
    when: the setting without which it is not written at all; wanted: when it is a final target of the run;
    directory: a directory (a model, a store); report: its figure name in Snakemake's own report (flagged with
    ``report()``, its caption by the figure's section)."""

    path: str
    _: KW_ONLY
    rule: str = ""
    output: str = ""
    fill: tuple[tuple[str, str], ...] = ()
    expand: tuple[tuple[str, str | tuple[str, ...]], ...] = ()
    only: str = ""
    when: str = ""
    wanted: tuple[Want, ...] = ()
    directory: bool = False
    report: str = ""

    @property
    def pattern(self) -> str:
        """The rule's output pattern under results/: the path with the rule's fixed fields filled."""
        return fill(self.path, **dict(self.fill))


@dataclass(frozen=True)
class Table(Output):
    """An output table, and its columns (for .npz the arrays it holds, for .json its keys).

    A table the one read of a store writes names its output (rule ``store_stats``; its kernel's
    :meth:`~bertology.attention.onepass.Kernel.outputs` names it so) and leaves `rule` empty; seeds: how it is compared
    across fine-tuning seeds."""

    columns: tuple[str, ...]
    seeds: AcrossSeeds | None = None


@dataclass(frozen=True)
class Run:
    """The values a run's wildcards take and the settings it has switched on (:data:`CONDITIONS`): what
    :meth:`Registry.targets` and :meth:`Registry.outputs` expand declarations with.

    tasks, splits, stores (the store variants of the first seed: pretrained, finetuned), inits, seedtags ('' and
    -seedN: one per fine-tuning seed), finetuned (the fine-tuned store variant of each seed: finetuned,
    finetuned-seedN). A run that fine-tunes nothing (train.inits: []) has no seed tags and no fine-tuned variant,
    so every want over them (``first_seed`` included: there is no first fine-tuning seed) expands to nothing."""

    tasks: tuple[str, ...]
    splits: tuple[str, ...]
    stores: tuple[str, ...]
    inits: tuple[str, ...]
    seedtags: tuple[str, ...]
    finetuned: tuple[str, ...]
    enabled: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """``finetuned`` is on exactly when the run has a fine-tuned variant (it follows from `finetuned`)."""
        fine = self.enabled | {"finetuned"} if self.finetuned else self.enabled - {"finetuned"}
        object.__setattr__(self, "enabled", frozenset(fine))

    def values(self, name: str | tuple[str, ...]) -> tuple[str, ...]:
        """A value set by name, or the tuple of values itself."""
        if not isinstance(name, str):
            return tuple(name)
        sets = {
            "tasks": self.tasks, "splits": self.splits, "stores": self.stores, "inits": self.inits,
            "seedtags": self.seedtags, "first_seed": self.seedtags[:1], "extra_seedtags": self.seedtags[1:],
            "finetuned": self.finetuned, "extra_finetuned": self.finetuned[1:],
            "pretrained_and_finetuned": ("pretrained", *self.finetuned),
            "probe_finetuned": tuple(f"probe-{v}" for v in self.finetuned),
            "syntax_models": ("pretrained", *(f"{t}-{v}" for t in self.tasks for v in self.finetuned[:1])),
            "extra_syntax_models": tuple(f"{t}-{v}" for t in self.tasks for v in self.finetuned[1:]),
        }
        try:
            return sets[name]
        except KeyError:
            raise KeyError(f"no value set {name!r}; sets: {', '.join(sets)}") from None

    def on(self, condition: str) -> bool:
        return not condition or condition in self.enabled

    def expand(self, pattern: str, over: Iterable[tuple[str, str | tuple[str, ...]]]) -> list[str]:
        """One path per combination of the values of `over` (the last varying fastest), under results/."""
        return expand(pattern, **{field: list(self.values(values)) for field, values in over})


#: a store table's targets: every task and store variant of the first seed
STORE_WANT = Want(STORE_WANT_OVER)
#: wanted once for the run, once per task, once per task for the first fine-tuning seed
ONCE = Want()
PER_TASK = Want((("task", "tasks"),))
FIRST_SEED = Want((("task", "tasks"), ("seedtag", "first_seed")))


def figure(rule: str, output: str, name: str, *, per_task: bool = True, when: str = "",
           reported: bool = True, wanted_when: str = "", only: str = "") -> Output:
    """A figure a rule draws, ``figures/{name}-{task}.png`` (``figures/{name}.png`` with per_task False), wanted
    once per task (or once) and, when `reported`, flagged for Snakemake's report under `name`. when: the setting
    without which the rule does not draw it; wanted_when: a further setting without which the run does not want
    it (``finetuned``: the rule reads a fine-tuned model's tables); only: the setting without which the rule
    leaves it out of its outputs (:attr:`Output.only`)."""
    path = rel("task_figure", name=name) if per_task else rel("figure", name=name)
    want = Want(PER_TASK.over if per_task else (), when=wanted_when)
    return Output(path, rule=rule, output=output, report=name if reported else "", when=when, wanted=(want,),
                  only=only)


@dataclass(frozen=True)
class Step:
    """A step of the pipeline (= its rule's name): the config sections it reads (handed over by its rule, so a
    change re-runs exactly the steps that read it), its help, and what a declared task's ``--task`` gives it
    (``task``: ``plain``, ``words`` (its language and spaCy pipeline too), ``whole`` (its whole declaration)).

    The function is ``bertology.steps.{module}:{name}`` (module: the family's step module; the CLI imports it
    when the step runs), or, for a table function (`function`: a pure function of named frames returning its
    output tables by name, :mod:`bertology.steps.functions`; given the step's typed config as ``config`` too when
    the step declares config sections), the one step of those, with its rule built from the
    declaration (``rules/tables.smk``: `inputs` and the outputs declared with its name). tracked: one MLflow run
    per job; options: the name of a function of the step module adding a tool step's own options (->
    ``ctx.options``); passthrough: arguments after ``--`` go to the step as they are (-> ``ctx.rest``); function:
    for a step that runs one table function, that function; inputs: its named inputs (name, path template under
    results/, fields filled), for such a step.

    What each job of its rule asks for, the one place every rule reads it from (``threads`` and ``resources`` in
    rules/steps.smk; a cluster overrides them in its profile: ``set-threads``, ``set-resources``): threads (capped to
    ``--cores`` locally, to ``max-threads`` in a profile), mem_mb (MB), runtime (minutes), gpu (the resource
    ``gpu``: 0 for a step that uses a GPU when its job has one, which a profile's ``set-resources`` raises to 1;
    None: no such resource)."""

    name: str
    module: str
    config: tuple[str, ...]
    help: str
    task: str = "plain"
    tracked: bool = True
    options: str | None = None
    passthrough: bool = False
    function: Any = None
    inputs: tuple[tuple[str, str], ...] = ()
    threads: int = 1
    mem_mb: int = 2000
    runtime: int = 10
    gpu: int | None = None

    @property
    def resources(self) -> dict[str, int]:
        """Its rule's ``resources:``: mem_mb, runtime and, where declared, gpu."""
        extra = {} if self.gpu is None else {"gpu": self.gpu}
        return {"mem_mb": self.mem_mb, "runtime": self.runtime, **extra}

    @property
    def target(self) -> str:
        """The step's function as ``module:function`` (a table function's step runs
        :data:`bertology.workflow.cli.TABLE_FUNCTION` instead: :func:`bertology.workflow.cli.step_function`)."""
        return f"bertology.steps.{self.module}:{self.name}"


@dataclass(frozen=True)
class Section:
    """A section of results/report.html: key (its anchor), title, what it measures, what the paper found
    (``finding``), the file-name prefixes of its figures (``results/figures/{prefix}-*.png``) and the path
    templates under results/ of the tables it shows (a field left open matches any value among the report's
    declared inputs); paper: the paper it follows (the category of its outputs in Snakemake's report,
    ``snakemake --report``)."""

    key: str
    title: str
    measures: str
    finding: str
    figure_prefixes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    paper: str = ""


@dataclass(frozen=True)
class Statistic:
    """A per-head statistic the explorer offers (one, or one per distinct value of `key`).

    id: the statistic's id (``id:key`` per key); group, label, desc: what the page shows (``{k}``: the key,
    ``{ref}``: the reference value); table: its source under results/ (``{task}``, and ``{variant}`` for one table
    per variant: pretrained, fine-tuned and their difference; without it one table for the task); column: the
    value; key: the column (or columns, joined by a space) whose values each make a statistic; where: rows kept
    (column, value); notna: rows kept where this column has a value; top: keep the keys with the 12 largest
    maxima of this column; diverging: a colour scale centred on 0 (else sequential); mark: a boolean column
    whose true cells get a dot (mark_label says what it means); ci: (low, high) interval columns; ref: a
    column whose first value is the reference (drawn on the scale, ``{ref}`` in desc); count: count, per head,
    the rows where this boolean column is true (instead of `column`); fmt: ``int`` for counts; optional: an
    absent table is no note on the page; per_seed: the table is a statistic over fine-tuning seeds whose
    ``seed{N}`` columns, each seed's value, the head view lists; across_seeds: also offer its mean and std over
    the fine-tuning seeds (its table must declare :attr:`Table.seeds`; :meth:`Registry.statistics`).
    """

    id: str
    group: str
    label: str
    desc: str
    table: str
    column: str = "mean"
    key: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    notna: str = ""
    top: str = ""
    diverging: bool = False
    mark: str = ""
    mark_label: str = ""
    ci: tuple[str, str] | None = None
    ref: str = ""
    count: str = ""
    fmt: str = ""
    optional: bool = False
    per_seed: bool = False
    across_seeds: bool = False

    @property
    def scale(self) -> str:
        return "div" if self.diverging else "seq"

    @property
    def per_variant(self) -> bool:
        return "{variant}" in self.table


@dataclass(frozen=True)
class Claim:
    """A paper's claim checked on the run's own tables (results/claims.csv, :mod:`bertology.claims`), declared on the
    analysis whose tables it reads.

    id: stable id (a column of the ledger, MLflow ``claims.{id}.{task}``); paper, section: where the paper says
    it; statement: the claim in one sentence, our words; statistic: the table and columns the effect is computed
    from; compute: the pure function ``(tables, boot, *, side, null, **params) -> Result``
    (:mod:`bertology.claims`); inputs: (name, template under results/, gate) triples: the tables the function gets
    by name (``{task}``, ``{variant}`` and ``{seedtag}`` filled per fine-tuning seed; several triples of one name are
    alternatives, the first the run has wins; gate: a config key that must be on for that input to exist);
    sentence: the paper's own sentence (docs/reference.md#claims); paper_value: the paper's figure where it gives
    one; side, null: the paper's side of the null value (``>`` above, ``<`` below); unit: what the bootstrap
    resamples; variant: the model the claim is about (pretrained: one; finetuned: every fine-tuning seed);
    config: the config key that computes its inputs (named when the run lacks them); params: keyword arguments
    of `compute`; anchor: its report section; figure: the prefix of its figure (``figures/{figure}-{task}.png``);
    figure_all: the whole stem of its figure when it is task-free (:meth:`task_free`: one row, task ``all``).
    """

    id: str
    paper: str
    section: str
    statement: str
    statistic: str
    compute: Any
    inputs: tuple[tuple[str, str, str], ...]
    sentence: str = ""
    paper_value: str = ""
    side: str = ">"
    null: float = 0.0
    unit: str = "heads"
    variant: str = "finetuned"
    config: str = ""
    params: tuple[tuple[str, Any], ...] = ()
    anchor: str = ""
    figure: str = ""
    figure_all: str = ""
    #: the models it is about: "" any, "decoder" decoders only (a run's ledger holds the claims of its model's
    #: kind, :meth:`Registry.claims`)
    models: str = ""

    def read_inputs(self, off: Collection[str] = ()) -> tuple[tuple[str, str, str], ...]:
        """The inputs the claim reads in a run whose config keys `off` are off: per table name, its alternatives
        from the first one whose gate is on (the ones before it cannot exist in this run)."""
        first: dict[str, int] = {}
        for i, (name, _, gate) in enumerate(self.inputs):
            if name not in first and (not gate or gate not in off):
                first[name] = i
        return tuple(x for i, x in enumerate(self.inputs) if i >= first.get(x[0], len(self.inputs)))

    def task_free(self, off: Collection[str] = ()) -> bool:
        """Whether the claim's inputs in this run do not depend on the task (the first alternative of each table
        it reads, :meth:`read_inputs`, has no ``{task}`` field: e.g. the gold-syntax stores' tables of the
        pretrained model): it is then one row of the ledger with task ``all``, and one test in Holm's correction.
        A claim with no input, or with an input no gate lets it read, is not task-free."""
        names = {name for name, _, _ in self.inputs}
        read = self.read_inputs(off)
        firsts = {name: template for name, template, _ in reversed(read)}
        return bool(names) and set(firsts) == names and all("{task}" not in t for t in firsts.values())

    def task_inputs(self, off: Collection[str] = ()) -> tuple[tuple[str, str, str], ...]:
        """The inputs the ledger reads: a task-free claim's alternatives without ``{task}`` (its fallbacks per
        task are not read), every declared one otherwise."""
        if self.task_free(off):
            return tuple(x for x in self.read_inputs(off) if "{task}" not in x[1])
        return self.inputs


@dataclass(frozen=True)
class Analysis:
    """One analysis: name; config: for an analysis over the attention store, the config sections its kernel reads
    (they join the rule ``store_stats``'s, so changing one re-runs the one read; any other step declares its
    sections on its :class:`Step`); kernel: for an analysis over the attention store,
    its kernel class (a :class:`bertology.attention.onepass.Kernel`; analyses sharing a kernel share its work, it runs
    once), or its ``"module:Class"`` name, imported when the kernel is first asked for (so that reading the
    registry, as the Snakefile does to build the workflow, imports no science); tables: its output tables;
    section: its report section; statistics: what it offers the explorer; claims: the papers' claims checked on
    its tables (:class:`Claim`)."""

    name: str
    config: tuple[str, ...] = ()
    kernel: type | str | None = None
    tables: tuple[Table, ...] = ()
    #: its rules' outputs that are not tables (figures, models, stores)
    outputs: tuple[Output, ...] = ()
    #: the steps (= rules) that compute it, with the config sections each reads
    steps: tuple[Step, ...] = ()
    section: Section | None = None
    statistics: tuple[Statistic, ...] = ()
    #: the papers' claims computed from this analysis's tables (the ledger, :mod:`bertology.claims`)
    claims: tuple[Claim, ...] = ()

    @property
    def kernel_class(self) -> type | None:
        """The kernel class (its ``"module:Class"`` name imported)."""
        if isinstance(self.kernel, str):
            module, cls = self.kernel.split(":")
            return getattr(importlib.import_module(module), cls)
        return self.kernel


def _first_seed(path: str) -> str:
    """A table path as the first fine-tuning seed's ({seedtag} empty)."""
    return path.replace("{seedtag}", "")


class Registry:
    """Every analysis, in the order of declaration (the report's and the explorer's order), and the queries the
    workflow is built from."""

    def __init__(self, analyses: Iterable[Analysis]):
        self.analyses: tuple[Analysis, ...] = tuple(analyses)
        names = [a.name for a in self.analyses]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"analyses declared twice: {', '.join(twice)}")
        loose = [a.name for a in self.analyses if a.config and a.kernel is None]
        if loose:
            raise ValueError(f"analyses {', '.join(loose)} declare config sections without a store kernel: the "
                             f"sections a step reads go on its Step")

    def __iter__(self):
        return iter(self.analyses)

    def analysis(self, name: str) -> Analysis:
        """The analysis named `name`."""
        for a in self.analyses:
            if a.name == name:
                return a
        raise KeyError(f"no analysis {name!r}; analyses: {', '.join(a.name for a in self.analyses)}")

    # the one read of a store

    def store_analyses(self) -> tuple[Analysis, ...]:
        """The analyses computed in the one read of a store (rule ``store_stats``), in order."""
        return tuple(a for a in self.analyses if a.kernel is not None)

    def store_kernels(self) -> tuple[type, ...]:
        """The distinct kernel classes of the store analyses, in order of first use."""
        return tuple(dict.fromkeys(a.kernel_class for a in self.store_analyses() if a.kernel is not None))

    def kernel_tables(self, kernel: type) -> dict[str, Table]:
        """The tables a store kernel writes: output name -> table, in order of declaration."""
        return {t.output: t for a in self.store_analyses() if a.kernel_class is kernel for t in a.tables
                if t.output and not t.rule}

    def store_outputs(self) -> dict[str, str]:
        """The one-pass rule's outputs: output name -> path under the working directory (results/...)."""
        return self.outputs(STORE_RULE)

    def store_sections(self) -> tuple[str, ...]:
        """The config sections the store analyses read (without the store's identity and Dask)."""
        return tuple(dict.fromkeys(s for a in self.store_analyses() for s in a.config))

    def store_targets(self, tasks: Sequence[str], variants: Sequence[str], root: str | None = ROOT) -> list[str]:
        """The final outputs of the one read of the stores: every store table of every task and variant."""
        return [join(root, fill(t.path, task=task, variant=v)) for task in tasks for v in variants
                for a in self.store_analyses() for t in a.tables if t.output and not t.rule]

    # every rule's outputs, the run's targets, the steps

    def steps(self) -> dict[str, Step]:
        """Every step by name, in the order of declaration. The one read of a store (``store_stats``) reads the
        config sections of every store analysis before its own."""
        out: dict[str, Step] = {}
        for a in self.analyses:
            for st in a.steps:
                if st.name in out:
                    raise ValueError(f"step {st.name} declared twice")
                if st.name == STORE_RULE:
                    st = replace(st, config=(*self.store_sections(), *st.config))
                out[st.name] = st
        return out

    def step(self, name: str) -> Step:
        """The step (and rule) named `name`."""
        steps = self.steps()
        if name not in steps:
            raise KeyError(f"no step {name!r}; steps: {', '.join(steps)}")
        return steps[name]

    def declared_outputs(self) -> tuple[Output, ...]:
        """Every declared output of every rule: the analyses' tables and other outputs, in order of declaration;
        a store analysis's table with an output name is the one read's (:data:`STORE_RULE`)."""
        out = []
        for a in self.analyses:
            for t in a.tables:
                if a.kernel is not None and t.output and not t.rule:
                    t = replace(t, rule=STORE_RULE, wanted=(STORE_WANT,))
                out.append(t)
            out.extend(a.outputs)
        return tuple(out)

    def outputs(self, rule: str, run: Run | None = None, *, directory: Any = None,
                report: Any = None) -> dict[str, Any]:
        """The rule's outputs: output name -> path pattern under the working directory (results/...), a list for
        an output the rule writes one file per value of; those a switched-off setting leaves out omitted (`run`:
        the run; None: all of them). directory, report: Snakemake's ``directory`` and the workflow's
        ``report`` flag, applied to the outputs declared so (the Snakefile passes them in)."""
        out: dict[str, Any] = {}
        for o in self.declared_outputs():
            if o.rule != rule or (run is not None and not run.on(o.only)):
                continue
            value: Any = (run.expand(o.pattern, o.expand) if o.expand and run is not None
                          else join(ROOT, o.pattern))
            if o.directory and directory is not None:
                value = directory(value)
            if o.report and report is not None:
                value = report(value, o.report)
            out[o.output] = value
        if rule == SEED_RULE:
            enabled = CONDITIONS if run is None else run.enabled
            out = {**{name: join(ROOT, rel("seed_stat", name=name)) for name in self.seed_tables(enabled)}, **out}
        if not out:
            raise KeyError(f"no outputs declared for rule {rule!r}")
        return out

    def output(self, rule: str, name: str, **values: object) -> str | list[str]:
        """The path under the working directory of one output of a rule, fields in `values` filled (a list or
        tuple value gives one path per item, like :func:`bertology.pipeline.layout.paths`)."""
        for o in self.declared_outputs():
            if o.rule == rule and o.output == name:
                found = expand(o.pattern, **values)
                return found if any(isinstance(v, (list, tuple)) for v in values.values()) else found[0]
        raise KeyError(f"rule {rule!r} declares no output {name!r}")

    def targets(self, run: Run) -> list[str]:
        """The run's final outputs (rule ``all``): every declared output's wanted combinations whose settings are
        on, then the tables over fine-tuning seeds with two or more seeds; in order of declaration, no file
        twice."""
        out: list[str] = []
        for o in self.declared_outputs():
            if not run.on(o.when):
                continue
            for want in o.wanted:
                if run.on(want.when):
                    out.extend(run.expand(o.path, want.over))
        if run.on("seeds"):
            out.extend(run.expand(rel("seed_stat"), (("task", "tasks"), ("name", tuple(self.seed_tables(run.enabled))))))
        left = [t for t in out if "{" in t]
        if left:
            raise ValueError(f"targets with a field no value set fills: {left[:3]}")
        return list(dict.fromkeys(out))

    def table_steps(self) -> tuple[Step, ...]:
        """The steps that run a table function (:attr:`Step.function`): each gets its rule from
        ``rules/tables.smk``."""
        return tuple(st for st in self.steps().values() if st.function is not None)

    def inputs(self, rule: str) -> dict[str, str]:
        """A table function's rule inputs: name -> path pattern under the working directory."""
        return {name: join(ROOT, template) for name, template in self.step(rule).inputs}

    def tables_of(self, rule: str) -> dict[str, Table]:
        """The tables a rule writes: output name -> table, in order of declaration."""
        return {t.output: t for t in self.declared_outputs() if t.rule == rule and isinstance(t, Table)}

    # the report and the explorer

    def report_sections(self) -> tuple[Section, ...]:
        """The report's sections, in the order of declaration."""
        return tuple(a.section for a in self.analyses if a.section is not None)

    def figure_section(self, stem: str) -> Section | None:
        """The section showing the figure ``figures/{stem}.png`` (``cosine-rte``, or a name with its ``{task}``
        left open): the one with the longest matching figure prefix (the stem, or the prefix and ``-`` or ``_``);
        None when no section claims it."""
        matches = [(p, s) for s in self.report_sections() for p in s.figure_prefixes
                   if stem == p or stem.startswith((p + "-", p + "_"))]
        return max(matches, key=lambda m: len(m[0]))[1] if matches else None

    def statistics(self) -> tuple[Statistic, ...]:
        """Every statistic the explorer offers: the declared ones in order, then, for each with ``across_seeds``,
        its mean over the fine-tuning seeds (each seed's value in the head view) and its std over them."""
        declared = tuple(s for a in self.analyses for s in a.statistics)
        return declared + tuple(s for st in declared if st.across_seeds for s in self.over_seeds(st))

    def over_seeds(self, st: Statistic) -> tuple[Statistic, Statistic]:
        """A statistic's mean and std over fine-tuning seeds, read from its table's seed table."""
        table = self.table(st.table)
        if table is None or table.seeds is None:
            raise ValueError(f"statistic {st.id}: across_seeds needs its table {st.table} declared with seeds=")
        name = table.seeds.name
        path = rel("seed_stat", name=name)
        what = st.label
        return (Statistic(id=f"seeds:{name}", group=OVER_SEEDS, label=f"{what}, mean over seeds",
                          desc=f"{what}: mean over the fine-tuning seeds; the head view lists each seed's value.",
                          table=path, key=st.key, where=st.where, notna=st.notna, diverging=st.diverging,
                          optional=True, per_seed=True),
                Statistic(id=f"seeds:{name}:std", group=OVER_SEEDS, label=f"{what}, std over seeds",
                          desc=f"{what}: standard deviation over the fine-tuning seeds (ddof 1).", table=path,
                          column="std", key=st.key, where=st.where, notna=st.notna, optional=True))

    def fine_tuned_only(self, st: Statistic) -> bool:
        """Whether a statistic's table exists only in a run that fine-tunes (setting ``finetuned``): a table of
        each fine-tuning seed (its declared path has ``{seedtag}``) or over the seeds."""
        if PurePosixPath(st.table).parent.name == "seeds":
            return True
        table = self.table(st.table)
        return table is not None and "{seedtag}" in table.path

    def when(self, st: Statistic) -> str:
        """The setting without which a statistic's table is not written (:data:`CONDITIONS`; '' always)."""
        if PurePosixPath(st.table).parent.name == "seeds":
            return "seeds"
        table = self.table(st.table)
        return table.when if table is not None else ""

    # the claims ledger

    def claims(self, kind: str | None = None) -> tuple[Claim, ...]:
        """Every claim of the ledger (results/claims.csv), in the order of declaration; with `kind` ("encoder" or
        "decoder", the run's model: :func:`bertology.models.kinds.model_kind`) only those about models of that kind
        (:attr:`Claim.models`)."""
        out = tuple(c for a in self.analyses for c in a.claims
                    if kind is None or not c.models or c.models == kind)
        ids = [c.id for c in out]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"claims declared twice: {', '.join(twice)}")
        return out

    # tables

    def tables(self) -> dict[str, tuple[str, ...]]:
        """Every table of every analysis: path under results/ -> columns."""
        return {t.path: t.columns for a in self.analyses for t in a.tables}

    def table(self, path: str) -> Table | None:
        """The declared table of a path template (the first seed's path matches a {seedtag} table)."""
        for a in self.analyses:
            for t in a.tables:
                if path in (t.path, _first_seed(t.path)):
                    return t
        return None

    def seed_tables(self, enabled: Collection[str] = CONDITIONS) -> dict[str, Table]:
        """The per-head tables compared across fine-tuning seeds: seed table name -> table, in order of
        declaration; enabled: the settings switched on (:data:`CONDITIONS`), tables of the others left out."""
        return {t.seeds.name: t for a in self.analyses for t in a.tables
                if t.seeds is not None and (not t.when or t.when in enabled)}

    def seed_inputs(self, variants: Sequence[str], tags: Sequence[str],
                    enabled: Collection[str] = CONDITIONS, root: str | None = ROOT) -> dict[str, list[str]]:
        """The rule ``seed_stats``'s per-head inputs: seed table name -> one path per fine-tuning seed (in the
        order of train.seeds). variants: the fine-tuned store variants (finetuned, finetuned-seedN); tags: the
        seed tags ('', -seedN), in the same order; {task} left open."""
        out = {}
        for name, t in self.seed_tables(enabled).items():
            files = []
            for variant, tag in zip(variants, tags):
                extra = {k: v.replace("{variant}", variant) for k, v in t.seeds.fields}
                files.append(join(root, fill(t.path, variant=variant, seedtag=tag, **extra)))
            out[name] = files
        return out


def check_outputs(kernel: Any, tables: dict[str, Any], declared: dict[str, Table]) -> None:
    """Raise when a kernel's tables are not the declared ones: the same output names, each with the declared
    columns (a frame's columns, or the arrays of an .npz, in order). A mismatch is a bug of the kernel or of its
    registry entry."""
    name = getattr(kernel, "name", getattr(kernel, "__name__", type(kernel).__name__))
    if set(tables) != set(declared):
        raise RuntimeError(f"kernel {name} gave the tables {list(tables)}, its registry entries declare "
                           f"{list(declared)}")
    for output, value in tables.items():
        got = list(value.columns) if hasattr(value, "columns") else list(value)
        if got != list(declared[output].columns):
            raise RuntimeError(f"kernel {name}: table {output} ({declared[output].path}) has the columns {got}, "
                               f"its registry entry declares {list(declared[output].columns)}")
