"""A critic written yourself: a pessimistic ensemble, the belief of Tactical Optimism and Pessimism
(Moskovitz, Parker-Holder, Pacchiano, Arbel, Jordan, "Tactical Optimism and Pessimism for Deep
Reinforcement Learning", NeurIPS 2021) with a fixed degree of pessimism ``beta``.

N heads ``Q_1..Q_N`` are trained to the same target, and both the bootstrap value and the value the
actor ascends are ``mean_i Q_i - beta std_i Q_i`` (the spread over the heads, ``std`` without
Bessel's correction): ``beta = 0`` is REDQ's mean, and with two heads ``beta = 1`` is the clipped
double Q of SAC and TD3 (``mean - |Q_1 - Q_2| / 2 = min``). TOP learns ``beta`` online with a
bandit; here it is a hyperparameter.

The critic contract (``rlzoo/nets/critics.py``) splits a critic's network pass (``outputs``: the
heads' values ``[N, B]``, inherited) from what is computed with it: overriding
``next_value_from`` and ``actor_value`` is the whole class, and since the pass stays split it also
trains inside the joint ``[s; s']`` pass (``algo=crossq critic=pessimistic``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlzoo.nets import EnsembleCritic
from rlzoo.nets.ensemble import NetworkFactory


class PessimisticCritic(EnsembleCritic):
    """N Q-heads whose value is ``mean - beta std`` over the heads (module docstring).

    Args:
        obs_dim, act_dim: sizes (the algorithm passes them).
        n: N, heads (>= 2).
        pessimism: beta (TOP's is learned; 1 with two heads is the min).
        hidden, activation, layer_norm, dropout, network: the trunk, as ``EnsembleCritic``'s.

    Every value is declared once, in ``examples/conf/critic/pessimistic.yaml``.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        pessimism: float,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None = None,
    ) -> None:
        if n < 2:
            raise ValueError(f"critic.n must be >= 2 (a spread needs two heads), got {n}")
        # subset and actor_reduce: the base's reductions, which this class replaces
        super().__init__(obs_dim, act_dim, n=n, subset=n, actor_reduce="mean", hidden=hidden,
                         activation=activation, layer_norm=layer_norm, dropout=dropout,
                         network=network)
        self.pessimism = float(pessimism)

    def belief(self, q: torch.Tensor) -> torch.Tensor:
        """``mean_i q_i - beta std_i q_i`` of the heads' values ``q [N, B]`` -> ``[B]``."""
        return q.mean(dim=0) - self.pessimism * q.std(dim=0, correction=0)

    def next_value_from(self, outputs: torch.Tensor) -> torch.Tensor:
        """The bootstrap value ``[1, B]`` from the heads' values at ``(s', a')``."""
        return self.belief(outputs).unsqueeze(0)

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        """The value the actor ascends, ``[B]``."""
        return self.belief(q)
