"""Critics. Every critic kind is a batched ensemble and answers four questions for an algorithm:

* ``forward(obs, action) -> q [E, B]``: the expected value of each member;
* ``next_value(next_obs, next_action) -> [K, B]``: the bootstrap value(s) a target is built from
  (``K = 1`` for point critics; the distributional critic returns its mean and a sampled value);
* ``td_loss(obs, action, target [K, B]) -> (loss, q [E, B])``: the kind's own TD loss;
* ``actor_value(q [E, B]) -> [B]``: how members are reduced for the actor.

So the algorithm writes ``y = r + discount * (next_value - alpha log pi)`` once, and the critic
kind decides the reductions and the loss. A new critic is one subclass and one YAML file.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rlzoo.nets.ensemble import EnsembleMLP

REDUCTIONS = ("min", "mean", "first")


def reduce_members(q: torch.Tensor, how: str) -> torch.Tensor:
    """Reduce ``q [E, B]`` over members: ``min``, ``mean`` or ``first`` (member 0) -> ``[B]``."""
    if how == "min":
        return q.min(dim=0).values
    if how == "mean":
        return q.mean(dim=0)
    return q[0]


class Critic(nn.Module):
    """Base class of all critic kinds; see the module docstring for the contract.

    Attributes:
        members: E, the number of ensemble members.
        action_horizon: H, the number of consecutive actions the critic scores (1 for Q(s, a)).
    """

    members: int = 1
    action_horizon: int = 1

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class EnsembleCritic(Critic):
    """N Q-networks as one batched ensemble (REDQ's critic; the twin critic is N = M = 2).

    Targets take the min over a random subset of M distinct members, drawn anew at every call
    (all members when M = N); the actor sees ``actor_reduce`` over all members.

    Args:
        obs_dim: observation size.
        act_dim: action size.
        n: N, the number of members (default 10).
        subset: M, members in the target's min (default 2).
        actor_reduce: ``mean`` (REDQ, default), ``min`` or ``first``.
        hidden: hidden sizes (default ``(256, 256)``).
        activation: hidden activation (default ``relu``).
        layer_norm: LayerNorm after each hidden layer (default off).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int = 10,
        subset: int = 2,
        actor_reduce: str = "mean",
        hidden: Sequence[int] = (256, 256),
        activation: str = "relu",
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if n < 1 or not 1 <= subset <= n:
            raise ValueError(
                f"critic needs n >= 1 and 1 <= subset <= n, got n={n}, subset={subset}"
            )
        if actor_reduce not in REDUCTIONS:
            raise ValueError(
                f"critic.actor_reduce must be one of {REDUCTIONS}, got {actor_reduce!r}"
            )
        self.members, self.subset, self.actor_reduce = n, subset, actor_reduce
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.net = EnsembleMLP(n, obs_dim + act_dim, hidden, 1, activation, layer_norm)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, A]`` -> ``q [E, B]``."""
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)

    def subset_min(self, q: torch.Tensor) -> torch.Tensor:
        """Min over a fresh random subset of M distinct members of ``q [E, B]`` -> ``[B]``."""
        if self.subset == self.members:
            return q.min(dim=0).values
        members = torch.randperm(self.members, device=q.device)[: self.subset]
        return q.index_select(0, members).min(dim=0).values

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """``[1, B]``: the subset-min of the members' values at ``(s', a')``."""
        return self.subset_min(self(next_obs, next_action)).unsqueeze(0)

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over members of the mean squared TD error to ``target [1, B]``."""
        q = self(obs, action)
        return (q - target).pow(2).mean(dim=1).sum(), q

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        return reduce_members(q, self.actor_reduce)


class TwinCritic(EnsembleCritic):
    """Clipped double Q (SAC, TD3): two members, min of both for targets.

    Args as ``EnsembleCritic`` without ``n``/``subset``; ``actor_reduce`` defaults to ``min``
    (SAC); TD3 sets ``first`` (the paper's actor ascends Q1).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        actor_reduce: str = "min",
        hidden: Sequence[int] = (256, 256),
        activation: str = "relu",
        layer_norm: bool = False,
    ) -> None:
        super().__init__(obs_dim, act_dim, 2, 2, actor_reduce, hidden, activation, layer_norm)
