"""Data sources: the GLUE-directory reader (every quirk of the download-script layout), the hub source
offline, seeded subsampling, and (optionally) the real GLUE files in ../shared/data/glue."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertology.data import DataError, load_split, normalise, sample_rows
from bertology.data.glue_dir import read_glue_rows, read_glue_split
from bertology.pipeline.tasks import TASKS, get_task


BOM = "\ufeff"


def write_tsv(path: Path, rows: list[list[str]], *, bom: bool = False, trailing_newline: bool = True) -> Path:
    """Write rows as GLUE does: tab-separated, no quoting, "\\n" line ends (optionally a UTF-8 BOM)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join("\t".join(r) for r in rows) + ("\n" if trailing_newline else "")
    path.write_bytes(((BOM if bom else "") + text).encode("utf-8"))
    return path


MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                     "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:-1] + ["label2", "label3", "label4", "label5", "gold_label"]
STSB_HEADER = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
               "score"]


def _mnli_row(i: int, a: str, b: str, gold: str, dev: bool) -> list[str]:
    parse = "( ( x ) )"
    head = [str(i), str(100 + i), f"{100 + i}e", "fiction", parse, parse, parse, parse, a, b, gold]
    return head + ([gold, gold, gold, gold, gold] if dev else [gold])


@pytest.fixture
def glue_dir(tmp_path: Path) -> Path:
    """A GLUE-layout directory with two rows (dev) and three rows (train) per task, every quirk included."""
    root = tmp_path / "glue_data"
    for split, name in (("train", "train.tsv"), ("validation", "dev.tsv")):
        k = 3 if split == "train" else 2
        write_tsv(root / "MRPC" / name, [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]]
                  + [[str(i % 2), str(10 + i), str(20 + i), f'He said "yes" {i}.', f"He agreed {i}."] for i in range(k)],
                  bom=True)
        write_tsv(root / "CoLA" / name, [["gj04", str(i % 2), "" if i % 2 else "*", f"The dog barked {i}."]
                                         for i in range(k)], trailing_newline=False)
        write_tsv(root / "SST-2" / name, [["sentence", "label"]] + [[f"a fine film {i} ", str(i % 2)] for i in range(k)])
        write_tsv(root / "STS-B" / name, [STSB_HEADER] + [
            [str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", f"A man sings {i}.",
             f"A man is singing {i}.", f"{4.75 - i:.3f}"] for i in range(k)])
        write_tsv(root / "QQP" / name, [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]] + [
            [str(i), str(2 * i), str(2 * i + 1), f"How do I cook {i}?", f"How can I cook {i}?", str(i % 2)]
            for i in range(k)])
        write_tsv(root / "QNLI" / name, [["index", "question", "sentence", "label"]] + [
            [str(i), f"Who wrote {i}?", f"Anna wrote {i}.", ["entailment", "not_entailment"][i % 2]] for i in range(k)])
        write_tsv(root / "RTE" / name, [["index", "sentence1", "sentence2", "label"]] + [
            [str(i), f"Tom bought a red car {i}.", f"Tom bought a car {i}.", ["entailment", "not_entailment"][i % 2]]
            for i in range(k)])
    golds = ["entailment", "neutral", "contradiction"]
    write_tsv(root / "MNLI" / "train.tsv", [MNLI_TRAIN_HEADER] + [
        _mnli_row(i, f"P {i}.", f"H {i}.", golds[i % 3], dev=False) for i in range(3)])
    write_tsv(root / "MNLI" / "dev_matched.tsv", [MNLI_DEV_HEADER] + [
        _mnli_row(i, f"P {i}.", f"H {i}.", golds[(i + 2) % 3], dev=True) for i in range(2)])
    return root


