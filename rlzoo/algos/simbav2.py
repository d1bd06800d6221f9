"""SimbaV2 (Lee et al., "Hyperspherical Normalization for Scalable Deep Reinforcement Learning",
ICML 2025; official JAX code github dojeon-ai/SimbaV2 at commit 14fafb2,
``scale_rl/agents/simbaV2/simbaV2_agent.py`` and ``simbaV2_update.py``).

SAC with SimbaV2's parts, each a component of its own (``conf/algo/simbav2.yaml`` composes them):
the hyperspherical networks (``net=simbav2``, ``rlzoo/nets/hyperspherical.py``), the categorical
critic on ``[-G_max, G_max]`` (``critic=categorical``), the observation normalizer and the reward
scaler (``normalize.obs``, ``normalize.reward``), a ``tanh``-squashed log std in ``[-10, 2]`` and
the temperature loss ``alpha (H - H_target)`` (``tuner.loss_form=alpha``). What is this file's own
is the update, in the reference's order (``_update_simbav2_networks``):

1. actor: ``J_pi = E[alpha log pi(a~|s) - min_i Q_i(s, a~)]`` with the critic as it is, then the
   actor's weights are re-projected onto the unit sphere;
2. temperature: one step on ``alpha (-E[log pi(a~|s)] - H_target)`` with that step's samples;
3. critic: the target ``y = r + discount (Z'_j(s', a') - alpha' log pi'(a'|s'))`` uses the actor
   and temperature just updated (``a' ~ pi'``), then the critic is re-projected;
4. target critic: ``theta' <- (1 - tau) theta' + tau theta`` every update.

All three learning rates decay linearly, ``lr_t = lr_0 (1 - (1 - lr_decay_to) min(t / T, 1))``,
``t`` the updates done, ``T = lr_decay_updates`` (the reference: 1e-4 to 5e-5 over its run).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import EnvSpec
from rlzoo.algos.sac import SAC
from rlzoo.algos.schedules import Factor, ScheduledRates, Step, linear_decay
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.critics import Critic
from rlzoo.nets.target import polyak_update
from rlzoo.tuners.entropy import Tuner


class SimbaV2(SAC):
    """SAC updated in SimbaV2's order with decaying learning rates (module docstring).

    Args:
        spec, actor, critic, tuner, gamma, tau, n_step: as ``SAC``'s.
        actor_lr: initial actor learning rate.
        critic_lr: initial critic learning rate.
        lr_decay_to: final learning rate as a fraction of the initial one, for the actor, the
            critic and the temperature.
        lr_decay_updates: T, updates over which the rates decay (then stay at the end value).

    Every hyperparameter is required; the reference's values are declared once, in
    ``conf/algo/simbav2.yaml``.
    """

    graph_safe = True  # the learning rates are set on the device (ScheduledRates)

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
        n_step: int,
        lr_decay_to: float,
        lr_decay_updates: int,
    ) -> None:
        super().__init__(spec, actor, critic, tuner, gamma, tau, actor_lr, critic_lr, 1, n_step,
                         None)
        if not 0.0 < lr_decay_to <= 1.0:
            raise ValueError(f"algo.lr_decay_to must be in (0, 1], got {lr_decay_to}")
        if lr_decay_updates < 1:
            raise ValueError(f"algo.lr_decay_updates must be >= 1, got {lr_decay_updates}")
        self.lr_decay_to, self.lr_decay_updates = lr_decay_to, lr_decay_updates
        self.lr_schedule = ScheduledRates(self.optimizers, self.lr_factor)

    def update_phase(self) -> None:
        return None

    def lr_factor(self, name: str, updates: Step) -> Factor:
        """Every optimizer's ``lr_t / lr_0`` at ``t = updates`` (optax's linear_schedule)."""
        return linear_decay(updates, self.lr_decay_to, self.lr_decay_updates)

    def set_learning_rates(self) -> None:
        """``lr_t`` of every optimizer for the update about to run, ``t = self.updates`` (on
        the device from the schedule's clock on CUDA: ``ScheduledRates``)."""
        assert self.lr_schedule is not None
        self.lr_schedule.apply(self.updates)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.set_learning_rates()
        alpha = self.alpha
        actor_loss, log_prob = self.per_seed(self.actor_loss, batch.obs, alpha)
        self.step(self.actor_optimizer, actor_loss)
        alpha_loss = self.per_seed(self.tuner.loss, log_prob)
        if self.tuner.optimizer is not None:
            self.step(self.tuner.optimizer, alpha_loss)
        new_alpha = self.alpha  # the critic's target uses the updated temperature
        critic_loss, q_mean, critic_stats = self.per_seed(self.critic_terms, batch, new_alpha)
        self.step(self.critic_optimizer, critic_loss)
        self.updates += 1
        self.lr_schedule.tick()
        self.update_targets()
        return {
            "loss/critic": critic_loss.detach(),
            "stats/q_mean": q_mean,
            **critic_stats,
            "loss/actor": actor_loss.detach(),
            "loss/alpha": alpha_loss.detach(),
            "stats/alpha": self.seed_mean(alpha),
            "stats/entropy": -self.seed_mean(log_prob.detach()),
        }

    def update_targets(self) -> None:
        polyak_update(self.target_critic, self.critic, self.tau)
