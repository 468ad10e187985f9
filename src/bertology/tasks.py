"""GLUE task specifications: text columns, label sets, metrics and file layout."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertology.errors import UserError


@dataclass(frozen=True)
class TaskSpec:
    """What the pipeline needs to know about one GLUE task.

    label_names: class names in label-id order (hub ids); empty for regression (STS-B).
    metrics: names understood by bertology.metrics (issue 3), the first is the headline metric.
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

    @property
    def is_pair(self) -> bool:
        return self.text_b is not None

    @property
    def is_regression(self) -> bool:
        return not self.label_names

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


def get_task(name: str) -> TaskSpec:
    """Look a task up by its GLUE name; a wrong name lists the right ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTaskError(
            f"unknown task {name!r}; GLUE tasks are: {', '.join(TASKS)}") from None


# The model variants, named once. A store exists for a pretrained encoder and for the one fine-tuned
# from it; a score also for the model fine-tuned from a random init.
STORE_VARIANTS = ("pretrained", "finetuned")
SCORE_VARIANTS = ("pretrained", "finetuned", "random-finetuned")
VARIANT_INIT = {"finetuned": "pretrained", "random-finetuned": "random"}  # fine-tuned variant -> its init
INIT_VARIANT = {init: variant for variant, init in VARIANT_INIT.items()}
