"""Twin Delayed DDPG (Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic
Methods", ICML 2018).

* target smoothing: ``a' = clip(mu'(s') + clip(N(0, sigma~), -c, c), -1, 1)``
* critic: ``y = r + discount * min(Q'_1, Q'_2)(s', a')``, ``J_Q = sum_i E[(Q_i(s, a) - y)^2]``
* every ``policy_delay`` critic steps: actor ``J_mu = -E[Q_1(s, mu(s))]`` (critic frozen), then
  polyak update of the target actor and target critic
* exploration: ``a = clip(mu(s) + N(0, sigma), -1, 1)``

Actions are normalised to ``[-1, 1]``, so the noise scales are relative to the action range.
DDPG (Lillicrap et al., ICLR 2016) is this class with one critic, ``policy_delay = 1`` and no
smoothing noise (``conf/algo/ddpg.yaml``, as Stable-Baselines3 builds its ``DDPG`` on its
``TD3``).

``target_networks=none`` bootstraps from the online actor and critic (read without gradient);
``adam_betas`` are the actor's and critic's Adam betas. Networks with batch norms normalize with
the batch's statistics in the critic's TD loss and the actor's loss, with their running
statistics everywhere else (``rlzoo/nets/batch_norm.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rlzoo.algos.base import Algorithm, EnvSpec, adam, check_tau
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import DeterministicActor
from rlzoo.nets.batch_norm import batch_statistics
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.critics import ActionSequenceCritic, Critic, EnsembleCritic, TwinCritic
from rlzoo.nets.target import frozen, optional_target, polyak_update


class TD3(Algorithm):
    """TD3.

    Args:
        spec: environment sizes.
        actor: builds the deterministic actor from ``(obs_dim, act_dim)``.
        critic: builds the critic from ``(obs_dim, act_dim)``.
        gamma: discount.
        tau: polyak rate.
        actor_lr, critic_lr: learning rates.
        policy_delay: critic steps per actor/target step.
        policy_noise: std of the target smoothing noise.
        noise_clip: clip of the target smoothing noise.
        exploration_noise: std of the Gaussian exploration noise.
        n_step: n-step returns.
        target_networks: ``polyak`` (target actor and critic) or ``none`` (module docstring).
        adam_betas: ``[beta1, beta2]`` of the actor's and critic's Adam.

    Every hyperparameter is required; its default is declared once, in ``conf/algo/td3.yaml``.

    Critic kinds: twin, ensemble and action chunks. The distributional critic is DSAC-T's and is
    not validated with a deterministic policy, so it is refused (use algo=sac or algo=dsac_t).
    """

    supported_critics = (TwinCritic, EnsembleCritic, ActionSequenceCritic, CategoricalCritic)
    graph_safe = True

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., DeterministicActor],
        critic: Callable[..., Critic],
        gamma: float,
        tau: float,
        actor_lr: float,
        critic_lr: float,
        policy_delay: int,
        policy_noise: float,
        noise_clip: float,
        exploration_noise: float,
        n_step: int,
        target_networks: str,
        adam_betas: Sequence[float],
    ) -> None:
        super().__init__(spec, gamma, n_step)
        check_tau(tau)
        if policy_delay < 1:
            raise ValueError(f"algo.policy_delay must be >= 1, got {policy_delay}")
        if min(policy_noise, noise_clip, exploration_noise) < 0:
            raise ValueError("algo.policy_noise, noise_clip and exploration_noise must be >= 0")
        self.tau, self.policy_delay = tau, policy_delay
        self.policy_noise, self.noise_clip = policy_noise, noise_clip
        self.exploration_noise = exploration_noise
        self.target_networks, self.adam_betas = target_networks, [float(b) for b in adam_betas]
        self.critic = critic(spec.obs_dim, spec.act_dim)
        self.check_critic(self.critic)
        self.actor = actor(spec.obs_dim, spec.act_dim * self.critic.action_horizon)
        self.target_actor = optional_target(self.actor, target_networks)
        self.target_critic = optional_target(self.critic, target_networks)
        self.optimizers["actor"] = self.actor_optimizer = adam(
            self.actor.parameters(), actor_lr, betas=adam_betas)
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr, betas=adam_betas)

    @property
    def action_horizon(self) -> int:
        return self.critic.action_horizon

    def update_phase(self) -> bool:
        """Whether the next update steps the actor and the targets."""
        return (self.updates + 1) % self.policy_delay == 0

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        action = self.actor(obs)
        if deterministic:
            return action
        return (action + self.exploration_noise * torch.randn_like(action)).clamp(-1.0, 1.0)

    def critic_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_Q`` against ``y = r + discount min_i Q'_i(s', a')`` with smoothed ``a'``."""
        actor = self.actor if self.target_actor is None else self.target_actor
        critic = self.critic if self.target_critic is None else self.target_critic
        with torch.no_grad():
            noise = torch.randn_like(batch.action) * self.policy_noise
            noise = noise.clamp(-self.noise_clip, self.noise_clip)
            next_action = (actor(batch.next_obs) + noise).clamp(-1.0, 1.0)
            next_value = critic.next_value(batch.next_obs, next_action)
            target = batch.reward + batch.discount * next_value
        with batch_statistics(self.critic):
            return self.critic.td_loss(batch.obs, batch.action, target)

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """``J_mu = -E[Q_1(s, mu(s))]`` (the critic's actor reduction) with the critic frozen."""
        with batch_statistics(self.actor):
            action = self.actor(obs)
        with frozen(self.critic):
            q_pi = self.critic.actor_value(self.critic(obs, action))
        return -q_pi.mean()

    def critic_terms(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``J_Q`` and the mean Q."""
        loss, q = self.critic_loss(batch)
        return loss, q.detach().mean()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        critic_loss, q_mean = self.compute(self.critic_terms, batch)
        self.step(self.critic_optimizer, critic_loss)
        self.updates += 1
        metrics = {"loss/critic": critic_loss.detach(), "stats/q_mean": q_mean}
        if self.updates % self.policy_delay == 0:
            actor_loss = self.compute(self.actor_loss, batch.obs)
            self.step(self.actor_optimizer, actor_loss)
            if self.target_actor is not None and self.target_critic is not None:
                polyak_update(self.target_actor, self.actor, self.tau)
                polyak_update(self.target_critic, self.critic, self.tau)
            metrics["loss/actor"] = actor_loss.detach()
        return metrics
