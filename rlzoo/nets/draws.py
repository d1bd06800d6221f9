"""Every random draw of the networks and algorithms: standard normal and uniform noise, and
dropout masks. Each seed of a seed group draws from its own generator exactly what its single
run draws (issue 43 item 3).

Outside a seed group (a single run) each function is the plain torch call on the process's
generator (``normal_like`` is ``torch.randn_like``, ``uniform`` is ``torch.rand``, ``dropout``
is ``F.dropout``), so a single run's numbers are what they were before this module.

Inside a group's ``per_seed`` call (``rlzoo.algos.seeds.run_per_seed``, one ``torch.vmap`` over
the seed axis) on the CPU, seed k's draw comes from seed k's own generator (its single run's
process generator, carried on from where that run's was after building its algorithm) with the
shape and dtype a single run's call has, one call per seed, so the numbers are the single run's
(``torch.randn_like`` of a dense ``like`` fills in memory order: what is drawn here is
contiguous, as ``like`` is for every caller in rlzoo). There the vmap runs with
``randomness="error"``: a torch random call that does not come through here stops the update
with a message, instead of drawing one ``[K, ...]`` tensor from the shared generator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch._C._functorch import _add_batch_dim, current_level

# the generators of the per-seed call running now, and its vmap level (innermost last)
_ACTIVE: list[tuple[Sequence[torch.Generator], int]] = []


@contextlib.contextmanager
def per_seed_draws(generators: Sequence[torch.Generator]) -> Iterator[None]:
    """Within the block (entered inside the vmapped function of a group's per-seed call, at its
    vmap level), seed k draws from ``generators[k]``."""
    _ACTIVE.append((generators, current_level()))
    try:
        yield
    finally:
        _ACTIVE.pop()


def _each_seed(draw: Callable[[torch.Generator], torch.Tensor]) -> torch.Tensor:
    """``draw(generator)`` once per seed, as one tensor batched over the seed axis of the
    per-seed call running now (seed k's slice: ``draw`` from seed k's generator)."""
    generators, level = _ACTIVE[-1]
    if current_level() != level:
        raise RuntimeError("rlzoo.nets.draws: a random draw inside a vmap nested in a seed "
                           "group's per-seed call has no per-seed generator")
    with torch._C._DisableFuncTorch():  # plain tensors: one draw per seed, not one of [K, ...]
        stacked = torch.stack([draw(g) for g in generators])
    return _add_batch_dim(stacked, 0, level)


def normal(shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
    """Standard normal noise of ``shape``, ``like``'s dtype and device (``torch.randn``)."""
    if not _ACTIVE:
        return torch.randn(tuple(shape), dtype=like.dtype, device=like.device)
    dtype, device = like.dtype, like.device
    return _each_seed(lambda g: torch.randn(tuple(shape), dtype=dtype, device=device,
                                            generator=g))


def normal_like(like: torch.Tensor) -> torch.Tensor:
    """Standard normal noise shaped like ``like`` (``torch.randn_like``)."""
    if not _ACTIVE:
        return torch.randn_like(like)
    return normal(like.shape, like)


def uniform(shape: Sequence[int], device: torch.device | str | None = None) -> torch.Tensor:
    """Float32 noise uniform on ``[0, 1)`` of ``shape`` on ``device`` (``torch.rand``)."""
    if not _ACTIVE:
        return torch.rand(tuple(shape), device=device)
    return _each_seed(lambda g: torch.rand(tuple(shape), device=device, generator=g))


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``F.dropout(x, p, training)``: in training, each entry zeroed with probability ``p``
    and the rest scaled by ``1 / (1 - p)``. Per seed on the CPU as ATen's CPU dropout computes
    it (``x * (bernoulli(1 - p) / (1 - p))``)."""
    if not _ACTIVE or not training or p == 0.0 or p == 1.0:
        return F.dropout(x, p, training)
    shape, dtype, device = x.shape, x.dtype, x.device
    keep = _each_seed(lambda g: torch.empty(shape, dtype=dtype, device=device)
                      .bernoulli_(1.0 - p, generator=g).div_(1.0 - p))
    return x * keep


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose mask comes from :func:`dropout` (per seed in a seed group)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)