EXPECTED_VALIDATION = {  # (text_a of row 1, text_b of row 1, labels) of the fixture's dev files
    "mrpc": ('He said "yes" 1.', "He agreed 1.", [0, 1]),
    "cola": ("The dog barked 1.", None, [0, 1]),
    "sst2": ("a fine film 1 ", None, [0, 1]),
    "stsb": ("A man sings 1.", "A man is singing 1.", [4.75, 3.75]),
    "qqp": ("How do I cook 1?", "How can I cook 1?", [0, 1]),
    "qnli": ("Who wrote 1?", "Anna wrote 1.", [0, 1]),
    "rte": ("Tom bought a red car 1.", "Tom bought a car 1.", [0, 1]),
    "mnli": ("P 1.", "H 1.", [2, 0]),  # gold_label strings contradiction, entailment -> hub ids
}


@pytest.mark.parametrize("task", list(TASKS))
def test_reads_every_task_layout(glue_dir, task):
    spec = get_task(task)
    dev = normalise(read_glue_split(glue_dir, spec, "validation"), spec)
    text_a, text_b, labels = EXPECTED_VALIDATION[task]
    assert dev["idx"].tolist() == [0, 1]
    assert dev.loc[1, "text_a"] == text_a
    assert (dev.loc[1, "text_b"] if spec.is_pair else None) == text_b
    if not spec.is_pair:
        assert dev["text_b"].isna().all()
    np.testing.assert_allclose(dev["label"].to_numpy(dtype=float), labels)
    assert dev["label"].dtype == (np.float32 if spec.is_regression else np.int64)
    train = read_glue_split(glue_dir, spec, "train")
    assert len(train) == 3


def test_bom_is_stripped_and_header_read(glue_dir):
    df = read_glue_split(glue_dir, get_task("mrpc"), "validation")
    assert len(df) == 2 and not df["text_a"].str.contains(BOM).any()


def test_quote_and_unicode_line_separators_stay_inside_a_field(tmp_path):
    root = tmp_path / "glue"
    texts = ['She said "no way', "first part\u2028second part", "tab-less\x0bvertical tab", "next\u2029para\x85nel"]
    write_tsv(root / "RTE" / "dev.tsv", [["index", "sentence1", "sentence2", "label"]]
              + [[str(i), t, f'"{i}', "entailment"] for i, t in enumerate(texts)])
    df = read_glue_split(root, get_task("rte"), "validation")
    assert df["text_a"].tolist() == texts
    assert df["text_b"].tolist() == [f'"{i}' for i in range(len(texts))]


def test_crlf_line_ends_are_accepted(tmp_path):
    root = tmp_path / "glue"
    path = root / "SST-2" / "dev.tsv"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"sentence\tlabel\r\ngood\t1\r\nbad\t0\r\n")
    df = read_glue_split(root, get_task("sst2"), "validation")
    assert df["text_a"].tolist() == ["good", "bad"] and df["label"].tolist() == [1, 0]


def _qqp_with_a_broken_row(root: Path) -> Path:
    rows = [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]]
    rows += [[str(i), "1", "2", f"Why {i}?", f"Why not {i}?", str(i % 2)] for i in range(1500)]
    rows.insert(700, ["699b", "1", "2", "a question cut short by a stray newline"])  # line 701 of the file
    return write_tsv(root / "QQP" / "dev.tsv", rows)


def test_a_malformed_row_is_an_error_naming_file_and_line(tmp_path):
    """By default nothing is dropped, however large the file."""
    path = _qqp_with_a_broken_row(tmp_path / "glue")
    with pytest.raises(DataError) as err:
        read_glue_split(tmp_path / "glue", get_task("qqp"), "validation")
    message = str(err.value)
    assert message.startswith(f"{path}:701: 1 of 1501 rows (line(s) 701) have 4 tab-separated field(s) where the "
                              f"header has 6; fix those lines, or set data.bad_rows: skip") and "QQP" in message


def test_bad_rows_skip_drops_and_records_them(tmp_path, caplog):
    from bertology.data.glue_dir import SkippedRow, read_glue_rows

    path = _qqp_with_a_broken_row(tmp_path / "glue")
    with caplog.at_level(logging.WARNING):
        read = read_glue_rows(tmp_path / "glue", get_task("qqp"), "validation", bad_rows="skip")
    assert len(read.frame) == 1500 and read.frame["idx"].tolist() == list(range(1500))
    assert read.skipped == (SkippedRow(str(path), 701, 4, 6),)
    assert f"{path}: skipped 1 of 1501 rows (line(s) 701)" in caplog.text


