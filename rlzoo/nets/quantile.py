"""TQC's truncated quantile critic (Kuznetsov, Shvechikov, Grishin, Vetrov, "Controlling
Overestimation Bias with Truncated Mixture of Continuous Distributional Quantile Critics", ICML
2020, arXiv:2005.04269; the official code github SamsungLabs/tqc_pytorch at 65114eb; sb3-contrib
2.9.2's ``TQC``, ``sb3_contrib/tqc/``).

N networks each predict M quantiles ``z_n,m(s, a)`` of the return at the fractions
``tau_m = (2m + 1) / (2M)``. With it (``critic=tqc``), ``algo=sac`` is TQC, because the critic
contract leaves the bootstrap value and the loss to the critic:

* ``next_value``: pool the N * M target atoms at ``(s', a')``, sort them and keep the smallest
  ``K = N (M - d)`` (drop the top ``d`` per network: the truncation that controls
  overestimation); SAC then builds ``K`` targets ``y_k = r + discount (z_(k) - alpha log
  pi(a'|s'))``;
* ``td_loss``: the quantile Huber loss (kappa = 1) of every predicted quantile against every
  target atom, ``|tau_m - 1{y_k < z_n,m}| huber(y_k - z_n,m)``, averaged over all of ``[N, B, M,
  K]`` (the official code's and sb3-contrib's ``.mean()``; the paper writes a sum over the
  quantiles);
* ``forward`` / ``actor_value``: each network's mean over its atoms, and ``mean`` over the
  networks: the actor ascends the mean of all N * M atoms, none dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlzoo.nets.critics import EnsembleCritic
from rlzoo.nets.ensemble import NetworkFactory, make_network


class TruncatedQuantileCritic(EnsembleCritic):
    """N quantile networks as one batched ensemble (an ``EnsembleCritic``, so SAC and TD3 take
    it).

    Args:
        obs_dim, act_dim: sizes.
        n: N, networks (sb3-contrib: 2; the paper: 5).
        quantiles: M, quantiles per network (25).
        drop_per_member: d, top atoms dropped per network in the target (2; the paper's
            per-task values: Hopper 5, HalfCheetah 0).
        actor_reduce: reduction of the networks' means for the actor (``mean``: TQC).
        hidden, activation, layer_norm, dropout, network: as ``EnsembleCritic``'s.

    Every value is declared once, in ``conf/critic/tqc.yaml``.
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
        if quantiles < 1 or not 0 <= drop_per_member < quantiles:
            raise ValueError(f"critic.quantiles must be >= 1 and critic.drop_per_member in "
                             f"[0, {quantiles}), got {quantiles} and {drop_per_member}")
        # the same trunk as the base's (an MLP, or net=...'s), with a head of M quantiles
        self.net = make_network(network, n, obs_dim + act_dim, quantiles, heads=1, hidden=hidden,
                                activation=activation, layer_norm=layer_norm, dropout=dropout)
        self.kept_atoms = n * (quantiles - drop_per_member)  # K
        self.register_buffer("tau", (torch.arange(quantiles) + 0.5) / quantiles,
                             persistent=False)

    def outputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, A]`` -> the quantiles ``z [N, B, M]``."""
        return self.net(torch.cat([obs, action], dim=-1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Each network's mean over its quantiles, ``[N, B]``."""
        return self.outputs(obs, action).mean(dim=-1)

    def next_value_from(self, outputs: torch.Tensor) -> torch.Tensor:
        """The K smallest of the N * M pooled atoms ``z [N, B, M]`` at ``(s', a')``, ascending:
        ``[K, B]``."""
        pooled = outputs.transpose(0, 1).reshape(outputs.shape[1], -1)  # [B, N * M]
        return pooled.sort(dim=1).values[:, : self.kept_atoms].T

    def td_loss_from(
        self, outputs: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The quantile Huber loss of ``z = outputs [N, B, M]`` against the atoms
        ``target [K, B]``; also each network's mean ``[N, B]``."""
        delta = target.T[None, :, None, :] - outputs.unsqueeze(-1)  # [N, B, M, K]
        abs_delta = delta.abs()
        huber = torch.where(abs_delta > 1.0, abs_delta - 0.5, 0.5 * delta.pow(2))
        weight = (self.tau[:, None] - (delta < 0).to(delta.dtype)).abs()  # |tau_m - 1{delta<0}|
        return (weight * huber).mean(), outputs.mean(dim=-1)
