"""The one boundary between Snakemake and the science: ``bertology <step> [options]``.

Every rule calls its step the same way (``rules/common.smk``: ``shell: STEP``)::

    bertology <rule> -w task=rte --input store=PATH ... --output table=PATH ... --config JSON --threads N

- ``STEPS`` below names every step (= its rule), the function that runs it, and the config sections it
  reads. The rule passes exactly those sections (``step`` in rules/common.smk), so changing any other key never
  re-runs it, and reading an undeclared key fails at once.
- A step is a function ``step(ctx: StepContext) -> None``: read the declared inputs, call kernels, write
  the declared outputs, record to MLflow through ``ctx.tracker``. Steps live in ``bertology.steps.*``;
  kernels (everything else) import neither argparse nor mlflow nor Snakemake.
- Tool steps (no rule runs them, e.g. ``cluster-check``) may add options of their own (``StepSpec.options``,
  in ``ctx.options``) and take the arguments after ``--`` as they are (``StepSpec.passthrough``, ``ctx.rest``).
- Each tracked step runs inside one MLflow child run (params = its config sections, tags = its
  wildcards), opened here and nowhere else.
- Errors of the user's making (:class:`bertology.errors.UserError` and its subclasses, and nothing else)
  print one line, ``bertology <step>: error: <what and how to fix>``; the traceback only with ``--debug`` (or
  BERTOLOGY_DEBUG=1). Any other exception is a bug (:func:`report_bug`): one line on the console and its full
  traceback in the job's log.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import logging
import os
import shlex
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertology import layout
from bertology.errors import UserError
from bertology.analyses import REGISTRY
from bertology.config import EXPECT_SECTIONS
from bertology.steps.context import Files, StepContext


@dataclass(frozen=True)
class StepSpec:
    target: str  # "module:function"
    sections: tuple[str, ...]  # config keys the step reads (dotted), handed over by its rule
    help: str
    tracked: bool = True  # one MLflow run per job
    options: str | None = None  # "module:function(parser)" adding a tool step's own options (-> ctx.options)
    passthrough: bool = False  # arguments after "--" go to the step as they are (-> ctx.rest)


_TRAIN_KEYS = tuple(f"train.{k}" for k in ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio",
                                           "mixed_precision", "eval_batch_size", "seed", "max_grad_norm",
                                           "checkpoint_steps", "checkpoint_minutes", "method", "lora"))

_SWEEP_KEYS = tuple(f"ablation.{k}" for k in ("examples", "batch_size", "seed", "config_batch", "sweep"))

STEPS: dict[str, StepSpec] = {
    # data
    "prepare_data": StepSpec("bertology.steps.data:prepare_data", ("data",),
                             f"{layout.path('data')} from data.source"),
    # fine-tuning and Table 1
    "train_model": StepSpec("bertology.steps.train:train_model", ("model", "data.max_length", *_TRAIN_KEYS),
                            "fine-tune a task into results/models/{task}/{init}{seedtag} (resumable)"),
    "score": StepSpec("bertology.steps.train:score",
                      ("model", "data.max_length", "train.seed", "train.eval_batch_size", "train.mixed_precision"),
                      "score a variant on the validation split -> results/scores/{task}/{variant}{seedtag}.json"),
    "table1": StepSpec("bertology.steps.train:table1", ("model", "train.alpha"),
                       "Kovaleva Table 1 over seeds: table1.csv, table1.md, table1_tests.csv and the figure"),
    # the attention store
    "attention_sample": StepSpec("bertology.steps.attention:attention_sample",
                                 ("attention.split", "attention.examples", "data.seed", "data.short_split"),
                                 "the seeded attention sample -> results/attention/{task}/sample.parquet"),
    "annotate_words": StepSpec("bertology.steps.attention:annotate_words",
                               ("model", "data.max_length", "attention.spacy_model"),
                               "spaCy words of the sample -> results/attention/{task}/words.parquet"),
    "extract_attention": StepSpec("bertology.steps.attention:extract_attention",
                                  ("model", "data.max_length", "data.seed", "attention", "analysis.norms.enabled"),
                                  "the attention store results/attention/{task}/{variant}.zarr (resumable), with "
                                  "value norms when the norm analyses are on"),
    # Kovaleva et al. 4.1-4.5
    # every store analysis of the registry (Kovaleva 4.1/4.2/4.4/4.5, Clark 3.3/4.2, Pande) in one read of a store
    "store_stats": StepSpec("bertology.steps.stores:store_stats",
                            (*REGISTRY.store_sections(), "analysis.dask", *EXPECT_SECTIONS),
                            "every store analysis (patterns, features, [CLS], relations, entropy, parser, sieve) "
                            "from one read of a store"),
    "kovaleva_cosine": StepSpec("bertology.steps.kovaleva:kovaleva_cosine",
                                ("analysis.features", "analysis.dask", *EXPECT_SECTIONS),
                                "pretrained vs fine-tuned cosine per head and feature differences"),
    "framenet_links": StepSpec("bertology.steps.kovaleva:framenet_links", ("analysis.relations.framenet_filter",),
                               "FrameNet release -> filtered sentences and target -> frame-element links"),
    "framenet_relations": StepSpec("bertology.steps.kovaleva:framenet_relations",
                                   ("model", "data.max_length", "analysis.relations.percentile"),
                                   "run a model on the FrameNet sentences -> relation rows with source=framenet "
                                   "(target -> FE) and framenet_fe_target"),
    "kovaleva_figures": StepSpec("bertology.steps.kovaleva:kovaleva_figures", (),
                                 "Kovaleva Figs. 2, 3, 5, 6, 7 of one task"),
    "kovaleva_overview": StepSpec("bertology.steps.kovaleva:kovaleva_overview", ("tasks",),
                                  "Kovaleva Figs. 2 and 5 across tasks"),
    "patterns_sheet": StepSpec("bertology.steps.kovaleva:patterns_sheet", (),
                               "a sample of attention maps as PNGs + a label sheet to annotate"),
    "patterns_train": StepSpec("bertology.steps.kovaleva:patterns_train", (),
                               "train the 8-conv-layer pattern CNN from a label sheet (example, layer, head, label)"),
    # Clark et al. 2019: gold trees (entropy and parser of the task stores come from store_stats)
    "demo_trees": StepSpec("bertology.steps.clark:demo_trees", ("data.seed", "data.demo"),
                           "gold CoNLL-U trees of the demo grammar -> results/data/syntax/demo.conllu"),
    "syntax_sentences": StepSpec("bertology.steps.clark:syntax_sentences", (),
                                 "gold CoNLL-U trees -> results/attention/syntax/sample.parquet, words.parquet"),
    "extract_syntax": StepSpec("bertology.steps.clark:extract_syntax",
                               ("model", "data.max_length", "data.seed", "attention"),
                               "the attention store of the gold sentences, results/attention/syntax/{model}.zarr"),
    "syntax_parser": StepSpec("bertology.steps.clark:syntax_parser", ("analysis.dask", *EXPECT_SECTIONS),
                              "heads as dependency parsers on the gold trees -> results/stats/syntax/{model}.csv"),
    "clark_figures": StepSpec("bertology.steps.clark:clark_figures", (),
                              "entropy by layer and best head per relation (spaCy arcs) of one task"),
    "syntax_figures": StepSpec("bertology.steps.clark:syntax_figures", (),
                               "best head per relation on the gold trees, every model (Clark et al. Fig. 5)"),
    # Kobayashi et al. 2020/2021, Abnar & Zuidema 2020: value norms, mixing, token views, faithfulness
    "norms_views": StepSpec("bertology.steps.norms:norms_views",
                            ("data.short_split", "analysis.norms.examples", "analysis.norms.batch_size",
                             "analysis.flow.examples", "analysis.mixing_views", *EXPECT_SECTIONS),
                            "value norms, mixing, token views and the newer mixing views of one variant -> norms.csv, mixing.csv, "
                            "token_scores.parquet, mixing_layers.parquet"),
    "norms_faithfulness": StepSpec("bertology.steps.norms:norms_faithfulness",
                                   ("data.max_length", "data.seed", "analysis.norms.copy_tokens", "analysis.flow"),
                                   "token importance of the fine-tuned model and faithfulness of each view -> "
                                   "faithfulness.csv, faithfulness_examples.csv, importance.parquet"),
    "norms_figures": StepSpec("bertology.steps.norms:norms_figures", (),
                              "weight vs norm-weighted shares, mixing ratios and faithfulness of one task"),
    # decoders: attention sinks and induction heads
    "decoder_probe": StepSpec("bertology.steps.decoders:decoder_probe",
                              ("model", "data.max_length", "data.seed", "train.seed"),
                              "a decoder's sink and induction probe of one task, the pretrained model and its random "
                              "initialisation -> decoder_sink.csv, decoder_induction.csv, pretrained/decoder_heads.csv"),
    "decoder_probe_finetuned": StepSpec("bertology.steps.decoders:decoder_probe_finetuned",
                                        ("model", "data.max_length", "data.seed"),
                                        "the same probe of one fine-tuning seed's models -> "
                                        "finetuned{seedtag}/decoder_{sink,induction,heads}.csv"),
    "decoder_figure": StepSpec("bertology.steps.decoders:decoder_figure", (),
                               "alpha_0 and the induction score per head, one column per model of the probe"),
    # Pande et al. sieves
    "sieve_figures": StepSpec("bertology.steps.sieve:sieve_figures", ("analysis.sieve",),
                              "Pande Figs. 3-5 of one task"),
    "sieve_delta": StepSpec("bertology.steps.sieve:sieve_delta", ("tasks",),
                            "Pande Fig. 6: fine-tuned minus pretrained bias -> results/stats/sieve_delta.csv"),
    "sieve_summary": StepSpec("bertology.steps.sieve:sieve_summary", ("tasks",),
                              "role shares, overlaps, Spearman -> results/stats/sieve_summary.csv"),
    # disabling heads and layers
    "ablation_sweep": StepSpec("bertology.steps.ablation:ablation_sweep", (*_SWEEP_KEYS, "ablation.bootstrap",
                                                                            "ablation.alpha", "data.max_length",
                                                                            "data.short_split"),
                               "disable every head and every layer alone -> results/ablation/{task}/*.csv"),
    "ablation_figures": StepSpec("bertology.steps.ablation:ablation_figures", (),
                                 "Kovaleva Figs. 8-9 of one task"),
    "ablation_pruning": StepSpec("bertology.steps.ablation:ablation_pruning",
                                 (*_SWEEP_KEYS, "ablation.pruning", "data.max_length",
                                  "data.short_split"),
                                 "head importance and pruning curves (Michel et al.) -> importance.csv, pruning.csv"),
    "pruning_figures": StepSpec("bertology.steps.ablation:pruning_figures", (),
                                "importance map and pruning curves of one task"),
    # statistics over fine-tuning seeds (two or more train.seeds)
    "seed_stats": StepSpec("bertology.steps.seeds:seed_stats",
                           ("train.seed", "train.seeds", "data.seed", "analysis.seeds"),
                           "every per-head statistic of a task across fine-tuning seeds -> results/stats/{task}/seeds/"),
    # the claims ledger (the report opens with it)
    "claims": StepSpec("bertology.steps.claims:claims",
                       ("model", "tasks", "data.seed", "data.source", "train.seed", "train.seeds", "train.inits",
                        "analysis.claims", "analysis.norms.enabled", "analysis.syntax.conllu"),
                       f"{layout.path('claims')}, claims.md: the papers' claims checked on this run (effect, "
                       f"interval, test, verdict)"),
    # the report
    "report": StepSpec("bertology.steps.report:report",
                       ("model", "tasks", "data", "train", "attention", "analysis", "ablation", "mlflow"),
                       f"{layout.path('report')} from every table and figure (and the whole config, shown)"),
    "explorer": StepSpec("bertology.steps.report:explorer", ("tasks", *EXPECT_SECTIONS),
                         f"{layout.path('explorer')}: browse every head's statistics and maps (offline page)"),
    # tools
    "validate_config": StepSpec("bertology.steps.admin:validate_config", (),
                                "print a config file resolved (defaults filled) or what is wrong with it",
                                tracked=False),
    "init_mlflow": StepSpec("bertology.steps.admin:init_mlflow", ("mlflow",),
                            "create the MLflow store and the invocation's parent run", tracked=False),
    "tracking_replay": StepSpec("bertology.steps.admin:tracking_replay", (),
                                "send the MLflow records kept under .bertology/pending/ while tracking was down",
                                tracked=False),
    "cluster_check": StepSpec("bertology.steps.cluster:cluster_check", (),
                              "do the jobs of the workflow fit the nodes sinfo lists? (dry-runs snakemake with "
                              "--profile and the snakemake arguments after --)",
                              tracked=False, options="bertology.steps.cluster:check_options", passthrough=True),
    "cluster_dask": StepSpec("bertology.steps.cluster:cluster_dask", (),
                             "a Dask scheduler here with workers as Slurm jobs (dask-jobqueue), for "
                             "analysis.dask.scheduler", tracked=False, options="bertology.steps.cluster:dask_options"),
}

#: where a bug's traceback goes when the command runs in a terminal (relative to the working directory)
ERROR_DIR = Path(".bertology") / "errors"


def step_args(wildcards: Mapping[str, str], input: Any, output: Any) -> str:
    """The wildcard and file arguments of a step's command line, from a Snakemake job (shell-quoted)."""
    parts: list[str] = []
    for key, value in dict(wildcards).items():
        parts += ["-w", f"{key}={value}"]
    for flag, files in (("--input", input), ("--output", output)):
        for name, value in files.items():
            for path in (value if isinstance(value, list) else [value]):
                parts += [flag, f"{name}={path}"]
    return " ".join(shlex.quote(p) for p in parts)


