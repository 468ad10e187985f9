"""bertology.models.hooks: hooks registered for a scope and removed however it ends, targets by module or by name, and a
forward pass stopped at a module (run_until, stop_forward) on a tiny random BertModel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from bertology.models.hooks import hooks, register_hooks, resolve, run_until, stop_forward

LAYERS = 3


@pytest.fixture(scope="module")
def bert():
    """A tiny random BertModel (eval, eager attention) and the inputs of one batch of 2 x 7 tokens."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=LAYERS, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertModel(config, add_pooling_layer=True).eval()
    model.set_attn_implementation("eager")
    ids = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _first(output) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _hooks_of(model: torch.nn.Module) -> dict[str, tuple[list, list]]:
    """{module name: (its forward hooks, its forward pre-hooks)} (transformers adds hooks of its own on the layers the
    first time hidden states or attentions are asked for: what a test registers is compared with the hooks already there)."""
    return {name: (list(m._forward_hooks.values()), list(m._forward_pre_hooks.values()))
            for name, m in model.named_modules()}


def test_hooks_run_inside_and_are_removed_on_a_normal_exit(bert):
    model, inputs = bert
    existing = _hooks_of(model)
    seen, pre_seen = [], []
    fwd = [(layer, lambda m, a, o, i=i: seen.append(i)) for i, layer in enumerate(model.encoder.layer)]
    pre = [(model.pooler, lambda m, a: pre_seen.append(a[0].shape))]
    with torch.no_grad(), hooks(model, fwd=fwd, pre=pre) as scope:
        assert len(scope.handles) == LAYERS + 1 and _hooks_of(model) != existing
        model(**inputs)
    assert seen == list(range(LAYERS)) and pre_seen == [torch.Size([2, 7, 16])]
    assert _hooks_of(model) == existing and not scope.stopped
    assert not model.pooler._forward_pre_hooks and not model.pooler._forward_hooks


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_hooks_are_removed_when_the_block_raises(bert, error):
    model, inputs = bert
    existing = _hooks_of(model)

    def fails(module, args, output):
        raise error("from a hook")

    with pytest.raises(error), torch.no_grad(), hooks(model, fwd=[("encoder.layer.1", fails)],
                                                      pre=[("embeddings", lambda m, a: None)]):
        model(**inputs)
    assert _hooks_of(model) == existing
    with pytest.raises(error), hooks(model, fwd=[(model.encoder, lambda m, a, o: None)]):
        raise error("in the block")
    assert _hooks_of(model) == existing


def test_names_are_resolved_with_get_submodule(bert):
    model, inputs = bert
    existing = _hooks_of(model)
    assert resolve(model, "encoder.layer.2.attention.self") is model.encoder.layer[2].attention.self
    assert resolve(None, model.pooler) is model.pooler
    got = {}
    with torch.no_grad(), hooks(model, fwd=[("encoder.layer.0.output", lambda m, a, o: got.update(by_name=o))]):
        model(**inputs)
    with torch.no_grad(), hooks(model, fwd=[(model.encoder.layer[0].output, lambda m, a, o: got.update(by_module=o))]):
        model(**inputs)
    assert torch.equal(got["by_name"], got["by_module"])
    with pytest.raises(AttributeError):                  # a wrong name: nothing registered, not even the good ones
        register_hooks(model, fwd=[("encoder.layer.0", lambda *a: None), ("encoder.layer.9", lambda *a: None)])
    assert _hooks_of(model) == existing
    with pytest.raises(ValueError, match="is a name"):
        register_hooks(None, fwd=[("encoder", lambda *a: None)])


def test_with_kwargs_hooks_see_the_keyword_arguments_and_may_replace_them(bert):
    model, inputs = bert
    existing = _hooks_of(model)
    seen = []

    def pre(module, args, kwargs):
        seen.append(sorted(kwargs))
        hidden = args[0] if args else kwargs["hidden_states"]
        zeros = torch.zeros_like(hidden)
        return ((zeros, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": zeros})

    with torch.no_grad(), hooks(model, pre=[("encoder.layer.0", pre)], with_kwargs=True):
        out = run_until(model, "encoder.layer.0.attention.self.value", **inputs)
    assert seen and torch.allclose(out, model.encoder.layer[0].attention.self.value.bias.expand_as(out))
    assert _hooks_of(model) == existing


def test_run_until_returns_the_modules_output_and_runs_nothing_after_it(bert):
    model, inputs = bert
    existing = _hooks_of(model)
    with torch.no_grad():
        full = model(**inputs, output_hidden_states=True).hidden_states
    existing = _hooks_of(model)
    calls = {i: 0 for i in range(LAYERS)}
    counting = [(layer, lambda m, a, i=i: calls.__setitem__(i, calls[i] + 1))
                for i, layer in enumerate(model.encoder.layer)]
    pooled = []
    with torch.no_grad(), hooks(model, pre=counting + [(model.pooler, lambda m, a: pooled.append(1))]):
        out = run_until(model, model.encoder.layer[1], **inputs)
        assert _first(out).shape == (2, 7, 16)
        torch.testing.assert_close(_first(out), full[2], rtol=0, atol=0)
        assert calls == {0: 1, 1: 1, 2: 0} and not pooled        # layer 2 and the pooler never ran
        named = run_until(model, "encoder.layer.0", **inputs)
        torch.testing.assert_close(_first(named), full[1], rtol=0, atol=0)
    assert _hooks_of(model) == existing


def test_run_until_counts_the_calls_of_a_shared_module_and_says_when_it_is_not_reached():
    torch.manual_seed(0)
    shared = torch.nn.Linear(4, 4)
    net = torch.nn.Sequential(shared, torch.nn.Tanh(), shared, torch.nn.Tanh())
    existing = _hooks_of(net)
    x = torch.randn(3, 4)
    with torch.no_grad():
        second = run_until(net, shared, x, call=1)
        torch.testing.assert_close(second, shared(torch.tanh(shared(x))), rtol=0, atol=0)
        with pytest.raises(RuntimeError, match="called Linear 2 time"):
            run_until(net, "0", x, call=2)
    assert _hooks_of(net) == existing
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())


def test_stop_forward_ends_the_block_without_an_exception(bert):
    model, inputs = bert
    existing = _hooks_of(model)
    after = []

    def stop(module, args, output):
        stop_forward(("stopped at", _first(output).shape))

    with torch.no_grad(), hooks(model, fwd=[("encoder.layer.0", stop)]) as scope:
        model(**inputs)
        after.append("the rest of the block")
    assert scope.stopped and scope.output == ("stopped at", torch.Size([2, 7, 16]))
    assert after == [] and _hooks_of(model) == existing


def test_no_module_forward_is_replaced_in_src():
    """Forward passes are changed by hooks (bertology.models.hooks), never by assigning a module's forward."""
    src = Path(__file__).resolve().parents[1] / "src" / "bertology"
    bad = [f"{p.relative_to(src)}:{i}" for p in sorted(src.rglob("*.py"))
           for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\.forward\s*=[^=]", line)]
    assert not bad, "a module's forward assigned: " + ", ".join(bad)
