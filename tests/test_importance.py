"""Head importance (Michel et al. 2019): gates on the heads' outputs, gradients, pruning curves.

Known by construction: gates of 1 are the plain model; gates of 0 are a head whose output is zeroed by
hand (a hook on the output projection's input); the gradient is the finite difference of the gated loss;
0% pruned is the baseline; the fast pruning equals the naive one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertology.ablation import importance as imp
from bertology.ablation.heads import enable_heads
from bertology.ablation import pruning as pr
from bertology.ablation import significance as ast
from bertology.ablation import sweep as sw
from tests.builders.ablation import H, L, padded, random_examples, tiny_classifier


def gated_model(num_labels: int = 3, seed: int = 0):
    return tiny_classifier(num_labels, seed=seed)


@pytest.fixture(scope="module")
def model():
    return gated_model()


def test_gates_of_one_change_nothing(model):
    plain = tiny_classifier(attn="eager")
    ids, tts = random_examples(6)
    x, t, m = padded(ids, tts)
    with torch.no_grad():
        want = plain(input_ids=x, token_type_ids=t, attention_mask=m).logits
        none = model(input_ids=x, token_type_ids=t, attention_mask=m).logits
        ones = model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_gates=torch.ones(L, H)).logits
        rows = model(input_ids=x, token_type_ids=t, attention_mask=m,
                     bertology_gates=torch.ones(L, len(ids), H)).logits
    for got in (none, ones, rows):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def zeroed_by_hand(model, zero: dict[int, list[int]], x, t, m) -> torch.Tensor:
    """Reference: an eager model whose heads' context columns are set to 0 before the output projection."""
    dh = model.config.hidden_size // model.config.num_attention_heads
    hooks = []
    for layer, heads in zero.items():
        def pre(module, args, heads=heads):
            (context,) = args
            context = context.clone()
            for h in heads:
                context[..., h * dh:(h + 1) * dh] = 0
            return (context,)
        hooks.append(model.base_model.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            return model(input_ids=x, token_type_ids=t, attention_mask=m).logits
    finally:
        for hk in hooks:
            hk.remove()


def test_gates_of_zero_equal_zeroed_head_output_by_hand(model):
    plain = tiny_classifier(attn="eager")
    ids, tts = random_examples(6, seed=3)
    x, t, m = padded(ids, tts)
    zero = {0: [1], 2: [0, 3]}
    gates = torch.ones(L, H)
    for layer, heads in zero.items():
        gates[layer, heads] = 0.0
    with torch.no_grad():
        got = model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_gates=gates).logits
    want = zeroed_by_hand(plain, zero, x, t, m)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert not torch.allclose(got, plain(input_ids=x, token_type_ids=t, attention_mask=m).logits, atol=1e-3)


@pytest.mark.parametrize("num_labels", [3, 1])
def test_gate_gradients_equal_finite_differences(num_labels):
    model = gated_model(num_labels, seed=1).double()
    ids, tts = random_examples(4, seed=5)
    x, t, m = padded(ids, tts)
    labels = torch.tensor([0, 2, 1, 0]) if num_labels > 1 else torch.tensor([0.3, -1.0, 2.0, 0.5])
    g = imp.gate_gradients(model, x, t, m, labels)                        # (N, L, H)
    assert g.shape == (4, L, H)
    eps = 1e-6

    def losses(gates):
        with torch.no_grad():
            logits = model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_gates=gates).logits
        return imp.per_example_loss(logits, labels).double()

    for layer, head in [(0, 0), (1, 2), (2, 3)]:
        up = torch.ones(L, 4, H, dtype=torch.float64)
        down = up.clone()
        up[layer, :, head] += eps
        down[layer, :, head] -= eps
        fd = (losses(up) - losses(down)) / (2 * eps)                       # (N,): each example's own gate
        torch.testing.assert_close(g[:, layer, head], fd, atol=1e-6, rtol=1e-5)


def test_importance_is_mean_absolute_per_example_gradient_normalised_per_layer(model):
    ids, tts = random_examples(9, seed=7)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    batches = sw.make_batches(ids, tts, 0, batch_size=4)
    batched = imp.head_importance(model, batches, labels, progress=False)
    one_by_one = imp.head_importance(model, batches, labels, progress=False, per_example=True)
    np.testing.assert_allclose(batched.raw, one_by_one.raw, rtol=1e-4, atol=1e-7)
    assert batched.n == 9
    # by hand: every example alone, |grad| averaged
    x, t, m = padded(ids, tts)
    g = imp.gate_gradients(model, x, t, m, torch.as_tensor(labels))
    np.testing.assert_allclose(batched.raw, g.abs().mean(0).numpy(), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(batched.importance, axis=1), 1.0)
    np.testing.assert_allclose(batched.importance, batched.raw / np.linalg.norm(batched.raw, axis=1, keepdims=True))
    frame = batched.frame("validation")
    assert list(frame.columns[:3]) == ["layer", "head", "importance"] and len(frame) == L * H
    assert (frame["split"] == "validation").all()


def test_normalise_by_layer_keeps_a_zero_row_zero():
    raw = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(imp.normalise_by_layer(raw), [[0.6, 0.8], [0.0, 0.0]])


