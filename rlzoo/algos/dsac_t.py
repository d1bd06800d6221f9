"""DSAC-T (DSAC-v2): Duan, Wang, Xiao, Li, Guan, Li, Sun, Chen, "Distributional Soft Actor-Critic
with Three Refinements", IEEE TPAMI 2025 (arXiv:2310.05858); official code Jingliang-Duan/DSAC-v2.

SAC whose twin critics each learn a Gaussian return ``Z_i(s, a) ~ N(mu_i, sigma_i^2)``:

* next action from the target policy: ``a' ~ pi'(.|s')``
* expected-value substitution: ``y = r + discount (min_i mu'_i(s', a') - alpha log pi'(a'|s'))``
  and the sampled target ``y_s = r + discount (z'_j - alpha log pi'(a'|s'))`` with ``z'_j`` drawn
  from the target member j of the smaller mean (``mu'_j + clamp(eps, -3, 3) sigma'_j``)
* twin value distribution learning with variance-based gradient adjustment:
  ``J_Z = sum_i E[ratio_i (huber(mu_i, y) + sigma_i (sd_i^2 - huber(mu_i, y_bi)) / (sd_i + 0.1))]``
  with ``sd_i = sigma_i`` detached, ``y_bi`` = ``y_s`` clipped to ``mu_i ± 3 ms_i`` (``ms_i`` the
  running mean of ``sigma_i``) and ``ratio_i = clamp(ms_i^2 / (sd_i^2 + 0.1), 0.1, 10)``; this
  lives in ``DistributionalCritic.td_loss`` (nets/distributional.py)
* actor: ``J_pi = E[alpha log pi(a~|s) - min_i mu_i(s, a~)]``; alpha as SAC
* every ``policy_delay`` = 2 critic steps: actor, alpha, then polyak of the target critics and the
  target policy.

``log pi`` is measured in the env's own action units by default (``tuner.entropy_units=env`` in
``conf/algo/dsac_t.yaml``), as the official ``TanhGaussDistribution``, whose log-prob subtracts
``sum log((high - low) / 2)``; see ``optim/entropy.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import EnvSpec
from rlzoo.algos.sac import SAC
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.critics import Critic
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.target import make_target, polyak_update
from rlzoo.optim.adam import ADAM_BETAS
from rlzoo.optim.entropy import Tuner


class DSACT(SAC):
    """DSAC-T: SAC with the distributional critic and a target policy network.

    Args are SAC's, all required; DSAC-T's values are declared in ``conf/algo/dsac_t.yaml``
    (actor and critic lr 1e-4, ``policy_delay = target_delay = 2``).
    """

    supported_critics = (DistributionalCritic,)

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., TanhGaussianActor],
        critic: Callable[..., Critic],
        tuner: Callable[..., Tuner],
        gamma: float,
        tau: float,
        actor_lr: float,
        critic_lr: float,
        policy_delay: int,
        n_step: int,
        target_delay: int | None,
    ) -> None:
        super().__init__(
            spec, actor, critic, tuner, gamma, tau, actor_lr, critic_lr, policy_delay, n_step,
            target_delay, "polyak", "separate", ADAM_BETAS,  # its targets, torch's Adam
        )
        self.target_actor = make_target(self.actor)

    def next_action(self, next_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``a' ~ pi'(.|s')`` from the target policy, and ``log pi'(a'|s')``."""
        return self.target_actor.sample(next_obs)

    def update_targets(self) -> None:
        """Polyak step of the target critics and the target policy."""
        super().update_targets()
        polyak_update(self.target_actor, self.actor, self.tau)
