"""The usage examples in the package's docstrings (``>>>``) run as doctests: every module of src/bertology whose
source holds one is imported and its examples are run (doctest.testmod: module docstring, functions, classes).
Only those modules are imported, found by their text, so a module without examples costs nothing here."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import bertology

PACKAGE = Path(bertology.__file__).parent


def modules_with_examples() -> list[str]:
    out = []
    for file in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in file.read_text(encoding="utf-8"):
            parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


MODULES = modules_with_examples()


def test_the_worked_examples_are_doctests():
    """The modules whose examples the docs point to keep them as doctests (not as prose that nothing runs)."""
    assert {"bertology.pipeline.layout", "bertology.pipeline.seedtags", "bertology.models.table1", "bertology.demo.lexicon"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, report=True)
    assert result.attempted > 0, f"{name} mentions '>>> ' but has no doctest that runs"
    assert result.failed == 0, f"{result.failed} of the {result.attempted} examples of {name} fail (printed above)"
