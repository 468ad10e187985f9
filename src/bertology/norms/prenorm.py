"""The parts of a pre-norm layer the newer context-mixing views decompose (docs/reference.md#newer-mixing-views),
found from the modules' structure, and the linearisation of a norm on a given input.

A pre-norm layer computes, on the residual stream x (T, D) entering it:

    h = N1(x);  r = x + Attn(h) (+ b_O inside Attn);  out = r + MLP(N2(r))

with N1, N2 a LayerNorm or an RMSNorm, and the model ends in a final norm Nf before its head. :func:`prenorm_parts`
finds, for every layer, the attention block of :mod:`bertology.norms.values` (its ``enclosing`` layer), N1 and N2
(a recognised pair of the layer's children: ``input_layernorm``/``post_attention_layernorm`` (Llama, Qwen2,
Mistral, Gemma, SmolLM2, BLOOM), ``ln_1``/``ln_2`` (GPT-2), ``self_attn_layer_norm``/``final_layer_norm`` (OPT),
``attn_norm``/``mlp_norm`` (ModernBERT, whose first layer's ``attn_norm`` is the identity)), the MLP's linears and
activation, and the final norm Nf (the one norm among the siblings of the layers' list that is not the embeddings'
own; none: the identity). Layouts it does not recognise raise :class:`MixingViewsUnsupported` in one line: a
post-LN layer, a layer with more norms than the two (Gemma 2's and Gemma 3's sandwich layers: four), attention and
MLP run in parallel on the same input (``use_parallel_residual``/``parallel_attn``), OPT's post-LN variant
(``do_layer_norm_before: false``), BLOOM's residual taken after the norm
(``apply_residual_connection_post_layernorm``), an MLP that is not two or three linears (experts).

:class:`Norm` says what a norm computes: LayerNorm (x - mean x) / sqrt(var x + eps) * w + b, RMSNorm
x / sqrt(mean x^2 + eps) * (w + offset) (offset 1 where the module multiplies by (1 + w), Gemma's; told by running
the module on a probe vector, never from the model's name). :func:`linear_part` applies a norm's linear part to
parts of an input at the scale of the real input (:func:`norm_scale`): the sum of the parts' images plus the bias is
the norm's output on the sum. For RMSNorm the linear part has no mean subtracted (the norm has none): a departure
from Ferrando et al. 2023, who linearise LayerNorm only.

Glossary: T positions, D hidden size, F the MLP's width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertology.norms.mixparts import MixingViewsUnsupported
from bertology.norms.values import AttentionBlock, attention_blocks, is_linear, linear_weight

#: (the norm before attention, the norm before the MLP): the pairs of a pre-norm layer's children recognised
NORM_PAIRS = (("input_layernorm", "post_attention_layernorm"), ("ln_1", "ln_2"),
              ("self_attn_layer_norm", "final_layer_norm"), ("attn_norm", "mlp_norm"))
#: the names an MLP's activation module has (GPT-2 ``act``, Llama ``act_fn``, OPT ``activation_fn``, BLOOM
#: ``gelu_impl``)
ACTIVATION_NAMES = ("act", "act_fn", "activation_fn", "activation", "gelu_impl")
#: a gated MLP's linears: the one through the activation, the one it multiplies
GATE_NAMES, UP_NAMES = ("gate_proj",), ("up_proj",)
#: configuration flags under which a layer is not the sequential pre-norm layout (attention and MLP in parallel;
#: OPT's post-LN variant is ``do_layer_norm_before: false``; BLOOM's residual after the norm)
PARALLEL_FLAGS = ("use_parallel_residual", "parallel_attn", "apply_residual_connection_post_layernorm")


@dataclass(frozen=True)
class Norm:
    """A normalisation as the views linearise it. kind: "layernorm" (y = (x - mean x) / sqrt(var x + eps) * w + b),
    "rmsnorm" (y = x / sqrt(mean x^2 + eps) * (w + offset)) or "identity" (y = x); module: the model's module (None
    for an identity the model has no module for); weight (D,) w or None (1); bias (D,) b or None; offset: 1.0 where
    the module multiplies by (1 + w) (Gemma's RMSNorm), else 0.0."""

    module: torch.nn.Module | None
    kind: str
    eps: float = 0.0
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    offset: float = 0.0

    def gain(self, like: torch.Tensor) -> torch.Tensor | None:
        """(D,) w + offset in `like`'s dtype and device, None where the norm has no weight (a gain of 1)."""
        if self.weight is None:
            return None
        return self.weight.to(like.device, like.dtype) + self.offset

    def shift(self, like: torch.Tensor) -> torch.Tensor | None:
        """(D,) the bias b in `like`'s dtype and device, None where the norm has none."""
        return None if self.bias is None else self.bias.to(like.device, like.dtype)


def norm_scale(norm: Norm, real_in: torch.Tensor) -> torch.Tensor:
    """real_in (..., D) the norm's real input -> (...,) its scale: 1 / sqrt(var + eps) (LayerNorm, variance over D,
    biased), 1 / sqrt(mean(x^2) + eps) (RMSNorm), 1 (identity); in real_in's dtype."""
    if norm.kind == "layernorm":
        return (real_in.var(-1, unbiased=False) + norm.eps).rsqrt()
    if norm.kind == "rmsnorm":
        return (real_in.pow(2).mean(-1) + norm.eps).rsqrt()
    return torch.ones(real_in.shape[:-1], dtype=real_in.dtype, device=real_in.device)


def linear_part(norm: Norm, parts: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The norm's linear part on parts (..., D) of an input, at scale (a tensor broadcasting to parts.shape[:-1],
    :func:`norm_scale` of the real input) -> (..., D): LayerNorm (v - mean v) * scale * gain, RMSNorm
    v * scale * gain (no mean: the norm subtracts none), identity v. The bias is left out: the norm's output on
    a sum of parts is the sum of their linear parts plus the bias."""
    if norm.kind == "identity":
        return parts
    v = parts - parts.mean(-1, keepdim=True) if norm.kind == "layernorm" else parts
    v = v * scale.to(parts.dtype)[..., None]
    g = norm.gain(parts)
    return v if g is None else v * g


def apply_norm(norm: Norm, x: torch.Tensor) -> torch.Tensor:
    """The norm of x (..., D) as :class:`Norm` defines it (its linear part at x's own scale, plus the bias)."""
    out = linear_part(norm, x, norm_scale(norm, x))
    b = norm.shift(x)
    return out if b is None else out + b


def _eps(module: torch.nn.Module) -> float | None:
    for name in ("eps", "variance_epsilon", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    if isinstance(module, getattr(torch.nn, "RMSNorm", ())) and module.eps is None:
        return float(torch.finfo(module.weight.dtype if module.weight is not None else torch.float32).eps)
    return None


def _one_d(module, name: str) -> torch.Tensor | None:
    t = getattr(module, name, None)
    return t if isinstance(t, torch.Tensor) and t.ndim == 1 else None


@torch.no_grad()
def _probe(module: torch.nn.Module, candidates: list[Norm], what: str) -> Norm:
    """The candidate whose definition gives the module's output on a probe vector (a non-zero mean, so that
    LayerNorm and RMSNorm differ, and (1 + w) differs from w); on the meta device the first candidate."""
    ref = candidates[0].weight if candidates[0].weight is not None else next(module.parameters(), None)
    if ref is None or ref.is_meta:
        return candidates[0]
    D = ref.shape[0]
    x = (torch.linspace(-1.0, 2.0, D, dtype=torch.float64) + torch.arange(D) % 3).to(ref.device, ref.dtype)[None]
    y = module(x).double()
    tol = 1e-4 if ref.dtype in (torch.float64, torch.float32) else 2e-2     # Llama's RMSNorm runs in float32
    for cand in candidates:
        want = apply_norm(cand, x.double())
        if torch.allclose(y, want, rtol=tol, atol=tol * float(want.abs().max())):
            return cand
    raise MixingViewsUnsupported(f"{what} ({type(module).__name__}) computes neither LayerNorm nor RMSNorm (w or "
                                 f"1 + w) on a probe vector: the newer mixing views linearise those two")


def norm_of(module: torch.nn.Module | None, what: str) -> Norm:
    """The :class:`Norm` of a model's normalisation module (None or ``nn.Identity``: the identity): torch's
    LayerNorm; torch's RMSNorm or a model's own ``*Norm`` class with a 1-d weight and an eps (``eps``,
    ``variance_epsilon``), told LayerNorm, RMSNorm with w or RMSNorm with (1 + w) by running it on a probe vector.
    what: the module's place, for the error."""
    if module is None or isinstance(module, torch.nn.Identity):
        return Norm(module, "identity")
    if isinstance(module, torch.nn.LayerNorm):
        if len(module.normalized_shape) != 1:
            raise MixingViewsUnsupported(f"{what} normalises over {tuple(module.normalized_shape)}, not the hidden size")
        return Norm(module, "layernorm", float(module.eps), module.weight, module.bias)
    eps, w = _eps(module), _one_d(module, "weight")
    if eps is None or w is None:
        raise MixingViewsUnsupported(f"{what} ({type(module).__name__}) has no 1-d weight and eps: the newer mixing "
                                     f"views linearise LayerNorm and RMSNorm")
    b = _one_d(module, "bias")
    cands = [Norm(module, "rmsnorm", eps, w), Norm(module, "rmsnorm", eps, w, offset=1.0),
             Norm(module, "layernorm", eps, w, b)]
    if b is not None:
        cands = cands[2:] + cands[:2]
    return _probe(module, cands, what)


@dataclass(frozen=True)
class PreNormLayer:
    """One pre-norm layer: block (the attention block, :class:`~bertology.norms.values.AttentionBlock`), layer (the
    element of the layers' list whose input is the residual stream), attention_norm N1 and mlp_norm N2
    (:class:`Norm`), the MLP: mlp "plain" (down(act(up(h))), up D -> F), "gated" (down(act(gate(h)) * up(h)), gate
    and up D -> F) or "gated_fused" (z = up(h) D -> 2F: down(act(z[:F]) * z[F:]), ModernBERT's ``Wi``); down
    F -> D; activation the module between them."""

    block: AttentionBlock
    layer: torch.nn.Module
    attention_norm: Norm
    mlp_norm: Norm
    mlp: str
    up: torch.nn.Module
    down: torch.nn.Module
    activation: torch.nn.Module
    gate: torch.nn.Module | None = None

    @property
    def gated(self) -> bool:
        """Whether the MLP multiplies its activation by a second projection (SwiGLU/GeGLU type)."""
        return self.mlp != "plain"


@dataclass(frozen=True)
class PreNormParts:
    """A pre-norm model's layers (:class:`PreNormLayer`, in layer order) and its final norm Nf before the head
    (:class:`Norm`; the identity where the model has none)."""

    layers: list[PreNormLayer]
    final_norm: Norm


def _inside(module: torch.nn.Module, root: torch.nn.Module) -> bool:
    return any(m is module for m in root.modules())


def _is_norm(module) -> bool:
    return isinstance(module, (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", torch.nn.LayerNorm))) or \
        "Norm" in type(module).__name__


def _norms(model, b: AttentionBlock, layer: torch.nn.Module) -> tuple[Norm, Norm]:
    kids = dict(layer.named_children())
    where = f"{type(model).__name__} layer {b.index}"
    names = [n for n, m in kids.items() if _is_norm(m)]
    for first, second in NORM_PAIRS:
        if first in kids and second in kids:
            others = [n for n in names if n not in (first, second)]
            if others:
                raise MixingViewsUnsupported(
                    f"{where} has {len(names)} norms ({', '.join(names)}): a sandwich layer (Gemma 2's normalises the "
                    f"attention's and the MLP's outputs too), not the pre-norm layout the newer mixing views follow")
            return norm_of(kids[first], f"{where}'s {first}"), norm_of(kids[second], f"{where}'s {second}")
    raise MixingViewsUnsupported(f"{where}: bertology finds no pair of norms before attention and MLP among its "
                                 f"children ({', '.join(names) or 'none'}), not a pre-norm layout it recognises")


def _mlp(model, b: AttentionBlock, layer: torch.nn.Module):
    """(mlp kind, up, down, activation, gate) of the layer's MLP, or MixingViewsUnsupported."""
    where = f"{type(model).__name__} layer {b.index}"
    named = [(n, m) for n, m in layer.named_modules() if not _inside(m, b.attention)]
    lins = [(n.rsplit(".", 1)[-1], m) for n, m in named if is_linear(m) and not isinstance(m, torch.nn.Embedding)]
    acts = [m for n, m in named if n.rsplit(".", 1)[-1] in ACTIVATION_NAMES]
    D = b.output_weight().shape[0]
    shapes = [tuple(linear_weight(m).shape) for _, m in lins]           # (out, in)
    if len(acts) != 1:
        raise MixingViewsUnsupported(f"{where}: bertology finds {len(acts)} activation modules in the MLP (named "
                                     f"{', '.join(ACTIVATION_NAMES)}), not one")
    if len(lins) == 2 and shapes[0][1] == D and shapes[1][0] == D:
        up, down = lins[0][1], lins[1][1]
        if shapes[0][0] == shapes[1][1]:
            return "plain", up, down, acts[0], None
        if shapes[0][0] == 2 * shapes[1][1]:
            return "gated_fused", up, down, acts[0], None
    if len(lins) == 3:
        by = dict(lins)
        gate = next((by[n] for n in GATE_NAMES if n in by), None)
        up = next((by[n] for n in UP_NAMES if n in by), None)
        down = next((m for _, m in lins if m is not gate and m is not up), None)
        if gate is not None and up is not None and linear_weight(down).shape[0] == D and \
                linear_weight(gate).shape == linear_weight(up).shape == (linear_weight(down).shape[1], D):
            return "gated", up, down, acts[0], gate
    raise MixingViewsUnsupported(f"{where}: bertology finds {len(lins)} linears outside attention "
                                 f"({', '.join(f'{n} {s[1]}->{s[0]}' for (n, _), s in zip(lins, shapes))}), not a "
                                 f"plain (D -> F -> D) or gated (gate, up D -> F, down F -> D) MLP")


def _final_norm(model, layers: list[torch.nn.Module]) -> Norm:
    """The norm among the siblings of the layers' list that is not the embeddings' (none: the identity)."""
    names = {m: n for n, m in model.named_modules()}
    path = names[layers[0]].rsplit(".", 1)[0]                                 # the ModuleList
    parent = model.get_submodule(path.rsplit(".", 1)[0] if "." in path else "")
    found = [(n, m) for n, m in parent.named_children() if _is_norm(m) and "emb" not in n.lower()]
    if len(found) > 1:
        raise MixingViewsUnsupported(f"{type(model).__name__} has {len(found)} norms beside its layers "
                                     f"({', '.join(n for n, _ in found)}): bertology cannot tell the final one")
    return norm_of(found[0][1] if found else None, f"{type(model).__name__}'s final norm")


def prenorm_parts(model: torch.nn.Module) -> PreNormParts:
    """Every layer's :class:`PreNormLayer` in layer order and the final norm (:class:`PreNormParts`), or
    :class:`MixingViewsUnsupported` saying in one line why the model is not the pre-norm layout."""
    config = model.config
    flags = [f for f in PARALLEL_FLAGS if getattr(config, f, False)]
    if getattr(config, "do_layer_norm_before", True) is False:
        flags.append("do_layer_norm_before: false")
    if flags:
        raise MixingViewsUnsupported(f"{type(model).__name__}'s config sets {', '.join(flags)}: its layers are not "
                                     f"the sequential pre-norm layout (x + attention, then + MLP) the newer mixing "
                                     f"views follow")
    out = []
    for b in attention_blocks(model):
        layer = b.enclosing
        if b.post_norm is not None:
            raise MixingViewsUnsupported(f"{type(model).__name__} layer {b.index} is a post-LN layer (a LayerNorm "
                                         f"after attention + residual), not a pre-norm one")
        if layer is None or not any(m is b.attention for m in layer.children()):
            raise MixingViewsUnsupported(f"{type(model).__name__} layer {b.index}: its attention is not a child of "
                                         f"a layer of the model's layer list, a layout bertology does not recognise")
        n1, n2 = _norms(model, b, layer)
        out.append(PreNormLayer(b, layer, n1, n2, *_mlp(model, b, layer)))
    if len({id(p.layer) for p in out}) != len(out):
        raise MixingViewsUnsupported(f"{type(model).__name__} shares layers between several places of its stack")
    return PreNormParts(out, _final_norm(model, [p.layer for p in out]))


def head_candidates(model: torch.nn.Module, parts: PreNormParts) -> list[torch.nn.Module]:
    """The linears outside the layers (embeddings apart) that may belong to a head after the final norm; which of
    them ran after it, and on what, :class:`PreNormCapture` finds from the forward pass."""
    inside = {id(m) for p in parts.layers for m in p.layer.modules()}
    return [m for m in model.modules() if is_linear(m) and not isinstance(m, torch.nn.Embedding)
            and id(m) not in inside]


class PreNormCapture:
    """Forward hooks (a context manager, beside :class:`~bertology.norms.values.Capture`) keeping, per layer of
    `parts`, its input x (B, T, D) (the residual stream), the MLP norm's input r = x + attention (+ b_O) (B, T, D)
    and the layer's output (B, T, D) (r + MLP); the final norm's input and output (B, T, D) (the last layer's output
    where the model has no final norm); and the calls of the `head` linears after the final norm, in call order
    (module, input, output). Each forward pass of the model starts afresh."""

    def __init__(self, model: torch.nn.Module, parts: PreNormParts, head: list[torch.nn.Module] | None = None):
        self.model, self.parts, self.head = model, parts, head or []
        self.x: dict[int, torch.Tensor] = {}
        self.r: dict[int, torch.Tensor] = {}
        self.out: dict[int, torch.Tensor] = {}
        self.final_in: torch.Tensor | None = None
        self.final_out: torch.Tensor | None = None
        self.head_calls: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor]] = []
        self._scope = None

    def _reset(self, *_) -> None:
        for kept in (self.x, self.r, self.out):
            kept.clear()
        self.final_in = self.final_out = None
        self.head_calls.clear()

    def __enter__(self) -> PreNormCapture:
        from contextlib import ExitStack

        from bertology.models.hooks import hooks

        def first(t):
            return (t[0] if isinstance(t, (tuple, list)) else t).detach()

        def layer_in(i):
            def hook(module, args, kwargs):
                self.x[i] = first(args[0] if args else kwargs.get("hidden_states", kwargs.get("x")))
            return hook

        def keep(store, i, what):
            def hook(module, args, output):
                t = first(args[0] if what == "input" else output)
                x = self.x.get(i)
                store[i] = t.view(x.shape) if x is not None and t.ndim == 2 < x.ndim else t    # OPT flattens (B*T, D)
            return hook

        def final(module, args, output):
            self.final_in, self.final_out = first(args[0]), first(output)

        def head(module, args, output):
            if self.final_out is not None:
                self.head_calls.append((module, first(args[0]), first(output)))

        last = len(self.parts.layers) - 1
        fwd = []
        for i, p in enumerate(self.parts.layers):
            fwd.append((p.layer, keep(self.out, i, "output")))
            if p.mlp_norm.module is not None:
                fwd.append((p.mlp_norm.module, keep(self.r, i, "input")))
        if self.parts.final_norm.module is not None:
            fwd.append((self.parts.final_norm.module, final))
        else:                                        # no final norm: the last layer's output goes to the head
            fwd.append((self.parts.layers[last].layer, lambda m, a, o: final(m, (first(o),), o)))
        fwd += [(m, head) for m in self.head]
        with ExitStack() as scope:
            scope.enter_context(hooks(self.model, pre=[(self.model, self._reset)]))
            scope.enter_context(hooks(self.model, pre=[(p.layer, layer_in(i)) for i, p in enumerate(self.parts.layers)],
                                      with_kwargs=True))
            scope.enter_context(hooks(self.model, fwd=fwd))
            self._scope = scope.pop_all()
        return self

    def __exit__(self, *exc) -> bool | None:
        """Removes every hook (:func:`bertology.models.hooks.hooks`)."""
        return self._scope.__exit__(*exc)