def test_too_many_malformed_rows_is_an_error_even_with_skip(tmp_path):
    root = tmp_path / "glue"
    rows = [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]]
    rows += [[str(i), "1", "2", f"Why {i}?"] if i % 3 else [str(i), "1", "2", "q?", "q?", "0"] for i in range(30)]
    path = write_tsv(root / "QQP" / "dev.tsv", rows)
    for bad_rows in ("error", "skip"):
        with pytest.raises(DataError, match=re.escape(f"{path}: 20 of 30 rows (line(s) 3, 4, 6,") + r".*"
                                            + re.escape("and 0 more") * 0 + r".*is this a GLUE QQP file\?"):
            read_glue_rows(root, get_task("qqp"), "validation", bad_rows=bad_rows)


def test_many_malformed_lines_are_all_counted_and_the_first_named(tmp_path):
    root = tmp_path / "glue"
    rows = [["sentence", "label"]] + [["ok", "1"]] * 100 + [["a\tb", "1"]] * 25
    write_tsv(root / "SST-2" / "dev.tsv", rows)
    with pytest.raises(DataError, match=r"dev.tsv:102: 25 of 125 rows \(line\(s\) 102, 103, .*, 121 and 5 more\)"):
        read_glue_split(root, get_task("sst2"), "validation")


def test_a_lone_surrogate_names_file_and_line(tmp_path):
    root = tmp_path / "glue"
    path = write_tsv(root / "RTE" / "dev.tsv", [["index", "sentence1", "sentence2", "label"],
                                                 ["0", "A cafe.", "B.", "entailment"]])
    path.write_bytes(path.read_bytes() + "1\tbroken \ud83d text\tB.\tentailment\n".encode("utf-8", "surrogatepass"))
    with pytest.raises(DataError) as err:
        read_glue_split(root, get_task("rte"), "validation")
    assert str(err.value).startswith(f"{path}:3:10: a lone surrogate (U+D83D, bytes ed a0 bd) is not Unicode text")


def test_missing_directory_names_it_and_the_alternatives(tmp_path):
    with pytest.raises(DataError, match=r"nowhere.*does not exist.*demo.*hub"):
        read_glue_split(tmp_path / "nowhere", get_task("mrpc"), "validation")


def test_missing_file_names_the_expected_path(glue_dir):
    (glue_dir / "RTE" / "dev.tsv").unlink()
    with pytest.raises(DataError) as err:
        read_glue_split(glue_dir, get_task("rte"), "validation")
    assert str(glue_dir / "RTE" / "dev.tsv") in str(err.value)


def test_mnli_validation_is_dev_matched(glue_dir):
    (glue_dir / "MNLI" / "dev_matched.tsv").rename(glue_dir / "MNLI" / "dev_mismatched.tsv")
    with pytest.raises(DataError, match="dev_matched.tsv"):
        read_glue_split(glue_dir, get_task("mnli"), "validation")


def test_missing_column_names_file_and_column(tmp_path):
    root = tmp_path / "glue"
    path = write_tsv(root / "STS-B" / "dev.tsv", [STSB_HEADER[:-1]] + [["0"] * 9])
    with pytest.raises(DataError) as err:
        read_glue_split(root, get_task("stsb"), "validation")
    assert str(path) in str(err.value) and "'score'" in str(err.value)


def test_label_outside_the_label_set_names_file_and_line(tmp_path):
    root = tmp_path / "glue"
    path = write_tsv(root / "QNLI" / "dev.tsv", [["index", "question", "sentence", "label"],
                                                  ["0", "Who?", "Anna.", "entailment"],
                                                  ["1", "Who?", "Tom.", "maybe"]])
    with pytest.raises(DataError, match=re.escape(f"{path}:3: label 'maybe'") + ".*entailment, not_entailment"):
        read_glue_split(root, get_task("qnli"), "validation")
    write_tsv(root / "SST-2" / "dev.tsv", [["sentence", "label"], ["ok", "1"], ["bad", "2"]])
    with pytest.raises(DataError, match=r"SST-2/dev.tsv:3: label '2'"):
        read_glue_split(root, get_task("sst2"), "validation")


