"""The parts of a post-LN layer the newer context-mixing views decompose (docs/reference.md#newer-mixing-views), found
from the modules' structure, and the forward hooks that keep their inputs and outputs.

:func:`layer_parts`: the attention block of :mod:`bertology.norms.values` with its post-LayerNorm LN1
(:mod:`bertology.norms.mixing`), then a feed-forward block of two linears W1 (D -> F) and W2 (F -> D) with an
elementwise activation between them, and a second LayerNorm LN2 over (FFN + residual), whose output is the layer's
output. A pre-LN layer (ModernBERT, a pre-norm decoder) is :mod:`bertology.norms.prenorm`'s; a layout bertology does not
recognise gets none of ALTI, GlobEnc (Ferrando et al. 2022, Modarressi et al. 2022) and DecompX (Modarressi et al.
2023) (:class:`MixingViewsUnsupported`, said in one line). :func:`head_linears`: the linears a classifier head may hold.
:class:`PartsCapture`: per layer the FFN's pre-activation z (B, T, F) and activation a (B, T, F), LN2's input and
output (B, T, D), and the head's calls after the last layer.

Glossary: B batch, T padded length, D hidden size, F the FFN's width.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import torch

from bertology.pipeline.errors import UserError
from bertology.models.hooks import hooks
from bertology.norms.values import AttentionBlock, is_linear, attention_blocks


class MixingViewsUnsupported(UserError, ValueError):
    """The model's layers are not a layout the newer mixing views decompose (post-LN, or pre-norm: prenorm.py)."""


@dataclass(frozen=True)
class LayerParts:
    """One post-LN layer: its attention block (with LN1 = block.post_norm), the FFN's linears W1 (F x D) and W2
    (D x F) and LN2, the LayerNorm whose output is the layer's output."""

    block: AttentionBlock
    ffn_in: torch.nn.Module
    ffn_out: torch.nn.Module
    final_norm: torch.nn.LayerNorm


def _inside(module: torch.nn.Module, root: torch.nn.Module) -> bool:
    return any(m is module for m in root.modules())


def layer_parts(model: torch.nn.Module) -> list[LayerParts]:
    """Every layer's :class:`LayerParts`, in layer order, or :class:`MixingViewsUnsupported` saying why not."""
    blocks = attention_blocks(model)
    out = []
    for b in blocks:
        if b.layer is None or b.post_norm is None:
            kind = "a pre-LN layer (no LayerNorm after attention + residual)" if b.residual_sum is not None else \
                "a layer whose residual layout bertology does not recognise"
            raise MixingViewsUnsupported(
                f"{type(model).__name__} layer {b.index} is {kind}: ALTI, GlobEnc and DecompX decompose "
                f"post-LN layers (attention, residual, LayerNorm, feed-forward, residual, LayerNorm)")
        rest = [m for m in b.layer.modules() if is_linear(m) and m is not b.output and not _inside(m, b.attention)]
        norms = [m for m in b.layer.modules() if isinstance(m, torch.nn.LayerNorm) and m is not b.post_norm
                 and not _inside(m, b.attention)]
        D = b.output_weight().shape[0]
        ok = len(rest) == 2 and len(norms) == 1 and rest[0].weight.shape[1] == D and \
            rest[1].weight.shape == (D, rest[0].weight.shape[0])
        if not ok:
            raise MixingViewsUnsupported(
                f"{type(model).__name__} layer {b.index}: bertology finds {len(rest)} feed-forward linears and "
                f"{len(norms)} LayerNorms after the attention block, not the two linears (D -> F -> D) and one "
                f"LayerNorm the newer mixing views decompose")
        out.append(LayerParts(b, rest[0], rest[1], norms[0]))
    return out


def head_linears(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The linears that may belong to a classifier head: every linear outside the encoder layers that is not an
    embedding. Which of them the head is, and in which order, :class:`PartsCapture` finds from the forward pass: the
    ones called after the last layer's output (a pooler's and the classifier's, in call order)."""
    blocks = attention_blocks(model)
    layer_mods = {id(m) for b in blocks if b.layer is not None for m in b.layer.modules()}
    return [m for m in model.modules() if is_linear(m) and not isinstance(m, torch.nn.Embedding)
            and id(m) not in layer_mods]


class PartsCapture:
    """Forward hooks (a context manager, beside :class:`~bertology.norms.values.Capture`) keeping per layer the
    FFN's pre-activation z = W1 h + b1 (B, T, F) and activation a (W2's input), LN2's input and output (B, T, D), and
    the head: the calls of the `head` candidates after the last layer's output, in call order (module, input (B, *),
    output (B, *)). A module shared by several layers (ALBERT) serves them in call order."""

    def __init__(self, model: torch.nn.Module, parts: list[LayerParts], head: list[torch.nn.Module]):
        self.model, self.parts, self.head = model, parts, head
        self.z: dict[int, torch.Tensor] = {}
        self.a: dict[int, torch.Tensor] = {}
        self.ln2_in: dict[int, torch.Tensor] = {}
        self.ln2_out: dict[int, torch.Tensor] = {}
        self.head_calls: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor]] = []
        self._after = False
        self._last = parts[-1].block.index if parts else -1
        self._calls: dict[int, int] = {}
        self._scope = ExitStack()

    def _rank(self, module, kind: str) -> int | None:
        users = [p.block.index for p in self.parts if getattr(p, kind) is module]
        k = self._calls.get(id(module), 0)
        self._calls[id(module)] = k + 1
        return users[k] if k < len(users) else None

    def __enter__(self) -> PartsCapture:
        def reset(*_):
            for d in (self.z, self.a, self.ln2_in, self.ln2_out, self._calls):
                d.clear()
            self.head_calls.clear()
            self._after = False

        fwd = []
        seen: set[int] = set()
        for p in self.parts:
            for kind in ("ffn_in", "ffn_out", "final_norm"):
                mod = getattr(p, kind)
                if (id(mod), kind) in seen:
                    continue
                seen.add((id(mod), kind))
                fwd.append((mod, self._hook(kind)))
        fwd += [(m, self._head_hook) for m in self.head]
        with ExitStack() as scope:
            scope.enter_context(hooks(self.model, fwd=fwd, pre=[(self.model, reset)]))
            self._scope = scope.pop_all()
        return self

    def _hook(self, kind: str):
        def hook(module, args, output):
            layer = self._rank(module, kind)
            if layer is None:
                return
            x = args[0].detach()
            out = (output[0] if isinstance(output, tuple) else output).detach()
            if kind == "ffn_in":
                self.z[layer] = out
            elif kind == "ffn_out":
                self.a[layer] = x
            else:
                self.ln2_in[layer], self.ln2_out[layer] = x, out
                self._after = self._after or layer == self._last
        return hook

    def _head_hook(self, module, args, output):
        if self._after:
            self.head_calls.append((module, args[0].detach(), output.detach()))

    def head_of(self, row: int, target: int = 0) -> tuple[list[torch.nn.Module], list[torch.Tensor],
                                                          list[torch.Tensor]]:
        """The head's linears in call order and their input and output of row `row` (position `target` where the
        head saw positions)."""
        def pick(t: torch.Tensor) -> torch.Tensor:
            return t[row] if t.ndim == 2 else t[row, target]

        return ([m for m, _, _ in self.head_calls], [pick(i) for _, i, _ in self.head_calls],
                [pick(o) for _, _, o in self.head_calls])

    def __exit__(self, *exc) -> bool | None:
        """Removes every hook (:func:`bertology.models.hooks.hooks`)."""
        return self._scope.__exit__(*exc)

