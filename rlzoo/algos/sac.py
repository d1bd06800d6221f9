"""Soft Actor-Critic (Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2019).

With ``y = r + discount * (min_i Q'_i(s', a') - alpha log pi(a'|s'))``, ``a' ~ pi(.|s')``:

* critic:  ``J_Q  = sum_i E[(Q_i(s, a) - y)^2]``
* actor:   ``J_pi = E[alpha log pi(a~|s) - min_i Q_i(s, a~)]``, ``a~ ~ pi(.|s)`` reparameterized,
  with the critic's weights frozen (gradient flows only through ``a~``)
* alpha:   ``J(alpha) = -E[log alpha (log pi(a~|s) + target_entropy)]``

Every ``log pi`` above is in the tuner's ``entropy_units`` (``tuners/entropy.py``): of the
``[-1, 1]`` action (``normalized``, SB3's and REDQ's convention) or of the env's own action
(``env``, CleanRL's and the official DSAC-v2's: ``log pi - sum_i log((high_i - low_i) / 2)``).
* targets: ``theta' <- (1 - tau) theta' + tau theta``

The critic kind chooses the reductions ("min" above) and the TD loss; see ``nets/critics.py``.
The actor and temperature step every ``policy_delay`` critic steps (1 in SAC; DSAC-T 2; REDQ
20, i.e. once per env step at 20 critic steps per env step), the targets every
``target_delay`` critic steps (default: ``policy_delay``; REDQ 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import Algorithm, EnvSpec, adam, check_tau, log_action_scale
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.critics import (
    ActionSequenceCritic,
    Critic,
    EnsembleCritic,
    TwinCritic,
)
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.gaussian import GaussianCritic
from rlzoo.nets.target import frozen, make_target, polyak_update
from rlzoo.tuners.entropy import Tuner


class SAC(Algorithm):
    """Soft Actor-Critic (with any critic kind: twin, ensemble, distributional, action chunks).

    Args:
        spec: environment sizes (and action bounds, for ``tuner.entropy_units=env``).
        actor: builds the actor from ``(obs_dim, act_dim)``.
        critic: builds the critic from ``(obs_dim, act_dim)``.
        tuner: builds the temperature tuner from ``act_dim``.
        gamma: discount.
        tau: polyak rate of the target critic.
        actor_lr: actor learning rate.
        critic_lr: critic learning rate.
        policy_delay: critic steps per actor/alpha step.
        n_step: n-step returns sampled from the buffer.
        target_delay: critic steps per polyak step of the targets (``None`` = ``policy_delay``).

    Every hyperparameter is required: its default is declared once, in ``conf/algo/sac.yaml``
    (and the other algo files that build this class), with a one-line comment.
    """

    supported_critics = (
        TwinCritic, EnsembleCritic, DistributionalCritic, ActionSequenceCritic, CategoricalCritic,
        GaussianCritic,
    )
    graph_safe = True

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
        super().__init__(spec, gamma, n_step)
        check_tau(tau)
        target_delay = policy_delay if target_delay is None else target_delay
        if policy_delay < 1 or target_delay < 1:
            raise ValueError(
                f"algo.policy_delay and algo.target_delay must be >= 1, got {policy_delay} "
                f"and {target_delay}"
            )
        if not callable(tuner):  # tuner=none leaves a bare node (or nothing) where a tuner goes
            raise ValueError(
                f"{self.name} needs an entropy temperature: leave tuner out (the algorithm's own) "
                "or pass tuner=fixed, not tuner=none"
            )
        self.tau, self.policy_delay, self.target_delay = tau, policy_delay, target_delay
        self.check_critic_factory(critic)
        self.critic = critic(spec.obs_dim, spec.act_dim)
        self.check_critic(self.critic)
        chunk_dim = spec.act_dim * self.critic.action_horizon
        self.actor = actor(spec.obs_dim, chunk_dim)
        self.target_critic = make_target(self.critic)
        self.tuner = tuner(chunk_dim)
        # An action chunk holds H consecutive env actions: the scale repeats H times.
        self.tuner.set_action_scale(log_action_scale(spec).repeat(self.critic.action_horizon))
        self.optimizers["actor"] = self.actor_optimizer = adam(self.actor.parameters(), actor_lr)
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr
        )
        if self.tuner.optimizer is not None:
            self.optimizers["alpha"] = self.tuner.optimizer

    @property
    def action_horizon(self) -> int:
        return self.critic.action_horizon

    def update_phase(self) -> tuple[bool, bool]:
        """(actor and alpha step?, target step?) for the next update."""
        n = self.updates + 1
        return n % self.policy_delay == 0, n % self.target_delay == 0

    @property
    def alpha(self) -> torch.Tensor:
        return self.tuner.alpha

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    def next_action(self, next_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``a' ~ pi(.|s')`` and its log-prob for the target (DSAC-T uses a target policy)."""
        return self.actor.sample(next_obs)

    def critic_loss(self, batch: Batch, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_Q`` against ``y = r + discount (V'(s') - alpha log pi(a'|s'))``; (loss, q)."""
        with torch.no_grad():
            next_action, next_log_prob = self.next_action(batch.next_obs)
            next_log_prob = self.tuner.to_units(next_log_prob)
            next_value = self.target_critic.next_value(batch.next_obs, next_action)
            target = batch.reward + batch.discount * (next_value - alpha * next_log_prob)
        return self.critic.td_loss(batch.obs, batch.action, target)

    def actor_loss(
        self, obs: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_pi = E[alpha log pi(a~|s) - Q(s, a~)]`` with the critic frozen; (loss, log_prob),
        ``log_prob [B]`` in the tuner's entropy units."""
        action, log_prob = self.actor.sample(obs)
        log_prob = self.tuner.to_units(log_prob)
        with frozen(self.critic):
            q_pi = self.critic.actor_value(self.critic(obs, action))
        return (alpha * log_prob - q_pi).mean(), log_prob

    def critic_terms(
        self, batch: Batch, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``J_Q``, the mean Q and the critic kind's statistics."""
        loss, q = self.critic_loss(batch, alpha)
        return loss, q.detach().mean(), self.critic.stats()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        alpha = self.alpha
        critic_loss, q_mean, critic_stats = self.compute(self.critic_terms, batch, alpha)
        self.step(self.critic_optimizer, critic_loss)
        self.updates += 1
        metrics = {"loss/critic": critic_loss.detach(), "stats/q_mean": q_mean, **critic_stats}
        if self.updates % self.policy_delay == 0:
            actor_loss, log_prob = self.compute(self.actor_loss, batch.obs, alpha)
            self.step(self.actor_optimizer, actor_loss)
            alpha_loss = self.compute(self.tuner.loss, log_prob)
            if self.tuner.optimizer is not None:
                self.step(self.tuner.optimizer, alpha_loss)
            metrics.update({
                "loss/actor": actor_loss.detach(),
                "loss/alpha": alpha_loss.detach(),
                "stats/alpha": alpha,
                "stats/entropy": -log_prob.detach(),  # reported as its mean
            })
        if self.updates % self.target_delay == 0:
            self.update_targets()
        return metrics

    def update_targets(self) -> None:
        """Polyak step of every target network (DSAC-T adds its target policy)."""
        polyak_update(self.target_critic, self.critic, self.tau)
