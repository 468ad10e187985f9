"""Static checks of src/bertology (no code is run): no private name imported across modules, no schema
default repeated as a function default, every imported third-party package declared in pyproject.toml."""

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
           if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertology")
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
