"""The one boundary between Snakemake and the science: ``bertology <step> [options]``.

Every rule calls its step the same way (``rules/steps.smk``: ``shell: STEP``)::

    bertology <rule> -w task=rte --input store=PATH ... --output table=PATH ... --config JSON --threads N

- ``STEPS`` below names every step (= its rule), the function that runs it, and the config sections it
  reads, as declared beside its analysis (:class:`bertology.registry.Step`). The rule passes exactly those sections (``step`` in rules/steps.smk), so changing any other key never
  re-runs it, and reading an undeclared key fails at once.
- A step is a function ``step(ctx: StepContext) -> None``: read the declared inputs, call kernels, write
  the declared outputs, record to MLflow through ``ctx.tracker``. Steps live in ``bertology.steps.*``;
  kernels (everything else) import neither argparse nor mlflow nor Snakemake.
- Tool steps (no rule runs them, e.g. ``cluster-check``) may add options of their own (``Step.options``,
  in ``ctx.options``) and take the arguments after ``--`` as they are (``Step.passthrough``, ``ctx.rest``).
- Each tracked step runs inside one MLflow child run (params = its config sections, tags = its
  wildcards), opened here and nowhere else.
- Errors of the user's making (:class:`bertology.pipeline.errors.UserError` and its subclasses, and nothing else)
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from bertology.pipeline.errors import UserError
from bertology.analyses import REGISTRY
from bertology.registry import Step
from bertology.steps.context import Files, StepContext


#: every step by name (= its rule's name): the function it runs and the config sections it reads, declared beside
#: its analysis (:class:`bertology.registry.Step` in :mod:`bertology.analyses`)
STEPS: dict[str, Step] = REGISTRY.steps()

#: the one step of every table function (:attr:`bertology.registry.Step.function`)
TABLE_FUNCTION = "bertology.steps.functions:table_function"


def step_function(spec: Step) -> str:
    """The function a step runs, as ``module:function``: its own (:attr:`Step.target`), or for a table function
    the one step of those."""
    return TABLE_FUNCTION if spec.function is not None else spec.target


#: the modules the steps' functions live in (``bertology.steps.{Step.module}``), imported when a step runs
STEP_MODULES = ("bertology.steps.data", "bertology.steps.train", "bertology.steps.attention", "bertology.steps.stores",
                "bertology.steps.kovaleva", "bertology.steps.clark", "bertology.steps.norms",
                "bertology.steps.decoders", "bertology.steps.sieve", "bertology.steps.ablation",
                "bertology.steps.seeds", "bertology.steps.claims", "bertology.steps.report", "bertology.steps.admin",
                "bertology.steps.cluster", "bertology.steps.functions", "bertology.steps.compare",
                "bertology.steps.models")


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
    """The function a "module:function" names (a module of :data:`STEP_MODULES`)."""
    module, func = target.split(":")
    if module not in STEP_MODULES:
        raise KeyError(f"{target}: steps live in {', '.join(STEP_MODULES)}")
    return getattr(importlib.import_module(module), func)


def parser(name: str, spec: Step) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"bertology {name}", description=spec.help,
                                 epilog="arguments after -- go to the step as they are" if spec.passthrough else None)
    ap.add_argument("-w", "--wildcard", action="append", default=[], metavar="NAME=VALUE",
                    help="a wildcard of the job (task=rte, variant=finetuned, ...)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=PATH", help="a named input (repeatable)")
    ap.add_argument("--output", action="append", default=[], metavar="NAME=PATH", help="a named output (repeatable)")
    ap.add_argument("--config", default="{}", metavar="JSON",
                    help=f"the config sections the step reads, validated: {', '.join(spec.config) or 'none'}")
    ap.add_argument("--task", action="append", default=[], metavar="JSON",
                    help="a declared task the job reads (its declaration, or what steps after the data rule read of "
                         "it: bertology.pipeline.tasks.task_param); repeatable")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (Snakemake's {threads})")
    ap.add_argument("--device", default=None, help="cuda, cpu, ...; default: a GPU if there is one")
    ap.add_argument("--no-mlflow", action="store_true", help="do not record to MLflow")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--debug", action="store_true", help="full traceback on errors")
    if spec.options:
        _target(f"bertology.steps.{spec.module}:{spec.options}")(ap.add_argument_group(f"options of {name.replace('_', '-')}"))
    return ap


def setup_logging(debug: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, force=True, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("urllib3", "matplotlib", "PIL", "alembic", "filelock", "fsspec", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _register_tasks(tasks_config: list, items: list[str]) -> None:
    """Make a job's declared tasks known to bertology.pipeline.tasks.get_task: those of its config's `tasks` (a step
    that reads the list; what the steps after the data rule read of each, task_param), then its --task arguments."""
    import json

    from bertology.pipeline.tasks import declarations, register, task_param

    for decl in declarations(tasks_config).values():
        register(task_param(decl, None, words=False) if "source" in decl else decl)
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
    step after the data rule reads (bertology.pipeline.tasks.task_param); whole: name -> the whole declaration (the data
    rule). Nothing for GLUE tasks: their jobs' commands carry no --task."""
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


