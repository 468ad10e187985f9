"""docs/performance.md is bench/performance.py's render of docs/measurements/*.json, and those records are the
JSON the bench scripts last wrote to bench/out/ (where this checkout has them): the page cannot drift from them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("bench_performance", REPO / "bench" / "performance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_the_render_of_the_records():
    gen = _generator()
    assert (REPO / "docs" / "performance.md").read_text() == gen.render(gen.load()), (
        "docs/performance.md differs from its render: run .venv/bin/python bench/performance.py")


def test_every_renderer_has_its_record():
    gen = _generator()
    assert set(gen.load()) == set(gen.RENDERERS)


@pytest.mark.parametrize("name", ["bench_costs", "bench_decoder_extract", "bench_dryrun", "bench_makerun"])
def test_the_records_are_bench_out(name):
    out = REPO / "bench" / "out" / f"{name}.json"
    if not out.exists():
        pytest.skip(f"bench/out/{name}.json is not in this checkout (git ignores bench/out/)")
    recorded = json.loads((REPO / "docs" / "measurements" / f"{name}.json").read_text())
    assert json.loads(out.read_text()) == recorded, (
        f"bench/out/{name}.json is newer than docs/measurements/: run .venv/bin/python bench/performance.py")


def test_every_figure_states_its_provenance():
    """Each measurement section gives its command, machine, commit and date, and no heading tells history."""
    text = (REPO / "docs" / "performance.md").read_text()
    sections = text.split("\n### ")[1:]
    assert len(sections) >= 10
    for section in sections:
        title = section.splitlines()[0]
        for field in ("- command:", "- machine:", "- commit:", "- date:"):
            assert field in section, f"section {title!r} lacks {field}"
    for line in text.splitlines():
        if line.startswith("#"):
            assert "issue" not in line.lower() and "before" not in line.lower(), line
