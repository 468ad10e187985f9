"""Each layer's attention module, found once (bertology.models.layers) for the interventions on heads and the
value norms: on tiny random models of several architectures both consumers give every layer the same module, and
ALBERT's shared modules serve their layers call by call."""

from __future__ import annotations

import pytest
import torch

from bertology.ablation import heads as dis
from bertology.models.layers import CallRank, layer_modules, shares_attention
from bertology.norms import values as nv

SIZES = dict(vocab_size=60, hidden_size=16, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2, pad_token_id=0)


def tiny(model_type: str, **extra):
    import transformers as tf

    config = tf.CONFIG_MAPPING[model_type]()
    sizes = dict(SIZES, num_hidden_layers=2)
    if model_type == "distilbert":
        sizes.update(dim=16, n_layers=2, n_heads=2, hidden_dim=32, dropout=0.0, attention_dropout=0.0)
    if model_type == "albert":
        sizes.update(embedding_size=8)
    if model_type in ("deberta", "deberta-v2"):
        sizes.update(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
                     pooler_hidden_size=16, pooler_dropout=0.0)
    for key, value in {**sizes, **extra}.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return tf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval()


ARCHITECTURES = {"bert": {}, "roberta": {}, "distilbert": {}, "deberta": {}, "deberta-v2": {}, "mpnet": {},
                 "albert": dict(num_hidden_layers=4, num_hidden_groups=1, inner_group_num=1),
                 "albert-2-groups": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=1)}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_heads_and_norms_find_the_same_attention_for_every_layer(name):
    model = tiny(name.split("-2-")[0], **ARCHITECTURES[name])
    modules, _ = dis.attention_modules(model)
    layers = layer_modules(model, modules)
    blocks = nv.attention_blocks(model)
    assert layers is not None and len(layers) == len(blocks) == model.config.num_hidden_layers
    assert all(block.attention is module for block, module in zip(blocks, layers))
    assert len({id(m) for m in layers}) == len(modules)
    if name == "albert-2-groups":  # layers 0, 1 share group 0's module, layers 2, 3 group 1's
        assert shares_attention(model) and layers[0] is layers[1] and layers[2] is layers[3] \
            and layers[1] is not layers[2]


def test_layers_that_cannot_be_matched_are_none():
    model = tiny("bert")
    modules, _ = dis.attention_modules(model)
    assert layer_modules(model, modules[:1]) is None            # 1 module for 2 layers, not shared by design
    albert = tiny("albert", **ARCHITECTURES["albert-2-groups"])
    modules, _ = dis.attention_modules(albert)
    assert layer_modules(albert, modules[:1]) is None            # one module for two groups


def test_shared_modules_serve_their_layers_call_by_call():
    """ALBERT, 2 groups of 2 layers: a head disabled in layer 1 (group 0's second call) or in layer 2 (group 1's
    first) changes the logits differently; the value norms of every layer are captured, different per layer."""
    model = dis.enable_heads(tiny("albert", **ARCHITECTURES["albert-2-groups"]))
    ids = torch.tensor([[2, 11, 23, 35, 47, 3], [2, 13, 29, 3, 0, 0]])
    mask = (ids != 0).long()
    logits = {}
    with torch.no_grad():
        for layer in (None, 1, 2):
            disabled = torch.zeros(4, 2, dtype=torch.bool)
            if layer is not None:
                disabled[layer, 0] = True
            with dis.disabled_heads(model, disabled):
                logits[layer] = model(input_ids=ids, attention_mask=mask).logits
            assert model._bertology_head_state.rank.total == 4                 # every layer seen once
    assert not torch.equal(logits[1], logits[None]) and not torch.equal(logits[2], logits[None])
    assert not torch.equal(logits[1], logits[2])
    with torch.no_grad(), nv.Capture(model) as cap:
        model(input_ids=ids, attention_mask=mask)
        norms = cap.value_norms(mask.sum(1))                                 # (B, L, H, T)
    assert norms.shape[1] == 4 and not torch.equal(norms[:, 0], norms[:, 1])


def test_call_rank_counts_each_kind_apart():
    a, b = torch.nn.Identity(), torch.nn.Identity()
    rank = CallRank([a, a, b, b])
    assert [rank.next(a, "value"), rank.next(a, "sum"), rank.next(a, "value")] == [0, 0, 1]
    assert rank.next(a, "value") is None                             # more calls than layers
    assert rank.next(b) == 2 and rank.total == 1
    rank.reset()
    assert rank.next(a, "value") == 0