def test_load_split_from_a_directory_with_sampling(glue_dir, typed_config):
    cfg = typed_config({"data": {"source": str(glue_dir), "seed": 1, "max_train_examples": 2}}).data
    train = load_split("stsb", "train", cfg)
    assert len(train) == 2 and train["idx"].is_monotonic_increasing
    assert len(load_split("stsb", "validation", cfg)) == 2


def test_header_only_file_is_an_error_naming_it(tmp_path, typed_config):
    root = tmp_path / "glue"
    path = write_tsv(root / "RTE" / "dev.tsv", [["index", "sentence1", "sentence2", "label"]])
    with pytest.raises(DataError, match=re.escape(f"{path} holds no examples (only its header)")):
        load_split("rte", "validation", typed_config({"data": {"source": str(root)}}).data)


def test_undecodable_byte_names_file_line_and_encoding(tmp_path):
    root = tmp_path / "glue"
    path = write_tsv(root / "RTE" / "dev.tsv", [["index", "sentence1", "sentence2", "label"],
                                                 ["0", "A cafe.", "B.", "entailment"]])
    path.write_bytes(path.read_bytes() + "1\tThe caf\u00e9 opened.\tIt opened.\tentailment\n".encode("latin-1"))
    with pytest.raises(DataError) as err:
        read_glue_split(root, get_task("rte"), "validation")
    message = str(err.value)
    assert message.startswith(f"{path}:3:10: byte 0xe9 is not UTF-8 (it would be 'é' in Latin-1/cp1252)")
    assert f"iconv -f cp1252 -t utf-8 {path}" in message


def test_more_eval_examples_than_the_split_holds_fails_in_the_data_rule(glue_dir, typed_config):
    cfg = typed_config({"data": {"source": str(glue_dir), "max_eval_examples": 5}}).data
    with pytest.raises(DataError, match=r"rte/validation: data.max_eval_examples asks for 5 examples but the split "
                                        r"has only 2"):
        load_split("rte", "validation", cfg)
    cfg = typed_config({"data": {"source": str(glue_dir), "max_eval_examples": 5, "short_split": "all"}}).data
    assert len(load_split("rte", "validation", cfg)) == 2


@pytest.mark.slow
def test_edited_source_file_reruns_the_data_rule_and_what_follows(tmp_path, config_file, snakemake_run):
    """A GLUE file edited after a finished run: the dry run lists prepare_data and the sample drawn from it,
    and the run rebuilds both from the edited file."""
    import pandas as pd

    root = tmp_path / "glue"
    rows = [[str(i), f"Tom bought a red car {i}.", f"Tom bought a car {i}.", "entailment"] for i in range(12)]
    header = ["index", "sentence1", "sentence2", "label"]
    dev = write_tsv(root / "RTE" / "dev.tsv", [header] + rows)
    work = tmp_path / "work"
    work.mkdir()
    config_file(work, tasks=["rte"], data={"source": str(root)}, attention={"examples": 8})
    target = "results/data/rte/sample.parquet"
    snakemake_run(work, "--cores", "1", target)
    assert "Nothing to be done" in snakemake_run(work, "-n", target).stdout
    flipped = [r[:3] + ["not_entailment"] for r in rows]
    write_tsv(dev, [header] + flipped)
    stamp = time.time() + 5  # a clearly newer file, whatever the clock resolution
    os.utime(dev, (stamp, stamp))
    dry = snakemake_run(work, "-n", target).stdout
    assert re.search(r"prepare_data\s+1", dry) and re.search(r"attention_sample\s+1", dry), dry
    snakemake_run(work, "--cores", "1", target)
    assert set(pd.read_parquet(work / "results/data/rte/validation.parquet")["label"]) == {1}
    assert set(pd.read_parquet(work / target)["label"]) == {1}


