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
``t`` the updates done, ``T = lr_decay_updates``: by default the run's own updates,
``int(total_steps x utd)`` (``run_updates``), as the reference's ``learning_rate_decay_step =
int(1.0 x num_interaction_steps x updates_per_interaction_step)`` counts them (its random
warm-up's steps included), 1e-4 to 5e-5 over the run.

The discount is by default the reference's heuristic from TD-MPC2 (``configs/online_rl.yaml``),
``gamma = max(min((T/5 - 1) / (T/5), 0.995), 0.95)`` with ``T`` the env's episode limit
(:func:`episode_discount`: 0.995 for MuJoCo's 1,000 steps, 0.975 for Pendulum's 200); the reward
scaler's running return uses the same discount (``algo.gamma``).
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
from rlzoo.optim.adam import ADAM_BETAS
from rlzoo.optim.entropy import Tuner


def episode_discount(max_episode_steps: int | None) -> float:
    """SimbaV2's discount for episodes of at most ``max_episode_steps`` env steps (action repeat
    1): ``max(min((T/5 - 1) / (T/5), 0.995), 0.95)``; ``ValueError`` for an env without a time
    limit (set ``algo.gamma`` then)."""
    if max_episode_steps is None or max_episode_steps < 1:
        raise ValueError("algo.gamma=null derives the discount from the env's episode limit and "
                         "this env has none; set algo.gamma (e.g. algo.gamma=0.99)")
    horizon = max_episode_steps / 5
    return max(min((horizon - 1) / horizon, 0.995), 0.95)


class SimbaV2(SAC):
    """SAC updated in SimbaV2's order with decaying learning rates (module docstring).

    Args:
        spec, actor, critic, tuner, tau, n_step: as ``SAC``'s.
        gamma: the discount; ``None``: from the env's episode limit (:func:`episode_discount`).
        actor_lr: initial actor learning rate.
        critic_lr: initial critic learning rate.
        lr_decay_to: final learning rate as a fraction of the initial one, for the actor, the
            critic and the temperature.
        lr_decay_updates: T, updates over which the rates decay (then stay at the end value);
            ``None``: ``run_updates``.
        run_updates: the updates the run is counted to make, ``int(total_steps x utd)``
            (passed by ``rlzoo.config.build``; needed when ``lr_decay_updates`` is ``None``).

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
        gamma: float | None,
        tau: float,
        actor_lr: float,
        critic_lr: float,
        n_step: int,
        lr_decay_to: float,
        lr_decay_updates: int | None,
        run_updates: int | None = None,
    ) -> None:
        if gamma is None:
            gamma = episode_discount(spec.max_episode_steps)
        if lr_decay_updates is None:
            if run_updates is None:
                raise ValueError("algo.lr_decay_updates=null decays over the run's own updates, "
                                 "which nobody passed; set algo.lr_decay_updates")
            lr_decay_updates = max(1, int(run_updates))
        super().__init__(spec, actor, critic, tuner, gamma, tau, actor_lr, critic_lr, 1, n_step,
                         None, "polyak", "separate", ADAM_BETAS)  # its target, torch's Adam
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
        actor_loss, log_prob = self.compute(self.actor_loss, batch.obs, alpha)
        self.step(self.actor_optimizer, actor_loss)
        alpha_loss = self.compute(self.tuner.loss, log_prob)
        if self.tuner.optimizer is not None:
            self.step(self.tuner.optimizer, alpha_loss)
        new_alpha = self.alpha  # the critic's target uses the updated temperature
        critic_loss, q_mean, critic_stats = self.compute(self.critic_terms, batch, new_alpha)
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
            "stats/alpha": alpha,
            "stats/entropy": -log_prob.detach(),  # reported as its mean
        }

    def update_targets(self) -> None:
        polyak_update(self.target_critic, self.critic, self.tau)