def test_orders_and_masks():
    assert np.allclose(pr.pruning_fractions(0.1), np.linspace(0, 1, 11))
    assert np.allclose(pr.pruning_fractions(0.3), [0, 0.3, 0.6, 0.9, 1.0])
    importance = np.array([[0.5, 0.1], [0.9, 0.1]])
    assert pr.importance_order(importance).tolist() == [1, 3, 0, 2]
    masks = pr.order_masks(pr.importance_order(importance), np.array([0, 0.5, 1.0]), 2, 2)
    assert masks[0].sum() == 0 and masks[2].all()
    assert masks[1].tolist() == [[False, True], [False, True]]
    perm = pr.random_order(12, 3)
    assert sorted(perm.tolist()) == list(range(12)) and perm.tolist() == pr.random_order(12, 3).tolist()
    nested = pr.order_masks(perm, pr.pruning_fractions(0.1), 3, 4)
    assert all((nested[i] <= nested[i + 1]).all() for i in range(len(nested) - 1))


@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_fast_pruning_equals_naive_and_zero_percent_is_the_baseline(model, mode):
    ids, tts = random_examples(11, seed=9)
    batches = sw.make_batches(ids, tts, 0, batch_size=4)
    rng = np.random.default_rng(0)
    importance = rng.random((L, H))
    plan, masks = pr.pruning_plan(importance, pr.pruning_fractions(0.25), seeds=[1, 2])
    naive = pr.pruned_logits(model, batches, masks, len(ids), mode=mode, method="naive", config_batch=3,
                             progress=False)
    fast = pr.pruned_logits(model, batches, masks, len(ids), mode=mode, method="fast", config_batch=3,
                            progress=False)
    np.testing.assert_allclose(fast, naive, atol=1e-5, rtol=0)
    base = sw.forward_logits(model, batches, None, len(ids))
    for c in np.flatnonzero(plan["fraction"].to_numpy() == 0):
        np.testing.assert_allclose(naive[c], base, atol=1e-6, rtol=0)
    labels = np.arange(len(ids)) % 3
    table = pr.pruning_table(plan, naive, labels, ["accuracy"], regression=False, mode=mode)
    want = float((base.argmax(1) == labels).mean())
    assert (table.loc[table["fraction"] == 0, "value"] == want).all()
    assert (table["mode"] == mode).all() and table["seed"].isna().sum() == len(pr.pruning_fractions(0.25))
    summary = ast.curve_summary(table)
    assert (summary["random_n"] == 2).all() and len(summary) == len(pr.pruning_fractions(0.25))


def test_uniform_pruning_of_one_head_equals_the_disabling_sweep(model):
    ids, tts = random_examples(5, seed=4)
    batches = sw.make_batches(ids, tts, 0, batch_size=5)
    mask = np.zeros((1, L, H), dtype=bool)
    mask[0, 1, 2] = True
    got = pr.pruned_logits(model, batches, mask, len(ids), mode="uniform", method="fast", config_batch=2,
                           progress=False)[0]
    want = sw.forward_logits(model, batches, torch.as_tensor(mask[0]), len(ids))
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    zero = pr.pruned_logits(model, batches, mask, len(ids), mode="zero", method="fast", config_batch=2,
                            progress=False)[0]
    x, t, m = padded(ids, tts)
    ref = zeroed_by_hand(tiny_classifier(attn="eager"), {1: [2]}, x, t, m).double().numpy()
    np.testing.assert_allclose(zero, ref, atol=1e-5, rtol=0)


def test_bad_inputs_fail_clearly(model):
    with pytest.raises(ValueError, match="pruning mode"):
        pr.removal_kwargs(torch.ones(L, H, dtype=torch.bool), "drop")
    with pytest.raises(ValueError, match="step"):
        pr.pruning_fractions(0)
    ids, tts = random_examples(2)
    x, t, m = padded(ids, tts)
    with pytest.raises(ValueError, match="bertology_gates"):
        model(input_ids=x, token_type_ids=t, attention_mask=m, bertology_gates=torch.ones(L, H + 1))


def other_arch(name: str):
    """A tiny random RoBERTa or ELECTRA classifier (their attention follows transformers' AttentionInterface)."""
    from transformers import ElectraConfig, ElectraForSequenceClassification, RobertaConfig, RobertaForSequenceClassification

    kw = dict(vocab_size=50, hidden_size=32, num_hidden_layers=L, num_attention_heads=H, intermediate_size=48,
              max_position_embeddings=40, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              initializer_range=0.3)
    cls, cfg = ((RobertaForSequenceClassification, RobertaConfig(**kw)) if name == "roberta" else
                (ElectraForSequenceClassification, ElectraConfig(embedding_size=32, **kw)))
    torch.manual_seed(0)
    model = cls(cfg).eval()
    model.set_attn_implementation("eager")
    return model


@pytest.mark.parametrize("arch", ["roberta", "electra"])
def test_gates_on_other_architectures(arch):
    plain = other_arch(arch)
    model = enable_heads(other_arch(arch))
    x = torch.randint(5, 50, (4, 9), generator=torch.Generator().manual_seed(2))
    m = torch.ones_like(x)
    m[1, 6:] = 0
    t = torch.zeros_like(x)
    with torch.no_grad():
        want = plain(input_ids=x, attention_mask=m).logits
        ones = model(input_ids=x, attention_mask=m, bertology_gates=torch.ones(L, H)).logits
        gates = torch.ones(L, H)
        gates[1, [0, 2]] = 0.0
        zero = model(input_ids=x, attention_mask=m, bertology_gates=gates).logits
    torch.testing.assert_close(ones, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(zero, zeroed_by_hand(plain, {1: [0, 2]}, x, t, m), atol=1e-5, rtol=0)
    g = imp.gate_gradients(model, x, t, m, torch.tensor([0, 1, 1, 0]))
    assert g.shape == (4, L, H) and bool((g != 0).any())
