"""Forward hooks on a model's modules, registered for a scope and always removed (in the manner of TransformerLens'
``hooks()``), and a forward pass stopped at a module.

A hook is a pair ``(target, fn)``: target is a module, or the dotted name of a submodule of the root module
(resolved with ``root.get_submodule``: ``"bert.encoder.layer.3"``, ``"model.layers.0.self_attn"``). ``fn`` is a
forward hook ``fn(module, args, output)`` (its return value, when not None, replaces the module's output) or a
forward pre-hook ``fn(module, args)`` (a return value replaces the positional arguments); with ``with_kwargs=True``
they are ``fn(module, args, kwargs, output)`` and ``fn(module, args, kwargs)`` -> None or ``(args, kwargs)``
(PyTorch's ``register_forward_hook`` and ``register_forward_pre_hook``). Hooks are registered in the order given,
pre-hooks first; on one module they run in that order.

- :func:`hooks`: a context manager; every handle it registered is removed however the block ends (normally, by an
  exception, by KeyboardInterrupt).
- :func:`register_hooks`: the same registration for hooks meant to stay for the module's lifetime (the caller
  keeps the handles, or never removes them).
- :func:`stop_forward`: called by a hook, ends the forward pass there with an output; the enclosing :func:`hooks`
  block catches it (its :class:`HookScope` holds the output), so the caller never sees the exception.
- :func:`run_until`: the forward pass of a model run up to a module's call, returning that call's output; the
  modules after it do not run.

>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
>>> shapes = []
>>> with hooks(net, fwd=[("0", lambda module, args, output: shapes.append(tuple(output.shape)))]):
...     _ = net(torch.ones(4, 2))
>>> shapes, len(net[0]._forward_hooks)
([(4, 3)], 0)
>>> tuple(run_until(net, "1", torch.ones(4, 2)).shape)              # the ReLU's output; the last linear never runs
(4, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

#: a module, or the dotted name of a submodule of the root module
Target = torch.nn.Module | str
#: (target, hook function)
Hook = tuple[Target, Callable[..., Any]]


class _StopForward(Exception):
    """Raised by :func:`stop_forward` inside a hook: ends the forward pass, carrying the output it stops with.
    An Exception (not a BaseException) so that ``try/finally`` and ``except Exception`` cleanups of the modules
    it crosses run as for any error."""

    def __init__(self, output: Any):
        super().__init__("a hook stopped the forward pass (bertology.models.hooks.stop_forward)")
        self.output = output


def stop_forward(output: Any = None):
    """End the forward pass being run, from inside a hook, with `output` (any object: the module's output, what the
    hook captured). The innermost enclosing :func:`hooks` block catches it: the block ends there and its
    :class:`HookScope` has ``stopped`` True and ``output`` set. Never returns."""
    raise _StopForward(output)


def resolve(root: torch.nn.Module | None, target: Target) -> torch.nn.Module:
    """The module `target` names: a module itself, or a dotted name resolved by ``root.get_submodule`` (an
    AttributeError names what is missing; "" is the root)."""
    if isinstance(target, torch.nn.Module):
        return target
    if not isinstance(target, str):
        raise TypeError(f"a hook's target is a module or a submodule's name, not {type(target).__name__}")
    if root is None:
        raise ValueError(f"the hook target {target!r} is a name: give the module it is resolved in")
    return root.get_submodule(target)


def register_hooks(root: torch.nn.Module | None, fwd: Iterable[Hook] = (), pre: Iterable[Hook] = (), *,
                   with_kwargs: bool = False) -> list[RemovableHandle]:
    """Register forward pre-hooks `pre`, then forward hooks `fwd`, in the order given, on their targets (modules, or
    names of submodules of `root`; every name is resolved before anything is registered). with_kwargs: every hook
    of this call also receives the forward's keyword arguments. Returns the handles, pre-hooks first; the caller
    removes them (``handle.remove()``), or keeps the hooks for the module's lifetime. :func:`hooks` removes them for
    a scope."""
    pre = [(resolve(root, t), fn) for t, fn in pre]
    fwd = [(resolve(root, t), fn) for t, fn in fwd]
    handles: list[RemovableHandle] = []
    try:
        for module, fn in pre:
            handles.append(module.register_forward_pre_hook(fn, with_kwargs=with_kwargs))
        for module, fn in fwd:
            handles.append(module.register_forward_hook(fn, with_kwargs=with_kwargs))
    except BaseException:
        for handle in handles:
            handle.remove()
        raise
    return handles


@dataclass
class HookScope:
    """What a :func:`hooks` block yields: its handles (pre-hooks first), and once the block has ended, whether a
    hook stopped the forward pass (:func:`stop_forward`) and the output it stopped with."""

    handles: list[RemovableHandle] = field(default_factory=list)
    stopped: bool = False
    output: Any = None


@contextmanager
def hooks(root: torch.nn.Module | None, fwd: Iterable[Hook] = (), pre: Iterable[Hook] = (), *,
          with_kwargs: bool = False) -> Iterator[HookScope]:
    """Within the block, forward hooks `fwd` and forward pre-hooks `pre` are registered on their targets (modules,
    or names of submodules of `root`, :func:`register_hooks`); every one is removed when the block ends, however it
    ends. A hook that calls :func:`stop_forward` ends the block (the rest of it does not run) without an exception:
    the yielded :class:`HookScope` then has ``stopped`` True and ``output`` the stop's output. Blocks nest; a stop
    ends the innermost one. Hooks that take keyword arguments and hooks that do not: two blocks, nested.
    """
    scope = HookScope(register_hooks(root, fwd, pre, with_kwargs=with_kwargs))
    try:
        yield scope
    except _StopForward as stop:
        scope.stopped, scope.output = True, stop.output
    finally:
        for handle in scope.handles:
            handle.remove()


def run_until(model: torch.nn.Module, target: Target, *args, call: int = 0, **kwargs) -> Any:
    """Run ``model(*args, **kwargs)`` until `target` (a module, or the name of a submodule of `model`) returns from
    its call number `call` (0: the first; a module shared by several layers is called once per layer), and return
    that call's output (after the forward hooks registered on it before this one); nothing after it runs. The
    output is whatever the module returns: a tensor (batch, positions, hidden) for most layers, or a tuple.

    Raises RuntimeError when the forward pass ends without that call."""
    module = resolve(model, target)
    calls = {"n": 0}

    def stop(mod, inputs, output):
        k = calls["n"]
        calls["n"] += 1
        if k == call:
            stop_forward(output)

    with hooks(model, fwd=[(module, stop)]) as scope:
        model(*args, **kwargs)
    if not scope.stopped:
        raise RuntimeError(f"the forward pass of {type(model).__name__} called {type(module).__name__} "
                           f"{calls['n']} time(s), never its call {call}")
    return scope.output
