"""FlashSAC (official PyTorch code github Holiday-Robot/FlashSAC at commit 87edc90,
``flash_rl/agents/flashSAC/agent.py`` and ``update.py``; Kim et al., "FlashSAC: Fast and Stable
Off-Policy Reinforcement Learning for High-Dimensional Robot Control", arXiv:2604.04539, 2026).

SAC with fewer, larger updates and bounded networks, each part a component of its own
(``conf/algo/flashsac.yaml`` composes them): the norm-bounded batch-normalized residual networks
(``net=flashsac``, ``rlzoo/nets/unit_norm.py``), the categorical twin critic on
``[-G_max, G_max]`` (``critic=categorical``), the reward scaler (``normalize.reward``), a
``tanh``-squashed log std in ``[-10, 2]``, the alpha-form temperature loss against the entropy
of a Gaussian of std ``sigma`` (``tuner.loss_form=alpha``, ``tuner.target_std``) and repeated
exploration noise (``rlzoo/algos/exploration.py``). What is this file's own is the update, in
the reference's order (``_update_networks``), every ``policy_delay``-th update starting with
the first (``update_step % actor_update_period == 0``):

1. actor: ``J_pi = E[alpha log pi(a~|s) - min_i Q_i(s, a~)]``. The actor samples ``a~`` for
   ``s`` and ``s'`` in one batch with batch statistics (its batch norms see both halves); the
   loss uses the ``s`` half; the critic is read frozen, with its running statistics. Then the
   actor is projected (``project_parameters``);
2. temperature: one step on ``alpha (-E[log pi(a~|s)] - H_target)`` with that step's samples;

and at every update

3. critic: ``a' ~ pi(.|s')`` from the updated actor (running statistics); the target critic
   and the critic each run ``(s, a)`` and ``(s', a')`` as one batch with batch statistics (the
   joint pass CrossQ uses too, ``rlzoo.nets.batch_norm.joint_pass``); the target member with
   the smaller expected value at ``(s', a')`` gives ``y = r + discount (Z'(s', a') - alpha'
   log pi(a'|s'))`` (the updated temperature), projected onto the support; the loss is the
   cross-entropy on the ``(s, a)`` half, *averaged* over the members and the batch; then the
   critic is projected;
4. target critic: ``theta' <- (1 - tau) theta' + tau theta`` for the parameters only (its batch
   norms keep the running statistics of its own passes).

Learning rates: every optimizer's rate is ``lr * f(k)``, ``k`` the steps that optimizer has
taken, ``f`` a linear warm-up then a cosine decay (``rlzoo.algos.schedules.warmup_cosine``); the
actor and the temperature step every ``policy_delay`` updates, so their ``k`` runs at half the
critic's (as the reference's per-optimizer schedulers do). The warm-up lasts
``int(lr_warmup_rate x run_updates)`` steps and the cosine ends at step ``lr_decay_updates``, by
default ``run_updates = int(total_steps x utd)``: the reference's ``learning_rate_warmup_step``
and ``learning_rate_decay_step``, ``int(rate x num_interaction_steps x
updates_per_interaction_step)`` with rates 1e-6 and 1.0 (no warm-up below 1M updates).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import EnvSpec
from rlzoo.algos.exploration import RepeatedNoise
from rlzoo.algos.sac import SAC
from rlzoo.algos.schedules import Factor, ScheduledRates, Step, ceil_div, warmup_cosine
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.batch_norm import batch_statistics, joint_pass
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.critics import Critic
from rlzoo.nets.target import frozen, polyak_update
from rlzoo.optim.adam import ADAM_BETAS
from rlzoo.optim.entropy import Tuner


class FlashSAC(SAC):
    """SAC updated in FlashSAC's order and batches (module docstring).

    Args:
        spec, actor, critic, tuner, gamma, tau, actor_lr, critic_lr, n_step: as ``SAC``'s
            (the learning rates are the schedule's peak).
        policy_delay: updates per actor and temperature step (the reference: 2).
        lr_init_fraction: the rate at the first step, as a fraction of the peak (1.0).
        lr_end_fraction: the rate at the end of the decay, as a fraction (0.5).
        lr_warmup_updates: optimizer steps of the linear warm-up; ``None``:
            ``int(lr_warmup_rate x run_updates)`` (the reference's ``learning_rate_warmup_step``).
        lr_decay_updates: optimizer step at which the cosine decay ends; ``None``:
            ``run_updates`` (the reference's ``learning_rate_decay_step``: its whole run).
        lr_warmup_rate: the warm-up's fraction of ``run_updates`` when ``lr_warmup_updates`` is
            ``None`` (the reference: 1e-6; the default is only for run dirs written before this
            key, whose numeric ``lr_warmup_updates`` never reads it).
        run_updates: the updates the run is counted to make, ``int(total_steps x utd)``
            (passed by ``rlzoo.config.build``).
        noise_envs: training envs (one exploration noise row each: ``num_envs``).
        noise_zeta_mu, noise_zeta_max: the repetition of the exploration noise
            (``RepeatedNoise``).
    """

    supported_critics = (CategoricalCritic,)
    graph_safe = True  # the learning rates are set on the device (ScheduledRates)

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., TanhGaussianActor],
        critic: Callable[..., Critic],
        tuner: Callable[..., Tuner],
        *,
        gamma: float,
        tau: float,
        actor_lr: float,
        critic_lr: float,
        policy_delay: int,
        n_step: int,
        lr_init_fraction: float,
        lr_end_fraction: float,
        lr_warmup_updates: int | None,
        lr_decay_updates: int | None,
        noise_envs: int,
        noise_zeta_mu: float,
        noise_zeta_max: int,
        lr_warmup_rate: float = 1.0e-6,
        run_updates: int | None = None,
    ) -> None:
        if lr_decay_updates is None or lr_warmup_updates is None:
            if run_updates is None:
                raise ValueError("algo.lr_decay_updates=null and algo.lr_warmup_rate schedule "
                                 "over the run's own updates, which nobody passed; set "
                                 "algo.lr_decay_updates and algo.lr_warmup_updates")
            if not 0.0 <= lr_warmup_rate < 1.0:
                raise ValueError(f"algo.lr_warmup_rate must be in [0, 1), got {lr_warmup_rate}")
            if lr_decay_updates is None:
                lr_decay_updates = max(1, int(run_updates))
            if lr_warmup_updates is None:
                lr_warmup_updates = int(lr_warmup_rate * run_updates)
        # its target critic and torch's Adam; its joint passes are its own update's
        super().__init__(spec, actor, critic, tuner, gamma, tau, actor_lr, critic_lr,
                         policy_delay, n_step, 1, "polyak", "separate", ADAM_BETAS)
        for name, value in (("lr_init_fraction", lr_init_fraction),
                            ("lr_end_fraction", lr_end_fraction)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"algo.{name} must be in (0, 1], got {value}")
        if not 0 <= lr_warmup_updates < lr_decay_updates:
            raise ValueError(
                "algo.lr_warmup_updates must be >= 0 and below algo.lr_decay_updates, got "
                f"{lr_warmup_updates} and {lr_decay_updates}"
            )
        self.lr_init_fraction, self.lr_end_fraction = lr_init_fraction, lr_end_fraction
        self.lr_warmup_updates, self.lr_decay_updates = lr_warmup_updates, lr_decay_updates
        self.lr_schedule = ScheduledRates(self.optimizers, self.lr_factor)
        self.exploration = RepeatedNoise(noise_envs, spec.act_dim, noise_zeta_mu,
                                         noise_zeta_max)

    def update_phase(self) -> bool:
        """Whether the next update steps the actor and the temperature."""
        return self.updates % self.policy_delay == 0

    def lr_factor(self, name: str, updates: Step) -> Factor:
        """``f(k)`` of optimizer ``name`` after ``updates`` updates, ``k`` its own steps so far
        (module docstring): the critic steps at every update, the actor and the temperature at
        updates 0, d, 2d, ... (``ceil(updates / d)`` steps so far)."""
        k = updates if name == "critic" else ceil_div(updates, self.policy_delay)
        return warmup_cosine(k, self.lr_init_fraction, self.lr_end_fraction,
                             self.lr_warmup_updates, self.lr_decay_updates)

    def set_learning_rates(self) -> None:
        """``lr * f(k)`` for every optimizer for the update about to run (on the device from
        the schedule's clock on CUDA: ``ScheduledRates``)."""
        assert self.lr_schedule is not None
        self.lr_schedule.apply(self.updates)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``tanh(mean)`` (evaluation), or ``tanh(mean + std * noise)`` with the repeated noise
        (training); the actor reads its running statistics."""
        if deterministic:
            return self.actor.mode(obs)
        mean, log_std = self.actor(obs)
        return torch.tanh(mean + self.exploration.draw(mean) * log_std.exp())

    def joint_actor_loss(
        self, batch: Batch, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_pi`` on the ``s`` half of a joint ``(s, s')`` actor pass; (loss, log_prob [B])."""
        size = batch.obs.shape[0]
        with batch_statistics(self.actor):
            action, log_prob = self.actor.sample(torch.cat([batch.obs, batch.next_obs]))
        action, log_prob = action[:size], self.tuner.to_units(log_prob[:size])
        with frozen(self.critic):
            q_pi = self.critic.actor_value(self.critic(batch.obs, action))
        return (alpha * log_prob - q_pi).mean(), log_prob

    def joint_critic_terms(
        self, batch: Batch, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The cross-entropy loss (mean over members and batch), the mean Q and the critic's
        statistics (module docstring, step 3)."""
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch.next_obs)
            next_log_prob = self.tuner.to_units(next_log_prob)
        pair = (batch.obs, batch.action, batch.next_obs, next_action)
        with torch.no_grad():
            next_log_probs = joint_pass(self.target_critic, *pair)[1]  # [E, B, N]
            next_value = self.target_critic.next_value_from(next_log_probs)
            target = batch.reward + batch.discount * (next_value - alpha * next_log_prob)
            projected = self.critic.target_probs(target)  # [B, N]
        log_probs = joint_pass(self.critic, *pair)[0]  # [E, B, N]
        loss = -(projected * log_probs).sum(-1).mean()
        q = self.critic.moments(log_probs.detach())[0]
        return loss, q.mean(), self.critic.stats()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.set_learning_rates()
        metrics: dict[str, torch.Tensor] = {}
        if self.update_phase():
            alpha = self.alpha
            actor_loss, log_prob = self.compute(self.joint_actor_loss, batch, alpha)
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
        critic_loss, q_mean, critic_stats = self.compute(self.joint_critic_terms, batch,
                                                         self.alpha)
        self.step(self.critic_optimizer, critic_loss)
        self.updates += 1
        self.lr_schedule.tick()
        self.update_targets()
        return {"loss/critic": critic_loss.detach(), "stats/q_mean": q_mean, **critic_stats,
                **metrics}

    def update_targets(self) -> None:
        polyak_update(self.target_critic, self.critic, self.tau, buffers=False)
