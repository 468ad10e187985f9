"""Where every output lives: the one place that names the paths of ``results/`` (docs/reference.md#layout).

Every path the pipeline writes or reads is a named template here, relative to the results root :data:`ROOT`.
The rules (``rules/*.smk``), the steps, the report, the explorer, training's checkpoints and the registry's
tables all spell their paths through this module, so a path changes in one line and a test
(``tests/test_layout.py``) checks that no other file spells one.

A template's fields are Snakemake wildcards (``{task}``, ``{variant}``, ``{seedtag}``, ...). :func:`path` fills
the fields it is given and leaves the others as wildcards, so one template serves a rule's output (nothing
filled), an input that keeps a wildcard (some filled) and a concrete file (all filled); these examples, and
the others of this module, run as doctests (tests/test_doctests.py):

>>> path("store")
'results/attention/{task}/{variant}.zarr'
>>> path("store", variant="pretrained")
'results/attention/{task}/pretrained.zarr'
>>> path("store", task="rte", variant="finetuned")
'results/attention/rte/finetuned.zarr'
>>> paths("store", task=["rte", "sst2"], variant="pretrained")  # one path per task, like Snakemake's expand
['results/attention/rte/pretrained.zarr', 'results/attention/sst2/pretrained.zarr']

Fields:

- ``task``: a GLUE task name (bertology.pipeline.tasks.TASKS) or a declared task's name; ``split``: train | validation;
- ``init``: pretrained | random (the fine-tuning's initialisation);
- ``seedtag``: '' for the first fine-tuning seed, ``-seedN`` for each further one (bertology.pipeline.seedtags);
- ``variant``: a store variant (pretrained | finetuned | finetuned-seedN) or, for a score, a score variant
  (pretrained | finetuned | random-finetuned, the seed in ``seedtag``);
- ``model``: a gold-syntax store's model (pretrained | {task}-finetuned[-seedN]);
- ``file``: a file name with its extension (``patterns.csv``); ``name``: a file-name stem (``heads``);
- ``rule``, ``job``: a log's or benchmark's rule and its job (the job's wildcards, e.g. ``{task}/{variant}``).

The variant -> model directory mapping lives here too (:func:`model_dir`, :func:`variant_model`,
:func:`syntax_model`), as does training's resumable state (:func:`checkpoint`).
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Iterable, Mapping
from os import PathLike

#: the results root, relative to the working directory (``snakemake --directory DIR`` puts it under DIR)
ROOT = "results"

#: template name -> path relative to :data:`ROOT`, its fields Snakemake wildcards
TEMPLATES: Mapping[str, str] = {
    # data (rules/data.smk, rules/clark.smk)
    "data": "data/{task}/{split}.parquet",
    "data_skipped": "data/{task}/{split}.skipped.csv",
    "demo_trees": "data/syntax/demo.conllu",
    # fine-tuning and Table 1 (rules/train.smk)
    "model": "models/{task}/{init}{seedtag}",
    "checkpoint": "checkpoints/{task}/{init}{seedtag}",
    "score": "scores/{task}/{variant}{seedtag}.json",
    "table1": "tables/table1.csv",
    "table1_md": "tables/table1.md",
    "table1_tests": "tables/table1_tests.csv",
    # attention stores (rules/attention.smk) and the gold-syntax stores (rules/clark.smk)
    "sample": "data/{task}/sample.parquet",
    "words": "data/{task}/words.parquet",
    "store": "attention/{task}/{variant}.zarr",
    "syntax_sample": "data/syntax/sample.parquet",
    "syntax_words": "data/syntax/words.parquet",
    "syntax_sentences": "data/syntax/sentences.csv",
    "syntax_counts": "data/syntax/counts.json",
    "syntax_store": "attention/syntax/{model}.zarr",
    # statistics: per store variant, per task (with the seed's tag), across seeds, across tasks
    "variant_stat": "stats/{task}/{variant}/{file}",
    "cosine": "stats/{task}/cosine{seedtag}.csv",
    "features_diff": "stats/{task}/features_diff{seedtag}.csv",
    "cosine_examples": "stats/{task}/cosine_examples{seedtag}.npz",
    "seed_stat": "stats/{task}/seeds/{name}.csv",
    "sieve_delta": "stats/sieve_delta{seedtag}.csv",
    "sieve_summary": "stats/sieve_summary.csv",
    "framenet_links": "data/framenet/links.parquet",
    "framenet_counts": "data/framenet/counts.json",
    "syntax_stat": "stats/syntax/{model}.csv",
    "syntax_summary": "stats/syntax/{model}.json",
    "syntax_best": "stats/syntax/best_heads.csv",
    # the decoder probe (rules/decoders.smk)
    "decoder_sink": "stats/{task}/decoder_sink.csv",
    "decoder_induction": "stats/{task}/decoder_induction.csv",
    # disabling, importance and pruning (rules/ablation.smk): {name} heads | layers | summary | importance | pruning
    "ablation": "ablation/{task}/{name}{seedtag}.csv",
    "ablation_info": "ablation/{task}/summary{seedtag}.json",
    "ablation_examples": "ablation/{task}/examples{seedtag}.npz",
    # figures: one per task, or one for the run
    "task_figure": "figures/{name}-{task}.png",
    "figure": "figures/{name}.png",
    "sieve_delta_figure": "figures/sieve-delta{seedtag}.png",
    # the pattern-labelling sheet (not a default target)
    "patterns_labels": "patterns/{task}/labels.csv",
    "patterns_images": "patterns/{task}/images",
    # the claims ledger (rules/claims.smk)
    "claims": "claims.csv",
    "claims_md": "claims.md",
    # a run of several models: the comparisons over them, {name} sinks | induction | patterns | roles | depth,
    # and the ledger's counts across models (rules/compare.smk; each model's own results under results/m/{name}/,
    # model_root)
    "compare_table": "compare/{name}.csv",
    "compare_figure": "compare/{name}.png",
    "models_counts": "compare/claims.csv",
    # the two pages
    "report": "report.html",
    "explorer": "explorer.html",
    # every rule's log and benchmark
    "log": "logs/{rule}/{job}.log",
    "benchmark": "benchmarks/{rule}/{job}.tsv",
}

#: the folder, under the results root, of each model's results in a run of several models: results/m/{name}/
MODELS_DIR = "m"

#: the first path component of what no model decides (prepared data, the attention sample, its spaCy words, the
#: gold sentences, FrameNet links): computed once per run and shared by every model
SHARED_DIR = "data"

_FORMATTER = string.Formatter()
#: what a field matches when a path is read back (:func:`match`); any other field matches one path component
_FIELD_REGEX = {"seedtag": r"(?:-seed[0-9]+)?", "job": r".+?"}


def template(key: str) -> str:
    """The template named `key`, relative to the results root.

    >>> template("store")
    'attention/{task}/{variant}.zarr'
    """
    try:
        return TEMPLATES[key]
    except KeyError:
        raise KeyError(f"no path template {key!r} in bertology.pipeline.layout; templates: {', '.join(TEMPLATES)}") from None


def fields(key: str) -> tuple[str, ...]:
    """The fields (wildcards) of a template, in order.

    >>> fields("model")
    ('task', 'init', 'seedtag')
    """
    return tuple(f for _, f, _, _ in _FORMATTER.parse(template(key)) if f is not None)


def fill(text: str, **values: object) -> str:
    """`text` with the fields in `values` replaced by their values and every other field left as it is
    (``{field}``, a Snakemake wildcard). A value is inserted as it is (a value ``'{task}'`` keeps the wildcard)."""
    out = []
    for literal, field, spec, conv in _FORMATTER.parse(text):
        out.append(literal)
        if field is None:
            continue
        if field in values:
            out.append(str(values[field]))
        else:
            out.append("{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def _check(key: str, values: Mapping[str, object]) -> None:
    unknown = set(values) - set(fields(key))
    if unknown:
        raise TypeError(f"path template {key!r} ({template(key)}) has no field(s) {', '.join(sorted(unknown))}; "
                        f"its fields: {', '.join(fields(key)) or 'none'}")


def rel(key: str, /, **values: object) -> str:
    """The template named `key` relative to the results root, the fields in `values` filled.

    >>> rel("variant_stat", file="sieve.csv")
    'stats/{task}/{variant}/sieve.csv'
    """
    _check(key, values)
    return fill(template(key), **values)


def join(root: str | PathLike[str] | None, relative: str) -> str:
    """`relative` (a path under the results root) under `root` ('' or None: left relative)."""
    root = "" if root is None else str(root)
    return f"{root.rstrip('/')}/{relative}" if root else relative


def path(key: str, /, *, root: str | PathLike[str] | None = ROOT, **values: object) -> str:
    """The path named `key` under `root` (the results root by default, relative to the working directory),
    the fields in `values` filled and the others left as Snakemake wildcards. Under a model's root
    (:func:`model_root`) a shared path (:func:`shared`) is the run's.

    >>> path("score", seedtag="")
    'results/scores/{task}/{variant}.json'
    >>> path("words", root="results/m/bert", task="rte")
    'results/data/rte/words.parquet'
    """
    return join(run_root(root) if shared(key) else root, rel(key, **values))


def paths(key: str, /, *, root: str | PathLike[str] | None = ROOT, **values: object) -> list[str]:
    """One path per combination of the values (like Snakemake's ``expand``): a value that is a list or tuple
    gives one path per item, a string or number is one value; fields not given stay wildcards. Combinations
    in the order of the keyword arguments, the last varying fastest."""
    _check(key, values)
    return expand(template(key), root=root, **values)


def expand(text: str, /, *, root: str | PathLike[str] | None = ROOT, **values: object) -> list[str]:
    """A template text (a template, or a registry declaration's path) under `root`, one path per combination of
    the values as :func:`paths` makes them.

    >>> expand("stats/{task}/{variant}/x.csv", task="rte", variant=["pretrained", "finetuned"])
    ['results/stats/rte/pretrained/x.csv', 'results/stats/rte/finetuned/x.csv']
    """
    names = list(values)
    choices = [list(v) if isinstance(v, (list, tuple)) else [v] for v in values.values()]
    return [join(root, fill(text, **dict(zip(names, combo)))) for combo in itertools.product(*choices)]


def log(rule: str, job: str | None = None) -> str:
    """The log of a job of `rule`: results/logs/{rule}/{job}.log; job: its wildcards as a path
    (e.g. '{task}/{variant}'), the rule's name for a rule that runs once."""
    return path("log", rule=rule, job=job if job is not None else rule)


def benchmark(rule: str, job: str | None = None) -> str:
    """The benchmark of a job of `rule`: results/benchmarks/{rule}/{job}.tsv (job as in :func:`log`)."""
    return path("benchmark", rule=rule, job=job if job is not None else rule)


def pattern(text: str, /, **values: object) -> re.Pattern[str]:
    """A regular expression matching the paths of a template text (relative to the results root, e.g. a
    registry table), the fields in `values` fixed and every other field matching one path component
    (``seedtag``: '' or -seedN; ``job``: any path)."""
    out = []
    for literal, field, _, _ in _FORMATTER.parse(text):
        out.append(re.escape(literal))
        if field is None:
            continue
        if field in values:
            out.append(re.escape(str(values[field])))
        else:
            out.append(f"(?P<{field}>{_FIELD_REGEX.get(field, r'[^/]+?')})")
    return re.compile("".join(out))


def regex(key: str, /, **values: object) -> re.Pattern[str]:
    """A regular expression matching the paths of template `key` relative to the results root, the fields in
    `values` fixed (each other field matches one path component; ``seedtag`` '' or -seedN)."""
    _check(key, values)
    return pattern(template(key), **values)


def matching(text: str, relatives: Iterable[str]) -> list[str]:
    """The paths among `relatives` (under the results root) that a template text matches, sorted: every
    variant's mixing table of those declared, say.

    >>> declared = ["stats/rte/pretrained/mixing.csv", "stats/rte/pretrained/sieve.csv",
    ...             "stats/mrpc/finetuned/mixing.csv"]
    >>> matching("stats/{task}/{variant}/mixing.csv", declared)
    ['stats/mrpc/finetuned/mixing.csv', 'stats/rte/pretrained/mixing.csv']
    """
    rx = pattern(text)
    return sorted(r for r in relatives if rx.fullmatch(r))


def match(key: str, relative: str, /, **values: object) -> dict[str, str] | None:
    """The fields of `relative` (a path under the results root) read back through template `key`, or None
    when it is not one of its paths.

    >>> match("store", "attention/rte/pretrained.zarr")
    {'task': 'rte', 'variant': 'pretrained'}
    >>> match("store", "attention/rte/pretrained.csv") is None
    True
    """
    m = regex(key, **values).fullmatch(relative)
    return None if m is None else m.groupdict()


def parse(key: str, file: str | PathLike[str], /, **values: object) -> dict[str, str] | None:
    """The fields of a path of template `key` under any results root (a declared input, relative or absolute),
    or None when it is not one.

    >>> parse("data", "/run/results/data/rte/train.parquet")
    {'task': 'rte', 'split': 'train'}
    """
    from pathlib import PurePath

    m = re.search(r"(?:^|/)" + regex(key, **values).pattern + r"$", PurePath(file).as_posix())
    return None if m is None else m.groupdict()


def under(root: str | PathLike[str], files: Iterable[str | PathLike[str]]) -> list[str]:
    """The paths among `files` that lie under `root`, relative to it (POSIX separators), in their order;
    the others are left out."""
    from pathlib import Path

    base = Path(root).resolve()
    out = []
    for f in files:
        try:
            out.append(Path(f).resolve().relative_to(base).as_posix())
        except ValueError:
            continue
    return out


# --------------------------------------------------------------------- several models in one run


def shared(key: str) -> bool:
    """Whether the path named `key` is computed once per run and shared by every model (under results/data/).

    >>> shared("words"), shared("store")
    (True, False)
    """
    return template(key).split("/", 1)[0] == SHARED_DIR


def model_root(name: str, root: str | PathLike[str] | None = ROOT) -> str:
    """The results root of the model named `name` in a run of several models.

    >>> model_root("minilm-l6")
    'results/m/minilm-l6'
    """
    return join(root, f"{MODELS_DIR}/{name}")


def run_root(root: str | PathLike[str] | None) -> str | None:
    """The run's results root of a results root: a model's root's grandparent, any other root itself.

    >>> run_root("results/m/minilm-l6"), run_root("results"), run_root(None)
    ('results', 'results', None)
    """
    from pathlib import PurePath

    if root is None or str(root) == "":
        return root if root is None else ""
    p = PurePath(root)
    return str(p.parent.parent) if p.parent.name == MODELS_DIR and p.parent.parent != p.parent else str(root)


def model_of(file: str | PathLike[str]) -> str | None:
    """The short name of the model whose results root holds `file` (None outside any model's root).

    >>> model_of("results/m/llama/claims.csv"), model_of("results/claims.csv")
    ('llama', None)
    """
    from pathlib import PurePath

    parts = PurePath(file).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i - 1] == MODELS_DIR and parts[i]:
            return parts[i]
    return None


def model_prefixes(name: str, root: str = ROOT) -> dict[str, str]:
    """Snakemake's ``replace_prefix`` of a model's part of the workflow: each path under the results root that a
    model decides moves under its root (:func:`model_root`); what no model decides (:data:`SHARED_DIR`) stays.

    >>> model_prefixes("bert")["results/attention/"]
    'results/m/bert/attention/'
    >>> "results/data/" in model_prefixes("bert")
    False
    """
    firsts = dict.fromkeys(t.split("/", 1)[0] + ("/" if "/" in t else "") for t in TEMPLATES.values())
    return {join(root, f): join(model_root(name, root), f) for f in firsts if f.rstrip("/") != SHARED_DIR}


# --------------------------------------------------------------------- which model a variant runs


def model_dir(task: str, variant: str, seedtag: str = "", *, root: str | PathLike[str] | None = ROOT) -> str | None:
    """The fine-tuned model directory of a score variant and seed; None for 'pretrained' (the config's `model`
    with an untrained head).

    >>> model_dir("rte", "random-finetuned", "-seed43")
    'results/models/rte/random-seed43'
    >>> model_dir("rte", "pretrained") is None
    True
    """
    from bertology.pipeline.tasks import VARIANT_INIT

    if variant not in VARIANT_INIT:
        return None
    return path("model", root=root, task=task, init=VARIANT_INIT[variant], seedtag=seedtag)


def variant_model(task: str, variant: str, *, root: str | PathLike[str] | None = ROOT) -> str | None:
    """The fine-tuned model directory a store variant runs (None for `pretrained`, which runs the config's
    `model`); a fine-tuned variant is fine-tuned from the pretrained init.

    >>> variant_model("{task}", "finetuned-seed43")
    'results/models/{task}/pretrained-seed43'
    """
    from bertology.pipeline.seedtags import split_variant

    base, tag = split_variant(variant)
    return model_dir(task, base, tag, root=root)


def syntax_model(model: str, *, root: str | PathLike[str] | None = ROOT) -> str | None:
    """The fine-tuned model directory a gold-syntax store runs; None for 'pretrained' (the config's `model`).

    >>> syntax_model("rte-finetuned-seed43")
    'results/models/rte/pretrained-seed43'
    """
    from bertology.pipeline.seedtags import split_syntax_model

    task, variant = split_syntax_model(model)
    return None if task is None else variant_model(task, variant, root=root)


def checkpoint(task: str, init: str, seedtag: str = "", *, root: str | PathLike[str] | None = ROOT) -> str:
    """Where the train_model job of (task, init, seed) keeps its resumable state, deliberately not a declared
    output (bertology.models.checkpoint).

    >>> checkpoint("rte", "random", "-seed43")
    'results/checkpoints/rte/random-seed43'
    """
    return path("checkpoint", root=root, task=task, init=init, seedtag=seedtag)


def wildcard_job(pattern: str) -> str:
    """A job's log name from an output pattern's wildcards: ``{task}/{variant}``; a ``{seedtag}`` follows the field
    before it (``{task}{seedtag}``); the pattern's file stem when it has none.

    >>> wildcard_job(path("variant_stat", file="x.csv")), wildcard_job(path("ablation", name="heads"))
    ('{task}/{variant}', '{task}{seedtag}')
    """
    names = [f for _, f, _, _ in _FORMATTER.parse(pattern) if f is not None]
    parts: list[str] = []
    for name in names:
        if name == "seedtag" and parts:
            parts[-1] += "{seedtag}"
        else:
            parts.append("{" + name + "}")
    return "/".join(parts) if parts else pattern.rsplit("/", 1)[-1].split(".")[0]
