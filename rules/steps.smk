# How every rule runs its step, from the step's declaration (bertology.registry.Step, beside its analysis in
# bertology.analyses): its command (STEP: `step`, `step_files`), its named outputs (`outputs`, `output`), its threads
# and resources (`step_threads`, `step_resources`), its job's log name (`job_path`); and the run's targets.
import json
import os
import shlex

from bertology.pipeline.configjson import sections_json
from bertology.pipeline.layout import wildcard_job
from bertology.pipeline.tasks import task_param
from bertology.report.native import report_flags
from bertology.workflow.cli import STEPS, step_args, task_args


# Each rule runs its step the same way, `bertology <step>` with its wildcards, named inputs and
# outputs, the config sections the step declares (bertology.workflow.cli.STEPS) and its threads. The sections
# are part of the param, so changing one re-runs exactly the steps that read it.
STEP = "bertology {params.step} {params.files} --threads {threads} > {log} 2>&1"

# What a job's --task gets of a declared task (bertology.registry.Step.task): plain, words (its language and spaCy
# pipeline too), or the whole declaration (the data rule): each job gets what it reads
# (bertology.pipeline.tasks.task_param), so a changed declaration re-runs exactly the jobs that read what changed.
TASK_JSON = {
    "plain": {n: json.dumps(task_param(d, PIPELINES[n], words=False), sort_keys=True) for n, d in DECLARED.items()},
    "words": {n: json.dumps(task_param(d, PIPELINES[n]), sort_keys=True) for n, d in DECLARED.items()},
    "whole": {name: json.dumps(decl, sort_keys=True) for name, decl in DECLARED.items()},
}


def step(name):
    """The `step` param of the rule named `name`, i.e. its step and config sections (a plain string, so that
    Snakemake records it and re-runs the rule when a section changes). A set `model_name` (each model of a run of
    several) goes to every step: its job's MLflow run is tagged with it (bertology.workflow.cli.run_step)."""
    sections = (*STEPS[name].config, *(("model_name",) if config.get("model_name") else ()))
    return f"{name} --config {shlex.quote(sections_json(config, tuple(dict.fromkeys(sections))))}"


def step_files(name):
    """The `files` param of the step `name`: the job's wildcards and named inputs/outputs as -w/--input/--output
    arguments, and what its step reads of a declared task (bertology.registry.Step.task: plain, words, whole)."""
    kind = STEPS[name].task

    def files(wildcards, input, output):
        tasks = (task_args(wildcards, TASK_JSON["plain"], whole=TASK_JSON["whole"]) if kind == "whole"
                 else task_args(wildcards, TASK_JSON[kind]))
        return " ".join(filter(None, [step_args(wildcards, input, output), tasks]))

    return files


# Every rule's threads and resources come from its step's declaration (bertology.registry.Step: threads, mem_mb,
# runtime, gpu); a cluster overrides them in its profile (set-threads, set-resources: profiles/slurm/config.yaml).
def step_threads(name):
    """The `threads` of the rule named `name`, as its step declares them."""
    return STEPS[name].threads


def step_resources(name):
    """The `resources` of the rule named `name`, as its step declares them (mem_mb, runtime and, for a step that
    uses a GPU when its job has one, gpu)."""
    return STEPS[name].resources


def reported(output, name):
    """An output flagged for Snakemake's own report (snakemake --report report.zip): its category (the paper), its
    subcategory (the report section's title) and its caption (report/captions/, the registry's section text), by the
    output's figure name without the task, or table1, claims, report (bertology.report.native.report_flags)."""
    flags = report_flags(name)
    caption = os.path.join(workflow.basedir, flags["caption"]) if flags["caption"] else None
    return report(output, caption=caption, category=flags["category"], subcategory=flags["subcategory"])


def outputs(rule):
    """The rule's named outputs, as the registry declares them (bertology.registry.Registry.outputs), with
    Snakemake's directory() and the report flag (`reported`) applied where declared."""
    return REGISTRY.outputs(rule, RUN, directory=directory, report=reported)


def output(rule, name, **values):
    """One declared output of a rule as another rule's input, fields in `values` filled (a list gives one path
    per value)."""
    return REGISTRY.output(rule, name, **values)


def targets(run=RUN):
    """The run's final outputs (what `all` asks for): every declared output the run wants (Registry.targets)."""
    return REGISTRY.targets(run)


def job_path(rule):
    """A rule's job as a path of its outputs' wildcards: {task}/{variant}, {task}{seedtag}, ..."""
    return wildcard_job(next(iter(REGISTRY.outputs(rule).values())))
