"""Target networks: polyak averaging in one fused op, and freezing a module's weights."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn


def make_target(module: nn.Module) -> nn.Module:
    """A frozen deep copy of ``module`` (no parameter requires grad)."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``theta' <- (1 - tau) theta' + tau theta`` for all parameters, as one ``foreach`` lerp.

    Floating-point buffers (running statistics) are averaged the same way.
    """
    target_params = [*target.parameters(), *_float_buffers(target)]
    online_params = [*online.parameters(), *_float_buffers(online)]
    torch._foreach_lerp_(target_params, online_params, tau)


def _float_buffers(module: nn.Module) -> list[torch.Tensor]:
    return [b for b in module.buffers() if b.is_floating_point()]


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block ``module``'s parameters get no gradient (inputs still do)."""
    flags = [p.requires_grad for p in module.parameters()]
    module.requires_grad_(False)
    try:
        yield module
    finally:
        for p, flag in zip(module.parameters(), flags):
            p.requires_grad_(flag)
