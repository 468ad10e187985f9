"""Disabling heads inside the forward pass (transformers 5: no head_mask), the sweeps, the sweep's tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertology.ablation import heads as dis
from bertology.ablation import significance as ast
from bertology.ablation import stacking
from bertology.ablation import sweep as sw
from bertology.ablation import sweep_fast
from bertology.models.metrics import compute_metrics
from tests.builders.ablation import D, H, L, padded, random_examples, tiny_classifier

@pytest.fixture(scope="module")
def model():
    return tiny_classifier()


def test_nothing_disabled_equals_the_plain_model(model):
    plain = tiny_classifier(attn="eager")
    ids, tts = random_examples(7)
    x, t, m = padded(ids, tts)
    with torch.no_grad():
        ours = model(input_ids=x, token_type_ids=t, attention_mask=m).logits
        none = model(input_ids=x, token_type_ids=t, attention_mask=m,
                     bertology_disabled=torch.zeros(L, H, dtype=torch.bool)).logits
        want = plain(input_ids=x, token_type_ids=t, attention_mask=m).logits
    torch.testing.assert_close(ours, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(none, want, atol=1e-5, rtol=0)


def test_disabled_head_attention_is_exactly_uniform_over_real_tokens(model):
    plain = tiny_classifier(attn="eager")
    ids, tts = random_examples(5)
    x, t, m = padded(ids, tts)
    disabled = torch.zeros(L, H, dtype=torch.bool)
    disabled[1, 2] = True
    with torch.no_grad():
        att = model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_disabled=disabled,
                    output_attentions=True).attentions
        ref = plain(input_ids=x, token_type_ids=t, attention_mask=m, output_attentions=True).attentions
    for b, n in enumerate(m.sum(1).tolist()):
        a = att[1][b, 2, :n]                      # the real queries' rows of the disabled head
        assert torch.equal(a[:, :n], torch.full((n, n), 1.0 / n))
        assert torch.equal(a[:, n:], torch.zeros(n, a.shape[1] - n))
    torch.testing.assert_close(att[0], ref[0], atol=1e-6, rtol=0)   # the layer below is untouched
    keep = [h for h in range(H) if h != 2]
    torch.testing.assert_close(att[1][:, keep], ref[1][:, keep], atol=1e-6, rtol=0)


def test_padding_changes_nothing(model):
    ids, tts = random_examples(2, seed=3)
    short, long_ = (0, 1) if len(ids[0]) < len(ids[1]) else (1, 0)
    ids = [ids[short], ids[long_] + [7] * 6]
    tts = [tts[short], tts[long_] + [1] * 6]
    for cfg in (sw.Configuration(), sw.Configuration(0, 1), sw.Configuration(2, None)):
        mask = cfg.mask(L, H)
        alone = sw.forward_logits(model, sw.make_batches(ids[:1], tts[:1], 0, 1), mask, 1)
        together = sw.forward_logits(model, sw.make_batches(ids, tts, 0, 2), mask, 2)
        np.testing.assert_allclose(together[0], alone[0], atol=1e-5, err_msg=str(cfg))


def test_without_the_registered_mask_padding_would_leak():
    """Guard the pitfall: a custom attention name gets no padding mask unless one is registered."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    assert dis.ATTN_IMPLEMENTATION in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping


