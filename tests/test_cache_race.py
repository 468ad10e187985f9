"""One entry per key in the between-workflow cache (bertology.pipeline.cachestore): two experiments that compute the
same entry at once leave one entry, never one inside the other; an entry holding files its digest does not list is
refused when fetched or read."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.builders.files import tree_bytes

from bertology.pipeline.errors import UserError

REPO = Path(__file__).resolve().parents[1]

#: the job of the tiny cached rule: a directory of two files and its digest, then a wait until every job of the
#: race has made its own (a file per job in $RACE_BARRIER, NEEDED of them), so that all of them missed the cache
#: before any stores: whichever stores second finds the entry there
JOB = """
import os, sys, time
from pathlib import Path
from bertology.pipeline.outputcache import record_digest
out = Path(sys.argv[1])
out.mkdir(parents=True)
(out / "model.bin").write_bytes(bytes(range(256)) * 64)
(out / "config.json").write_text('{"layers": 2}')
record_digest(out)
barrier = Path(os.environ["RACE_BARRIER"])
(barrier / str(os.getpid())).touch()
deadline = time.monotonic() + 120
while len(list(barrier.iterdir())) < int(os.environ["RACE_NEEDED"]):
    if time.monotonic() > deadline:
        sys.exit("the other experiment never reached the barrier")
    time.sleep(0.05)
"""


def _entries(cache: Path) -> list[Path]:
    """Everything in the cache directory (a lock file or temporary directory left behind included)."""
    return sorted(cache.iterdir())


def _workflow(tmp_path: Path) -> Path:
    """A tiny workflow with one cached rule (bertology's rules/cache.smk included, as the Snakefile includes it)."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(textwrap.dedent(f"""\
        include: {str(REPO / "rules" / "cache.smk")!r}

        rule make:
            output: directory("out/model")
            cache: CACHING
            shell: "{sys.executable} {script} {{output}}"
        """))
    return snakefile


def _race(tmp_path: Path, cache: Path, names: list[str]) -> list[subprocess.CompletedProcess]:
    """`snakemake --cache` in a working directory per name at once, all against `cache`."""
    snakefile = _workflow(tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = dict(os.environ, SNAKEMAKE_OUTPUT_CACHE=str(cache), RACE_BARRIER=str(barrier), RACE_NEEDED=str(len(names)),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    procs = []
    for name in names:
        (tmp_path / name).mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(tmp_path / name),
             "--cores", "1", "--cache", "--", "out/model"],
            env=env, cwd=tmp_path / name, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=300), *p.communicate()) for p in procs]


@pytest.mark.slow
def test_two_experiments_storing_one_entry_at_once_leave_one_entry(tmp_path):
    """Two `snakemake --cache` runs in two working directories compute the same entry, both miss it, both store
    it: one entry, no copy inside it, its digest lists exactly its files, and both outputs are its files."""
    import json

    cache = tmp_path / "cache"
    cache.mkdir()
    runs = _race(tmp_path, cache, ["first", "second"])
    for run in runs:
        assert run.returncode == 0, run.stderr[-4000:]
    entries = _entries(cache)
    assert len(entries) == 1, entries
    entry = entries[0]
    digest = json.loads((entry / "bertology-digest.json").read_text())["files"]
    assert sorted(p.name for p in entry.iterdir()) == sorted([*digest, "bertology-digest.json"])  # nothing nested
    assert all(not p.is_dir() for p in entry.iterdir())
    logs = "".join(run.stderr for run in runs)
    assert logs.count("was stored by another experiment meanwhile") == 1, logs[-4000:]
    assert "this job's copy is dropped (identical)" in logs
    first, second = (tmp_path / name / "out" / "model" for name in ("first", "second"))
    assert tree_bytes(first) == tree_bytes(second) == tree_bytes(entry)
    for output in (first, second):  # a symlink to the entry (stored) or a directory of links into it (dropped)
        assert os.path.realpath(output) == str(entry) or all(
            os.path.realpath(p) == str(entry / p.name) for p in output.iterdir() if p.name != ".snakemake_timestamp")


def _store_at(args) -> tuple[str, ...] | None:
    """One experiment's store of `output` as `entry`, released with the others by `barrier`."""
    from bertology.pipeline.cachestore import store_output
    from bertology.pipeline.outputcache import set_entry_permissions

    output, entry, barrier = args
    barrier.wait(timeout=60)
    return store_output(Path(output), Path(entry), set_entry_permissions)


def test_stores_released_together_keep_one_entry(tmp_path):
    """The store itself, from four processes released at once by a barrier: one stores, three find the entry,
    check it and drop their own identical copy; every output then reads the entry's files."""
    from bertology.pipeline.outputcache import record_digest

    cache = tmp_path / "cache"
    cache.mkdir()
    outputs = []
    for k in range(4):
        out = tmp_path / f"exp{k}" / "model"
        out.mkdir(parents=True)
        (out / "weights.bin").write_bytes(b"\x01\x02" * 5000)
        (out / "sub").mkdir()
        (out / "sub" / "vocab.txt").write_text("a\nb\n")
        record_digest(out)
        outputs.append(out)
    entry = cache / "3f2a9c"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Manager().Barrier(len(outputs))
    with ctx.Pool(len(outputs)) as pool:
        how = pool.map(_store_at, [(str(o), str(entry), barrier) for o in outputs])
    assert sorted(how, key=str) == [(), (), (), None]  # one stored, three identical copies dropped
    assert _entries(cache) == [entry]
    assert sorted(str(p.relative_to(entry)) for p in entry.rglob("*")) == [
        "bertology-digest.json", "sub", "sub/vocab.txt", "weights.bin"]
    for out in outputs:
        assert tree_bytes(out) == tree_bytes(entry)


def test_a_store_finding_a_damaged_entry_refuses_and_keeps_its_output(tmp_path):
    from bertology.pipeline.cachestore import store_output
    from bertology.pipeline.outputcache import record_digest, set_entry_permissions

    entry = tmp_path / "cache" / "3f2a9c"
    for d in (entry, tmp_path / "exp" / "model"):
        d.mkdir(parents=True)
        (d / "weights.bin").write_bytes(b"\x01" * 100)
        record_digest(d)
    (entry / "weights.bin").write_bytes(b"\x02" * 100)
    with pytest.raises(UserError, match="weights.bin differs from the digest") as err:
        store_output(tmp_path / "exp" / "model", entry, set_entry_permissions)
    assert f"remove it with `rm -rf {entry}`" in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "exp" / "model" / "weights.bin").read_bytes() == b"\x01" * 100


