"""STAC's one-step Gaussian critic and its uncertainty-scaled pessimism.

Özalp, "Stochastic Actor-Critic: Mitigating Overestimation via Temporal Aleatoric Uncertainty",
arXiv:2601.00737 (2026). No official code is linked from the paper (its Appendix E names
placeholder addresses); the author's public framework ugurcanozalp/rl-warehouse
(``rlwarehouse/algos/stac.py``, ``nets/probabilistic_qvalue.py``) holds an implementation, read
for the parametrisation of sigma only. Equation numbers are the arXiv v1 PDF's.

Member i models the one-step soft return as ``N(mu_i(s, a), sigma_i(s, a)^2)`` (Sec. 4.1, "STAC
models critic as normal distribution"), ``sigma_i = softplus(max(raw_i, raw_std_min))``:

* Eq. (13), the beta-pessimistic TD target:
  ``Q^TD = r + gamma (mu'(s', a~') - beta sigma'(s', a~') - alpha log pi(a~'|s')) (not done)``,
  ``a~' ~ pi(.|s')``, primes the lagged (target) critic. ``next_value`` returns
  ``mu'_j - beta sigma'_j`` ``[1, B]``; the algorithm adds ``r``, ``discount = gamma (1 - done)``
  and the entropy term. With several members j is, per sample, the one with the smallest
  ``mu' - beta sigma'`` (the paper's ESTAC baseline: two members, beta = 0);
* Eq. (14), the log loss: ``L = 1/2 log 2 pi + 1/(2 N_b) sum_i (log sigma^2 + (Q^TD - mu)^2 /
  sigma^2)``, summed over members;
* Sec. 4.2 and Algorithm 1, policy improvement with the same pessimistic value:
  the actor ascends ``mu(s, a) - beta sigma(s, a) - alpha log pi(a|s)``, so ``forward`` gives
  ``mu - beta sigma`` per member.

Corollary 3.1.1 (Eq. 11) is the backup this implements. See docs/critics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rlzoo.nets.critics import Critic, _check_reduction, reduce_members
from rlzoo.nets.ensemble import NetworkFactory, make_network

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class GaussianCritic(Critic):
    """E one-step Gaussian value distributions with STAC's pessimism, as one batched ensemble.

    Args:
        obs_dim: observation size.
        act_dim: action size.
        n: E, members (1: STAC's single critic; 2 with ``pessimism=0``: the paper's ESTAC).
        pessimism: beta >= 0 of Eq. (13) (0.25: STAC's most common MuJoCo value, Table 4).
        raw_std_min: lower clamp of the softplus input of sigma (-5, as rl-warehouse's
            ``GaussianHead``: sigma >= softplus(-5) = 0.0067).
        actor_reduce: reduction over members for the actor: ``min``, ``mean``,
            ``first``.
        hidden: hidden sizes.
        activation: hidden activation (``relu``, Appendix D).
        layer_norm: LayerNorm after each hidden layer (on in STAC; conf/critic/gaussian.yaml).
        dropout: drop probability after each hidden layer (STAC: 0.01 in its ablations), active
            in the online and the target critic (as the author's code: its target critic is
            never put in eval mode).
        network: builds each member's trunk instead of the MLP (``make_network``; two heads,
            mu and the std logit).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        pessimism: float,
        raw_std_min: float,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None = None,
    ) -> None:
        super().__init__()
        if n < 1:
            raise ValueError(f"critic.n must be >= 1, got {n}")
        if pessimism < 0:
            raise ValueError(f"critic.pessimism must be >= 0, got {pessimism}")
        _check_reduction(actor_reduce)
        self.members, self.pessimism, self.raw_std_min = n, pessimism, raw_std_min
        self.actor_reduce = actor_reduce
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.net = make_network(
            network, n, obs_dim + act_dim, 2, 2, hidden, activation, layer_norm, dropout
        )
        output = getattr(self.net, "output_layer", None)
        if output is not None:
            with torch.no_grad():  # rl-warehouse starts the std logit's bias at 0
                output.bias[..., 1].zero_()
        self._stats: dict[str, torch.Tensor] = {}

    def distribution(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [B, O]``, ``action [B, A]`` -> ``mu [E, B]`` and ``sigma [E, B]`` (> 0)."""
        mean, raw_std = self.net(torch.cat([obs, action], dim=-1)).unbind(-1)
        return mean, F.softplus(raw_std.clamp(min=self.raw_std_min))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``mu - beta sigma`` ``[E, B]`` (the means when ``pessimism = 0``): the actor's value."""
        mean, std = self.distribution(obs, action)
        return mean - self.pessimism * std

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """``[1, B]``: ``min_j (mu'_j - beta sigma'_j)`` at ``(s', a')``, Eq. (13)'s bracket
        without the entropy term."""
        return self(next_obs, next_action).min(dim=0, keepdim=True).values

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. (14) per member against ``target [1, B]``, summed over members; also ``mu [E, B]``
        (the means)."""
        mean, std = self.distribution(obs, action)
        nll = HALF_LOG_2PI + torch.log(std) + (target - mean).pow(2) / (2 * std.pow(2))
        self._stats = {"stats/q_std": std.detach().mean()}
        return nll.mean(dim=1).sum(), mean

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        return reduce_members(q, self.actor_reduce)

    def stats(self) -> dict[str, torch.Tensor]:
        return self._stats
