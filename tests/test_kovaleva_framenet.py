"""FrameNet parsing and the paper's filters on tiny FrameNet-like XML built here; the real sample if present."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.data import DataError
from bertology.kovaleva import framenet as fn
from bertology.steps.kovaleva import read_release

NS = "http://framenet.icsi.berkeley.edu"


def _span(text: str, words: str) -> tuple[int, int]:
    start = text.index(words)
    return start, start + len(words) - 1


def _aset(text: str, frame: str, target: str, fes: dict[str, str], null: str | None = None) -> str:
    ts, te = _span(text, target)
    labels = "".join(f'<label start="{s}" end="{e}" name="{n}"/>' for n, (s, e) in
                     ((n, _span(text, w)) for n, w in fes.items()))
    if null:
        labels += f'<label itype="CNI" name="{null}"/>'
    return (f'<annotationSet frameName="{frame}" status="MANUAL"><layer name="Target">'
            f'<label start="{ts}" end="{te}" name="Target"/></layer><layer name="FE">{labels}</layer></annotationSet>')


def _sentence(sid: int, text: str, *sets: str) -> str:
    return f'<sentence ID="{sid}"><text>{text}</text>{"".join(sets)}</sentence>'


@pytest.fixture()
def release(tmp_path):
    (tmp_path / "frame").mkdir()
    (tmp_path / "fulltext").mkdir()
    (tmp_path / "frame" / "Emotion_directed.xml").write_text(
        f'<frame xmlns="{NS}" name="Emotion_directed"><FE name="Experiencer" coreType="Core"/>'
        f'<FE name="Stimulus" coreType="Core"/><FE name="Degree" coreType="Peripheral"/></frame>')
    (tmp_path / "frame" / "Commerce_buy.xml").write_text(
        f'<frame xmlns="{NS}" name="Commerce_buy"><FE name="Buyer" coreType="Core"/><FE name="Goods" coreType="Core"/>'
        f'<FE name="Time" coreType="Peripheral"/></frame>')
    s1 = "He was becoming very agitated ."       # Experiencer 'He' 4 tokens from 'agitated': kept
    s2 = "I bought a small old red wooden chair ."  # Goods spans 6 tokens: the set is dropped
    s3 = "She bought fresh green apples ."       # Buyer 'She' is adjacent (distance 1): excluded (link mode: kept)
    s4 = "Yesterday in the morning the tall man with a hat bought bread at the shop ."  # > 12 tokens
    s5 = "We bought it quite cheaply yesterday ."   # only a peripheral FE far away: no core link
    s6 = "Bread was what Mary finally bought ."     # Goods 5 and Buyer 2 tokens from 'bought': two far links
    docs = "".join([
        _sentence(1, s1, _aset(s1, "Emotion_directed", "agitated", {"Experiencer": "He", "Degree": "very"}, "Stimulus")),
        _sentence(2, s2, _aset(s2, "Commerce_buy", "bought", {"Buyer": "I", "Goods": "a small old red wooden chair"})),
        _sentence(3, s3, _aset(s3, "Commerce_buy", "bought", {"Buyer": "She", "Goods": "apples"})),
        _sentence(4, s4, _aset(s4, "Commerce_buy", "bought", {"Buyer": "the tall man", "Goods": "bread"})),
        _sentence(5, s5, _aset(s5, "Commerce_buy", "bought", {"Time": "yesterday"})),
        _sentence(6, s6, _aset(s6, "Commerce_buy", "bought", {"Buyer": "Mary", "Goods": "Bread"})),
    ])
    (tmp_path / "fulltext" / "doc.xml").write_text(f'<fullTextAnnotation xmlns="{NS}">{docs}</fullTextAnnotation>')
    return tmp_path


def test_filters_and_counts(release):
    items = read_release(release)
    assert len(items) == 6
    first = items[0]
    assert first.tokens[:2] == ["He", "was"] and first.target == [4] and first.fes == {"Experiencer": [0]}
    kept, counts = fn.filter_items(items)                   # the paper's reading: whole sentences
    assert list(counts) == list(fn.COUNT_KEYS)
    assert counts["sentences"] == 6 and counts["annotation_sets"] == 6
    assert counts["short_sentences_sentences"] == 5         # s4 has more than 12 tokens
    assert counts["with_core_fe_sentences"] == 4            # s5 has only a peripheral FE
    assert counts["short_core_fes_sentences"] == 3          # s2's Goods has 6 tokens
    assert counts["core_links"] == 5 and counts["close_links"] == 1   # s1: 1, s3: 2 ('She' adjacent), s6: 2
    assert counts["links_2_apart_sentences"] == counts["surviving_sentences"] == 2   # s1, s6; s3 is excluded
    assert counts["surviving_sets"] == 2 and counts["links"] == 3
    links = fn.links_table(kept)
    assert sorted(zip(links["sentence_id"], links["fe"])) == [("1", "Experiencer"), ("6", "Buyer"), ("6", "Goods")]
    assert (links["distance"] >= 2).all()


def test_link_filter_keeps_the_sentence_without_its_close_links(release):
    kept, counts = fn.filter_items(read_release(release), mode="link")
    assert counts["short_core_fes_sentences"] == 3 and counts["core_links"] == 5 and counts["close_links"] == 1
    assert counts["surviving_sentences"] == 3 and counts["links"] == 4   # s3 stays through 'apples' (3 from 'bought')
    links = fn.links_table(kept)
    assert sorted(zip(links["sentence_id"], links["fe"])) == [("1", "Experiencer"), ("3", "Goods"), ("6", "Buyer"),
                                                              ("6", "Goods")]
    with pytest.raises(ValueError, match="sentence.*link"):
        fn.filter_items(kept, mode="links")


def test_direction_on_a_constructed_map():
    """A[target, FE] (the paper's: the target's pieces are the queries) and its transpose, which disagree here."""
    # [CLS] He was becoming very agi ##tated [SEP]: FrameNet tokens 0..4, 'agitated' (4) has two pieces
    word_ids = np.array([-1, 0, 1, 2, 3, 4, 4, -1])
    n = len(word_ids)
    a = np.full((1, 2, n, n), 0.01)
    a[0, 0, 5, 1], a[0, 0, 6, 1] = 0.7, 0.9      # head 0: 'agitated' attends to 'He'
    a[0, 0, 1, 5] = 0.2                           # ... 'He' attends little to 'agitated'
    a[0, 1, 1, 6] = 0.8                           # head 1: the other way round
    got = fn.item_scores(a, word_ids, fe_tokens=[[0]], target_tokens=[[4]])
    assert got["target_fe"].tolist() == [[0.9, 0.01]]
    assert got["fe_target"].tolist() == [[0.2, 0.8]]
    assert fn.DIRECTIONS == {"target_fe": "framenet", "fe_target": "framenet_fe_target"}
    assert np.isnan(fn.item_scores(a, word_ids, [[0]], [[7]])["target_fe"]).all()   # truncated target


def test_link_scores_read_the_model_in_both_directions(release, tiny_model_dir):
    """link_scores_both through the real tokenizer and a model whose attention is known by construction."""
    from types import SimpleNamespace

    import torch

    from bertology.models.loading import load_tokenizer

    links = fn.links_table(fn.filter_items(read_release(release))[0])
    tok = load_tokenizer(str(tiny_model_dir))
    items = sorted(links["item"].unique())
    enc = tok([links.loc[links["item"] == k, "text"].iloc[0].split() for k in items], is_split_into_words=True,
              padding=True, return_tensors="pt")

    class Known:
        """0.05 everywhere, except: target pieces -> FE pieces 0.6 (head 0), FE -> target pieces 0.3 (head 1)."""

        def __call__(self, input_ids, attention_mask, **_):
            b, t = input_ids.shape
            att = torch.full((b, 2, t, t), 0.05)
            for i in range(b):
                wid = np.array([-1 if w is None else w for w in enc.word_ids(i)])
                g = links[links["item"] == items[i]]
                for fe, tgt in zip(g["fe_tokens"], g["target_tokens"]):
                    f, q = np.flatnonzero(np.isin(wid, fe)), np.flatnonzero(np.isin(wid, tgt))
                    att[i, 0][np.ix_(q, f)] = 0.6
                    att[i, 1][np.ix_(f, q)] = 0.3
            return SimpleNamespace(attentions=(att,))

    both = fn.link_scores_both(links, tok, Known(), batch_size=len(items), max_length=128)
    assert both["target_fe"].shape == (len(items), 1, 2)
    assert np.allclose(both["target_fe"], [[0.6, 0.05]]) and np.allclose(both["fe_target"], [[0.05, 0.3]])
    assert np.array_equal(fn.link_scores(links, tok, Known(), batch_size=len(items), max_length=128), both["target_fe"])
    assert np.array_equal(fn.link_scores(links, tok, Known(), batch_size=len(items), max_length=128, direction="fe_target"),
                          both["fe_target"])


def test_missing_release_says_how_to_fix(tmp_path):
    with pytest.raises(DataError, match="analysis.relations.framenet"):
        read_release(tmp_path)


def test_parse_is_on_parsed_xml_and_unknown_frames_are_non_core(release, caplog):
    import xml.etree.ElementTree as ET

    root = ET.parse(release / "fulltext" / "doc.xml").getroot()
    core = {"Emotion_directed": fn.frame_core_types(ET.parse(release / "frame" / "Emotion_directed.xml").getroot())}
    assert core["Emotion_directed"] == {"Experiencer": "Core", "Stimulus": "Core", "Degree": "Peripheral"}
    with caplog.at_level("WARNING"):
        items = fn.release_items([("doc", root)], core)
    assert [i.doc for i in items] == ["doc"] * 6 and items[0].fes == {"Experiencer": [0]}
    assert all(i.fes == {} for i in items if i.frame == "Commerce_buy")  # no frame file: no core FE
    assert sum("Commerce_buy" in r.getMessage() for r in caplog.records) == 1  # one warning per frame


def test_link_scores_on_a_tiny_model(release, tiny_model_dir):
    import torch

    torch.set_num_threads(1)
    kept, _ = fn.filter_items(read_release(release))
    links = fn.links_table(kept)
    from bertology.models.loading import load_encoder, load_tokenizer

    tok, model = load_tokenizer(str(tiny_model_dir)), load_encoder(str(tiny_model_dir))
    scores = fn.link_scores(links, tok, model, batch_size=1, max_length=128)
    assert scores.shape == (2, 2, 4) and np.all((scores > 0) & (scores <= 1))
    # independent check of item 0: 'agitated' (the target, queries) -> 'He' (the FE) over every wordpiece pair
    words = links["text"].iloc[0].split()
    enc = tok(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        att = torch.stack(model(**enc, output_attentions=True).attentions, 1)[0].numpy()
    wid = np.array([-1 if w is None else w for w in enc.word_ids(0)])
    fe, tgt = np.flatnonzero(wid == 0), np.flatnonzero(wid == 4)
    assert np.allclose(scores[0], att[:, :, tgt][:, :, :, fe].reshape(2, 4, -1).max(-1), atol=1e-6)
    transposed = fn.link_scores(links, tok, model, batch_size=1, max_length=128, direction="fe_target")
    assert np.allclose(transposed[0], att[:, :, fe][:, :, :, tgt].reshape(2, 4, -1).max(-1), atol=1e-6)


@pytest.mark.realdata
def test_real_framenet_sample_survivors(shared_data):
    sample = shared_data / "framenet-sample"
    if not sample.is_dir():
        pytest.skip("../shared/data/framenet-sample is absent")
    items = read_release(sample)
    kept, counts = fn.filter_items(items)
    assert counts["sentences"] > counts["surviving_sentences"] > 0
    assert all(len(i.tokens) <= 12 for i in kept)
    kept_link, counts_link = fn.filter_items(items, mode="link")
    assert counts_link["surviving_sets"] >= counts["surviving_sets"] and counts_link["links"] >= counts["links"]
    assert {k: counts[k] for k in fn.COUNT_KEYS[:8]} == {k: counts_link[k] for k in fn.COUNT_KEYS[:8]}


def _config(step: str, **relations) -> str:
    from bertology.workflow.cli import STEPS
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json

    return sections_json(validate_config({"analysis": {"relations": relations}}), STEPS[step].config)


def test_framenet_links_command(release, tmp_path, capsys, monkeypatch):
    import json

    import mlflow
    import pandas as pd

    from tests.builders.steps import run_step

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    out = tmp_path / "out"
    files = dict(inputs={"release": release}, outputs={"links": out / "links.parquet", "counts": out / "counts.json"})
    assert run_step("framenet_links", _config("framenet_links"), **files, options=()) == 0   # the default: sentence
    counts = json.loads((out / "counts.json").read_text())
    assert counts["surviving_sentences"] == 2 and counts["links"] == 3 and counts["close_links"] == 1
    assert len(pd.read_parquet(out / "links.parquet")) == 3
    printed = capsys.readouterr()
    assert printed.out == "2 sentences (2 frame annotations, 3 links) of 6 survive the filters\n"
    assert ("FrameNet filters (sentence): " + ", ".join(f"{k} {v}" for k, v in counts.items())) in printed.err
    client = mlflow.MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("bertology").experiment_id])
    assert run.data.params["analysis.relations.framenet_filter"] == "sentence"
    assert {k: run.data.metrics[f"framenet.{k}"] for k in fn.COUNT_KEYS} == counts

    assert run_step("framenet_links", _config("framenet_links", framenet_filter="link"), **files,
                    options=("--no-mlflow",)) == 0
    counts = json.loads((out / "counts.json").read_text())
    assert counts["surviving_sentences"] == 3 and counts["links"] == 4
    capsys.readouterr()
    assert run_step("framenet_links", _config("framenet_links"), inputs={"release": tmp_path / "none"},
                    outputs={"links": out / "l.parquet", "counts": out / "c.json"}, options=("--no-mlflow",)) == 1
    assert capsys.readouterr().err == (f"bertology framenet-links: error: {tmp_path / 'none'} is not a FrameNet "
                                       f"release: it needs fulltext/ and frame/ folders (set "
                                       f"analysis.relations.framenet to such a directory, or null to skip FrameNet)\n")


def test_framenet_relations_command_writes_both_directions(release, tiny_model_dir, tmp_path):
    import pandas as pd

    from tests.builders.steps import run_step

    out = tmp_path / "out"
    assert run_step("framenet_links", _config("framenet_links"), inputs={"release": release},
                    outputs={"links": out / "links.parquet", "counts": out / "counts.json"},
                    options=("--no-mlflow",)) == 0
    assert run_step("framenet_relations", _config("framenet_relations", percentile=90),
                    {"task": "mrpc", "variant": "pretrained"},
                    inputs={"links": out / "links.parquet", "model": tiny_model_dir},
                    outputs={"table": out / "rel.csv"}, options=("--threads", "1", "--no-mlflow")) == 0
    rel = pd.read_csv(out / "rel.csv")
    assert rel.groupby("source").size().to_dict() == {"framenet": 8, "framenet_fe_target": 8}   # 2 layers x 4 heads
    assert (rel["n"] == 2).all() and rel.groupby("source")["flagged"].sum().to_dict() == {"framenet": 1,
                                                                                         "framenet_fe_target": 1}
    a = rel[rel["source"] == "framenet"]["mean"].to_numpy()
    b = rel[rel["source"] == "framenet_fe_target"]["mean"].to_numpy()
    assert not np.allclose(a, b)
