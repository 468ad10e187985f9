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
    s3 = "She bought fresh green apples ."       # Buyer 'She' is adjacent (distance 1): that link is dropped
    s4 = "Yesterday in the morning the tall man with a hat bought bread at the shop ."  # > 12 tokens
    s5 = "We bought it quite cheaply yesterday ."   # only a peripheral FE far away: no core link
    docs = "".join([
        _sentence(1, s1, _aset(s1, "Emotion_directed", "agitated", {"Experiencer": "He", "Degree": "very"}, "Stimulus")),
        _sentence(2, s2, _aset(s2, "Commerce_buy", "bought", {"Buyer": "I", "Goods": "a small old red wooden chair"})),
        _sentence(3, s3, _aset(s3, "Commerce_buy", "bought", {"Buyer": "She", "Goods": "apples"})),
        _sentence(4, s4, _aset(s4, "Commerce_buy", "bought", {"Buyer": "the tall man", "Goods": "bread"})),
        _sentence(5, s5, _aset(s5, "Commerce_buy", "bought", {"Time": "yesterday"})),
    ])
    (tmp_path / "fulltext" / "doc.xml").write_text(f'<fullTextAnnotation xmlns="{NS}">{docs}</fullTextAnnotation>')
    return tmp_path


def test_filters_and_counts(release):
    items = read_release(release)
    assert len(items) == 5
    first = items[0]
    assert first.tokens[:2] == ["He", "was"] and first.target == [4] and first.fes == {"Experiencer": [0]}
    kept, counts = fn.filter_items(items)
    assert counts["sentences"] == 5 and counts["short_sentences_sentences"] == 4
    assert counts["with_core_fe_sentences"] == 3           # s5 has only a peripheral FE
    assert counts["short_core_fes_sentences"] == 2          # s2's Goods has 6 tokens
    assert counts["surviving_sentences"] == 2               # s1, and s3 through 'apples' (3 from 'bought')
    links = fn.links_table(kept)
    assert sorted(zip(links["sentence_id"], links["fe"])) == [("1", "Experiencer"), ("3", "Goods")]
    assert (links["distance"] >= 2).all()


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
    assert [i.doc for i in items] == ["doc"] * 5 and items[0].fes == {"Experiencer": [0]}
    assert all(i.fes == {} for i in items if i.frame == "Commerce_buy")  # no frame file: no core FE
    assert sum("Commerce_buy" in r.getMessage() for r in caplog.records) == 1  # one warning per frame


def test_link_scores_on_a_tiny_model(release, tiny_model_dir):
    import torch

    torch.set_num_threads(1)
    kept, _ = fn.filter_items(read_release(release))
    links = fn.links_table(kept)
    from bertology.models import load_encoder, load_tokenizer

    tok, model = load_tokenizer(str(tiny_model_dir)), load_encoder(str(tiny_model_dir))
    scores = fn.link_scores(links, tok, model, batch_size=1)
    assert scores.shape == (2, 2, 4) and np.all((scores > 0) & (scores <= 1))
    # independent check of item 0: 'He' -> 'agitated' over every wordpiece pair
    words = links["text"].iloc[0].split()
    enc = tok(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        att = torch.stack(model(**enc, output_attentions=True).attentions, 1)[0].numpy()
    wid = np.array([-1 if w is None else w for w in enc.word_ids(0)])
    src, tgt = np.flatnonzero(wid == 0), np.flatnonzero(wid == 4)
    assert np.allclose(scores[0], att[:, :, src][:, :, :, tgt].reshape(2, 4, -1).max(-1), atol=1e-6)


@pytest.mark.realdata
def test_real_framenet_sample_survivors(shared_data):
    sample = shared_data / "framenet-sample"
    if not sample.is_dir():
        pytest.skip("../shared/data/framenet-sample is absent")
    kept, counts = fn.filter_items(read_release(sample))
    assert counts["sentences"] > counts["surviving_sentences"] > 0
    assert all(len(i.tokens) <= 12 for i in kept)


def test_framenet_links_command(release, tmp_path, capsys):
    import json

    import pandas as pd

    from bertology.cli import main

    out = tmp_path / "out"
    assert main(["framenet-links", "--input", f"release={release}", "--output", f"links={out / 'links.parquet'}",
                 "--output", f"counts={out / 'counts.json'}", "--no-mlflow"]) == 0
    counts = json.loads((out / "counts.json").read_text())
    assert counts["surviving_sentences"] == 2 and counts["links"] == 2
    assert len(pd.read_parquet(out / "links.parquet")) == 2
    assert capsys.readouterr().out == "2 sentences (2 frame annotations, 2 links) of 5 survive the filters\n"
    assert main(["framenet-links", "--input", f"release={tmp_path / 'none'}", "--output", f"links={out / 'l.parquet'}",
                 "--output", f"counts={out / 'c.json'}", "--no-mlflow"]) == 1
    assert capsys.readouterr().err == (f"bertology framenet-links: error: {tmp_path / 'none'} is not a FrameNet "
                                       f"release: it needs fulltext/ and frame/ folders (set "
                                       f"analysis.relations.framenet to such a directory, or null to skip FrameNet)\n")
