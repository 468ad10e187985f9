"""Set-up the Snakefile runs once per invocation (kept out of the rules so they stay thin)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

INVOCATION_ENV = "BERTOLOGY_INVOCATION"


def setup_environment(config: dict) -> str:
    """Export what every job needs; return this invocation's id.

    - PATH starts with the directory of the interpreter running Snakemake, so `bertology` (the CLI the
      rules call) is the one installed beside it (a conda env, if used, still comes first in its job).
    - MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME / BERTOLOGY_TRACKING_LIVE from the `mlflow:` section.
    - BERTOLOGY_INVOCATION: one id per `snakemake` call, kept if already set (cluster jobs inherit it), so
      that every job's MLflow run hangs under the same parent run.
    """
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if not path.startswith(bindir + os.pathsep):
        os.environ["PATH"] = f"{bindir}{os.pathsep}{path}"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ["MLFLOW_TRACKING_URI"] = config["mlflow"]["tracking_uri"]
    os.environ["MLFLOW_EXPERIMENT_NAME"] = config["mlflow"]["experiment"]
    # mlflow.live: false (the default) -> jobs queue their runs for the workflow's end handler to send.
    os.environ["BERTOLOGY_TRACKING_LIVE"] = "1" if config["mlflow"]["live"] else "0"
    from bertology.tracking import bound_http_timeouts

    bound_http_timeouts()  # seconds, not minutes, for a tracking server that hangs (jobs inherit them)
    _pending_hint()
    return os.environ.setdefault(INVOCATION_ENV, uuid.uuid4().hex)


def _pending_hint() -> None:
    """One line when MLflow records wait under .bertology/pending/, saying what they are."""
    from bertology.tracking import PENDING_DIR, pending_records
    from bertology.tracking.pending import pending_summary

    kept = pending_records()
    if kept:
        print(f"bertology: {len(kept)} MLflow record(s) wait under {PENDING_DIR}/: {pending_summary(kept)}; "
              f"the next run with jobs sends them, or now: bertology tracking-replay", file=sys.stderr)


def check_config(config: dict, configfiles: list | tuple = (), basedir: str | Path | None = None,
                 overrides: Any = None) -> None:
    """Validate the workflow's config in place (defaults filled); a bad one stops it in one line.

    `overrides`: the values set on the command line (``--config``; Snakemake's ``workflow.config_settings.config``),
    whose strings get the schema's types first (:func:`bertology.pipeline.configcli.coerce_command_line`: ``64`` an integer).

    First every config file the invocation read (`configfiles`: the Snakefile's ``configfile:`` and each
    ``--configfile``, Snakemake's ``workflow.configfiles``; and the profiles' ``config.yaml`` found from the
    command line and `basedir`) is read again strictly: a key given twice or an alias bomb stops the workflow
    in one line naming the file (and the key and both lines), before anything walks the config."""
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configcli import coerce_command_line
    from bertology.pipeline.configfile import check_workflow_config_files
    from bertology.pipeline.errors import UserError

    try:
        if basedir is not None:
            check_workflow_config_files(configfiles, basedir)
        if overrides:
            coerce_command_line(config, _plain(overrides))
        validate_config(config)
    except UserError as err:
        fail(str(err))


def _plain(value: Any) -> Any:
    """A mapping of Snakemake's (an immutables.Map, a dict) as plain dicts and lists."""
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def check_config_file_first(path: str | Path) -> None:
    """The Snakefile's own config file (config.yaml), read strictly before its ``configfile:`` line merges it:
    a key given twice or an alias bomb stops the workflow in one line (Snakemake's merge of a bomb of mappings
    would copy it for ever)."""
    from bertology.pipeline.configfile import check_config_file
    from bertology.pipeline.errors import UserError

    try:
        if Path(path).is_file():
            check_config_file(path)
    except UserError as err:
        fail(str(err))


def on_start(invocation: str, config: dict) -> None:
    """The Snakefile's ``onstart`` (real runs only, before any job): the model is one bertology studies (an
    encoder or a decoder, :func:`bertology.models.loading.check_model`) with a readable config that asks for no code
    of its own, and a tokenizer that reads English, the tracking store answers (or the workflow stops with one line
    naming it, unless ``mlflow.required`` is false), records kept by earlier runs are sent, and the invocation's
    parent run is created."""
    from bertology import tracking
    from bertology.pipeline.errors import UserError
    from bertology.models.loading import check_model, check_max_length, check_tokenizer, resolve_model

    try:  # an encoder or a decoder, its directory readable (a hub name not cached: its first job checks)
        resolved = resolve_model(config["model"])
        check_model(resolved)
        check_tokenizer(resolved)
        check_max_length(resolved, config["data"]["max_length"], config["model"])
        if config["train"]["method"] == "lora":  # peft installed, the target modules in the model
            from bertology.models.lora import check_lora

            check_lora(resolved, config["train"]["lora"])
    except UserError as err:
        fail(f"model: {err}")
    try:
        tracking.start_invocation(invocation, params=config, required=config["mlflow"]["required"])
    except tracking.StoreCreationError as err:
        fail(str(err))
    except tracking.TrackingUnreachable as err:
        fail(f"{err}. Start the server, fix mlflow.tracking_uri, or set mlflow.required: false to run "
             f"without tracking (what is not sent is kept under {tracking.PENDING_DIR}/ for "
             f"`bertology tracking-replay`).")


_ENDED: set[str] = set()  # invocations whose parent run this process has ended (onsuccess/onerror/atexit)


def on_end(invocation: str, status: str) -> None:
    """The Snakefile's ``onsuccess``/``onerror``: the parent run ends FINISHED or FAILED, and so does every
    job run of the invocation (never RUNNING after the workflow exits); never raises."""
    from bertology import tracking

    _ENDED.add(invocation)
    tracking.end_invocation(invocation, status)


def end_failed_at_exit(invocation: str) -> None:
    """Make sure the parent run does not stay RUNNING when Snakemake exits without calling ``onerror`` (an
    exception in its scheduler, e.g. a file where an output's directory should be): at interpreter exit, a run
    neither ``onsuccess`` nor ``onerror`` ended is ended FAILED. Registered by the Snakefile's ``onstart``."""
    import atexit

    def _end() -> None:
        if invocation not in _ENDED:
            on_end(invocation, "FAILED")

    atexit.register(_end)


def blocked_paths(paths: Iterable[str | Path]) -> list[tuple[Path, Path]]:
    """(path, blocker) for every path whose directory cannot exist because an ancestor `blocker` is a file (or
    anything but a directory): ``results/stats`` replaced by a file blocks ``results/stats/rte/pretrained/
    cls.csv``. Each blocker is reported once, with the first path it blocks."""
    found: dict[Path, Path] = {}
    checked: dict[Path, bool] = {}
    for path in map(Path, paths):
        for parent in reversed(path.parents):
            if parent in (Path("."), Path("/")):
                continue
            if parent not in checked:
                checked[parent] = parent.exists() and not parent.is_dir()
            if checked[parent]:
                found.setdefault(parent, path)
                break
    return [(path, blocker) for blocker, path in found.items()]


def job_paths(workflow: Any) -> list[str]:
    """Every output, log and benchmark file of the jobs Snakemake is about to run (``workflow.dag``)."""
    out: list[str] = []
    for job in workflow.dag.needrun_jobs():
        out.extend(str(f) for f in job.output)
        out.extend(str(f) for f in job.log)
        if getattr(job, "benchmark", None):
            out.append(str(job.benchmark))
    return out


def stale_pages(pages: Mapping[str, Iterable[str]], rerun: Collection[str]) -> dict[str, str]:
    """The pages on disk (results/report.html, results/explorer.html: page -> its declared inputs) that no longer
    show their inputs, each with the first input that is gone or that a job about to run rewrites (`rerun`: the
    outputs of those jobs). Snakemake removes a job's outputs when it starts it, and the outputs of a failed or
    killed job: a page's inputs (claims.csv) can vanish while the page stays on disk until its own job runs."""
    out = {}
    for page, inputs in pages.items():
        if not os.path.exists(page):
            continue
        for f in inputs:
            if f in rerun or not os.path.exists(f):
                out[page] = f
                break
    return out


def remove_stale_pages(workflow: Any, rule_names: Iterable[str] = ("report", "explorer")) -> list[str]:
    """The Snakefile's ``onstart``: delete each page of `rule_names` (their one output each) whose inputs are gone or
    about to be recomputed (:func:`stale_pages`), saying so in one line each; the run writes it again after them
    (written atomically, bertology.pipeline.io.write_text), so no page on disk shows a ledger that is not the one beside it.
    Returns the pages removed."""
    pages = {}
    for name in rule_names:
        rule = next((r for r in workflow.rules if r.name == name), None)
        if rule is not None and len(rule.output) == 1 and "{" not in str(rule.output[0]):
            pages[str(rule.output[0])] = [str(f) for f in rule.input if "{" not in str(f)]
    rerun = set(job_paths(workflow))
    removed = []
    for page, why in stale_pages(pages, rerun).items():
        os.remove(page)
        state = "is about to be recomputed" if why in rerun else "is gone"
        print(f"bertology: removed {page}: its input {why} {state}; the run writes the page again after its inputs",
              file=sys.stderr)
        removed.append(page)
    return removed


def check_job_dirs(workflow: Any, invocation: str) -> None:
    """The Snakefile's ``onstart``, before any job: a file where a directory of the jobs' outputs, logs or
    benchmarks must be (``results/stats`` replaced by a file) stops the workflow in one line naming it, and its
    MLflow run ends FAILED at once (Snakemake would fail inside its scheduler with ~60 lines of traceback ending in
    NotADirectoryError, without calling ``onerror``)."""
    blocked = blocked_paths(job_paths(workflow))
    if not blocked:
        return
    path, blocker = blocked[0]
    more = f" (and {len(blocked) - 1} more such path(s))" if len(blocked) > 1 else ""
    on_end(invocation, "FAILED")
    fail(f"{blocker} is a file where a directory is expected (it should hold {path}){more}; move or delete it "
         f"and run again")


def fail(message: str) -> None:
    """Stop the workflow with one line on stderr (no traceback): for checks in the Snakefile's handlers."""
    print(f"bertology: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(1)


def pretrained_only_notes(config: dict) -> list[str]:
    """One line per reason analyses are left out of a run that fine-tunes nothing (train.inits: []): no fine-tuned
    model, and the text-only tasks (``label: null``) that have no labels to score."""
    from bertology.pipeline.tasks import text_only_tasks

    if config.get("train", {}).get("inits", True):
        return []
    notes = ["bertology: train.inits is []: fine-tuning and what needs a fine-tuned model are left out (scores, "
             "Table 1, cosine and feature change, disabling, importance, pruning, faithfulness, sieve delta, seeds, "
             "the figures comparing pretrained and fine-tuned); the claims about a fine-tuned model read not "
             "computed; every other analysis runs on the pretrained model"]
    text_only = text_only_tasks(config.get("tasks", []))
    if text_only:
        notes.append(f"bertology: task(s) {', '.join(text_only)} are text only (label: null): what needs labels "
                     f"(scores, Table 1, ablation) is left out for them")
    return notes


def capability_notes(config: dict) -> list[str]:
    """One line per analysis that cannot run on the config's model (said before any job runs)."""
    from bertology.analyses.capability import model_capabilities

    from bertology.pipeline.tasks import annotation_notes

    notes = annotation_notes(config) + pretrained_only_notes(config)
    capabilities = model_capabilities(str(config["model"]))
    why = capabilities["disabling"]
    if why is not None and config.get("train", {}).get("inits", True):
        notes.append(f"bertology: disabling heads (Kovaleva 4.6) is not possible on model {config['model']!r}: "
                     f"{why}; results/ablation/* and its figures say so, every other output and the report are "
                     f"produced")
    why = config["analysis"]["norms"]["enabled"] and capabilities["norms"]
    if why:
        notes.append(f"bertology: the norm analyses (value norms, mixing, rollout, flow) are left out on model "
                     f"{config['model']!r}: {why}; every other output and the report are produced")
    return notes
