"""A new algorithm by subclassing SAC: CrossQ (Bhatt, Palenicek et al., "CrossQ: Batch Normalization
in Deep Reinforcement Learning for Greater Sample Efficiency and Simplicity", ICLR 2024).

* critic: ``[q, q'] = Q([s; s'], [a; a'])``, ``a' ~ pi(.|s')``: one pass in training mode, so
  BatchNorm normalizes current and next state-actions with the same batch statistics;
  ``y = r + discount * (min_i sg(q'_i) - alpha log pi(a'|s'))``, ``J_Q = sum_i E[(q_i - y)^2]``
* actor and temperature: as SAC, with the critic's BatchNorm in eval mode (running statistics)
* no target networks; Adam beta1 = 0.5, policy delay 3, lr 1e-3 (CrossQ's defaults)

Simplified: plain BatchNorm, critic only (the final paper uses Batch Renormalization; sb3-contrib
also normalizes the actor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from rlzoo.algos import SAC, EnvSpec
from rlzoo.buffers.batch import Batch
from rlzoo.nets import EnsembleLinear, TwinCritic
from rlzoo.nets.ensemble import activation as make_activation
from rlzoo.tuners.entropy import Tuner


class EnsembleBatchNorm(nn.BatchNorm1d):
    """BatchNorm of ``[E, B, F]`` with separate statistics per member and feature."""

    def __init__(self, members: int, features: int, momentum: float) -> None:
        super().__init__(members * features, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        members, batch, features = x.shape
        y = super().forward(x.transpose(0, 1).reshape(batch, members * features))
        return y.reshape(batch, members, features).transpose(0, 1)


class BatchNormCritic(TwinCritic):
    """Twin critic with BatchNorm on its input and after every hidden layer (before the ReLU)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        momentum: float,
    ) -> None:
        # the twin critic's MLP, replaced below by the batch-normalized one
        super().__init__(obs_dim, act_dim, actor_reduce, hidden, activation, layer_norm=False,
                         dropout=0.0)
        sizes = [obs_dim + act_dim, *hidden]
        layers: list[nn.Module] = [nn.BatchNorm1d(sizes[0], momentum=momentum)]
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [EnsembleLinear(2, n_in, n_out), EnsembleBatchNorm(2, n_out, momentum),
                       make_activation(activation)]
        self.net = nn.Sequential(*layers, EnsembleLinear(2, sizes[-1], 1))


class CrossQ(SAC):
    """SAC without target networks; see the module docstring. ``adam_beta1``: Adam's beta1."""

    supported_critics = (BatchNormCritic,)

    def __init__(
        self, spec: EnvSpec, actor: Callable[..., nn.Module],
        critic: Callable[..., BatchNormCritic], tuner: Callable[..., Tuner],
        adam_beta1: float, **sac_kwargs: Any,
    ) -> None:
        # tau and target_delay: SAC's polyak step of a target network CrossQ does not have
        super().__init__(spec, actor, critic, tuner, tau=1.0, target_delay=None, **sac_kwargs)
        del self.target_critic  # no target network
        for name in ("actor", "critic"):
            for group in self.optimizers[name].param_groups:
                group["betas"] = (adam_beta1, group["betas"][1])

    def critic_loss(self, batch: Batch, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch.next_obs)
            next_log_prob = self.tuner.to_units(next_log_prob)  # tuner.entropy_units
        both = self.critic(torch.cat([batch.obs, batch.next_obs]),
                           torch.cat([batch.action, next_action]))  # [2, 2B]
        q, next_q = both.chunk(2, dim=1)
        with torch.no_grad():
            target = batch.reward + batch.discount * (
                next_q.min(dim=0).values - alpha * next_log_prob)
        return (q - target).pow(2).mean(dim=1).sum(), q

    def actor_loss(
        self, obs: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.critic.eval()
        try:
            return super().actor_loss(obs, alpha)
        finally:
            self.critic.train()

    def update_targets(self) -> None:
        """Nothing to do: CrossQ has no target networks."""
