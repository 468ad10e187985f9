"""CONTRIBUTING.md stays true: its recipe's code blocks run against the real registry and give what they say, and
every dotted name and path it names exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TEXT = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
SRC = REPO / "src" / "bertology"
PATH_ROOTS = ("src/", "rules/", "tests/", "docs/", "bench/", "profiles/", "envs/", "schemas/", "config/")


def python_blocks() -> list[str]:
    """The ```python blocks of the page, dedented."""
    import textwrap

    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", TEXT, re.S)]


def backticked() -> list[str]:
    """Every `code span` of the page outside the fenced blocks."""
    prose = re.sub(r"```.*?```", "", TEXT, flags=re.S)
    return re.findall(r"`([^`\n]+)`", prose)


def resolve(name: str) -> object:
    """A dotted name: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def _modules() -> set[str]:
    return {p.stem if p.name != "__init__.py" else p.parent.name for p in SRC.glob("*.py")} | \
        {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}


def test_every_dotted_name_exists():
    """`bertology.x.y`, `tests.builders.x.y` and `module.Name` for a top-level bertology module (`cli.STEPS`,
    `onepass.Kernel.build`, `Registry.seed_inputs`...) resolve to something real."""
    modules = _modules()
    names = [c.removesuffix("()") for c in backticked() if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(\(\))?", c)]
    checked, missing = 0, []
    for name in names:
        head = name.split(".")[0]
        if head in ("bertology", "tests"):
            full = name
        elif head in modules and not (SRC / f"{name.replace('.', '/')}").exists():
            full = f"bertology.{name}"
        elif head == "Registry":
            full = f"bertology.registry.{name}"
        elif head in ("Kernel",):
            full = f"bertology.onepass.{name}"
        else:
            continue  # a file name (config.schema.yaml) or an attribute of an object (ex.n, job.config)
        if full.endswith((".py", ".yaml", ".md", ".smk", ".csv", ".png", ".npz", ".html")):
            continue
        checked += 1
        try:
            resolve(full)
        except (ImportError, AttributeError):
            missing.append(name)
    assert checked > 30
    assert missing == [], "names in CONTRIBUTING.md that do not exist"


def test_every_path_exists():
    """Paths under the repository (or under src/bertology, as the table of where things live gives them)."""
    missing, checked = [], 0
    for cell in backticked():
        for token in cell.split():
            token = token.split("#")[0].rstrip(",;:")
            if "/" not in token or any(c in token for c in "<{*(") or token.startswith(("results/", ".bertology")):
                continue
            if not token.startswith(PATH_ROOTS) and not (SRC / token.split("/")[0]).exists():
                continue
            checked += 1
            if not ((REPO / token).exists() or (SRC / token).exists()):
                missing.append(token)
    assert checked > 20
    assert missing == [], "paths in CONTRIBUTING.md that do not exist"


def test_the_recipe_runs_against_the_registry(tmp_path, typed_config, monkeypatch):
    """The recipe's kernel and registry entry, as written: with the entry added, the registry makes cls_sep.csv an
    output and a final target of store_stats, a report section, an explorer statistic and a table over seeds; the
    kernel, built and run as store_stats runs it, gives the declared columns and the values known by construction
    (tests.builders.kovaleva.maps: layer 0 head 0 attends to [CLS], layer 1 head 0 to the last [SEP], the uniform
    heads give [SEP] its share #SEP / n)."""
    from bertology.analyses import REGISTRY
    from bertology.onepass import Job, reduce_store
    from bertology.registry import Registry, check_outputs
    from bertology.store import open_store
    from tests.builders import kovaleva as kb

    import sys
    import types

    kernel_block, entry_block = python_blocks()
    module = types.ModuleType("contributing_recipe")  # the dataclass machinery looks its module up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    exec(compile(kernel_block, "CONTRIBUTING.md (kernel)", "exec"), namespace)
    exec(compile(entry_block, "CONTRIBUTING.md (registry entry)", "exec"), namespace)
    entry, kernel_class = namespace["CLS_SEP"], namespace["ClsSepKernel"]
    reg = Registry((*REGISTRY.analyses, entry))
    assert reg.store_outputs()["cls_sep"] == "results/stats/{task}/{variant}/cls_sep.csv"
    assert kernel_class in reg.store_kernels()
    assert "results/stats/rte/finetuned/cls_sep.csv" in reg.store_targets(["rte"], ["pretrained", "finetuned"])
    assert "cls_sep" in [s.key for s in reg.report_sections()]
    ids = [s.id for s in reg.statistics()]
    assert {"cls_sep", "seeds:cls_sep", "seeds:cls_sep:std"} <= set(ids)
    assert reg.seed_inputs(["finetuned", "finetuned-seed43"], ["", "-seed43"])["cls_sep"] == [
        "results/stats/{task}/finetuned/cls_sep.csv", "results/stats/{task}/finetuned-seed43/cls_sep.csv"]

    examples = [kb.pair_example(), kb.single_example(), kb.long_example(5, 4)]
    store = kb.write_store(kb.build_store(examples, kb.maps), tmp_path / "s.zarr", chunk=2)
    job = Job(typed_config(), "rte", "pretrained", str(store), open_store(store), None, {})
    kernel = kernel_class.build(job)
    tables = kernel.outputs(reduce_store(store, [kernel], None, compute_kwargs={"scheduler": "synchronous"})[
        kernel.name], job).tables
    check_outputs(kernel, tables, reg.kernel_tables(kernel_class))
    got = tables["cls_sep"].set_index(["layer", "head"])
    share = np.mean([sum(w == -1 for w in ex.word_ids[1:]) / ex.n for ex in examples])
    assert got.loc[(0, 0), "mean"] == pytest.approx(0, abs=1e-6)
    assert got.loc[(1, 0), "mean"] == pytest.approx(1, rel=1e-3)
    assert got.loc[(1, 1), "mean"] == pytest.approx(share, rel=1e-3) and (got["n"] == len(examples)).all()
