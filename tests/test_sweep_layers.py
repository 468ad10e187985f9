"""The prefix disabling sweep (bertology.ablation.sweep_prefix.prefix_sweep): every layered model enable_heads accepts,
layers below the disabled one replayed from a kept forward pass; equal to the naive sweep on tiny random models
of several architectures (a Llama with grouped-query attention, GPT-2, DistilBERT, ModernBERT, DeBERTa-v2, and
MPNet, whose heads are disabled by a hook on its probability dropout)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertology.ablation import heads as dis
from bertology.ablation import sweep as sw
from bertology.ablation import sweep_fast
from bertology.ablation import sweep_prefix as swp
from tests.builders.decoders import decoder_config, decoder_tokenizer
from tests.builders.encoders import model_config, tokenizer_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LAYERS = 3
ARCHES = ("llama", "gpt2", "distilbert", "modernbert", "deberta-v2", "mpnet")


def _classifier(arch: str, seed: int = 0):
    """A tiny random eval-mode sequence classifier of `arch` through enable_heads, and its pad id."""
    import transformers as tf
    from transformers import AutoModelForSequenceClassification

    if arch == "mpnet":
        config = tf.MPNetConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
                                intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                num_labels=2, pad_token_id=1, initializer_range=0.3)
    elif arch in ("llama", "gpt2"):
        config = decoder_config(arch, decoder_tokenizer("llama" if arch == "llama" else "gpt2"), layers=LAYERS)
    else:
        config = model_config(arch, tokenizer_for(arch), layers=LAYERS)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval()
    return dis.enable_heads(model), int(config.pad_token_id or 0)


@pytest.fixture(scope="module", params=ARCHES)
def built(request):
    return request.param, *_classifier(request.param)


def _batches(model, pad: int, n: int = 7, batch_size: int = 4, seed: int = 3):
    """n random examples of lengths 3..12 (no pad id inside), in length-grouped padded batches."""
    rng = np.random.default_rng(seed)
    vocab = int(model.config.vocab_size)
    ids = []
    for length in rng.integers(3, 13, n):
        row = rng.integers(0, vocab, int(length))
        row[row == pad] = (pad + 1) % vocab
        ids.append(row.tolist())
    return sw.make_batches(ids, [[0] * len(x) for x in ids], pad, batch_size)


def test_the_plan_finds_the_layers_in_order(built):
    arch, model, _ = built
    plan = swp.prefix_plan(model)
    assert isinstance(plan, swp.PrefixPlan)
    assert len(plan.layers) == LAYERS == model.config.num_hidden_layers
    modules, _ = dis.attention_modules(model)
    for layer, module in zip(plan.layers, modules):
        assert any(m is module for m in layer.modules())
    assert isinstance(sweep_fast.fast_plan(model), str)            # none of them is a BERT-layer encoder
    assert sw.resolve_sweep(model, "fast") == ("prefix", None)
    assert sw.resolve_sweep(model, "naive") == ("naive", None)


@pytest.mark.parametrize("config_batch", [1, 3])
def test_prefix_sweep_equals_the_naive_sweep(built, config_batch):
    arch, model, pad = built
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    if arch == "llama":
        assert model.config.num_key_value_heads < H          # grouped-query attention
    batches = _batches(model, pad)
    configs = sw.sweep_configurations(L, H)
    got = sw.run_sweep(model, batches, 7, sweep="prefix", config_batch=config_batch, progress=False)
    naive = sw.naive_sweep(model, batches, configs, 7, progress=False)
    assert got.shape == naive.shape == (1 + L * H + L, 7, 2)
    np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-5)
    # disabling changes the logits (else the comparison above would prove little)
    assert np.abs(naive[1:] - naive[0]).max() > 1e-3
    # the layers are back in place: a plain forward still runs every layer
    np.testing.assert_allclose(sw.forward_logits(model, batches, None, 7), naive[0], rtol=1e-5, atol=1e-5)


def test_the_skipped_layers_do_not_run(monkeypatch):
    """Layers 0..l-1 are stand-ins while layer l's configurations run: each real layer runs once for the baseline
    and then only for the configurations of the layers at and below it: (H + 1) * (l + 1) stacked passes."""
    model, pad = _classifier("llama")
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    plan = swp.prefix_plan(model)
    runs = [0] * L
    for i, layer in enumerate(plan.layers):
        layer.register_forward_hook(lambda m, a, o, i=i: runs.__setitem__(i, runs[i] + 1))
    (batch,) = _batches(model, pad, n=3)
    swp.prefix_batch_logits(model, batch, config_batch=1)
    assert runs == [1 + (H + 1) * (i + 1) for i in range(L)]
    assert all(type(layer).__name__ != "_Replayed" for layer in plan.layers)


def test_the_layer_passes_counted():
    naive, prefix = swp.prefix_layer_passes(8, 8)
    assert (naive, prefix) == ((1 + 64 + 8) * 8, 8 + 9 * sum(8 - l for l in range(8)))
    assert swp.prefix_layer_passes(30, 9) == (9030, 4680)


def test_outputs_of_any_shape_are_repeated_along_the_batch():
    x = torch.arange(6.0).view(2, 3)
    bias = torch.ones(1, 3)
    out = swp.repeat_output((x, None, bias, {"h": x}, [x]), 3, 2)
    assert out[0].shape == (6, 3) and torch.equal(out[0][4:], x) and out[1] is None and out[2] is bias
    assert out[3]["h"].shape == (6, 3) and out[4][0].shape == (6, 3)
    assert swp.repeat_output(x, 1, 2) is not x                   # a copy: the next layer may work in place


def test_a_forward_that_skips_a_layer_is_refused():
    """The plan's list must be what the forward runs, in order, each once: a model that runs only part of it
    (here: num_hidden_layers lowered after building, Llama's loop slices its list) is refused, not miscounted."""
    model, pad = _classifier("llama")
    plan = swp.prefix_plan(model)
    (batch,) = _batches(model, pad, n=2)
    model.config.num_hidden_layers = LAYERS - 1
    try:
        with pytest.raises(ValueError, match="not each once in order"):
            swp.prefix_batch_logits(model, batch, config_batch=2, plan=plan)
    finally:
        model.config.num_hidden_layers = LAYERS


def test_models_without_a_layer_list_fall_back_to_naive():
    """ALBERT's layers share one attention module: no prefix plan, and resolve_sweep says why."""
    import transformers as tf

    tok = tokenizer_for("bert")
    config = tf.AlbertConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=3,
                             num_attention_heads=4, intermediate_size=64, num_labels=2, pad_token_id=tok.pad_token_id,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = dis.enable_heads(tf.AutoModelForSequenceClassification.from_config(
        config, attn_implementation="eager").eval())
    used, why = sw.resolve_sweep(model, "fast")
    assert used == "naive" and "one attention module per layer" in why
    with pytest.raises(ValueError, match="naive sweep"):
        swp.check_prefix_supported(model)


def test_run_sweep_names_the_sweeps():
    model, pad = _classifier("gpt2")
    with pytest.raises(ValueError, match="unknown sweep 'quick'; use one of fast, naive"):
        sw.run_sweep(model, _batches(model, pad), 7, sweep="quick", config_batch=2, progress=False)
    with pytest.raises(ValueError, match="naive sweep"):          # the BERT-layer path refuses GPT-2
        sw.run_sweep(model, _batches(model, pad), 7, sweep="fast", config_batch=2, progress=False)
