"""MADDPG (Lowe et al., "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
Environments", NeurIPS 2017), continuous actions.

Deterministic actors ``mu_i(o_i)`` (one batched ensemble over agents), one centralized critic per
agent ``Q_i(x, a_1..a_N)`` with ``x`` the global state (one batched ensemble over agents), target
actors ``mu'_i`` and target critics ``Q'_i`` (polyak). With ``r_i`` agent ``i``'s own reward
(n-step sums when ``n_step > 1``; ``discount = gamma^k (1 - d)``):

* critic ``i``: ``y_i = r_i + discount * Q'_i(x', mu'_1(o'_1)..mu'_N(o'_N))``,
  ``J_Q = sum_i E[(Q_i(x, a_1..a_N) - y_i)^2]``; with ``critic=distributional`` agent ``i``'s
  critic is DSAC-T's Gaussian critic over ``(x, a_1..a_N)`` instead, its targets ``y_i`` (min of
  its target means) and ``y_s,i`` (a sample of that member), its loss DSAC-T's (nets/critics.py)
* actor ``i``: ``J_mu_i = -E[Q_i(x, a_1..mu_i(o_i)..a_N)]`` with the critic frozen, where the other
  agents' actions ``a_j`` are the buffer's (``others_actions=buffer``, the paper) or their current
  policies' ``mu_j(o_j)`` without gradient (``others_actions=policy``, as HARL and BenchMARL)
* targets: ``theta' <- (1 - tau) theta' + tau theta``
* exploration: ``a_i = clip(mu_i(o_i) + N(0, sigma), -1, 1)``

All N actor losses are summed and taken in one step: agent ``i``'s loss only reaches actor ``i``
(its own ensemble member), so this equals N separate optimizers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import EnvSpec, adam, check_tau
from rlzoo.algos.multi_agent import MultiAgentAlgorithm
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import DeterministicActor
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.centralized import AgentActors, AgentCritics
from rlzoo.nets.critics import Critic
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.target import frozen, make_target, polyak_update

OTHERS_ACTIONS = ("buffer", "policy")


class MADDPG(MultiAgentAlgorithm):
    """MADDPG with per-agent centralized critics.

    Args:
        spec: environment sizes (multi-agent, with a global state).
        actor: builds the deterministic actor from ``(obs_dim, act_dim, members=...)``.
        critic: builds the per-agent critics from ``(state_dim, joint_act_dim, n_agents=N)``:
            ``AgentCritics`` (one Q per agent, the paper) or ``DistributionalCritic`` (DSAC-T's
            Gaussian critic per agent, ``critic.n`` members each).
        gamma: discount (0.99).
        tau: polyak rate of the target actors and critics (0.005, HARL).
        actor_lr: actor learning rate (5e-4, HARL).
        critic_lr: critic learning rate (1e-3, HARL).
        exploration_noise: std of the Gaussian exploration noise on actions in [-1, 1] (0.1).
        others_actions: ``buffer`` (the paper) or ``policy`` (current policies, HARL/BenchMARL).
        share_actor: one actor for all agents with the agent id appended (False).
        n_step: n-step returns (1).
    """

    graph_safe = True
    supported_critics = (AgentCritics, DistributionalCritic, CategoricalCritic)

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., DeterministicActor],
        critic: Callable[..., Critic],
        gamma: float,
        tau: float,
        actor_lr: float,
        critic_lr: float,
        exploration_noise: float,
        others_actions: str,
        share_actor: bool,
        n_step: int,
    ) -> None:
        super().__init__(spec, gamma, n_step)
        check_tau(tau)
        if exploration_noise < 0:
            raise ValueError(f"algo.exploration_noise must be >= 0, got {exploration_noise}")
        if others_actions not in OTHERS_ACTIONS:
            raise ValueError(
                f"algo.others_actions must be one of {OTHERS_ACTIONS}, got {others_actions!r}"
            )
        self.tau, self.exploration_noise = tau, exploration_noise
        self.others_from_policy = others_actions == "policy"
        self.check_critic_factory(critic)
        self.critic = critic(spec.state_dim, self.joint_dim, n_agents=self.n_agents)
        self.check_critic(self.critic)
        if self.critic.groups != self.n_agents:
            raise ValueError(f"MADDPG needs one critic per agent ({self.n_agents}); "
                             f"{type(self.critic).__name__} holds {self.critic.groups}")
        self.actor = AgentActors(actor, spec.obs_dim, spec.act_dim, self.act_dims, share_actor)
        if self.actor.stochastic:
            raise ValueError("MADDPG needs a deterministic actor (rlzoo.nets.DeterministicActor)")
        self.target_actor = make_target(self.actor)
        self.target_critic = make_target(self.critic)
        # Agent i's actor loss replaces slot i of the joint action: eye[i, 1, j, 1] = (i == j).
        eye = torch.eye(self.n_agents, dtype=torch.bool)
        self.register_buffer("own_slot", eye[:, None, :, None])
        self.optimizers["actor"] = self.actor_optimizer = adam(self.actor.parameters(), actor_lr)
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr
        )

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [E, N, O]`` -> ``action [E, N, A]`` in [-1, 1] (padding 0)."""
        action = self.actor.mode(obs)
        if deterministic:
            return action
        noisy = action + self.exploration_noise * torch.randn_like(action)
        return noisy.clamp(-1.0, 1.0) * self.act_mask

    def critic_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-agent TD losses ``[N]`` and values ``q [E, B]`` (targets without gradient).

        The target is ``[N, B]`` (``AgentCritics``) or ``[2, N, B]`` (the distributional
        critic's mean and sampled targets of each agent); the critic kind's loss takes it."""
        assert batch.state is not None and batch.next_state is not None
        assert batch.agent_reward is not None
        with torch.no_grad():
            next_action = self.target_actor.mode(batch.next_obs)
            next_value = self.target_critic.next_value(batch.next_state, self.joint(next_action))
            target = batch.agent_reward.T + batch.discount * next_value  # [(2,) N, B]
        return self.critic.td_losses(batch.state, self.joint(batch.action), target)

    def actor_losses(self, obs: torch.Tensor, state: torch.Tensor, action: torch.Tensor
                     ) -> torch.Tensor:
        """``[N]``: ``-E[Q_i(x, a_1..mu_i(o_i)..a_N)]`` for every agent, critics frozen."""
        mu = self.actor.mode(obs)  # [B, N, A]
        others = mu.detach() if self.others_from_policy else action
        joint_per_agent = torch.where(self.own_slot, mu[None], others[None])  # [N, B, N, A]
        states = state[None].expand(self.n_agents, -1, -1)
        with frozen(self.critic):
            q_pi = self.critic.agent_values(self.critic(states, self.joint(joint_per_agent)))
        return -q_pi.mean(dim=1)  # q_pi [N, B]: agent i's value from its own critic

    def critic_terms(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Per-agent TD losses ``[N]``, the mean Q (a scalar) and the critic kind's statistics."""
        losses, q = self.critic_losses(batch)
        return losses, q.detach().mean(), self.critic.stats()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One critic and one actor step of every agent, then the targets' polyak step.

        ``batch`` as the replay buffer gives it (``obs [B, N, O]``, ``state [B, S]``, ...).
        """
        assert batch.state is not None
        critic_losses, q_mean, critic_stats = self.compute(self.critic_terms, batch)  # [N] each
        critic_loss = critic_losses.sum(-1)
        self.step(self.critic_optimizer, critic_loss)
        actor_losses = self.compute(self.actor_losses, batch.obs, batch.state, batch.action)
        self.step(self.actor_optimizer, actor_losses.sum(-1))
        polyak_update(self.target_actor, self.actor, self.tau)
        polyak_update(self.target_critic, self.critic, self.tau)
        self.updates += 1
        metrics = {
            "loss/critic": critic_loss.detach(),
            "loss/actor": actor_losses.detach().sum(-1),
            "stats/q_mean": q_mean,
            **critic_stats,
        }
        for i in range(self.n_agents):
            metrics[f"loss/critic/agent_{i}"] = critic_losses[..., i].detach()
            metrics[f"loss/actor/agent_{i}"] = actor_losses[..., i].detach()
        return metrics
