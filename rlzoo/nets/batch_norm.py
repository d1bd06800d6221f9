"""Batch normalization for any actor or critic: the layers, when they use the batch's statistics,
and one joint critic pass over ``[s; s']`` with shared statistics.

**Layers.** :class:`EnsembleBatchNorm` is a batch norm per ensemble member (Ioffe & Szegedy 2015;
the semantics of ``torch.nn.BatchNorm1d``): ``[E, B, d]`` normalized over ``B`` with the batch's
mean and biased variance, the running statistics moved towards them as ``m <- m + momentum
(batch - m)`` (the variance unbiased, ``B / (B - 1)``). :class:`EnsembleBatchRenorm` is Batch
Renormalization (Ioffe, "Batch Renormalization", NeurIPS 2017, arXiv:1702.03275) as CrossQ uses
it (sb3-contrib 2.9.2, ``sb3_contrib/common/torch_layers.py``, ``BatchRenorm``; the CrossQ
authors' code, github adityab/CrossQ at a318a26): plain batch norm for the first
``warmup_steps`` batch-statistics passes, then the batch statistics corrected towards the running
ones by ``r = clip(sigma_B / sigma_R, 1/r_max, r_max)`` and ``d = clip((mu_B - mu_R) / sigma_R,
-d_max, d_max)`` (no gradient through ``r``, ``d``), with no schedule of ``r_max``, ``d_max``.
Both keep ``weight``, ``bias`` (affine, ``[E, 1, d]``) and the buffers ``running_mean``,
``running_var`` (and the renorm's ``steps``), so a seed group holds them per seed
(``[K, E, 1, d]``) and a checkpoint, ``policy.pt`` and ``Policy.export`` carry them.

**When the batch's statistics are used.** A layer normalizes with its running statistics (mean 0,
variance 1 at the start) unless it is inside :func:`batch_statistics`: there it normalizes with the
batch's statistics and updates its running ones (torch's ``train()`` mode, named apart so that
dropout's mode stays its own). The algorithms ask for them in the passes that train a network:
the critic's TD loss and the actor's loss (``rlzoo.algos.SAC``, ``TD3``; FlashSAC's own update).
Acting, evaluation, targets, the critic read by the actor's loss, ``Policy`` and the exported
graph use the running statistics. No layer branches on a value on the device: the renorm's
warm-up is a ``torch.where`` on its step counter, so an update is captured whole by a CUDA graph
and never waits for the host.

**Joint pass.** :func:`joint_pass` runs a critic once on ``[s; s']`` and ``[a; a']`` inside
:func:`batch_statistics`, so both halves are normalized with the same statistics (CrossQ, Bhatt et
al., ICLR 2024; FlashSAC), and returns each half's outputs (the critic kind's
``Critic.outputs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from rlzoo.nets.ensemble import EnsembleLinear
from rlzoo.nets.ensemble import activation as make_activation


class EnsembleBatchNorm(nn.Module):
    """Per-member batch norm of ``[E, B, d]`` (module docstring).

    Parameters ``weight``, ``bias`` ``[E, 1, d]`` (1 and 0 at the start); buffers
    ``running_mean`` (0) and ``running_var`` (1), ``[E, 1, d]``.

    Args:
        members: E.
        dim: d, features.
        momentum: rate of the running statistics (torch's convention: 0.1 = torch's default,
            0.01 = flax's 0.99).
        eps: added to the variance under the square root.
    """

    def __init__(self, members: int, dim: int, momentum: float, eps: float) -> None:
        super().__init__()
        if not 0.0 < momentum <= 1.0:
            raise ValueError(f"network batch_norm_momentum must be in (0, 1], got {momentum}")
        if not eps > 0.0:
            raise ValueError(f"network batch_norm_eps must be > 0, got {eps}")
        self.momentum, self.eps = float(momentum), float(eps)
        self.batch_stats = False  # set by batch_statistics()
        self.weight = nn.Parameter(torch.ones(members, 1, dim))
        self.bias = nn.Parameter(torch.zeros(members, 1, dim))
        self.register_buffer("running_mean", torch.zeros(members, 1, dim))
        self.register_buffer("running_var", torch.ones(members, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [E, B, d]`` -> normalized ``[E, B, d]``."""
        if self.batch_stats:
            x = self.normalize_batch(x)
        else:
            x = (x - self.running_mean) * torch.rsqrt(self.running_var + self.eps)
        return x * self.weight + self.bias

    def batch_moments(self, x: torch.Tensor, correction: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's mean and variance over ``B`` (``[E, 1, d]`` each; ``correction`` 0:
        biased, 1: unbiased)."""
        if x.shape[1] < 2:
            raise ValueError("batch statistics need a batch of at least 2 samples")
        return (x.mean(dim=1, keepdim=True),
                x.var(dim=1, correction=correction, keepdim=True))

    @torch.no_grad()
    def track(self, mean: torch.Tensor, unbiased_var: torch.Tensor) -> None:
        """Move the running statistics towards a batch's (in place: a seed's slice of a
        group's buffers is written where it lies)."""
        m = self.momentum
        self.running_mean.copy_(self.running_mean + m * (mean - self.running_mean))
        self.running_var.copy_(self.running_var + m * (unbiased_var - self.running_var))

    def normalize_batch(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean_B) / sqrt(var_B + eps)``, and the running statistics updated."""
        mean, var = self.batch_moments(x, correction=0)
        batch = x.shape[1]
        self.track(mean.detach(), var.detach() * (batch / (batch - 1)))
        return (x - mean) * torch.rsqrt(var + self.eps)


class EnsembleBatchRenorm(EnsembleBatchNorm):
    """Per-member Batch Renormalization of ``[E, B, d]``, as sb3-contrib's ``BatchRenorm``.

    With ``mu_B``, ``v_B`` the batch's mean and **unbiased** variance, ``sigma_B = sqrt(v_B +
    eps)`` and ``sigma_R = sqrt(running_var + eps)``, after ``warmup_steps`` batch-statistics
    passes (``steps > warmup_steps``): ``r = clip(sigma_B / sigma_R, 1/r_max, r_max)``, ``d =
    clip((mu_B - running_mean) / sigma_R, -d_max, d_max)``, both without gradient, and the
    layer normalizes with ``m = mu_B - d sqrt(v_B) / r`` and ``v = v_B / r^2``:
    ``(x - m) / sqrt(v + eps)``; before that ``m = mu_B``, ``v = v_B`` (``r = 1``, ``d = 0``,
    the same numbers as plain batch norm with the unbiased variance). The running statistics
    move towards ``mu_B`` and ``v_B`` after ``r`` and ``d`` are computed; ``steps`` (a buffer,
    a 0-d int64 shared by the members, which all pass together) counts the passes.

    Args:
        members, dim, momentum, eps: as :class:`EnsembleBatchNorm`'s.
        rmax: r_max > 1 (sb3-contrib and the CrossQ code: 3).
        dmax: d_max >= 0 (5).
        warmup_steps: batch-statistics passes of plain batch norm first (100,000).
    """

    def __init__(self, members: int, dim: int, momentum: float, eps: float, rmax: float,
                 dmax: float, warmup_steps: int) -> None:
        super().__init__(members, dim, momentum, eps)
        if not rmax >= 1.0 or not dmax >= 0.0 or warmup_steps < 0:
            raise ValueError(f"batch renorm needs rmax >= 1, dmax >= 0 and warmup_steps >= 0, "
                             f"got {rmax}, {dmax}, {warmup_steps}")
        self.rmax, self.dmax, self.warmup_steps = float(rmax), float(dmax), int(warmup_steps)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def normalize_batch(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.batch_moments(x, correction=1)
        std = torch.sqrt(var + self.eps)
        with torch.no_grad():
            running_std = torch.sqrt(self.running_var + self.eps)
            renorm = self.steps > self.warmup_steps  # on the device: no host sync
            r = (std / running_std).clamp(1.0 / self.rmax, self.rmax)
            d = ((mean - self.running_mean) / running_std).clamp(-self.dmax, self.dmax)
            r = torch.where(renorm, r, torch.ones_like(r))
            d = torch.where(renorm, d, torch.zeros_like(d))
        centre = mean - d * torch.sqrt(var) / r
        scale = var / (r * r)
        self.track(mean.detach(), var.detach())
        self.steps.add_(1)
        return (x - centre) / torch.sqrt(scale + self.eps)


NormFactory = Callable[[int, int], EnsembleBatchNorm]
"""``norm(members, dim) -> layer``: a ``functools.partial`` of :class:`EnsembleBatchNorm` or
:class:`EnsembleBatchRenorm` with its settings (``conf/net/batch_norm.yaml``,
``conf/net/batch_renorm.yaml``)."""


class BatchNormMLP(nn.Module):
    """E MLPs with a batch norm on the input and after every hidden activation:
    ``norm -> [Linear -> act -> norm] x len(hidden) -> Linear``, ``[E, B, in] -> [E, B, out]``.

    The layer order of sb3-contrib's CrossQ (SB3's ``create_mlp`` with the norm before every
    linear layer, the output layer's included) and of the CrossQ authors' flax networks; an
    actor's mean and log std are the two halves of the last layer (two heads with their own
    weights, as sb3-contrib's ``mu`` and ``log_std`` layers after the last norm).

    Args:
        members: E.
        in_features, out_features: sizes.
        hidden: hidden sizes (``net=batch_norm`` / ``batch_renorm`` take the actor's and the
            critic's own ``hidden``).
        activation: hidden activation name (likewise their own ``activation``).
        norm: builds each normalization layer, ``norm(members, dim)`` (:data:`NormFactory`).
        heads: the network contract's (``rlzoo.nets.ensemble.make_network``); each output
            unit already has its own weights.
    """

    def __init__(self, members: int, in_features: int, out_features: int,
                 hidden: Sequence[int], activation: str, norm: NormFactory,
                 heads: int = 1) -> None:
        super().__init__()
        if heads < 1 or out_features % heads:
            raise ValueError(f"network output {out_features} cannot be split into {heads} heads")
        sizes = [in_features, *hidden]
        layers: list[nn.Module] = [norm(members, in_features)]
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [EnsembleLinear(members, n_in, n_out), make_activation(activation),
                       norm(members, n_out)]
        layers.append(EnsembleLinear(members, sizes[-1], out_features))
        self.members = members
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` (shared by all members) -> ``[E, B, out]``."""
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.members, -1, -1)
        return self.layers(x)


