"""Caches and verdicts that lie: a cached model with a flipped byte, a damaged cached store whose re-run must not
re-link the same entry, cache entries anyone can write, a cache that cannot be written (found before training),
verdicts on a fine-tuned model that learned nothing, and a report left beside a ledger that is gone."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.pipeline.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# ---- cache layouts as Snakemake leaves them (snakemake.caching.local.OutputFileCache) -----------------------------

def _store_in_cache(output: Path, cache: Path, name: str) -> Path:
    """What Snakemake's store does: move the output into the cache as `name`, leave a symlink in its place."""
    entry = cache / name
    shutil.move(str(output), entry)
    os.symlink(entry, output)
    return entry


def _fetch_from_cache(entry: Path, output: Path) -> Path:
    """What Snakemake's fetch does for a directory: a new directory with one symlink per entry."""
    output.mkdir(parents=True)
    for f in entry.iterdir():
        os.symlink(f, output / f.name)
    return output


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.fixture()
def cached_model(tmp_path, tiny_model_dir, monkeypatch):
    """A tiny fine-tuned classifier saved as the train step saves it, moved into a cache by one experiment and
    fetched by another: (entry, first experiment's link, second experiment's directory of links)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from bertology.models.training import save_model

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir), local_files_only=True)
    config = BertConfig.from_pretrained(str(tiny_model_dir), num_labels=2)
    torch.manual_seed(0)
    first = tmp_path / "first" / "results" / "models" / "rte" / "pretrained"
    save_model(BertForSequenceClassification(config), tok, first)
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))  # as in every job of a run with --cache
    entry = _store_in_cache(first, cache, "3f2a9c")
    second = _fetch_from_cache(entry, tmp_path / "second" / "results" / "models" / "rte" / "pretrained")
    return entry, first, second


def test_a_flipped_byte_in_a_cached_model_is_named_with_its_eviction(cached_model):
    """One flipped byte in a cached model.safetensors (the classifier's weights) is found, never used silently: every
    load checks the model against the digest written with it; the error names the cache entry and removes it."""
    from bertology.models.loading import load_encoder

    entry, first, second = cached_model
    load_encoder(str(second), classifier=True)  # intact: loads
    weights = entry / "model.safetensors"
    _flip(weights, weights.stat().st_size - 3)  # the last tensor's bytes: the safetensors header still reads
    for output in (first, second):
        with pytest.raises(UserError, match="model.safetensors differs from the digest") as err:
            load_encoder(str(output), classifier=True)
        line = _one_line(err)
        # the first experiment's link is resolved before the load: the entry alone is removed, its link then dangles
        assert f"cache entry {entry}" in line and f"`rm -rf {entry}{'' if output == first else f' {output}'}`" in line


def test_a_model_file_cut_short_or_missing_is_named(cached_model):
    from bertology.models.loading import load_tokenizer

    entry, _, second = cached_model
    tokens = entry / "tokenizer.json"
    tokens.write_bytes(tokens.read_bytes()[:-100])
    with pytest.raises(UserError, match=r"tokenizer.json has \d+ bytes, not the \d+ recorded") as err:
        load_tokenizer(str(second))
    assert f"rm -rf {entry} {second}" in _one_line(err)
    tokens.unlink()
    with pytest.raises(UserError, match=r"tokenizer.json is missing"):
        load_tokenizer(str(second))


def test_a_model_others_can_write_is_refused(cached_model):
    """Snakemake leaves entries world-writable: one others can write is refused, naming the chmod that fixes it."""
    from bertology.models.loading import load_encoder

    entry, _, second = cached_model
    os.chmod(entry / "config.json", 0o666)
    with pytest.raises(UserError, match="can be written by anyone") as err:
        load_encoder(str(second), classifier=True)
    assert f"chmod -R o-w {entry}" in _one_line(err)


# ---- 2. a damaged cached store ------------------------------------------------------------------------------------

@pytest.fixture()
def cached_store(tmp_path, monkeypatch):
    from tests.test_store_layout import synthetic, write

    output = tmp_path / "exp" / "results" / "attention" / "mrpc" / "finetuned.zarr"
    output.parent.mkdir(parents=True)
    write(output, synthetic())
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    return _store_in_cache(output, cache, "9b1e07.zarr"), output


def test_a_damaged_cached_store_names_its_cache_entry(cached_store):
    """A corrupt cached store is not re-linked by 'delete results/attention/.../finetuned.zarr and re-run': the error
    names the cache entry and removes it with the experiment's link."""
    from bertology import store as st

    entry, output = cached_store
    shard = entry / "attention" / "c" / "1" / "0" / "0" / "0" / "0"
    _flip(shard, shard.stat().st_size // 3)
    with pytest.raises(st.StoreError, match="corrupt") as err:
        st.open_store(output)["attention"].isel(example=slice(4, 8)).values
    line = _one_line(err)
    assert f"cache entry {entry}" in line and f"`rm -rf {entry} {output}`" in line


def test_a_changed_store_metadata_is_caught_by_the_digest(cached_store):
    """The chunks carry their own checksums; the metadata does not: a changed attribute is caught by the digest."""
    from bertology import store as st

    entry, output = cached_store
    meta = entry / "zarr.json"
    meta.write_text(meta.read_text().replace('"synthetic"', '"synthetiC"'))
    with pytest.raises(UserError, match="zarr.json differs from the digest") as err:
        st.open_store(output)
    assert f"rm -rf {entry} {output}" in _one_line(err)


# ---- 3. permissions of a shared cache ---------------------------------------------------------------------------

def test_cache_entries_get_a_shared_caches_modes_not_0666(tmp_path, monkeypatch):
    """Snakemake's own set_permissions gives files 0666 and directories 0777; the workflow's entries get 0644 and
    0775 (the group may evict, nobody else may write) and the cache directory's group."""
    from snakemake.caching.local import OutputFileCache

    from bertology.pipeline.outputcache import DIR_MODE, FILE_MODE, share_permissions

    cache = tmp_path / "cache"
    (cache / "e.zarr" / "attention").mkdir(parents=True)
    (cache / "e.zarr" / "attention" / "zarr.json").write_text("{}")
    (cache / "m.json").write_text("{}")
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    original = OutputFileCache.set_permissions
    try:
        share_permissions()
        oc = OutputFileCache()
        oc.set_permissions(cache / "e.zarr")
        oc.set_permissions(cache / "m.json")
    finally:
        OutputFileCache.set_permissions = original
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert mode(cache / "e.zarr") == mode(cache / "e.zarr" / "attention") == DIR_MODE == 0o775
    assert mode(cache / "e.zarr" / "attention" / "zarr.json") == mode(cache / "m.json") == FILE_MODE == 0o644
    assert os.stat(cache / "m.json").st_gid == os.stat(cache).st_gid


# ---- 4. a cache that cannot be written ----------------------------------------------------------------------------

def test_a_cache_that_cannot_be_written_stops_the_training_before_it_runs(tmp_path, monkeypatch, capfd):
    """A cache directory that cannot be written is found before fine-tuning, not after it ran in full (when
    Snakemake would delete the model): the cached job checks it first, in one line, and trains nothing."""
    from bertology.workflow import cli
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json
    from bertology.pipeline.outputcache import CACHING_ENV
    from tests.builders.steps import run_step

    monkeypatch.chdir(tmp_path)
    frame = pd.DataFrame({"idx": range(8), "text_a": ["a good film", "a bad film"] * 4, "label": [0, 1] * 4})
    frame.to_parquet(tmp_path / "train.parquet")
    frame.to_parquet(tmp_path / "validation.parquet")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    config = sections_json(validate_config({"model": "minilm-l6", "data": {"max_length": 16},
                                            "train": {"epochs": 1, "batch_size": 8}}), cli.STEPS["train_model"].config)
    for cache in (tmp_path / "missing", blocker):
        monkeypatch.setenv(CACHING_ENV, str(cache))
        rc = run_step("train_model", config, {"task": "sst2", "init": "pretrained"},
                      inputs={"train": tmp_path / "train.parquet", "validation": tmp_path / "validation.parquet"},
                      outputs={"model": tmp_path / "out"}, options=("--no-progress", "--no-mlflow"))
        err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
        assert rc != 0
        assert len(err) == 1 and f"the output cache {cache} ($SNAKEMAKE_OUTPUT_CACHE) cannot be written" in err[0], err
        assert not (tmp_path / "out").exists() and not (tmp_path / "results" / "checkpoints").exists()


def test_the_workflow_refuses_a_missing_cache_directory_at_start():
    from bertology.pipeline.outputcache import check_cache_dir

    assert "is not a directory: create it (`mkdir -p /nonexistent/c`)" in check_cache_dir("/nonexistent/c")
    assert "SNAKEMAKE_OUTPUT_CACHE set" in check_cache_dir(None)
    assert check_cache_dir(str(REPO)) is None


# ---- 5. verdicts on a model that learned nothing ------------------------------------------------------------------


def _boot():
    from bertology.claims.bootstrap import Boot

    return Boot(resamples=500, confidence=0.95, seed=0)


def _write(results: Path, rel: str, frame: pd.DataFrame) -> None:
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def _forty_classes_results(tmp_path) -> Path:
    """Two tasks: `sst2` fine-tuned well (90% against 50%), `rte` with 40 classes of 2 examples each,
    the fine-tuned model and the untrained head both at chance (labels and predictions drawn uniformly over the 40
    classes); both with a cosine table on which the head claim holds."""
    from tests.test_claims import cosine, right_on, score_record

    from bertology.models.table1 import aggregate_seeds, scores_frame

    results = tmp_path / "results"
    rng = np.random.default_rng(7)
    labels40 = np.repeat(np.arange(40), 2)
    binary = np.arange(200) % 2
    records = [score_record("rte", "finetuned", labels40, rng.integers(0, 40, 80)),
               score_record("rte", "pretrained", labels40, rng.integers(0, 40, 80)),
               score_record("sst2", "finetuned", binary, right_on(binary.copy(), 0, 180)),
               score_record("sst2", "pretrained", binary, right_on(binary.copy(), 0, 100))]
    for r in records:
        path = results / "scores" / r["task"] / f"{r['variant']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))
    _write(results, "tables/table1.csv", aggregate_seeds(scores_frame(records)))
    for task in ("rte", "sst2"):
        _write(results, f"stats/{task}/cosine.csv", cosine(True)["cosine"])
    return results


def test_claims_about_a_model_at_chance_carry_a_caveat(tmp_path):
    """Forty classes of two training examples, Table 1 at chance: head claims that 'hold' carry a caveat.
    The caveat comes from the Table 1 claim's interval over the examples, per row of that task; the verdicts of
    claims about the fine-tuned model are marked in claims.md and in the report's ledger table."""
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import AT_CHANCE, CHANCE_CLAIM, build_ledger, to_markdown, verdict_marked
    from bertology.claims.render import ledger_html, matrix_html

    results = _forty_classes_results(tmp_path)
    ledger = build_ledger(results, REGISTRY.claims(), ["rte", "sst2"], [42], _boot())
    rows = ledger.set_index(["claim", "task"])
    assert rows.loc[(CHANCE_CLAIM, "rte"), "verdict"] != "holds"
    assert rows.loc[(CHANCE_CLAIM, "sst2"), "verdict"] == "holds"
    assert rows.loc[("kovaleva_cosine_last_layers", "rte"), "verdict"] == "holds"  # the head finding, unchanged
    rte, sst2 = ledger[ledger.task == "rte"], ledger[ledger.task == "sst2"]
    assert rte["caveat"].str.startswith(f"{AT_CHANCE}: {CHANCE_CLAIM} ").all()  # every row of the task
    assert (sst2["caveat"] == "").all()
    lo, hi = rows.loc[(CHANCE_CLAIM, "rte"), ["ci_low", "ci_high"]]
    assert lo <= 0 <= hi  # what decided it, not a threshold set by hand
    marked = {r["claim"] for r in rte.to_dict("records") if verdict_marked(r)}
    assert "kovaleva_cosine_last_layers" in marked
    assert not any(verdict_marked(r) for r in rte.to_dict("records") if r["variant"] == "pretrained")
    assert not any(verdict_marked(r) for r in sst2.to_dict("records"))

    # through claims.csv as the claims step writes it and the report reads it
    ledger.to_csv(tmp_path / "claims.csv", index=False)
    back = pd.read_csv(tmp_path / "claims.csv")  # as the report reads it: an empty caveat is NaN
    md = to_markdown(back, 0.95)
    assert "| kovaleva_cosine_last_layers | rte | finetuned | holds *(model at chance)* |" in md
    assert "| kovaleva_cosine_last_layers | sst2 | finetuned | holds |" in md
    page = ledger_html(back)
    cos_rte = next(tr for tr in page.split("<tr>") if 'id="claim-kovaleva_cosine_last_layers-rte"' in tr)
    cos_sst2 = next(tr for tr in page.split("<tr>") if 'id="claim-kovaleva_cosine_last_layers-sst2"' in tr)
    assert "model at chance" in cos_rte and AT_CHANCE in cos_rte
    assert "model at chance" not in cos_sst2 and AT_CHANCE not in cos_sst2

    # the claims matrix at the top of the report says it too: the task's column and its marked cells
    grid = matrix_html(back)
    cell = next(td for td in grid.split("<td") if 'data-claim="kovaleva_cosine_last_layers" data-task="rte"' in td)
    assert 'data-caveat="1"' in cell and "model at chance" in cell and AT_CHANCE in cell
    cell = next(td for td in grid.split("<td") if 'data-claim="kovaleva_cosine_last_layers" data-task="sst2"' in td)
    assert 'data-caveat=""' in cell and "model at chance" not in cell
    header = grid.split("</thead>")[0]
    assert header.count("fine-tuned model at chance") == 1
    assert header.index("fine-tuned model at chance") > header.index("rte")


def test_no_interval_no_caveat():
    """A Table 1 claim without an interval (too few examples, not computed) cannot say the model is at chance."""
    from bertology.claims.ledger import CHANCE_CLAIM, chance_caveats

    ledger = pd.DataFrame({"claim": [CHANCE_CLAIM, "x"], "task": ["rte", "rte"], "variant": ["finetuned"] * 2,
                           "effect": [0.0, 1.0], "ci_low": [np.nan, 0.5], "ci_high": [np.nan, 2.0],
                           "side": [">", ">"], "null": [0.0, 0.0]})
    assert (chance_caveats(ledger) == "").all()


# ---- 6. a report left beside a ledger that is gone ----------------------------------------------------------------

def test_a_page_whose_inputs_are_gone_or_rerun_is_stale(tmp_path, monkeypatch):
    from bertology.workflow.snakefile import stale_pages

    monkeypatch.chdir(tmp_path)
    for f in ("report.html", "explorer.html", "claims.csv", "table1.csv"):
        Path(f).write_text("x")
    pages = {"report.html": ["table1.csv", "claims.csv"], "explorer.html": ["claims.csv"]}
    assert stale_pages(pages, set()) == {}
    assert stale_pages(pages, {"table1.csv"}) == {"report.html": "table1.csv"}
    os.remove("claims.csv")  # a killed claims job: Snakemake removed its output
    assert stale_pages(pages, set()) == {"report.html": "claims.csv", "explorer.html": "claims.csv"}
    os.remove("report.html")
    assert stale_pages(pages, set()) == {"explorer.html": "claims.csv"}


@pytest.mark.slow
def test_after_a_killed_ledger_the_report_and_explorer_are_removed(tmp_path, config_file, snakemake_run):
    """No report.html or explorer.html stays beside a missing claims.csv between a kill and the re-run: a run
    whose claims job fails (Snakemake removes its output as after a kill) leaves no page beside the missing ledger,
    and the next run writes both again."""
    small = dict(tasks=["rte"], data={"demo": {"train": 24, "validation": 16}},
                 train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8},
                 attention={"examples": 8, "batch_size": 8, "chunk_size": 8})
    config_file(tmp_path, **small)
    snakemake_run(tmp_path, "--cores", "2")
    results = tmp_path / "results"
    assert (results / "report.html").exists() and (results / "explorer.html").exists()
    table1 = results / "tables" / "table1.csv"
    kept = table1.read_text()
    table1.write_text("task,variant\n")  # an input of the ledger the claims job cannot read: it fails
    proc = snakemake_run(tmp_path, "--cores", "2", "--forcerun", "claims", check=False)
    assert proc.returncode != 0
    assert not (results / "claims.csv").exists()
    assert not (results / "report.html").exists() and not (results / "explorer.html").exists()
    assert "removed results/report.html" in proc.stderr
    table1.write_text(kept)
    snakemake_run(tmp_path, "--cores", "2")
    assert (results / "claims.csv").exists() and (results / "report.html").exists()


# ---- end to end: two experiments, one cache -----------------------------------------------------------------------

@pytest.mark.slow
def test_cached_entries_are_shared_safely(tmp_path, config_file, snakemake_run, monkeypatch):
    """Under --cache: a missing cache stops the run at start in one line (nothing trained); the entries the run
    stores are 0644/0775 with a digest; a flipped byte in the cached model stops the next experiment's first job
    that loads it, naming the entry; the eviction it prints, run as printed, trains that model alone again."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    small = dict(tasks=["rte"], data={"demo": {"train": 24, "validation": 16}},
                 train={"inits": ["pretrained"], "epochs": 1, "batch_size": 8},
                 attention={"examples": 8, "batch_size": 8, "chunk_size": 8})
    first, second = tmp_path / "first", tmp_path / "second"
    for d in (first, second):
        d.mkdir()
        config_file(d, **small)
    model, score = "results/models/rte/pretrained", "results/scores/rte/finetuned.json"
    proc = snakemake_run(first, "--cores", "1", "--cache", "--", model, check=False)
    assert proc.returncode != 0 and f"SNAKEMAKE_OUTPUT_CACHE={cache} is not a directory" in proc.stderr
    assert not (first / "results" / "logs" / "train_model").exists()
    cache.mkdir()
    snakemake_run(first, "--cores", "1", "--cache", "--", model)
    entries = list(cache.iterdir())
    assert len(entries) == 1 and (entries[0] / "bertology-digest.json").exists()
    for p in [entries[0], *entries[0].rglob("*")]:
        assert not os.stat(p).st_mode & stat.S_IWOTH, p
    _flip(entries[0] / "model.safetensors", (entries[0] / "model.safetensors").stat().st_size - 3)
    proc = snakemake_run(second, "--cores", "1", "--cache", "--", score, check=False)
    assert proc.returncode != 0
    text = proc.stderr + "".join(p.read_text() for p in (second / "results" / "logs").rglob("*.log"))
    (line,) = {line for line in text.splitlines() if f"rm -rf {entries[0]} {model}" in line}
    # the advice, run as printed in the second experiment: the model alone is trained again and cached again
    from tests.test_advice import run_printed

    jobs = run_printed(second, line[line.index("the model "):], dry=False, run_snakemake=snakemake_run)
    assert jobs == {"train_model": 1}, jobs  # not the workflow's every job
    assert list(cache.iterdir()) == entries and (entries[0] / "bertology-digest.json").exists()
    snakemake_run(second, "--cores", "1", "--cache", "--", score)  # the job that refused the damaged model runs now
    assert (second / score).exists()
