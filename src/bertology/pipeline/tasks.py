"""Task specifications: the eight GLUE tasks and the tasks a config declares (docs/reference.md#declared-tasks).

A declared task (an entry of ``tasks:`` that is a mapping) becomes a :class:`TaskSpec` with ``declared=True``.
Its declaration travels to each job that needs it as the step's ``--task JSON`` argument (rules/steps.smk), so
a job knows it without reading the whole config, and Snakemake re-runs a job when that declaration changes
(:func:`task_param`: only what downstream steps read; the data rule gets the whole declaration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bertology.pipeline.errors import UserError


@dataclass(frozen=True)
class TaskSpec:
    """What the pipeline needs to know about one GLUE task.

    label_names: class names in label-id order (hub ids); empty for regression (STS-B).
    metrics: names understood by bertology.models.metrics, the first is the headline metric.
    hub_splits: our split name -> the split name of nyu-mll/glue.
    glue_dir / glue_files: the layout of GLUE's original download script.
    """

    name: str
    display: str
    text_a: str
    text_b: str | None
    label_names: tuple[str, ...]
    metrics: tuple[str, ...]
    glue_dir: str
    glue_files: dict[str, str] = field(default_factory=dict)
    hub_splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "validation": "validation"})
    #: declared tasks: explicit kind (a classification task whose label names come from its data has none yet)
    regression: bool | None = None
    language: str = "en"
    #: declared tasks: the spaCy pipeline of its language (None: none installed; words are tokenised only)
    spacy_pipeline: str | None = None
    declared: bool = False
    #: declared tasks: whether this job was told its language and pipeline (only the jobs that read words are)
    words_known: bool = True
    #: declared tasks: text only (``label: null``): its splits' ``label`` column is empty (NaN), nothing is scored
    text_only: bool = False

    @property
    def is_pair(self) -> bool:
        return self.text_b is not None

    @property
    def is_regression(self) -> bool:
        return self.regression if self.regression is not None else not self.label_names

    @property
    def annotated(self) -> bool:
        """Whether its words get POS tags and dependency parses (GLUE: always; declared: with a pipeline)."""
        if not self.words_known:
            raise RuntimeError(f"task {self.name}: its language and spaCy pipeline were not handed to this step (the "
                               f"rules reading words pass them: step_files in rules/steps.smk)")
        return not self.declared or self.spacy_pipeline is not None

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.label_names)

    @property
    def id2label(self) -> dict[int, str]:
        return {i: n for i, n in enumerate(self.label_names)} if self.label_names else {0: "score"}


_DEV = {"train": "train.tsv", "validation": "dev.tsv"}

TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        TaskSpec("cola", "CoLA", "sentence", None, ("unacceptable", "acceptable"), ("mcc", "accuracy"), "CoLA", _DEV),
        TaskSpec("sst2", "SST-2", "sentence", None, ("negative", "positive"), ("accuracy",), "SST-2", _DEV),
        TaskSpec("mrpc", "MRPC", "sentence1", "sentence2", ("not_equivalent", "equivalent"), ("f1", "accuracy"), "MRPC", _DEV),
        TaskSpec("stsb", "STS-B", "sentence1", "sentence2", (), ("pearson", "spearman"), "STS-B", _DEV),
        TaskSpec("qqp", "QQP", "question1", "question2", ("not_duplicate", "duplicate"), ("f1", "accuracy"), "QQP", _DEV),
        TaskSpec("mnli", "MNLI-m", "premise", "hypothesis", ("entailment", "neutral", "contradiction"), ("accuracy",), "MNLI",
                 {"train": "train.tsv", "validation": "dev_matched.tsv"},
                 {"train": "train", "validation": "validation_matched"}),
        TaskSpec("qnli", "QNLI", "question", "sentence", ("entailment", "not_entailment"), ("accuracy",), "QNLI", _DEV),
        TaskSpec("rte", "RTE", "sentence1", "sentence2", ("entailment", "not_entailment"), ("accuracy",), "RTE", _DEV),
    ]
}

SPLITS = ("train", "validation")


class UnknownTaskError(UserError, KeyError):
    """A task name that is not a GLUE task (the config's `tasks`, a wildcard); the message lists the right ones."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


#: declared tasks known to this process (registered from a job's --task arguments or a config's `tasks`)
_DECLARED: dict[str, TaskSpec] = {}

#: the metrics of a declared task whose `metrics` is null, by kind
DEFAULT_METRICS = {"classification": ("accuracy", "macro_f1"), "regression": ("pearson", "spearman")}
#: names that are no task: directories of results/ beside the tasks' (results/stats/syntax, .../framenet)
RESERVED_NAMES = ("syntax", "framenet")
#: a declared task's name: a safe path component and wildcard value (no dot, dash or slash)
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
#: what downstream steps read of a declaration (the data rule reads all of it)
DOWNSTREAM_KEYS = ("name", "kind", "pair", "labels", "metrics")
#: what the jobs reading its words also get (annotate_words and the analyses of annotated words)
WORDS_KEYS = ("language", "spacy_pipeline")


def get_task(name: str) -> TaskSpec:
    """Look a task up by its GLUE name or a declared task's name; a wrong name lists the right ones."""
    if name in TASKS:
        return TASKS[name]
    if name in _DECLARED:
        return _DECLARED[name]
    declared = f"; declared tasks: {', '.join(_DECLARED)}" if _DECLARED else ""
    raise UnknownTaskError(
        f"unknown task {name!r}; GLUE tasks are: {', '.join(TASKS)}{declared} (a task of your own is declared "
        f"in `tasks:` as a mapping with name, source, text, label, ...: docs/reference.md#declared-tasks)")


def task_names(tasks_config) -> list[str]:
    """The names of the config's `tasks:` entries, in order: a GLUE name as it is, a declared task (a mapping)
    by its `name`.

    >>> task_names(["mrpc", {"name": "imdb", "source": "stanfordnlp/imdb"}])
    ['mrpc', 'imdb']
    """
    return [e["name"] if isinstance(e, dict) else e for e in tasks_config]


def declarations(entries) -> dict[str, dict]:
    """The declared tasks of the config's `tasks:` entries: name -> declaration."""
    return {e["name"]: e for e in entries if isinstance(e, dict)}


def spec_from_declaration(decl: dict) -> TaskSpec:
    """The TaskSpec of a declaration (the whole one, validated, or its :func:`task_param`). Label names: the declared
    ones, else none yet (they come from the data: :func:`with_labels`). Its language and spaCy pipeline only when
    the declaration holds them (the words of a whole declaration are not known: no pipeline was chosen for it)."""
    regression = decl["kind"] == "regression"
    metrics = tuple(decl["metrics"] or DEFAULT_METRICS["regression" if regression else "classification"])
    labels = tuple(str(x) for x in (decl["labels"] or ())) if not regression else ()
    words = {k: decl[k] for k in WORDS_KEYS if k in decl}
    return TaskSpec(name=decl["name"], display=decl["name"], text_a="text", text_b="pair" if decl["pair"] else None,
                    label_names=labels, metrics=metrics, glue_dir="", regression=regression, declared=True,
                    words_known="spacy_pipeline" in decl, text_only=is_text_only(decl), **words)


def is_text_only(decl: dict) -> bool:
    """Whether a declaration (whole, or its :func:`task_param`) is text only: ``label: null``."""
    return bool(decl.get("text_only")) or ("label" in decl and decl["label"] is None)


def text_only_tasks(tasks_config) -> list[str]:
    """The names of the config's text-only declared tasks (``label: null``), in order."""
    return [e["name"] for e in tasks_config if isinstance(e, dict) and is_text_only(e)]


def task_param(decl: dict, spacy_pipeline: str | None, *, words: bool = True) -> dict:
    """What the steps after the data rule read of a declaration (the `--task` argument of their jobs): its name,
    kind, whether it is a pair task, label names and metrics; with `words` (the jobs that annotate or read
    annotated words) also its language and the spaCy pipeline that annotates it (None: none installed). Columns,
    source and splits are the data rule's alone: a change there re-runs the data rule, and what follows re-runs
    because its data changed; installing a pipeline re-runs the annotation and what reads it, not fine-tuning."""
    param = {"name": decl["name"], "kind": decl["kind"], "pair": bool(decl["pair"]), "labels": decl["labels"],
             "metrics": decl["metrics"]}
    if is_text_only(decl):
        param["text_only"] = True
    if words:
        param.update(language=decl["language"], spacy_pipeline=spacy_pipeline)
    return param


_DECLARATIONS: dict[str, dict] = {}


def register(decl: dict) -> TaskSpec:
    """Make a declared task known to :func:`get_task` in this process (a whole declaration, or its
    :func:`task_param`)."""
    spec = spec_from_declaration(decl)
    _DECLARED[spec.name] = spec
    _DECLARATIONS[spec.name] = dict(decl)
    return spec


def declaration(name: str) -> dict:
    """The whole declaration of a declared task known to this process (the data rule's `--task` argument)."""
    decl = _DECLARATIONS.get(name)
    if decl is None or "source" not in decl:
        raise UnknownTaskError(f"task {name!r}: its declaration was not handed to this step (the data rule passes it "
                               f"as --task JSON)")
    return decl


def with_labels(spec: TaskSpec, label_names) -> TaskSpec:
    """The spec with the label names its prepared data records (declared classification tasks whose names come
    from a ClassLabel feature or the data's distinct values); GLUE and regression specs unchanged."""
    if not spec.declared or spec.is_regression or spec.label_names or not label_names:
        return spec
    import dataclasses

    return dataclasses.replace(spec, label_names=tuple(str(x) for x in label_names))


# The model variants, named once. A store exists for a pretrained encoder and for the one fine-tuned
# from it; a score also for the model fine-tuned from a random init.
STORE_VARIANTS = ("pretrained", "finetuned")
SCORE_VARIANTS = ("pretrained", "finetuned", "random-finetuned")
VARIANT_INIT = {"finetuned": "pretrained", "random-finetuned": "random"}  # fine-tuned variant -> its init
INIT_VARIANT = {init: variant for variant, init in VARIANT_INIT.items()}


# --------------------------------------------------------------------------------------------------
# the spaCy pipeline of a declared task's language

#: the analyses that need words tagged and parsed, left out for a task without a pipeline for its language
ANNOTATED_ANALYSES = ("features", "relations", "syntactic sieves", "heads as parsers", "FrameNet")


def pipeline_for(language: str, config: dict) -> tuple[str | None, str]:
    """The spaCy pipeline a validated config gives `language` and the config key that sets it:
    attention.spacy_model for en, spacy_pipelines.<language> otherwise (None when the mapping has no entry)."""
    if language == "en":
        return config["attention"]["spacy_model"], "attention.spacy_model"
    return config["spacy_pipelines"].get(language), f"spacy_pipelines.{language}"


def pipeline_installed(name: str | None) -> bool:
    """Whether spaCy can load `name` (an installed package or a directory), found without importing spaCy."""
    if not name:
        return False
    import importlib.util
    from pathlib import Path

    if Path(name).is_dir():
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def declared_pipeline(decl: dict, config: dict) -> str | None:
    """The pipeline that annotates a declared task's words: the configured one when installed, else None."""
    name, _ = pipeline_for(decl["language"], config)
    return name if pipeline_installed(name) else None


def annotation_notes(config: dict) -> list[str]:
    """One line per declared task whose language has no installed spaCy pipeline (said at start)."""
    notes = []
    for decl in declarations(config["tasks"]).values():
        name, key = pipeline_for(decl["language"], config)
        if pipeline_installed(name):
            continue
        why = f"pipeline {name!r} is not installed" if name else "no pipeline is configured"
        notes.append(f"bertology: task {decl['name']} (language {decl['language']}): {why}, so "
                     f"{', '.join(ANNOTATED_ANALYSES)} are left out for it; set {key} to an installed spaCy "
                     f"pipeline (e.g. pip install it) to have them; every other analysis and the report are produced")
    return notes


#: features of Kovaleva 4.4/4.5 that need no annotated words (the special tokens come from the tokenizer)
TOKEN_FEATURES = ("cls", "sep")


def annotated_only(task: str, name: str, table):
    """What a store table keeps for a task whose words are not annotated (no spaCy pipeline for its language):
    features, cls and features_diff only their `cls` and `sep` rows; relations and parser nothing (their header);
    any other table (and every table of an annotated task) as it is. table: a pandas DataFrame."""
    if get_task(task).annotated:
        return table
    if name in ("features", "cls", "features_diff"):
        return table[table["feature"].isin(TOKEN_FEATURES)].reset_index(drop=True)
    if name in ("relations", "parser"):
        return table.iloc[0:0]
    return table


def declaration_file(name: str, text: str, root: str) -> str:
    """`{root}/data/{name}/declaration.json` holding a declared task's whole declaration `text`, (re)written only
    when it differs, so its modification time changes exactly when the declaration does: an input of the data
    rule (Snakemake does not record a param computed per job), which re-runs it and everything after it."""
    from pathlib import Path

    path = Path(root) / "data" / name / "declaration.json"
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(path)