# The batch-norm layers inside a module, found once per module (walking the tree on every
# update costs; modules do not gain layers after they are built).
_LAYERS: weakref.WeakKeyDictionary[nn.Module, list[EnsembleBatchNorm]] = (
    weakref.WeakKeyDictionary()
)


def batch_norm_layers(module: nn.Module) -> list[EnsembleBatchNorm]:
    """Every :class:`EnsembleBatchNorm` (renorm and FlashSAC's ``UnitBatchNorm`` included)
    inside ``module`` (cached)."""
    found = _LAYERS.get(module)
    if found is None:
        found = [m for m in module.modules() if isinstance(m, EnsembleBatchNorm)]
        _LAYERS[module] = found
    return found


@contextlib.contextmanager
def batch_statistics(*modules: nn.Module) -> Iterator[None]:
    """Within the block every batch norm inside ``modules`` normalizes with its batch's
    statistics and updates its running ones; outside, they use the running statistics. A no-op
    for modules without batch norms (an MLP), and for layers already inside such a block."""
    layers = [m for module in modules for m in batch_norm_layers(module) if not m.batch_stats]
    for m in layers:
        m.batch_stats = True
    try:
        yield
    finally:
        for m in layers:
            m.batch_stats = False


def halves(value: Any, size: int) -> tuple[Any, Any]:
    """``value`` (a tensor, or a dataclass of tensors such as ``DiscreteReturn``) with the batch
    on axis 1, split into its first ``size`` rows and the rest."""
    if torch.is_tensor(value):
        return value[:, :size], value[:, size:]
    names = [f.name for f in dataclasses.fields(value)]
    return (dataclasses.replace(value, **{n: getattr(value, n)[:, :size] for n in names}),
            dataclasses.replace(value, **{n: getattr(value, n)[:, size:] for n in names}))


def joint_pass(critic: Any, obs: torch.Tensor, action: torch.Tensor, next_obs: torch.Tensor,
               next_action: torch.Tensor) -> tuple[Any, Any]:
    """``critic.outputs([s; s'], [a; a'])`` in one pass with batch statistics: the batch norms
    normalize both halves with the statistics of all ``2B`` rows (and update their running
    statistics once). Returns the outputs of ``(s, a)`` and of ``(s', a')``, each with ``B``
    rows on axis 1 (``[E, B]`` for the twin critic, ``[E, B, N]`` for the categorical one,
    ...). Gradient flows through both halves' shared statistics; detach the second half's
    outputs for a target."""
    with batch_statistics(critic):
        out = critic.outputs(torch.cat([obs, next_obs]), torch.cat([action, next_action]))
    return halves(out, obs.shape[0])
