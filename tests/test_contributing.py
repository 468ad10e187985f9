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
            full = f"bertology.attention.onepass.{name}"
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
    from bertology.attention.onepass import Job, reduce_store
    from bertology.registry import Registry, check_outputs
    from bertology.store import open_store
    from tests.builders import kovaleva as kb

    import sys
    import types

    kernel_block, entry_block = python_blocks()[:2]
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


def test_the_table_function_recipe_runs_against_the_registry(tmp_path, monkeypatch):
    """The recipe of an analysis of the run's tables (no store read), as written: with the entry added, the registry
    makes first_token.csv the output of its own rule with its input, a final target of a run with the norm
    analyses (none without them), a report section and one of the explorer's task tables; the one step of table
    functions runs it from the command line on a token_scores table whose answer is known by construction and
    writes the declared columns."""
    import sys
    import types

    import pandas as pd

    from bertology.workflow import cli
    from bertology.analyses import REGISTRY
    from bertology.registry import Registry, Run
    from bertology.steps import functions

    block = python_blocks()[2]
    module = types.ModuleType("contributing_table_recipe")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(block, "CONTRIBUTING.md (table function)", "exec"), module.__dict__)
    entry = module.__dict__["FIRST_TOKEN_SHARE"]
    reg = Registry((*REGISTRY.analyses, entry))
    assert reg.outputs("first_token_share") == {"table": "results/stats/{task}/{variant}/first_token.csv"}
    assert reg.inputs("first_token_share") == {"scores": "results/stats/{task}/{variant}/token_scores.parquet"}
    assert "first_token_share" in [s.name for s in reg.table_steps()]
    run = dict(tasks=("rte",), splits=("train", "validation"), stores=("pretrained", "finetuned"),
               inits=("pretrained",), seedtags=("",), finetuned=("finetuned",))
    assert "results/stats/rte/finetuned/first_token.csv" in reg.targets(Run(**run, enabled=frozenset({"norms"})))
    assert not any("first_token" in t for t in reg.targets(Run(**run)))
    assert "first_token" in [s.key for s in reg.report_sections()]
    from bertology.explorer import inputs as explorer_inputs

    monkeypatch.setattr(explorer_inputs, "REGISTRY", reg)
    assert "stats/{task}/{variant}/first_token.csv" in [t for _, t, _ in explorer_inputs.task_templates()]
    assert "results/stats/rte/finetuned/first_token.csv" in explorer_inputs.explorer_inputs(["rte"], norms=True)[
        "required"]

    # two examples, two views: raw puts 1/2 and 1/4 of its mass on the first token, flow 1/3 and 1/3
    rows = [(0, 0, "raw", 1.0), (0, 1, "raw", -1.0), (1, 0, "raw", 1.0), (1, 1, "raw", 3.0),
            (0, 0, "flow", 1.0), (0, 1, "flow", 2.0), (1, 0, "flow", 2.0), (1, 1, "flow", 4.0)]
    scores = pd.DataFrame([(e, p, "w", m, s) for e, p, m, s in rows],
                          columns=["example_idx", "position", "word", "method", "score"])
    source, out = tmp_path / "token_scores.parquet", tmp_path / "first_token.csv"
    scores.to_parquet(source)
    monkeypatch.setattr(functions, "REGISTRY", reg)
    monkeypatch.setitem(cli.STEPS, "first_token_share", reg.step("first_token_share"))
    assert cli.main(["first_token_share", "--input", f"scores={source}", "--output", f"table={out}",
                     "--no-mlflow", "--no-progress"]) == 0
    got = pd.read_csv(out).set_index("method")
    assert list(got.reset_index().columns) == ["method", "mean", "std", "n"]
    assert got.loc["raw", "mean"] == pytest.approx(0.375) and got.loc["flow", "mean"] == pytest.approx(1 / 3)
    assert (got["n"] == 2).all()
