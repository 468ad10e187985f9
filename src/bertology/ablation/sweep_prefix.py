"""The prefix sweep: any model whose layers are one list called in order (decoders such as Llama, GPT-2, Qwen;
DistilBERT, ModernBERT, DeBERTa-v2, ...: :func:`prefix_plan` states the rule); layers below the disabled one
replay their outputs.

Per batch one forward pass keeps each layer's output; the configurations of layer l then run the model's own
forward, stacked along the batch, with layers 0..l-1 swapped for stand-ins that return their kept outputs
(:func:`prefix_batch_logits`), which saves about half the layer passes (:func:`prefix_layer_passes`). Results
equal the naive sweep's up to float rounding. The model must have been passed through
:func:`bertology.ablation.heads.enable_heads`.

Shapes: the glossary of :mod:`bertology.ablation.sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from bertology.ablation.heads import disabled_heads
from bertology.ablation.stacking import effective_config_batch, n_outputs, plan_or_raise, repeat_rows
from bertology.models.encoding import Batch
from bertology.models.hooks import hooks


@dataclass(frozen=True)
class PrefixPlan:
    """How the prefix sweep runs a model: `layers`, the model's own list of its L layers (layer i holds the
    attention module of layer i), which its forward calls in order, each once (checked on every batch)."""

    model: torch.nn.Module
    layers: torch.nn.ModuleList


def prefix_plan(model) -> PrefixPlan | str:
    """The prefix sweep's plan for `model`, or why it cannot run it (then use the naive sweep: same outputs).

    The rule: the attention modules that :func:`~bertology.ablation.heads.enable_heads` reaches are one per
    layer (not shared: ALBERT's are, and a stand-in would skip the calls that tell a shared module its layer),
    and one ``nn.ModuleList`` of the model has L entries, entry i holding the attention module of layer i (a
    decoder's ``model.layers``, GPT-2's ``transformer.h``, DistilBERT's ``transformer.layer``, ...). That the
    forward calls those layers in order, each once, is checked on each batch (:func:`prefix_batch_logits`).
    """
    from torch import nn

    from bertology.ablation.heads import DisablingUnsupported, attention_modules
    from bertology.models.layers import shares_attention

    name = type(model).__name__
    n_layers = int(model.config.num_hidden_layers)
    try:
        modules, _ = attention_modules(model)
    except DisablingUnsupported as err:
        return str(err)
    if shares_attention(model) or len(modules) != n_layers:
        return (f"{name} has {len(modules)} attention modules for {n_layers} layers; the prefix sweep skips "
                f"layers, which needs one attention module per layer")
    for candidate in model.modules():
        if isinstance(candidate, nn.ModuleList) and len(candidate) == n_layers and \
                all(any(m is modules[i] for m in layer.modules()) for i, layer in enumerate(candidate)):
            return PrefixPlan(model, candidate)
    return (f"{name} has no list of {n_layers} layers holding its attention modules in order; the prefix sweep "
            f"needs one to skip the layers below the disabled one")


def check_prefix_supported(model) -> PrefixPlan:
    """The prefix sweep's plan of `model`; ConfigError saying why (and to use the naive sweep) if it has none."""
    return plan_or_raise(prefix_plan(model))


def _map_tensors(obj, fn):
    """`obj` (a tensor, or tuples / lists / dicts of them, None, other values) with fn applied to every tensor."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):              # a namedtuple
        return type(obj)(*(_map_tensors(x, fn) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(x, fn) for x in obj)
    if isinstance(obj, dict):
        out = {key: _map_tensors(value, fn) for key, value in obj.items()}
        return out if type(obj) is dict else type(obj)(**out)
    return obj


def repeat_output(output, k: int, n_rows: int):
    """A layer's output on N rows -> the same on k*N rows, replica-major
    (:func:`~bertology.ablation.stacking.repeat_rows`).

    output: what the layer returned (a tensor, or a tuple / list / dict of tensors and other values); each
    tensor whose first dimension is N is repeated, any other (a broadcast (1, ...) bias, None, a number) is
    returned as it is. With N = 1 a tensor of first dimension 1 is repeated too (the same values either way).
    Always new tensors for the repeated ones, so the next layer may change its input in place.
    """
    return _map_tensors(output, lambda t: repeat_rows(t, k) if t.ndim and t.shape[0] == n_rows else t)


class _Replayed(torch.nn.Module):
    """Stands in for a skipped layer: whatever it is called with, returns the layer's kept output on N rows,
    repeated k times (:func:`repeat_output`, at call time: one repeated output alive at a time). Other
    attributes read through to the layer (ModernBERT's loop reads ``layer.attention_type``); the layer is not
    registered as a submodule."""

    def __init__(self, layer: torch.nn.Module, output, k: int, n_rows: int):
        super().__init__()
        self.__dict__["_replaced"] = layer
        self.__dict__["_replay"] = (output, k, n_rows)

    def forward(self, *args, **kwargs):
        output, k, n_rows = self._replay
        return repeat_output(output, k, n_rows)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_replaced"], name)


def _prefix_inputs(model, batch: Batch) -> dict:
    """The batch's model inputs (:meth:`bertology.models.encoding.Batch.inputs`), plus ``use_cache=False`` where the
    forward takes it (no key/value cache kept: the logits are the same, and a skipped layer never fills its cache
    entry)."""
    import inspect

    inputs = batch.inputs()
    if "use_cache" in inspect.signature(model.forward).parameters:
        inputs["use_cache"] = False
    return inputs


def prefix_layer_passes(n_layers: int, n_heads: int) -> tuple[int, int]:
    """(naive, prefix): the layer passes per row of a batch of the two sweeps, the embeddings and head left out.

    naive = C * L = (1 + L*H + L) * L; prefix = L (the baseline) + sum_{l<L} (H+1) * (L-l)
    = L + (H+1) * L * (L+1) / 2. The ratio prefix / naive tends to (L+1) / (2L): 0.52 for 30 layers of 9 heads
    (SmolLM2-135M: 4680 / 9030), 0.57 for 8 layers of 8 heads (332 / 584).

    >>> prefix_layer_passes(30, 9)
    (9030, 4680)
    """
    return (1 + n_layers * n_heads + n_layers) * n_layers, n_layers + (n_heads + 1) * n_layers * (n_layers + 1) // 2


@torch.no_grad()
def prefix_batch_logits(model, batch: Batch, config_batch: int, plan: PrefixPlan | None = None,
                        on_layer: Callable[[], None] | None = None) -> torch.Tensor:
    """Logits of every configuration of :func:`~bertology.ablation.sweep.sweep_configurations` on one batch:
    (1 + L*H + L, N, K).

    One forward pass with nothing disabled keeps each layer's output (forward hooks; whatever the layer returns,
    tensor or tuple) and gives the baseline. For layer l, its H + 1 configurations (head j alone, then every
    head) are stacked k at a time along the batch (k = :func:`~bertology.ablation.stacking.effective_config_batch`):
    the model's own forward on the inputs repeated k times (replica-major: rows r*N .. r*N+N-1 are configuration
    r), the disabled mask (L, k*N, H) True only in layer l, and layers 0..l-1 swapped for :class:`_Replayed`
    stand-ins returning their kept outputs repeated k times (restored in a ``finally``). Everything else
    (embeddings, masks, rotary embeddings, what runs between layers, final norm, pooling, head) is the model's own
    code. A layer with no disabled head returns the same output on the same input, so the logits equal the naive
    sweep's up to float rounding (stacked rows run as different batch shapes). Layer passes: see
    :func:`prefix_layer_passes`.
    on_layer: called after each layer's configurations (a progress bar).

    Raises ValueError when the forward did not call the plan's layers in order, each once.
    """
    plan = plan or check_prefix_supported(model)
    layers = plan.layers
    n_layers, n_heads = len(layers), model.config.num_attention_heads
    n, width = batch.input_ids.shape
    inputs = _prefix_inputs(model, batch)
    kept: list = [None] * n_layers
    calls: list[int] = []

    def keep(index, module, args, output):
        kept[index] = _map_tensors(output, torch.Tensor.clone)   # a later layer may change its input in place
        calls.append(index)

    keeping = [(layer, lambda m, a, o, i=i: keep(i, m, a, o)) for i, layer in enumerate(layers)]
    with hooks(model, fwd=keeping), disabled_heads(model, None):
        baseline = model(**inputs).logits
    if calls != list(range(n_layers)):
        raise ValueError(f"{type(model).__name__}'s forward called its layers in the order {calls}, not each once "
                         f"in order; the prefix sweep cannot skip them: run the naive sweep (ablation.sweep: naive)")
    out = torch.empty(1 + n_layers * n_heads + n_layers, n, n_outputs(model), dtype=torch.float64)
    out[0] = baseline.double().cpu()
    device = batch.input_ids.device
    # configurations of one layer: row j < H disables head j alone, row H disables every head
    per_layer = torch.cat([torch.eye(n_heads, dtype=torch.bool), torch.ones(1, n_heads, dtype=torch.bool)])
    k_max = effective_config_batch(config_batch, n, width, device)
    originals = list(layers)
    for l in range(n_layers):
        targets = [1 + l * n_heads + h for h in range(n_heads)] + [1 + n_layers * n_heads + l]
        for start in range(0, n_heads + 1, k_max):
            sel = per_layer[start:start + k_max]                                   # (k, H)
            k = sel.shape[0]
            mask = torch.zeros(n_layers, k * n, n_heads, dtype=torch.bool)
            mask[l] = sel[:, None, :].expand(k, n, n_heads).reshape(k * n, n_heads)
            stacked = {key: repeat_rows(value, k) if isinstance(value, torch.Tensor) else value
                       for key, value in inputs.items()}
            try:
                for i in range(l):
                    layers[i] = _Replayed(originals[i], kept[i], k, n)
                with disabled_heads(model, mask.to(device)):
                    logits = model(**stacked).logits
            finally:
                for i in range(l):
                    layers[i] = originals[i]
            out[targets[start:start + k]] = logits.view(k, n, -1).double().cpu()
        if on_layer is not None:
            on_layer()
    return out


def prefix_sweep(model, batches: Sequence[Batch], n_examples: int, config_batch: int,
                 progress: bool = True) -> np.ndarray:
    """(C, E, K) logits for :func:`~bertology.ablation.sweep.sweep_configurations`, equal to
    :func:`~bertology.ablation.sweep.naive_sweep` up to rounding (:func:`prefix_batch_logits` on each batch)."""
    from tqdm.auto import tqdm

    plan = check_prefix_supported(model)
    if model.training:
        raise ValueError("call model.eval() first: the sweep measures the deterministic model")
    device = next(model.parameters()).device
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = np.zeros((1 + n_layers * n_heads + n_layers, n_examples, n_outputs(model)))
    with tqdm(total=len(batches) * n_layers, desc="prefix sweep", unit="layer", disable=not progress) as bar:
        for batch in batches:
            out[:, batch.rows] = prefix_batch_logits(model, batch.to(device), config_batch, plan,
                                                     on_layer=lambda: bar.update(1)).numpy()
    return out