def _pairs(items: list[str], flag: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"{flag} takes NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out.setdefault(key, []).append(value)
    return out


def _target(target: str) -> Any:
    """The function a "module:function" names."""
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def parser(name: str, spec: StepSpec) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"bertology {name}", description=spec.help,
                                 epilog="arguments after -- go to the step as they are" if spec.passthrough else None)
    ap.add_argument("-w", "--wildcard", action="append", default=[], metavar="NAME=VALUE",
                    help="a wildcard of the job (task=rte, variant=finetuned, ...)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=PATH", help="a named input (repeatable)")
    ap.add_argument("--output", action="append", default=[], metavar="NAME=PATH", help="a named output (repeatable)")
    ap.add_argument("--config", default="{}", metavar="JSON",
                    help=f"the config sections the step reads, validated: {', '.join(spec.sections) or 'none'}")
    ap.add_argument("--task", action="append", default=[], metavar="JSON",
                    help="a declared task the job reads (its declaration, or what steps after the data rule read of "
                         "it: bertology.tasks.task_param); repeatable")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (Snakemake's {threads})")
    ap.add_argument("--device", default=None, help="cuda, cpu, ...; default: a GPU if there is one")
    ap.add_argument("--no-mlflow", action="store_true", help="do not record to MLflow")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--debug", action="store_true", help="full traceback on errors")
    if spec.options:
        _target(spec.options)(ap.add_argument_group(f"options of {name.replace('_', '-')}"))
    return ap


def setup_logging(debug: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, force=True, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("urllib3", "matplotlib", "PIL", "alembic", "filelock", "fsspec", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _register_tasks(items: list[str]) -> None:
    """Make the declared tasks of a job's --task arguments known to bertology.tasks.get_task."""
    import json

    from bertology.tasks import register

    for item in items:
        try:
            decl = json.loads(item)
        except json.JSONDecodeError as err:
            raise UserError(f"--task is not valid JSON ({err}): {item[:200]!r}") from None
        if not isinstance(decl, dict) or "name" not in decl:
            raise UserError(f"--task must be a JSON object with a name, got {item[:200]!r}")
        register(decl)


def task_args(wildcards: Mapping[str, str], params: Mapping[str, str], *, whole: Mapping[str, str] | None = None) -> str:
    """The --task arguments of a job (shell-quoted): the declared task of its `task` wildcard (of its `model`
    wildcard, TASK-finetuned[-seedN]), or every declared task for a job without one. params: name -> the JSON a
    step after the data rule reads (bertology.tasks.task_param); whole: name -> the whole declaration (the data
    rule). Nothing for GLUE tasks, so their jobs' commands stay as they were."""
    import re

    source = whole if whole is not None else params
    wc = dict(wildcards)
    if "task" in wc:
        names = [wc["task"]]
    elif "model" in wc:
        match = re.fullmatch(r"(.+?)-finetuned(-seed\d+)?", wc["model"])
        names = [match.group(1)] if match else []
    else:
        names = list(source)
    return " ".join(f"--task {shlex.quote(source[n])}" for n in names if n in source)


def run_step(name: str, argv: list[str]) -> int:
    """Parse a step's command line, build its context and run it inside its MLflow run."""
    from bertology.config import plain_config, select_sections, sections_from_json
    from bertology.tracking import job_run

    spec = STEPS[name]
    rest: list[str] = []
    if spec.passthrough and "--" in argv:
        argv, rest = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    ap = parser(name, spec)
    common = {action.dest for action in parser(name, StepSpec(spec.target, spec.sections, spec.help))._actions}
    args = ap.parse_args(argv)
    setup_logging(args.debug)
    config = sections_from_json(args.config)
    _register_tasks(args.task)
    files = {kind: Files(kind, name, {k: [Path(p) for p in v] for k, v in _pairs(items, f"--{kind}").items()})
             for kind, items in (("input", args.input), ("output", args.output))}
    wildcards = {k: v[-1] for k, v in _pairs(args.wildcard, "--wildcard").items()}
    ctx = StepContext(step=name, wildcards=wildcards, input=files["input"], output=files["output"], config=config,
                      threads=max(1, args.threads), device=args.device, progress=not args.no_progress,
                      options={k: v for k, v in vars(args).items() if k not in common}, rest=rest)
    func = _target(spec.target)
    params = select_sections(plain_config(config), spec.sections) if spec.sections else {}
    with job_run(name, task=ctx.task, variant=ctx.variant or wildcards.get("init") or wildcards.get("split"),
                 params=params, tags={f"wildcard.{k}": v for k, v in wildcards.items()},
                 enabled=spec.tracked and not args.no_mlflow) as tracker:
        ctx.tracker = tracker
        started = time.perf_counter()
        func(ctx)
        # A job's own time (imports of its module and tracking excluded) in its log: bench/bench_jobcost.py reads
        # it. Not for the user's own commands (validate-config, ...), whose output is what they print.
        if spec.tracked:
            logging.getLogger("bertology.cli").info("%s: work %.3f s", name, time.perf_counter() - started)
    return 0


def _one_line(err: BaseException) -> str:
    """The exception's message on one line (its type when it has none)."""
    return " ".join(str(err).split()) or type(err).__name__


def report_bug(step: str, err: BaseException, argv: list[str] | None = None) -> int:
    """A bug (any exception but a UserError): one line on the console, the full traceback in the job's log.

    A rule runs its step with stderr redirected into the job's log (``rules/common.smk``: ``> {log} 2>&1``),
    so there stderr *is* the log: the traceback is written to it, then the one-line summary (the log's
    last line, the one Snakemake's error report shows). In a terminal the console keeps one line and the
    traceback goes to a file under ``.bertology/errors/``, named in that line. Returns the exit status, 1.
    """
    prog = f"bertology {step.replace('_', '-')}"
    summary = f"{prog}: internal error (a bug, please report it): {type(err).__name__}: {_one_line(err)}"
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    if not sys.stderr.isatty():
        sys.stderr.write(text)
        print(f"{summary} (traceback above)", file=sys.stderr)
        return 1
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    path = ERROR_DIR / f"{step}-{stamp}-{os.getpid()}.log"
    try:
        from bertology.io import write_text

        write_text(f"{prog} {shlex.join(argv or [])}\n{text}", path)
    except OSError:
        sys.stderr.write(text)
        print(f"{summary} (traceback above)", file=sys.stderr)
        return 1
    print(f"{summary} (traceback in {path}; --debug prints it here)", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: bertology <step> [options]   (bertology <step> --help for its options)\n\nsteps:")
        for name, spec in STEPS.items():
            print(f"  {name.replace('_', '-'):<20} {spec.help}")
        return 0
    name = argv[0].replace("-", "_")
    if name not in STEPS:
        print(f"bertology: unknown step {argv[0]!r}; steps: {', '.join(s.replace('_', '-') for s in STEPS)}",
              file=sys.stderr)
        return 2
    debug = "--debug" in argv or os.environ.get("BERTOLOGY_DEBUG", "") not in ("", "0")
    from bertology.diskspace import disk_full_message, is_disk_full

    try:
        return run_step(name, argv[1:])
    except UserError as err:
        if debug:
            raise
        if is_disk_full(err):  # zarr's other writes in flight failed the same way: asyncio would log each
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        print(f"bertology {name.replace('_', '-')}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"bertology {name.replace('_', '-')}: interrupted (what was written completely stays; run it again "
              f"to go on)", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a bug: summarised here, its traceback kept (report_bug)
        if debug:
            raise
        if is_disk_full(err):  # "[Errno 28] No space left on device" is the user's to fix: the path, what is free
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
            print(f"bertology {name.replace('_', '-')}: error: {disk_full_message(err)}", file=sys.stderr)
            return 1
        return report_bug(name, err, argv[1:])


if __name__ == "__main__":
    sys.exit(main())
