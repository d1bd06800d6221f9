"""A custom critic: TQC's truncated quantile critic (Kuznetsov et al., "Controlling Overestimation
Bias with Truncated Mixture of Continuous Distributional Quantile Critics", ICML 2020).

N networks each predict M quantiles ``z_n,m(s, a)`` of the return at the fractions
``tau_m = (2m + 1) / (2M)``. With it, ``algo=sac`` *is* TQC, because the critic contract leaves
the bootstrap value and the loss to the critic:

* ``next_value``: pool the N * M target atoms at ``(s', a')``, sort them and keep the smallest
  ``K = N (M - d)`` (drop the top ``d`` per network: the truncation that controls overestimation);
  SAC then builds ``K`` targets ``y_k = r + discount * (z_(k) - alpha log pi(a'|s'))``.
* ``td_loss``: the quantile Huber loss (kappa = 1) of every predicted quantile against every
  target atom, averaged as the reference code does.
* ``forward`` / ``actor_value``: the mean over atoms, so the actor ascends the mean of all N * M.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlzoo.nets import EnsembleCritic
from rlzoo.nets.ensemble import NetworkFactory, make_network


class TruncatedQuantileCritic(EnsembleCritic):
    """N quantile networks as one batched ensemble (subclasses EnsembleCritic, so SAC takes it).

    Args:
        obs_dim, act_dim: sizes.
        n: N, networks (TQC: 5).
        quantiles: M, quantiles per network (TQC: 25).
        drop_per_member: d, top atoms dropped per network in the target (TQC: 2; HalfCheetah 0).
        actor_reduce: reduction of the members' means for the actor (``mean``: TQC).
        hidden, activation, layer_norm, dropout, network: as EnsembleCritic (TQC: 512-512-512
            ReLU; conf/critic/tqc.yaml).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        quantiles: int,
        drop_per_member: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None = None,
    ) -> None:
        # subset=n: the base's min over a random subset is never used (next_value is TQC's own)
        super().__init__(obs_dim, act_dim, n=n, subset=n, actor_reduce=actor_reduce,
                         hidden=hidden, activation=activation, layer_norm=layer_norm,
                         dropout=dropout, network=network)
        if not 0 <= drop_per_member < quantiles:
            raise ValueError(f"critic.drop_per_member must be in [0, {quantiles}), got "
                             f"{drop_per_member}")
        # the same trunk as the base's (an MLP, or `net=simbav2`'s), with a head of M quantiles
        self.net = make_network(network, n, obs_dim + act_dim, quantiles, heads=1, hidden=hidden,
                                activation=activation, layer_norm=layer_norm, dropout=dropout)
        self.kept_atoms = n * (quantiles - drop_per_member)  # K
        self.register_buffer("tau", (torch.arange(quantiles) + 0.5) / quantiles)

    def quantiles(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, A]`` -> ``z [N, B, M]``."""
        return self.net(torch.cat([obs, action], dim=-1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Each network's mean over its quantiles, ``[N, B]``."""
        return self.quantiles(obs, action).mean(dim=-1)

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """The K smallest of the N * M pooled atoms at ``(s', a')``, ascending: ``[K, B]``."""
        z = self.quantiles(next_obs, next_action)  # [N, B, M]
        pooled = z.transpose(0, 1).reshape(z.shape[1], -1)  # [B, N * M]
        return pooled.sort(dim=1).values[:, : self.kept_atoms].T

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantile Huber loss of ``z [N, B, M]`` against the atoms ``target [K, B]``."""
        z = self.quantiles(obs, action)
        delta = target.T[None, :, None, :] - z.unsqueeze(-1)  # [N, B, M, K]
        abs_delta = delta.abs()
        huber = torch.where(abs_delta <= 1.0, 0.5 * delta.pow(2), abs_delta - 0.5)
        weight = (self.tau[:, None] - (delta < 0).float()).abs()  # |tau_m - 1{delta < 0}|
        return (weight * huber).mean(), z.mean(dim=-1)
