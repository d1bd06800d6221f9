"""Entropy temperature: fixed, or learned against a target entropy (Haarnoja et al. 2019).

With ``members > 1`` (one temperature per agent) ``alpha`` is ``[N, 1]`` and ``log_prob`` is
``[N, B]``; otherwise ``alpha`` is a scalar tensor and ``log_prob`` is ``[B]``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlzoo.optim import adam


class Tuner(nn.Module):
    """Base: ``alpha`` (no gradient) and ``update(log_prob)`` returning the temperature loss."""

    optimizer: torch.optim.Optimizer | None = None

    @property
    def alpha(self) -> torch.Tensor:
        raise NotImplementedError

    def update(self, log_prob: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class FixedAlpha(Tuner):
    """A constant temperature.

    Args:
        act_dim: action size (unused, accepted so all tuners build alike).
        alpha: the temperature (default 0.2).
        members: number of temperatures (agents); all equal to ``alpha``.
    """

    def __init__(self, act_dim: int, alpha: float = 0.2, members: int = 1) -> None:
        super().__init__()
        if alpha < 0:
            raise ValueError(f"tuner.alpha must be >= 0, got {alpha}")
        shape = (members, 1) if members > 1 else ()
        self.register_buffer("alpha_value", torch.full(shape, float(alpha)))

    @property
    def alpha(self) -> torch.Tensor:
        return self.alpha_value

    def update(self, log_prob: torch.Tensor) -> torch.Tensor:
        return torch.zeros((), device=log_prob.device)


class AutoAlpha(Tuner):
    """Learned temperature: minimise ``-mean(log_alpha * (log pi + target_entropy))``.

    Args:
        act_dim: |A|, action size.
        init_alpha: starting temperature (default 1.0, as SB3 and CleanRL).
        lr: Adam learning rate of ``log_alpha`` (default 3e-4).
        target_entropy: the entropy target; ``None`` means ``-target_entropy_scale * |A|``.
        target_entropy_scale: scale of the default target (default 1.0 -> ``-|A|``).
        members: number of independent temperatures (per agent), default 1.
    """

    def __init__(
        self,
        act_dim: int,
        init_alpha: float = 1.0,
        lr: float = 3e-4,
        target_entropy: float | None = None,
        target_entropy_scale: float = 1.0,
        members: int = 1,
    ) -> None:
        super().__init__()
        if init_alpha <= 0:
            raise ValueError(f"tuner.init_alpha must be > 0, got {init_alpha}")
        if lr <= 0:
            raise ValueError(f"tuner.lr must be > 0, got {lr}")
        self.target_entropy = (
            float(target_entropy) if target_entropy is not None
            else -float(target_entropy_scale) * act_dim
        )
        shape = (members, 1) if members > 1 else ()
        self.log_alpha = nn.Parameter(torch.full(shape, math.log(init_alpha)))
        self.optimizer = adam([self.log_alpha], lr)

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def update(self, log_prob: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``log_alpha`` from ``log_prob`` (detached); returns the loss."""
        loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean(-1).sum()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()
