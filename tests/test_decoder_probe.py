"""The decoder probe (bertology.decoders.probe) on tiny random decoders of several architectures."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.decoders import heads, probe

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=64, vocab_size=120, max_position_embeddings=128)


def tiny(kind: str):
    configs = {
        "gpt2": lambda: transformers.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=120, n_positions=128,
                                                bos_token_id=0, eos_token_id=0),
        "llama": lambda: transformers.LlamaConfig(**SMALL),                      # grouped-query attention
        "mistral": lambda: transformers.MistralConfig(**SMALL, sliding_window=6),
        "qwen2": lambda: transformers.Qwen2Config(**SMALL),
    }
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(configs[kind](), attn_implementation="eager")
    return model.eval()


@pytest.mark.parametrize("kind", ["gpt2", "llama", "mistral", "qwen2"])
def test_maps_are_causal_one_per_query_head(kind):
    model = tiny(kind)
    ids = np.random.default_rng(0).integers(1, 120, size=(3, 12))
    mask = np.ones_like(ids)
    mask[2, 8:] = 0
    maps = probe.causal_maps(model, ids, mask)
    assert maps.shape == (3, 2, 4, 12, 12)                                  # query heads, not key/value groups
    assert np.abs(np.triu(maps, k=1)).max() == 0
    np.testing.assert_allclose(maps[:2].sum(-1), 1, atol=1e-6)
    np.testing.assert_allclose(maps[2, ..., :8, :8].sum(-1), 1, atol=1e-6)
    assert np.abs(maps[2, ..., :8, 8:]).max() == 0                          # no real query reads padding
    if kind == "mistral":                                                   # the sliding window, as computed
        assert np.abs(np.tril(maps, k=-6)).max() == 0


def test_the_probe_tables():
    model = tiny("llama")
    tokens, maps = probe.induction_probe(model, seed=3, seq_len=8, batch=4, bos_id=1)
    assert tokens.shape == (4, 17) and maps.shape == (4, 2, 4, 17, 17)
    again, _ = probe.induction_probe(model, seed=3, seq_len=8, batch=4, bos_id=1)
    np.testing.assert_array_equal(tokens, again)
    table = probe.induction_table(tokens, maps, seq_len=8)
    assert list(table.columns) == ["layer", "head", "induction_stripe", "induction", "previous_token", "duplicate_token"]
    assert len(table) == 8 and table.iloc[:, 2:].apply(lambda c: c.between(0, 1).all()).all()
    row = table[(table["layer"] == 1) & (table["head"] == 2)].iloc[0]
    assert row.induction == pytest.approx(heads.detection_scores(maps, heads.induction_pattern(tokens))[:, 1, 2].mean())
    lengths = np.array([17, 17, 10, 5])
    sink = probe.sink_table(maps, lengths)
    alpha0 = heads.sink_alpha(maps, lengths)[..., 0]
    assert sink.alpha_0.to_numpy() == pytest.approx(alpha0.mean(axis=0).ravel())
    assert 100 * sink.share_sink.mean() == pytest.approx(heads.sink_rate(alpha0))


def test_maps_need_eager_attention():
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**SMALL), attn_implementation="sdpa")
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        probe.causal_maps(model, np.ones((1, 4), dtype=np.int64))
