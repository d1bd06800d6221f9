"""Soft Actor-Critic (Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2019).

With ``y = r + discount * (min_i Q'_i(s', a') - alpha log pi(a'|s'))``, ``a' ~ pi(.|s')``:

* critic:  ``J_Q  = sum_i E[(Q_i(s, a) - y)^2]``
* actor:   ``J_pi = E[alpha log pi(a~|s) - min_i Q_i(s, a~)]``, ``a~ ~ pi(.|s)`` reparameterized,
  with the critic's weights frozen (gradient flows only through ``a~``)
* alpha:   ``J(alpha) = -E[log alpha (log pi(a~|s) + target_entropy)]``

Every ``log pi`` above is in the tuner's ``entropy_units`` (``optim/entropy.py``): of the
``[-1, 1]`` action (``normalized``, SB3's and REDQ's convention) or of the env's own action
(``env``, CleanRL's and the official DSAC-v2's: ``log pi - sum_i log((high_i - low_i) / 2)``).
* targets: ``theta' <- (1 - tau) theta' + tau theta``

The critic kind chooses the reductions ("min" above) and the TD loss; see ``nets/critics.py``.
Three options change how, each a declared key of ``conf/algo/*.yaml``:

* ``target_networks``: ``polyak`` (the target critic ``Q'`` above) or ``none``: ``Q'`` is the
  critic itself, read without gradient (CrossQ);
* ``critic_pass``: ``separate``, the TD loss's pass at ``(s, a)`` apart from the bootstrap pass at
  ``(s', a')``; or ``joint``, one pass of the critic over ``[s; s']`` with shared batch
  statistics (``rlzoo.nets.batch_norm.joint_pass``), whose ``(s', a')`` half gives ``Q'``
  without gradient when there is no target critic (CrossQ), else the target critic makes a
  joint pass of its own for it (FlashSAC's way);
* ``adam_betas``: the actor's and critic's Adam betas (the temperature's Adam keeps torch's).

Networks with batch norms (``net=batch_norm``, ``net=batch_renorm``) normalize with the batch's
statistics in the passes that train them (the TD loss, the actor's sample at ``s``) and with
their running statistics everywhere else (``a'``, ``Q'``, the critic read by the actor loss,
acting); see ``rlzoo/nets/batch_norm.py``.
The actor and temperature step every ``policy_delay`` critic steps (1 in SAC; DSAC-T 2; REDQ
20, i.e. once per env step at 20 critic steps per env step), the targets every
``target_delay`` critic steps (default: ``policy_delay``; REDQ 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rlzoo.algos.base import Algorithm, EnvSpec, adam, check_tau, log_action_scale
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.batch_norm import batch_statistics, joint_pass
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.critics import (
    ActionSequenceCritic,
    Critic,
    EnsembleCritic,
    TwinCritic,
)
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.gaussian import GaussianCritic
from rlzoo.nets.target import frozen, optional_target, polyak_update
from rlzoo.optim.entropy import Tuner

CRITIC_PASSES = ("separate", "joint")


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
        target_networks: ``polyak`` or ``none`` (module docstring).
        critic_pass: ``separate`` or ``joint`` (module docstring; ``joint`` needs a critic kind
            that splits its pass: twin, ensemble, categorical, tqc).
        adam_betas: ``[beta1, beta2]`` of the actor's and critic's Adam.

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
        target_networks: str,
        critic_pass: str,
        adam_betas: Sequence[float],
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
        if critic_pass not in CRITIC_PASSES:
            raise ValueError(f"algo.critic_pass must be one of {', '.join(CRITIC_PASSES)}, got "
                             f"{critic_pass!r}")
        self.tau, self.policy_delay, self.target_delay = tau, policy_delay, target_delay
        self.check_critic_factory(critic)
        self.critic = critic(spec.obs_dim, spec.act_dim)
        self.check_critic(self.critic)
        if critic_pass == "joint" and not self.critic.joins_passes():
            raise ValueError(f"algo.critic_pass=joint needs a critic that splits its pass "
                             f"(twin, ensemble, categorical, tqc); {type(self.critic).__name__} "
                             "does not: set algo.critic_pass=separate")
        self.critic_pass, self.target_networks = critic_pass, target_networks
        self.adam_betas = [float(b) for b in adam_betas]
        chunk_dim = spec.act_dim * self.critic.action_horizon
        self.actor = actor(spec.obs_dim, chunk_dim)
        self.target_critic = optional_target(self.critic, target_networks)
        self.tuner = tuner(chunk_dim)
        # An action chunk holds H consecutive env actions: the scale repeats H times.
        self.tuner.set_action_scale(log_action_scale(spec).repeat(self.critic.action_horizon))
        self.optimizers["actor"] = self.actor_optimizer = adam(
            self.actor.parameters(), actor_lr, betas=adam_betas)
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr, betas=adam_betas)
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

    @property
    def bootstrap_critic(self) -> Critic:
        """The critic ``V'(s')`` is read from: the target critic, or with
        ``target_networks=none`` the critic itself."""
        return self.critic if self.target_critic is None else self.target_critic

    def critic_loss(self, batch: Batch, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_Q`` against ``y = r + discount (V'(s') - alpha log pi(a'|s'))``; (loss, q)."""
        with torch.no_grad():
            next_action, next_log_prob = self.next_action(batch.next_obs)
            next_log_prob = self.tuner.to_units(next_log_prob)
        if self.critic_pass == "joint":
            return self.joint_critic_loss(batch, next_action, next_log_prob, alpha)
        with torch.no_grad():
            next_value = self.bootstrap_critic.next_value(batch.next_obs, next_action)
            target = batch.reward + batch.discount * (next_value - alpha * next_log_prob)
        with batch_statistics(self.critic):
            return self.critic.td_loss(batch.obs, batch.action, target)

    def joint_critic_loss(
        self, batch: Batch, next_action: torch.Tensor, next_log_prob: torch.Tensor,
        alpha: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``critic_loss`` with ``critic_pass=joint``: one critic pass over ``[s; s']`` (module
        docstring); ``V'(s')`` from its ``s'`` half, or from the target critic's joint pass."""
        pair = (batch.obs, batch.action, batch.next_obs, next_action)
        outputs, next_outputs = joint_pass(self.critic, *pair)
        with torch.no_grad():
            if self.target_critic is not None:
                next_outputs = joint_pass(self.target_critic, *pair)[1]
            next_value = self.bootstrap_critic.next_value_from(next_outputs.detach())
            target = batch.reward + batch.discount * (next_value - alpha * next_log_prob)
        return self.critic.td_loss_from(outputs, target)

    def actor_loss(
        self, obs: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_pi = E[alpha log pi(a~|s) - Q(s, a~)]`` with the critic frozen; (loss, log_prob),
        ``log_prob [B]`` in the tuner's entropy units."""
        with batch_statistics(self.actor):
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
        """Polyak step of every target network (DSAC-T adds its target policy); none without
        them. With ``critic_pass=joint`` the target critic's batch norms keep the running
        statistics of its own passes (only the parameters are averaged)."""
        if self.target_critic is not None:
            polyak_update(self.target_critic, self.critic, self.tau,
                          buffers=self.critic_pass == "separate")