def _model_name(values: dict) -> str | None:
    """The short name of the job's model for its MLflow run: the config's `model_name` (every step of a model in a run
    of several gets it), else the short name of its `model` where the step reads one."""
    from bertology.pipeline.modelset import short_name

    if values.get("model_name"):
        return str(values["model_name"])
    return short_name(values["model"]) if values.get("model") else None


def run_step(name: str, argv: list[str]) -> int:
    """Parse a step's command line, build its context and run it inside its MLflow run."""
    from bertology.pipeline.config import plain_config
    from bertology.pipeline.configjson import select_sections, sections_values, typed_sections
    from bertology.tracking import job_run

    spec = STEPS[name]
    rest: list[str] = []
    if spec.passthrough and "--" in argv:
        argv, rest = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    ap = parser(name, spec)
    common = {action.dest for action in parser(name, replace(spec, options=None))._actions}
    args = ap.parse_args(argv)
    setup_logging(args.debug)
    values = sections_values(args.config)
    config = typed_sections(values)
    _register_tasks(values.get("tasks", []), args.task)
    files = {kind: Files(kind, name, {k: [Path(p) for p in v] for k, v in _pairs(items, f"--{kind}").items()})
             for kind, items in (("input", args.input), ("output", args.output))}
    wildcards = {k: v[-1] for k, v in _pairs(args.wildcard, "--wildcard").items()}
    ctx = StepContext(step=name, wildcards=wildcards, input=files["input"], output=files["output"], config=config,
                      threads=max(1, args.threads), device=args.device, progress=not args.no_progress,
                      options={k: v for k, v in vars(args).items() if k not in common}, rest=rest)
    func = _target(step_function(spec))
    params = select_sections(plain_config(config), spec.config) if spec.config else {}
    with job_run(name, task=ctx.task, variant=ctx.variant or wildcards.get("init") or wildcards.get("split"),
                 params=params, tags={f"wildcard.{k}": v for k, v in wildcards.items()},
                 enabled=spec.tracked and not args.no_mlflow, model=_model_name(values)) as tracker:
        ctx.tracker = tracker
        started = time.perf_counter()
        func(ctx)
        # A job's own time (imports of its module and tracking excluded) in its log: bench/bench_jobcost.py reads
        # it. Not for the user's own commands (validate-config, ...), whose output is what they print.
        if spec.tracked:
            logging.getLogger("bertology.workflow.cli").info("%s: work %.3f s", name, time.perf_counter() - started)
    return 0


def _one_line(err: BaseException) -> str:
    """The exception's message on one line (its type when it has none)."""
    return " ".join(str(err).split()) or type(err).__name__


def report_bug(step: str, err: BaseException, argv: list[str] | None = None) -> int:
    """A bug (any exception but a UserError): one line on the console, the full traceback in the job's log.

    A rule runs its step with stderr redirected into the job's log (``rules/steps.smk``: ``> {log} 2>&1``),
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
        from bertology.pipeline.io import write_text

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
    from bertology.pipeline.diskspace import disk_full_message, is_disk_full

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