def reference_forward(model, ids: list[int], tts: list[int], disabled: torch.Tensor) -> torch.Tensor:
    """Hand-written BERT forward of one unpadded example; a disabled head outputs mean(V over tokens)."""
    sd = {k: v.double() for k, v in model.state_dict().items()}
    n = len(ids)
    dh = D // H

    def lin(x, name):
        return x @ sd[name + ".weight"].T + sd[name + ".bias"]

    def ln(x, name):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-12) * sd[name + ".weight"] + sd[name + ".bias"]

    x = (sd["bert.embeddings.word_embeddings.weight"][ids] + sd["bert.embeddings.position_embeddings.weight"][:n]
         + sd["bert.embeddings.token_type_embeddings.weight"][tts])
    x = ln(x, "bert.embeddings.LayerNorm")
    for layer in range(L):
        p = f"bert.encoder.layer.{layer}."
        q, k, v = (lin(x, p + f"attention.self.{w}") for w in ("query", "key", "value"))
        heads = []
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            if disabled[layer, h]:
                heads.append(v[:, sl].mean(0, keepdim=True).expand(n, dh))
            else:
                a = torch.softmax(q[:, sl] @ k[:, sl].T / math.sqrt(dh), dim=-1)
                heads.append(a @ v[:, sl])
        x = ln(lin(torch.cat(heads, 1), p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        ff = lin(x, p + "intermediate.dense")
        ff = 0.5 * ff * (1 + torch.erf(ff / math.sqrt(2)))
        x = ln(lin(ff, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = torch.tanh(lin(x[0], "bert.pooler.dense"))
    return lin(pooled, "classifier")


def test_disabling_equals_a_hand_written_reference(model):
    ids, tts = random_examples(4, seed=5)
    disabled = torch.zeros(L, H, dtype=torch.bool)
    disabled[0, 1] = disabled[2, 3] = True
    disabled[1] = True
    got = sw.forward_logits(model, sw.make_batches(ids, tts, 0, 4), disabled, 4)
    for i in range(4):
        want = reference_forward(model, ids[i], tts[i], disabled).numpy()
        np.testing.assert_allclose(got[i], want, atol=1e-5)
    # and the reference really differs from the intact model (the test can fail)
    intact = sw.forward_logits(model, sw.make_batches(ids, tts, 0, 4), None, 4)
    assert np.abs(intact - got).max() > 1e-3


def test_per_row_masks_equal_separate_runs(model):
    ids, tts = random_examples(3, seed=7)
    x, t, m = padded(ids, tts)
    per_row = torch.zeros(L, 3, H, dtype=torch.bool)
    per_row[0, 0, 1] = True
    per_row[2, 1] = True
    with torch.no_grad():
        got = model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_disabled=per_row).logits
        for r in range(3):
            want = model(input_ids=x[r:r + 1], token_type_ids=t[r:r + 1], attention_mask=m[r:r + 1],
                         bertology_disabled=per_row[:, r]).logits
            torch.testing.assert_close(got[r:r + 1], want, atol=1e-5, rtol=0)


def test_bad_mask_shape_is_a_clear_error(model):
    ids, tts = random_examples(2)
    x, t, m = padded(ids, tts)
    with pytest.raises(ValueError, match="bertology_disabled has shape"):
        model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_disabled=torch.zeros(L, H + 1, dtype=torch.bool))


@pytest.mark.parametrize("config_batch", [1, 3, 16])
def test_fast_sweep_equals_naive_sweep(model, config_batch):
    ids, tts = random_examples(23, seed=11)
    batches = sw.make_batches(ids, tts, 0, 6)
    configs = sw.sweep_configurations(L, H)
    fast = sweep_fast.fast_sweep(model, batches, 23, config_batch=config_batch, progress=False)
    if config_batch == 3:
        naive = sw.naive_sweep(model, batches, configs, 23, progress=False)
        np.testing.assert_allclose(fast, naive, atol=1e-5)
        labels = np.random.default_rng(0).integers(0, 3, 23)
        for c in range(len(configs)):
            assert compute_metrics("mnli", fast[c], labels) == compute_metrics("mnli", naive[c], labels)
    # spot-check a few configurations against the naive path in every case
    for c in (0, 5, len(configs) - 1):
        want = sw.forward_logits(model, batches, configs[c].mask(L, H), 23)
        np.testing.assert_allclose(fast[c], want, atol=1e-5)


def test_sweep_configuration_order():
    configs = sw.sweep_configurations(2, 3)
    assert [c.kind for c in configs] == ["baseline"] + ["head"] * 6 + ["layer"] * 2
    assert configs[1 + 1 * 3 + 2] == sw.Configuration(1, 2)
    assert torch.equal(sw.Configuration(1, None).mask(2, 3), torch.tensor([[False] * 3, [True] * 3]))


def test_sweep_tables_on_constructed_logits():
    e = 40
    labels = np.r_[np.ones(20, int), np.zeros(20, int)]
    configs = sw.sweep_configurations(2, 2)
    logits = np.zeros((len(configs), e, 2))
    base = labels.copy()
    base[:10] = 0                                        # baseline wrong on 10 examples
    for c in range(len(configs)):
        logits[c, np.arange(e), base] = 1.0
    logits[3] = 0.0
    logits[3, np.arange(e), labels] = 1.0                # head (1, 0) fixes all 10 errors
    t = ast.sweep_tables("mrpc", labels, logits, 2, 2, n_boot=200, seed=0, alpha=0.05)
    assert list(t.heads.columns[:6]) == ["layer", "head", "metric", "value", "baseline", "delta"]
    assert len(t.heads) == 4 * 2 and len(t.layers) == 2 * 2
    acc = t.heads[t.heads.metric == "accuracy"].set_index(["layer", "head"])
    assert acc.loc[(1, 0), "delta"] == pytest.approx(0.25)
    assert acc.loc[(1, 0), "p_value"] == pytest.approx(2 / 1024)     # McNemar: 10 of 10 discordant
    assert acc.loc[(1, 0), "ci_low"] > 0 and acc.loc[(0, 0), "delta"] == 0
    assert acc.loc[(0, 0), "p_value"] == 1.0
    rand = t.summary[(t.summary.metric == "accuracy") & (t.summary.finding == "random_head")]
    assert rand["delta"].iloc[0] == pytest.approx(0.25 / 4)
    gains = t.summary[t.summary.finding == "surviving_gain_head"]
    assert set(zip(gains["layer"], gains["head"])) == {(1, 0)}
    assert t.summary_info["metrics"]["f1"]["heads"]["gains"] == 1


def test_fast_sweep_regression_head_without_padding():
    """STS-B-style single output, and batches of equal lengths (transformers then builds no mask at all)."""
    model = tiny_classifier(num_labels=1, seed=4)
    ids, tts = random_examples(6, seed=13, low=9, high=10)
    batches = sw.make_batches(ids, tts, 0, 3)
    assert all(bool(b.attention_mask.all()) for b in batches)
    fast = sweep_fast.fast_sweep(model, batches, 6, config_batch=5, progress=False)
    configs = sw.sweep_configurations(L, H)
    for c in (0, 1, 2 + H, len(configs) - 2):
        np.testing.assert_allclose(fast[c], sw.forward_logits(model, batches, configs[c].mask(L, H), 6), atol=1e-5)
    assert fast.shape == (len(configs), 6, 1)


def test_effective_config_batch_caps_cpu_stacks_only():
    assert stacking.effective_config_batch(8, 64, 128, torch.device("cpu")) == 1
    assert stacking.effective_config_batch(8, 4, 16, torch.device("cpu")) == 8
    assert stacking.effective_config_batch(8, 16, 100, torch.device("cpu")) == 2
    assert stacking.effective_config_batch(8, 64, 128, torch.device("meta")) == 8
    with pytest.raises(ValueError):
        stacking.effective_config_batch(0, 4, 4, torch.device("cpu"))


@pytest.mark.parametrize("task, k", [("mrpc", 2), ("cola", 2), ("mnli", 3), ("stsb", 1)])
def test_table_values_are_compute_metrics_bit_for_bit(task, k):
    """heads.csv/layers.csv `value` and `baseline` are Table 1's compute_metrics of each configuration."""
    rng = np.random.default_rng(3)
    e, configs = 50, sw.sweep_configurations(2, 2)
    labels = rng.integers(0, 26, e) / 5 if k == 1 else rng.integers(0, k, e)
    logits = rng.normal(size=(len(configs), e, k))
    if k == 1:
        logits[1] = 2.5                                  # a constant prediction: correlation 0, not NaN
    t = ast.sweep_tables(task, labels, logits, 2, 2, n_boot=20, seed=0, alpha=0.05)
    want = [compute_metrics(task, logits[c], labels) for c in range(len(configs))]
    for metric in want[0]:
        heads = t.heads[t.heads.metric == metric]
        layers = t.layers[t.layers.metric == metric]
        assert heads["value"].tolist() == [w[metric] for w in want[1:5]]
        assert layers["value"].tolist() == [w[metric] for w in want[5:]]
        assert set(heads["baseline"]) == {want[0][metric]} and t.summary_info["baseline"][metric] == want[0][metric]
        assert (heads["delta"] == heads["value"] - heads["baseline"]).all()
    if k == 1:
        assert want[1] == {"pearson": 0.0, "spearman": 0.0}


def test_verdict_counts_gains_and_survivors():
    from bertology.ablation.ablation_figures import verdict

    e = 40
    labels = np.r_[np.ones(20, int), np.zeros(20, int)]
    configs = sw.sweep_configurations(2, 2)
    logits = np.zeros((len(configs), e, 2))
    base = labels.copy()
    base[:10] = 0
    logits[:, np.arange(e), base] = 1.0
    logits[3] = 0.0
    logits[3, np.arange(e), labels] = 1.0
    text = verdict(ast.sweep_tables("rte", labels, logits, 2, 2, n_boot=100, seed=0, alpha=0.05).summary_info)
    assert text.startswith("accuracy: disabling one head raised the score for 1 heads (max +0.2500), 1 of them "
                           "significant after Benjamini-Hochberg at 0.05; whole layers: 0 gains, 0 significant;")


def test_run_sweep_naive_equals_fast_and_names_the_sweeps(model):
    ids, tts = random_examples(9, seed=17)
    batches = sw.make_batches(ids, tts, 0, 4)
    fast = sw.run_sweep(model, batches, 9, sweep="fast", config_batch=4, progress=False)
    naive = sw.run_sweep(model, batches, 9, sweep="naive", config_batch=4, progress=False)
    np.testing.assert_allclose(fast, naive, atol=1e-5)
    with pytest.raises(ValueError, match="unknown sweep 'quick'; use one of fast, naive"):
        sw.run_sweep(model, batches, 9, sweep="quick", config_batch=4, progress=False)