# ---- seeded subsampling ---------------------------------------------------------------------------------


def test_sample_rows_is_seeded_sorted_and_seed_dependent(caplog):
    df = pd.DataFrame({"idx": np.arange(100), "text_a": [f"t{i}" for i in range(100)], "text_b": None,
                       "label": np.arange(100) % 2})
    a, b, c = sample_rows(df, 10, seed=1, short_split="error"), sample_rows(df, 10, seed=1, short_split="error"), sample_rows(df, 10, seed=2, short_split="error")
    pd.testing.assert_frame_equal(a, b)
    assert a["idx"].is_monotonic_increasing and len(a) == 10 and a.index.tolist() == list(range(10))
    assert a["idx"].tolist() != c["idx"].tolist()
    assert set(a["idx"]) <= set(df["idx"])
    pd.testing.assert_frame_equal(sample_rows(df, None, 1, short_split="error"), df)
    with pytest.raises(DataError, match=re.escape(
            "rte/validation: attention.examples asks for 1000 examples but the split has only 100; set "
            "attention.examples to at most 100, or to null for all of them, or set data.short_split: all")):
        sample_rows(df, 1000, 1, what="rte/validation", key="attention.examples", short_split="error")
    with caplog.at_level(logging.WARNING):
        pd.testing.assert_frame_equal(sample_rows(df, 1000, 1, what="rte/validation", key="attention.examples",
                                                  short_split="all"), df)
    assert "rte/validation: attention.examples asks for 1000 examples but the split has only 100: all 100" in caplog.text
    with pytest.raises(DataError, match="^rte/train: the split is empty"):
        sample_rows(df.iloc[:0], 5, 1, what="rte/train", short_split="error")


# ---- hub source, offline --------------------------------------------------------------------------------


def test_hub_source_fails_fast_offline_with_alternatives(monkeypatch, typed_config):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(DataError) as err:
        load_split("rte", "validation", typed_config({"data": {"source": "hub"}}).data)
    assert time.monotonic() - start < 30
    message = str(err.value)
    assert "nyu-mll/glue" in message and "demo" in message and "directory" in message


# ---- the real GLUE files (optional) ---------------------------------------------------------------------

REAL_GLUE = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"  # skipped when absent
REAL_COUNTS = {"mrpc": (3668, 408), "rte": (2490, 277), "stsb": (5749, 1500), "sst2": (67349, 872),
               "cola": (8551, 1043)}


@pytest.mark.realdata
@pytest.mark.skipif(not REAL_GLUE.is_dir(), reason="real GLUE files not present in ../shared/data/glue")
@pytest.mark.parametrize("task", list(REAL_COUNTS))
def test_real_glue_row_counts(task):
    spec = get_task(task)
    n_train, n_dev = REAL_COUNTS[task]
    dev = normalise(read_glue_split(REAL_GLUE, spec, "validation"), spec)
    assert len(dev) == n_dev
    assert dev["text_a"].str.len().min() > 0
    if spec.is_regression:
        assert dev["label"].between(0, 5).all()
    else:
        assert set(dev["label"]) == set(range(spec.num_labels))
    assert len(read_glue_split(REAL_GLUE, spec, "train")) == n_train


def test_hub_revision_is_a_param_of_the_data_rule(tmp_path, monkeypatch):
    """Offline, the hub source is identified by the revision in the local Hugging Face cache (a new revision
    changes the param, so the data rule re-runs); the demo and GLUE directories need none."""
    import huggingface_hub.constants

    from bertology.data import source_version

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert source_version("hub") == "nyu-mll/glue@unknown"
    ref = tmp_path / "datasets--nyu-mll--glue" / "refs" / "main"
    ref.parent.mkdir(parents=True)
    ref.write_text("bcdcba79d07bc864c1c254ccfcedcce55bcc9a8c\n")
    assert source_version("hub") == "nyu-mll/glue@bcdcba79d07bc864c1c254ccfcedcce55bcc9a8c"
    assert source_version("demo") == "" and source_version(str(tmp_path)) == ""
