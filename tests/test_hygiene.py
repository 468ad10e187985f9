"""Static checks of src/bertology (no code is run): no private name imported across modules, modules that import
one way (no import cycle), no schema default repeated as a function default, every imported third-party package
declared in pyproject.toml."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

SRC = Path(__file__).resolve().parents[1] / "src" / "bertology"


def _trees():
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC.parent), ast.parse(path.read_text())


def test_no_private_name_is_imported_across_modules():
    bad = [f"{path}:{node.lineno}: from {node.module} import {a.name}"
           for path, tree in _trees() for node in ast.walk(tree)
           if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("bertology"))
           for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "private names imported from another module (make them public where they belong):\n" + "\n".join(bad)


def _schema_defaults() -> dict[str, list[tuple[str, object]]]:
    """{leaf name: [(dotted key, default), ...]} of every scalar default of the config schema."""
    leaves: dict[str, list[tuple[str, object]]] = {}

    def walk(node: dict, key: str = "") -> None:
        for name, sub in (node.get("properties") or {}).items():
            dotted = f"{key}.{name}" if key else name
            if "default" in sub and sub["default"] is not None and not isinstance(sub["default"], (dict, list)):
                leaves.setdefault(name, []).append((dotted, sub["default"]))
            walk(sub, dotted)

    walk(yaml.safe_load((SRC / "config.schema.yaml").read_text()))
    return leaves




# A parameter that only shares its name with a config key: job_run's `enabled` switches tracking off for one job,
# it is not analysis.norms.enabled.
NOT_A_CONFIG_KEY = {("bertology/tracking/tracker.py", "job_run", "enabled")}


def test_no_function_default_repeats_a_schema_default():
    """A parameter named like a config key whose default equals the schema's: the default lives in two places."""
    leaves = _schema_defaults()
    bad = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                if not isinstance(default, ast.Constant) or arg.arg not in leaves:
                    continue
                if (str(path), node.name, arg.arg) in NOT_A_CONFIG_KEY:
                    continue
                for key, value in leaves[arg.arg]:
                    if type(value) is type(default.value) and value == default.value:
                        bad.append(f"{path}:{node.lineno}: {node.name}({arg.arg}={default.value!r}) repeats {key}")
    assert not bad, "schema defaults repeated in code (take them from the config):\n" + "\n".join(bad)


def _declared() -> set[str]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"]) + [s for extra in project.get("optional-dependencies", {}).values()
                                             for s in extra]
    return {re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def test_every_imported_third_party_package_is_declared():
    from importlib.metadata import packages_distributions

    imported = set()
    for _, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    imported -= set(sys.stdlib_module_names) | {"bertology"}
    declared = _declared()
    dists = packages_distributions()
    missing = []
    for module in sorted(imported):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} (distribution {', '.join(sorted(names))})")
    assert not missing, "imported by src/bertology but not in pyproject.toml: " + "; ".join(missing)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: a string that names a module, or a function of one ("bertology.steps.data:prepare_data"): an import by name
#: (importlib.import_module, cli.STEPS' targets)
NAMED_IMPORT = re.compile(r"(bertology(?:\.\w+)+)(?::\w+(?:\(\w*\))?)?")


