"""What a step gets (:class:`StepContext`): its wildcards, named files, typed config, threads and tracker.

Built by :mod:`bertology.workflow.cli` (the one boundary with Snakemake) and handed to the step functions of
``bertology.steps.*``, which import it from here: the steps depend on this module, not on the CLI that names them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertology.pipeline.errors import UserError


class Files(Mapping[str, list[Path]]):
    """Named paths of a step (``--input name=path``): ``files.store`` is the one path named `store`,
    ``files.all("stats")`` every path of that name."""

    def __init__(self, kind: str, step: str, items: Mapping[str, list[Path]]):
        self._kind, self._step, self._items = kind, step, dict(items)

    def __getitem__(self, name: str) -> list[Path]:
        return self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def all(self, name: str) -> list[Path]:
        if name not in self._items:
            raise UserError(f"step {self._step} needs --{self._kind} {name}=PATH (has: {', '.join(self._items) or 'none'})")
        return self._items[name]

    def get(self, name: str, default: Any = None) -> Path | None:  # type: ignore[override]
        paths = self._items.get(name)
        return paths[0] if paths else default

    def __getattr__(self, name: str) -> Path:
        if name.startswith("_"):
            raise AttributeError(name)
        paths = self.all(name)
        if len(paths) != 1:
            raise UserError(f"step {self._step}: --{self._kind} {name} has {len(paths)} paths where one is expected")
        return paths[0]


@dataclass
class StepContext:
    """What a step gets: its wildcards, named input/output paths, typed config sections, threads, tracker."""

    step: str
    wildcards: dict[str, str]
    input: Files
    output: Files
    config: Any  # bertology.pipeline.config.Config with only the step's sections filled
    threads: int = 1
    device: str | None = None
    progress: bool = True
    tracker: Any = None  # bertology.tracking.Tracker
    options: dict[str, Any] = field(default_factory=dict)  # a tool step's own options (registry.Step.options)
    rest: list[str] = field(default_factory=list)  # the arguments after "--" (registry.Step.passthrough)

    @property
    def task(self) -> str | None:
        return self.wildcards.get("task")

    @property
    def variant(self) -> str | None:
        return self.wildcards.get("variant")

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"bertology.{self.step}")
