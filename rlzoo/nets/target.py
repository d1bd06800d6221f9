"""Target networks: whether an algorithm keeps them (``algo.target_networks``), polyak averaging in
one fused op, and freezing a module's weights."""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Iterator

import torch
from torch import nn


def make_target(module: nn.Module) -> nn.Module:
    """A frozen deep copy of ``module`` (no parameter requires grad)."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target


TARGET_NETWORKS = ("polyak", "none")
"""``algo.target_networks``: ``polyak``, frozen copies averaged towards the online networks with
rate ``tau`` (SAC, TD3, DDPG, TQC); ``none``, no copies: the algorithm bootstraps from its online
networks, read without gradient (CrossQ; TorchRL's losses with ``delay_value=False``)."""


def optional_target(module: nn.Module, target_networks: str) -> nn.Module | None:
    """The target copy of ``module`` for ``algo.target_networks`` (:data:`TARGET_NETWORKS`):
    ``make_target(module)`` for ``polyak``, ``None`` for ``none``."""
    if target_networks not in TARGET_NETWORKS:
        raise ValueError(f"algo.target_networks must be one of {', '.join(TARGET_NETWORKS)}, got "
                         f"{target_networks!r}")
    return make_target(module) if target_networks == "polyak" else None


# Parameter and buffer lists per module, built once: walking the module tree on every update
# costs ~8% of a small SAC update on the CPU. Parameters are updated in place (optimizers,
# load_state_dict, .to()), so the lists stay valid; a module that gains tensors after its first
# update is not supported.
_TENSORS: weakref.WeakKeyDictionary[nn.Module, tuple[list[torch.Tensor], list[torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)


def _tensors(module: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(parameters, floating-point buffers) of ``module``, cached."""
    found = _TENSORS.get(module)
    if found is None:
        found = (list(module.parameters()),
                 [b for b in module.buffers() if b.is_floating_point()])
        _TENSORS[module] = found
    return found


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float, buffers: bool = True) -> None:
    """``theta' <- (1 - tau) theta' + tau theta`` for all parameters, as one ``foreach`` lerp.

    Floating-point buffers (running statistics) are averaged the same way, unless ``buffers``
    is false: then the target keeps its own (FlashSAC's target critic updates its batch norms'
    statistics in its own forward passes and averages only the parameters).
    """
    (target_params, target_buffers), (online_params, online_buffers) = (
        _tensors(target), _tensors(online)
    )
    if not buffers:
        target_buffers, online_buffers = [], []
    torch._foreach_lerp_(target_params + target_buffers, online_params + online_buffers, tau)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block ``module``'s parameters get no gradient (inputs still do).

    Each parameter is swapped for a detached alias of itself and put back after, so it works
    the same on weights under ``torch.vmap`` / ``torch.func.functional_call``, where
    ``requires_grad`` cannot be toggled."""
    swapped = [(m, name, p) for m in module.modules()
               for name, p in m._parameters.items() if p is not None]
    for m, name, p in swapped:
        m._parameters[name] = p.detach()  # type: ignore[assignment]
    try:
        yield module
    finally:
        for m, name, p in swapped:
            m._parameters[name] = p