def _import_graph() -> dict[str, set[str]]:
    """{module: the bertology modules it imports}, lazy (function-level) imports included; ``from pkg import name``
    counts as importing pkg.name when that is a module, else pkg; a string constant that is a module's dotted name
    or ``module:function`` (``importlib.import_module("bertology.x")``, ``"bertology.steps.data:prepare_data"``)
    counts as importing that module."""
    modules = {_module_name(path) for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path, tree in _trees():
        name = _module_name(SRC.parent / path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: the package, or its parent for `..`
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                deps |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = NAMED_IMPORT.fullmatch(node.value)
                if named:
                    module = named.group(1)
                    while module and module not in modules:  # a dotted name down to an attribute: its module
                        module = module.rpartition(".")[0]
                    deps.add(module)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph: its strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_modules_import_one_way():
    """No import cycle among bertology's modules (lazy imports included): a module and everything it imports can be
    understood, tested and moved without the modules that import it. In particular each module of the
    bertology.store package imports only the ones its docstring lists above it, never the package itself."""
    graph = _import_graph()
    assert "bertology.store.schema" in graph and "bertology.store.schema" in graph["bertology.store.reader"]
    cycles = _cycles(graph)
    assert not cycles, "modules that import each other (move what both need into a module below them):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)
    store = {m for m in graph if m.startswith("bertology.store.")}
    assert not [m for m in store if "bertology.store" in graph[m]], "a module of bertology.store imports the package"


def test_imports_by_name_are_in_the_graph():
    """The CLI names its steps by "module:function" strings, and registry entries their store kernels by
    "module:Class" (imported when first asked for, so that the Snakefile reads the registry without the science):
    the import graph sees them (a cycle through a string is a cycle), and nothing else names code so."""
    graph = _import_graph()
    assert "bertology.steps.data" in graph["bertology.workflow.cli"] and "bertology.steps.stores" in graph["bertology.workflow.cli"]
    named = {}
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value \
                    and NAMED_IMPORT.fullmatch(node.value):
                named.setdefault(_module_name(SRC.parent / path), []).append(node.value)
    kernels = {m: v for m, v in named.items() if m.startswith("bertology.analyses.")}
    assert set(named) - set(kernels) == {"bertology.workflow.cli"}, named
    assert all(v.endswith("Kernel") for values in kernels.values() for v in values), kernels


#: bertology's folders from the ground up: a package imports only packages before it in this list (lazy,
#: function-level imports and imports by name included), never one after it nor one at its own place. A new folder
#: takes its place here. CONTRIBUTING.md ("Where things live") draws the graph in this order.
LAYERS = (
    "pipeline",     # the ground: errors, files, config, paths, seed tags, the task registry, hub probe, figure style,
                    # output cache, dask and disk-full helpers
    "tracking",     # MLflow
    "cluster",      # Slurm and Dask-cluster checks
    "demo",         # the generated demo tasks
    "data",         # reading and preparing tasks
    "models",       # loading, layers, hooks, encoding, training
    "store",        # the attention store
    "decoders",     # decoder heads and the probe
    "norms",        # value norms, mixing views, faithfulness
    "stats",        # moments, tests, agreement across seeds
    "attention",    # annotation, extraction, the one pass over a store
    "ablation",     # disabling and pruning heads
    "sieve",        # Pande et al.'s roles
    "kovaleva",     # Kovaleva et al.'s analyses
    "clark",        # Clark et al.'s analyses
    "claims",       # the ledger's claims
    "compare",      # comparisons across models
    "registry",     # the registry's types (bertology/registry.py): the science never imports them
    "analyses",     # the registry's entries: each analysis's outputs, steps and report sections; capabilities
    "report",       # the report page
    "explorer",     # the explorer page
    "steps",        # one function per pipeline step
    "workflow",     # the top: command line, launcher, job server, the Snakefile's helpers, provenance
    "__main__",     # python -m bertology
)


def _package(module: str) -> str:
    """The folder (or root module) a module belongs to: bertology.models.loading -> models."""
    return module.split(".")[1] if module.count(".") else module


def _package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """{(importer's package, imported package): ["module -> module", ...]} across packages."""
    edges: dict[tuple[str, str], list[str]] = {}
    for m, deps in graph.items():
        for d in deps:
            if _package(m) != _package(d) and d != "bertology":
                edges.setdefault((_package(m), _package(d)), []).append(f"{m} -> {d}")
    return edges


def test_every_folder_has_its_layer():
    folders = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    assert folders | modules == set(LAYERS), "place the new package in LAYERS (tests/test_hygiene.py)"


def test_no_import_points_up():
    """Every import between bertology's packages points down LAYERS: the folders show which way the code leans."""
    order = {name: i for i, name in enumerate(LAYERS)}
    up = {f"{a} -> {b}": sorted(why)[:3] for (a, b), why in _package_edges(_import_graph()).items()
          if order[b] >= order[a]}
    assert up == {}, "imports that point up (move the module to the layer it belongs to):\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(up.items()))


def test_the_layer_check_sees_an_arrow_up():
    graph = {"bertology.pipeline.io": {"bertology.models.loading"}, "bertology.models.loading": set()}
    assert list(_package_edges(graph)) == [("pipeline", "models")]


def test_the_registry_and_its_entries():
    """The registry's types import only the layout; the entries beside their analyses (bertology.analyses) never a
    step, the pages or the workflow's top."""
    graph = _import_graph()
    assert graph["bertology.registry"] <= {"bertology.pipeline.layout"}, graph["bertology.registry"]
    for m, deps in graph.items():
        if _package(m) == "analyses":
            assert not {_package(d) for d in deps} & {"steps", "workflow", "report", "explorer"}, m


def layers_drawing(graph: dict[str, set[str]]) -> str:
    """The import graph by package, top down: each package of LAYERS and the packages it imports (all below it)."""
    edges = _package_edges(graph)
    order = {name: i for i, name in enumerate(LAYERS)}
    width = max(map(len, LAYERS))
    lines = []
    for name in reversed(LAYERS):
        below = sorted({b for (a, b) in edges if a == name}, key=order.__getitem__, reverse=True)
        lines.append(f"{name:<{width}}  -> {' '.join(below)}" if below else f"{name:<{width}}  (imports no other package)")
    return "\n".join(lines)


LAYERS_BEGIN, LAYERS_END = "<!-- layers: written by tests/test_hygiene.py -->\n```text\n", "\n```\n<!-- /layers -->"


def test_contributing_draws_the_layers():
    """CONTRIBUTING.md draws the import graph by package as it is (BERTOLOGY_WRITE_LAYERS=1 rewrites it)."""
    import os

    path = SRC.parents[1] / "CONTRIBUTING.md"
    text = path.read_text()
    assert LAYERS_BEGIN in text and LAYERS_END in text, "CONTRIBUTING.md lost its drawing of the layers"
    head, rest = text.split(LAYERS_BEGIN, 1)
    drawn, tail = rest.split(LAYERS_END, 1)
    want = layers_drawing(_import_graph())
    if os.environ.get("BERTOLOGY_WRITE_LAYERS") == "1":
        path.write_text(head + LAYERS_BEGIN + want + LAYERS_END + tail)
        drawn = want
    assert drawn == want, "the drawing of the layers in CONTRIBUTING.md is out of date: BERTOLOGY_WRITE_LAYERS=1 " \
                          "pytest tests/test_hygiene.py rewrites it"


#: the modules of more than MAX_LINES lines, each one job (CONTRIBUTING.md, "Where things live", says why)
ONE_JOB_LARGE = {"registry.py"}
MAX_LINES = 500


def test_a_large_module_does_one_job():
    """A module grows past MAX_LINES only when it is one job, named here and in CONTRIBUTING.md; any other is split."""
    large = {str(path.relative_to(SRC)) for path in SRC.rglob("*.py") if len(path.read_text().splitlines()) > MAX_LINES}
    assert large <= ONE_JOB_LARGE, f"modules over {MAX_LINES} lines: split them by job, or say in CONTRIBUTING.md " \
                                   f"why one is a single job and add it to ONE_JOB_LARGE: {sorted(large - ONE_JOB_LARGE)}"
    text = (SRC.parents[1] / "CONTRIBUTING.md").read_text()
    assert all(f"`{name}`" in text for name in ONE_JOB_LARGE)
