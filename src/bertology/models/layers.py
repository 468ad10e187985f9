"""Which layer each attention module serves: the one lookup behind the interventions on heads
(:mod:`bertology.ablation.heads`) and the value norms (:mod:`bertology.norms.values`).

Each consumer finds a model's attention modules by what it needs of them (the heads: a module whose attention it
can reach; the norms: a module with a value and an output projection) and hands them here in the model's module
order. :func:`layer_modules` gives every layer its module: one module per layer, or, where the layers share their
attention by design (ALBERT: ``num_hidden_groups`` groups of consecutive layers, one layer per group,
:func:`shares_attention`), each group's module for every layer of the group. Within one forward pass, the k-th
call of a shared module serves the k-th layer that uses it (the encoder runs its layers in order):
:class:`CallRank` counts the calls.

>>> a, b = "attention of group 0", "attention of group 1"
>>> rank = CallRank([a, a, a, b, b, b])          # 6 layers, 2 groups of 3
>>> [rank.next(m) for m in (a, a, a, b, b, b)], rank.total
([0, 1, 2, 3, 4, 5], 6)
>>> rank.reset(); rank.next(b)
3
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any


def shares_attention(model: Any) -> bool:
    """Whether the model's layers share their attention modules by design: ALBERT's ``num_hidden_groups``
    groups of ``inner_group_num`` layers each, run in order by the encoder's loop (one attention per layer)."""
    config = model.config
    groups = getattr(config, "num_hidden_groups", None)
    return groups is not None and int(getattr(config, "inner_group_num", 1)) == 1 and \
        int(config.num_hidden_layers) % int(groups) == 0


def layer_modules(model: Any, modules: Sequence[Any]) -> list[Any] | None:
    """Every layer's attention module, in layer order (num_hidden_layers of them), from the model's attention
    modules in module order: one per layer as they are; fewer, shared by design (:func:`shares_attention`, one
    module per group), each group's module repeated for its consecutive layers. None when the modules cannot
    be matched to the layers (the caller says why)."""
    n_layers = int(model.config.num_hidden_layers)
    if len(modules) == n_layers:
        return list(modules)
    if modules and len(modules) < n_layers and shares_attention(model) and \
            len(modules) == int(model.config.num_hidden_groups):
        return [modules[i * len(modules) // n_layers] for i in range(n_layers)]
    return None


class CallRank:
    """The layer of each call of a shared attention module within one forward pass.

    layers: every layer's module (:func:`layer_modules`); a module's k-th call (since :meth:`reset`) serves
    the k-th layer that uses it. Calls are counted per `kind`, so that several hooks of one layer (its value
    projection, its residual stream, ...) each find the layer of their own call.
    """

    def __init__(self, layers: Sequence[Hashable]):
        self.users: dict[int, list[int]] = {}
        for layer, module in enumerate(layers):
            self.users.setdefault(id(module), []).append(layer)
        self.calls: dict[tuple[str, int], int] = {}

    def reset(self) -> None:
        """A new forward pass: every count starts again."""
        self.calls.clear()

    def next(self, module: Hashable, kind: str = "") -> int | None:
        """The layer this call of `module` serves; None when it has been called more often than it has layers."""
        users = self.users.get(id(module), [])
        key = (kind, id(module))
        k = self.calls.get(key, 0)
        self.calls[key] = k + 1
        return users[k] if k < len(users) else None

    @property
    def total(self) -> int:
        """The calls of `kind` '' counted in this forward pass, every module together."""
        return sum(n for (kind, _), n in self.calls.items() if kind == "")