def test_a_later_copy_that_differs_is_dropped_naming_the_files_that_differ(tmp_path):
    """The first entry is kept even when a later copy differs (a model's training.json holds its timings)."""
    from bertology.pipeline.cachestore import store_output
    from bertology.pipeline.outputcache import record_digest, set_entry_permissions

    entry, output = tmp_path / "cache" / "3f2a9c", tmp_path / "exp" / "model"
    for d, seconds in ((entry, 1.5), (output, 2.5)):
        d.mkdir(parents=True)
        (d / "weights.bin").write_bytes(b"\x01" * 100)
        (d / "training.json").write_text(f'{{"train_seconds": {seconds}}}')
        record_digest(d)
    assert store_output(output, entry, set_entry_permissions) == ("training.json",)
    assert (output / "training.json").read_text() == '{"train_seconds": 1.5}' and (output / "training.json").is_symlink()


@pytest.fixture()
def nested_model(tmp_path, tiny_model_dir, monkeypatch):
    """A cached model as Snakemake's own store left it when two experiments stored it at once: a second copy moved
    inside the entry (<hash>/<hash>/...); the first experiment's link, another's directory of links."""
    import shutil

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    entry = cache / "3f2a9c"
    from bertology.pipeline.outputcache import record_digest

    shutil.copytree(tiny_model_dir, entry)
    record_digest(entry)
    shutil.copytree(entry, entry / entry.name)
    first = tmp_path / "first" / "model"
    first.parent.mkdir()
    os.symlink(entry, first)
    second = tmp_path / "second" / "model"
    second.mkdir(parents=True)
    for item in entry.iterdir():
        os.symlink(item, second / item.name)
    return entry, first, second


def test_a_read_refuses_an_entry_holding_a_copy_of_itself(nested_model):
    from bertology.models.loading import load_tokenizer

    entry, first, second = nested_model
    for output in (first, second):
        with pytest.raises(UserError, match=f"its cache entry {entry} holds {entry.name}/") as err:
            load_tokenizer(str(output))
        assert "which its digest does not list" in str(err.value) and f"`rm -rf {entry}" in str(err.value)
        assert "\n" not in str(err.value)


def test_a_fetch_refuses_an_entry_holding_a_copy_of_itself(nested_model, tmp_path):
    from bertology.pipeline.cachestore import check_entry

    entry, _, _ = nested_model
    output = tmp_path / "third" / "model"
    with pytest.raises(UserError, match=f"the cache entry {entry} for {output} holds {entry.name}/") as err:
        check_entry(entry, output)
    line = str(err.value)
    assert f"`rm -rf {entry}`" in line and f"snakemake --cores 2 --cache -- {output}" in line and "\n" not in line
    import shutil

    shutil.rmtree(entry / entry.name)
    check_entry(entry, output)  # intact: fetched


def test_a_store_digest_accounts_for_its_chunks_only_inside_its_arrays(tmp_path):
    """A store's digest lists its metadata only: the chunk files inside a listed array are its own, anything else
    (a second store inside it) is a stray."""
    from bertology.pipeline.outputcache import stray

    store = tmp_path / "e.zarr"
    (store / "attention" / "c" / "0").mkdir(parents=True)
    (store / "zarr.json").write_text("{}")
    (store / "attention" / "zarr.json").write_text("{}")
    (store / "attention" / "c" / "0" / "0").write_bytes(b"x")
    listed = ["zarr.json", "attention/zarr.json"]
    assert stray(store, listed) is None
    (store / "e.zarr" / "attention").mkdir(parents=True)
    (store / "e.zarr" / "attention" / "zarr.json").write_text("{}")
    assert stray(store, listed) == "e.zarr/attention/zarr.json"
