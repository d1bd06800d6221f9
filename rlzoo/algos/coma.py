"""Continuous COMA: counterfactual multi-agent policy gradients (Foerster et al., "Counterfactual
Multi-Agent Policy Gradients", AAAI 2018), extended to continuous actions with a sampled baseline.

The reference code (pymarl, EPyMARL) is discrete only: there the baseline sums
``pi_i(a'|o_i) Q(s, (a', a_-i))`` over the agent's actions. With tanh-Gaussian policies we
estimate that expectation by sampling. One centralized critic, shared by all agents with the
agent's one-hot id as input, ``Q(s, a, i)`` with ``a = (a_i, a_-i)`` the joint action in agent
order; tanh-Gaussian actors ``pi_i`` (one batched ensemble over agents). On a fresh on-policy
rollout of ``T`` steps (team reward ``r_t``, the mean over agents):

* critic targets, TD(lambda) from a target critic ``Q'`` (hard copy every
  ``target_update_every`` critic steps), per agent ``i``, backwards in time:
  ``G_t = r_t + gamma (1 - d_t) [Q'_{t+1} + lambda c_t (G_{t+1} - Q'_{t+1})]``, where
  ``Q'_{t+1} = Q'(s_{t+1}, a_{t+1}, i)`` with ``a_{t+1}`` the taken joint action if the episode
  continues inside the rollout (``c_t = 1``), else (truncation or the rollout's end, ``c_t = 0``)
  a joint action sampled from the current policies; ``J_Q = E_{t,i}[(Q(s_t, a_t, i) - G_t)^2]``
* counterfactual baseline, ``C`` samples of the agent's own action with the others fixed at the
  taken ones, in one critic call: ``b_i = (1/C) sum_c Q(s, (a~_i^c, a_-i), i)``,
  ``a~_i^c ~ pi_i(.|o_i)``; an unbiased estimate of ``E_{a'~pi_i} Q(s, (a', a_-i), i)``, so
  ``E_{a_i~pi_i}[A_i] = 0``
* advantage ``A_i = Q(s, a, i) - b_i`` (no gradient); actor
  ``J(pi_i) = -E_t[A_i log pi_i(a_i|o_i)] - beta H(pi_i(.|o_i))``, where ``log pi_i`` is the exact
  tanh-corrected log-density at the executed action (from the stored pre-tanh sample) and
  ``H`` is estimated by ``-log pi_i(a~|o_i)`` of a fresh reparameterized sample

Both networks' gradients are clipped to ``max_grad_norm`` (pymarl: 10; ``Algorithm.step``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch

from rlzoo.algos.base import EnvSpec, adam
from rlzoo.algos.multi_agent import MultiAgentAlgorithm
from rlzoo.buffers.rollout import Rollout
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.centralized import AgentActors
from rlzoo.nets.critics import Critic, EnsembleCritic
from rlzoo.nets.target import make_target, polyak_update


class COMA(MultiAgentAlgorithm):
    """Continuous COMA with a sampled counterfactual baseline (on-policy).

    Args:
        spec: environment sizes (multi-agent, with a global state).
        actor: builds the tanh-Gaussian actor from ``(obs_dim, act_dim, members=...)``.
        critic: builds the shared critic from ``(state_dim + N, joint_act_dim)``.
        gamma: discount (0.99).
        td_lambda: lambda of the critic's TD(lambda) targets (0.8, pymarl).
        baseline_samples: C, own-action samples in the counterfactual baseline (16).
        entropy_coef: beta, weight of the entropy bonus (0.01).
        actor_lr: actor learning rate (5e-4, pymarl).
        critic_lr: critic learning rate (5e-4, pymarl).
        critic_steps: full-rollout critic gradient steps per update (8).
        target_update_every: critic steps between hard target-critic copies (100).
        max_grad_norm: gradient-norm clip of actor and critic (10, pymarl).
        share_actor: one actor for all agents with the agent id appended (False).
    """

    graph_safe = True  # the target copies follow update_phase(), all else is on the device
    supported_critics = (EnsembleCritic,)
    on_policy: ClassVar[bool] = True

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., TanhGaussianActor],
        critic: Callable[..., Critic],
        gamma: float,
        td_lambda: float,
        baseline_samples: int,
        entropy_coef: float,
        actor_lr: float,
        critic_lr: float,
        critic_steps: int,
        target_update_every: int,
        max_grad_norm: float,
        share_actor: bool,
    ) -> None:
        super().__init__(spec, gamma, 1)  # on-policy: no n-step replay
        if not 0.0 <= td_lambda <= 1.0:
            raise ValueError(f"algo.td_lambda must be in [0, 1], got {td_lambda}")
        if baseline_samples < 1:
            raise ValueError(f"algo.baseline_samples must be >= 1, got {baseline_samples}")
        if critic_steps < 1 or target_update_every < 1:
            raise ValueError("algo.critic_steps and algo.target_update_every must be >= 1")
        if entropy_coef < 0 or max_grad_norm <= 0:
            raise ValueError("algo.entropy_coef must be >= 0 and algo.max_grad_norm > 0")
        self.td_lambda, self.baseline_samples = td_lambda, baseline_samples
        self.entropy_coef, self.max_grad_norm = entropy_coef, max_grad_norm
        self.critic_steps, self.target_update_every = critic_steps, target_update_every
        self.check_critic_factory(critic)
        self.critic = critic(spec.state_dim + self.n_agents, self.joint_dim)
        self.check_critic(self.critic)
        self.target_critic = make_target(self.critic)
        self.actor = AgentActors(actor, spec.obs_dim, spec.act_dim, self.act_dims, share_actor)
        if not self.actor.stochastic:
            raise ValueError("COMA needs a stochastic actor (rlzoo.nets.TanhGaussianActor)")
        eye = torch.eye(self.n_agents)
        self.register_buffer("agent_id", eye)
        self.register_buffer("own_slot", eye.bool()[:, :, None])  # [N(agent), N(slot), 1]
        self.optimizers["actor"] = self.actor_optimizer = adam(self.actor.parameters(), actor_lr)
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr
        )

    def optimizer_steps(self, updates: int) -> int:
        """The critic steps ``critic_steps`` times per update (the actor once)."""
        return updates * max(1, self.critic_steps)

    @property
    def critic_updates(self) -> int:
        """Critic gradient steps so far (``critic_steps`` per update; restored with ``updates``)."""
        return self.updates * self.critic_steps

    def update_phase(self) -> tuple[int, ...]:
        """The critic steps ``k`` (``0 .. critic_steps - 1``) of the next update after which
        the target critic is copied (a CUDA graph is captured per distinct value)."""
        done = self.critic_updates
        return tuple(k for k in range(self.critic_steps)
                     if (done + k + 1) % self.target_update_every == 0)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [E, N, O]`` -> ``action [E, N, A]`` in (-1, 1) (padding 0)."""
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    @torch.no_grad()
    def explore(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A rollout action ``[E, N, A]`` and its pre-tanh sample (kept for the exact log-prob)."""
        action, _, pre_tanh = self.actor.sample(obs)
        return action, pre_tanh

    # ------------------------------------------------------------------ the critic's view
    def agent_values(self, critic: Critic, state: torch.Tensor, joint_per_agent: torch.Tensor,
                     reduce: str = "actor") -> torch.Tensor:
        """``Q(s, a^i, i)`` for every agent ``i`` with its own joint action ``a^i``.

        Args:
            critic: the online or the target critic.
            state: ``[..., S]``.
            joint_per_agent: ``[..., N, N, A]``, row ``i`` the joint action agent ``i`` is
                scored with (padded actions; only real entries reach the critic).
            reduce: how critic members are reduced: ``actor`` (``critic.actor_value``, for
                advantages) -> ``[..., N]``; ``bootstrap`` (``critic.next_value``, for targets)
                -> ``[..., N]``; ``none`` -> every member, ``[M, ..., N]`` (for the TD loss).
        """
        lead, n = state.shape[:-1], self.n_agents
        inputs = torch.cat([
            state[..., None, :].expand(*lead, n, state.shape[-1]),
            self.agent_id.expand(*lead, n, n),
        ], dim=-1)
        joint = self.joint(joint_per_agent)  # [..., N, J]
        inputs, joint = inputs.reshape(-1, inputs.shape[-1]), joint.reshape(-1, joint.shape[-1])
        if reduce == "bootstrap":
            return critic.next_value(inputs, joint)[0].reshape(*lead, n)
        q = critic(inputs, joint)  # [M, L * N]
        if reduce == "none":
            return q.reshape(-1, *lead, n)
        return critic.actor_value(q).reshape(*lead, n)

    def same_joint(self, action: torch.Tensor) -> torch.Tensor:
        """``[..., N, A]`` -> ``[..., N, N, A]``: every agent scored with the same joint action."""
        return action[..., None, :, :].expand(*action.shape[:-2], self.n_agents, *action.shape[-2:])

    @torch.no_grad()
    def counterfactual_baseline(self, obs: torch.Tensor, state: torch.Tensor,
                                action: torch.Tensor) -> torch.Tensor:
        """``b_i = (1/C) sum_c Q(s, (a~_i^c, a_-i), i)``, ``a~_i^c ~ pi_i(.|o_i)`` -> ``[..., N]``.

        ``obs [..., N, O]``, ``state [..., S]``, ``action [..., N, A]`` (the taken actions); the
        C samples of every agent go through the critic in one call.
        """
        samples = self.baseline_samples  # C
        sampled = self.actor.sample(obs.expand(samples, *obs.shape))[0]  # [C, ..., N, A]
        # Agent i's joint action: slot i <- its own sample, the other slots <- the taken actions.
        counterfactual = torch.where(self.own_slot, sampled[..., None, :, :],
                                     action[None, ..., None, :, :])  # [C, ..., N, N, A]
        values = self.agent_values(self.critic, state.expand(samples, *state.shape),
                                   counterfactual)
        return values.mean(dim=0)

    @torch.no_grad()
    def td_lambda_targets(self, rollout: Rollout) -> torch.Tensor:
        """TD(lambda) targets ``G [T, E, N]`` from the target critic (see the module docstring)."""
        T = rollout.steps
        last = torch.arange(T, device=rollout.ended.device) == T - 1
        continues = (1.0 - rollout.ended) * (~last).float()[:, None]  # c_t [T, E]
        taken_next = torch.cat([rollout.action[1:], torch.zeros_like(rollout.action[:1])])
        sampled_next = self.actor.sample(rollout.obs[1:])[0]
        next_action = torch.where(continues[..., None, None] > 0, taken_next, sampled_next)
        next_value = self.agent_values(
            self.target_critic, rollout.state[1:], self.same_joint(next_action), "bootstrap"
        )  # [T, E, N]
        reward = rollout.reward[..., None]
        not_terminated = 1.0 - rollout.terminated[..., None]
        continues = continues[..., None]
        targets = torch.empty_like(next_value)
        ret = torch.zeros_like(next_value[0])
        for t in range(T - 1, -1, -1):
            bootstrap = next_value[t] + self.td_lambda * continues[t] * (ret - next_value[t])
            ret = reward[t] + self.gamma * not_terminated[t] * bootstrap
            targets[t] = ret
        return targets

    # ------------------------------------------------------------------ the update
    def update_inputs(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The taken actions with padding zeroed ``[T, E, N, A]``, the weight
        ``[T, E, 1]`` of each transition in a mean over the valid ones, and the TD(lambda)
        targets ``[T, E, N]``."""
        action = rollout.action * self.act_mask
        weight = rollout.valid[..., None] / rollout.valid.sum().clamp(min=1.0)
        return action, weight, self.td_lambda_targets(rollout)

    def critic_terms(self, rollout: Rollout, action: torch.Tensor, targets: torch.Tensor,
                     weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The critic loss ``J_Q`` on ``targets [T, E, N]`` and its mean Q (both
        scalars, weighted by ``weight [T, E, 1]``); ``action [T, E, N, A]``."""
        taken = self.same_joint(action)
        q = self.agent_values(self.critic, rollout.state[:-1], taken, reduce="none")  # [M, T, E, N]
        loss = ((q - targets).pow(2) * weight).sum() / self.n_agents
        return loss, (q.detach().mean(0) * weight).sum() / self.n_agents

    @torch.no_grad()
    def advantages(self, rollout: Rollout, action: torch.Tensor, weight: torch.Tensor
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The advantages ``A_i = Q(s, a, i) - b_i`` ``[T, E, N]`` and their weighted mean
        and mean absolute value (scalars)."""
        obs, state = rollout.obs[:-1], rollout.state[:-1]
        advantage = self.agent_values(self.critic, state, self.same_joint(action)) \
            - self.counterfactual_baseline(obs, state, action)  # [T, E, N]
        valid_advantage = advantage * weight * self.n_agents
        return advantage, {
            "stats/advantage_mean": valid_advantage.sum() / self.n_agents,
            "stats/advantage_abs": valid_advantage.abs().sum() / self.n_agents,
        }

    def actor_terms(self, rollout: Rollout, advantage: torch.Tensor, weight: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``actor_losses`` on the rollout: losses and entropies, both ``[N]``."""
        return self.actor_losses(rollout.obs[:-1], rollout.pre_tanh, advantage, weight)

    def update(self, rollout: Rollout) -> dict[str, torch.Tensor]:  # type: ignore[override]
        """Critic steps on TD(lambda) targets, then one actor step, on a fresh rollout.

        ``rollout`` as the store gives it (``obs [T + 1, E, N, O]``, ...).
        """
        action, weight, targets = self.compute(self.update_inputs, rollout)
        copies = self.update_phase()
        for k in range(self.critic_steps):
            critic_loss, q_mean = self.compute(self.critic_terms, rollout, action, targets,
                                               weight)
            self.step(self.critic_optimizer, critic_loss, self.max_grad_norm)
            if k in copies:
                polyak_update(self.target_critic, self.critic, 1.0)  # a hard copy
        advantage, advantage_stats = self.compute(self.advantages, rollout, action, weight)
        actor_losses, entropy = self.compute(self.actor_terms, rollout, advantage, weight)
        self.step(self.actor_optimizer, actor_losses.sum(-1), self.max_grad_norm)
        self.updates += 1
        metrics = {
            "loss/critic": critic_loss.detach(),
            "loss/actor": actor_losses.detach().sum(-1),
            "stats/q_mean": q_mean,
            **advantage_stats,
            "stats/entropy": entropy.detach(),  # [N], reported as its mean
        }
        for i in range(self.n_agents):
            metrics[f"loss/actor/agent_{i}"] = actor_losses[..., i].detach()
        return metrics

    def actor_losses(self, obs: torch.Tensor, pre_tanh: torch.Tensor, advantage: torch.Tensor,
                     weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-agent ``-E[A_i log pi_i(a_i|o_i)] - beta H_i`` ``[N]`` and the entropies ``[N]``.

        ``weight [T, E, 1]`` averages over valid transitions only.
        """
        log_prob = self.actor.log_prob(obs, pre_tanh)  # [T, E, N], exact at the executed action
        entropy = -(self.actor.sample(obs)[1] * weight).sum(dim=(0, 1))  # [N]
        policy_loss = -(advantage.detach() * log_prob * weight).sum(dim=(0, 1))
        return policy_loss - self.entropy_coef * entropy, entropy
