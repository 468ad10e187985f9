"""One source for every output: the registry declares every rule's outputs, the run's targets and each step's config
sections; the rules, the CLI and the report read them from there."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path, PurePosixPath

import pytest

from bertology.analyses import REGISTRY
from bertology.registry import Run

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "bertology"
RULES = sorted((REPO / "rules").glob("*.smk"))
FILE = re.compile(r"^[\w\-]+\.(csv|parquet|npz|json|png|zarr|md|html|conllu)$")


def run(**over) -> Run:
    values = dict(tasks=("rte", "sst2"), splits=("train", "validation"), stores=("pretrained", "finetuned"),
                  inits=("pretrained", "random"), seedtags=("",), finetuned=("finetuned",),
                  enabled=frozenset({"norms", "gold_trees", "random"}))
    return Run(**{**values, **over})


def test_every_output_file_name_is_spelled_once():
    """The file name of every declared output (and every layout template) appears once as a string in the package:
    in its declaration. Package data (the explorer's assets) is not an output."""
    declared = {PurePosixPath(o.path).name for o in REGISTRY.declared_outputs()}
    assets = {p.name for p in SRC.rglob("assets/*")}
    where = defaultdict(list)
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and FILE.match(node.value):
                where[node.value].append(f"{path.relative_to(SRC)}:{node.lineno}")
    twice = {name: places for name, places in where.items()
             if name in declared and name not in assets and len(places) > 1}
    assert twice == {}
    smk = {name for f in RULES for name in re.findall(r'"([\w\-]+\.(?:csv|parquet|npz|json|png))"', f.read_text())}
    assert smk == set(), "file names spelled in rules/ (take them from the registry: output(rule, name))"


def test_every_rule_takes_its_outputs_from_the_registry():
    """Each rule of rules/*.smk has `output: **outputs("<its name>")`, declared outputs and a declared step; no
    rule file lists targets."""
    steps = REGISTRY.steps()
    for f in RULES:
        text = f.read_text()
        assert "TARGETS" not in text, f.name
        for rule in re.findall(r"^\s*rule (\w+):", text, re.M):
            assert rule in steps, f"{f.name}: rule {rule} has no declared step"
            assert f'**outputs("{rule}")' in text, f"{f.name}: rule {rule} spells its outputs"
            assert REGISTRY.outputs(rule), rule
    for o in REGISTRY.declared_outputs():
        assert not o.rule or o.rule in steps, f"{o.path}: written by {o.rule}, which no step declares"
    snakefile = (REPO / "Snakefile").read_text()
    assert "targets()" in snakefile and "TARGETS" not in snakefile


def test_targets_follow_the_settings():
    """The run's targets: every file is concrete; the norm tables only with norms, the further seeds' stores and the
    tables over seeds only with seeds, the decoder probe only for a decoder."""
    plain = REGISTRY.targets(run(enabled=frozenset()))
    assert all("{" not in t for t in plain)
    assert "results/report.html" in plain and "results/explorer.html" in plain and "results/claims.csv" in plain
    assert "results/attention/rte/finetuned.zarr" in plain and "results/stats/sst2/pretrained/sieve.csv" in plain
    assert not any("norms.csv" in t or "/seeds/" in t or "decoder" in t for t in plain)
    normed = REGISTRY.targets(run())
    assert "results/stats/rte/finetuned/faithfulness.csv" in normed
    assert "results/stats/rte/pretrained/concentration.csv" in normed
    seeded = REGISTRY.targets(run(seedtags=("", "-seed43"), finetuned=("finetuned", "finetuned-seed43"),
                                  enabled=frozenset({"norms", "seeds", "gold_trees"})))
    assert "results/attention/rte/finetuned-seed43.zarr" in seeded
    assert "results/stats/rte/finetuned-seed43/faithfulness.csv" in seeded
    assert "results/stats/rte/seeds/multibootstrap.csv" in seeded and "results/stats/rte/seeds/findings.csv" in seeded
    assert "results/stats/syntax/rte-finetuned-seed43.csv" in seeded
    assert "results/stats/sieve_delta-seed43.csv" in seeded
    decoder = REGISTRY.targets(run(enabled=frozenset({"decoder"})))
    assert "results/attention/rte/probe-pretrained.zarr" in decoder
    assert "results/stats/rte/pretrained/decoder_heads.csv" in decoder


def test_outputs_follow_the_settings():
    """A rule's outputs: a per-task list output and an output only some settings write."""
    seeds = run(seedtags=("", "-seed43"), finetuned=("finetuned", "finetuned-seed43"), enabled=frozenset({"seeds"}))
    assert REGISTRY.outputs("claims", seeds)["findings"] == ["results/stats/rte/seeds/findings.csv",
                                                             "results/stats/sst2/seeds/findings.csv"]
    assert "findings" not in REGISTRY.outputs("claims", run(enabled=frozenset()))
    assert "probe_random_finetuned" in REGISTRY.outputs("decoder_probe_finetuned", run())
    assert "probe_random_finetuned" not in REGISTRY.outputs("decoder_probe_finetuned", run(enabled=frozenset()))
    assert REGISTRY.output("norms_views", "norms", variant=["pretrained", "finetuned"]) == [
        "results/stats/{task}/pretrained/norms.csv", "results/stats/{task}/finetuned/norms.csv"]
    with pytest.raises(KeyError, match="declares no output"):
        REGISTRY.output("norms_views", "no_such_output")
