"""HASAC (Liu et al., "Maximum Entropy Heterogeneous-Agent Reinforcement Learning", ICLR 2024;
reference code PKU-MARL/HARL).

One centralized soft Q over the global state and the joint action (a twin critic by default,
polyak targets, no target actors), tanh-Gaussian actors ``pi_i(a_i|o_i)`` (one batched ensemble
over agents), per-agent temperatures ``alpha_i`` and a critic temperature ``alpha_c``. With ``R``
the n-step team reward (the mean over agents, summed over ``k <= n`` steps, cut at episode ends)
and ``discount = gamma^k (1 - d)``:

* critic: ``y = R + discount * (min_j Q'_j(s', a') - alpha_c sum_i log pi_i(a'_i|o'_i))``,
  ``a'_i ~ pi_i(.|o'_i)`` from the current actors; ``J_Q = sum_j E[(Q_j(s, a) - y)^2]``
* actors, sequentially in a fresh random permutation ``i_1..i_N`` of the agents each update:
  draw ``a_i ~ pi_i(.|o_i)`` for every agent (old policies, no gradient); for ``m = 1..N``:
  re-sample ``a~_{i_m} ~ pi_{i_m}`` with gradient and minimise
  ``J(pi_{i_m}) = E[alpha_{i_m} log pi_{i_m}(a~_{i_m}|o_{i_m}) - min_j Q_j(s, a_{i_1:i_{m-1}},
  a~_{i_m}, a_{i_{m+1}:i_N})]`` (critic frozen), take the step, then replace ``a_{i_m}`` with a
  sample of the *updated* ``pi_{i_m}``. So agent ``i_m`` sees new-policy samples of the agents
  before it and old-policy samples of the agents after it.
* temperatures: ``J(alpha_i) = -E[log alpha_i (log pi_i(a~_i|o_i) + target_i)]``, ``target_i =
  -|A_i|``; ``J(alpha_c) = -E[log alpha_c (sum_i log pi_i(a~_i|o_i) + target_c)]``, ``target_c =
  -sum_i |A_i|``, on the same log-probs: each agent's sample drawn for its own step, *before*
  that step (as HARL's ``off_policy_ha_runner.py``, which keeps each agent's pre-update
  ``logp_actions`` for ``critic.update_alpha``)
* log-probs are in the tuner's ``entropy_units`` (``tuners/entropy.py``); HARL's are of the
  ``[-1, 1]`` action (``normalized``, the default in ``conf/algo/hasac.yaml``)
* targets: ``theta' <- (1 - tau) theta' + tau theta``

Each agent's step touches only its own ensemble member (``MemberAdam``), so the sequential scheme
is exact even though all actors live in one batched ensemble. The updated ``pi_{i_m}``'s sample is
taken from the forward pass that samples ``a~_{i_{m+1}}`` (detached), one pass per agent.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlzoo.algos.base import EnvSpec, adam, check_tau, log_action_scale
from rlzoo.algos.multi_agent import MultiAgentAlgorithm
from rlzoo.buffers.batch import Batch
from rlzoo.nets.actors import TanhGaussianActor
from rlzoo.nets.centralized import AgentActors
from rlzoo.nets.critics import Critic, EnsembleCritic
from rlzoo.nets.target import frozen, make_target, polyak_update
from rlzoo.optim import MemberAdam
from rlzoo.tuners.entropy import Tuner


class HASAC(MultiAgentAlgorithm):
    """Heterogeneous-Agent Soft Actor-Critic.

    Args:
        spec: environment sizes (multi-agent, with a global state).
        actor: builds the tanh-Gaussian actor from ``(obs_dim, act_dim, members=...)``.
        critic: builds the centralized critic from ``(state_dim, joint_act_dim)``.
        tuner: builds a temperature from ``(act_dim, members=...)``; used twice: per-agent
            temperatures (``act_dim`` = each agent's ``|A_i|``) and the critic's (``sum |A_i|``).
        gamma: discount (0.99).
        tau: polyak rate of the target critic (0.005).
        actor_lr: actor learning rate (5e-4, HARL MPE).
        critic_lr: critic learning rate (5e-4, HARL MPE).
        share_actor: one actor for all agents with the agent id appended (False).
        n_step: n-step returns (20, HARL MPE).

    The agent permutations come from torch's default CPU generator (seeded by the trainer and
    saved in checkpoints), so they cost no device synchronisation.
    """

    supported_critics = (EnsembleCritic,)

    def __init__(
        self,
        spec: EnvSpec,
        actor: Callable[..., TanhGaussianActor],
        critic: Callable[..., Critic],
        tuner: Callable[..., Tuner],
        gamma: float = 0.99,
        tau: float = 0.005,
        actor_lr: float = 5e-4,
        critic_lr: float = 5e-4,
        share_actor: bool = False,
        n_step: int = 20,
    ) -> None:
        super().__init__(spec, gamma, n_step)
        check_tau(tau)
        self.tau = tau
        self.check_critic_factory(critic)
        self.critic = critic(spec.state_dim, self.joint_dim)
        self.check_critic(self.critic)
        self.actor = AgentActors(actor, spec.obs_dim, spec.act_dim, self.act_dims, share_actor)
        if not self.actor.stochastic:
            raise ValueError("HASAC needs a stochastic actor (rlzoo.nets.TanhGaussianActor)")
        self.target_critic = make_target(self.critic)
        # Per-agent temperatures: act_dim [N, 1] gives each agent its own -|A_i| target.
        agent_dims = torch.tensor(self.act_dims, dtype=torch.float32)[:, None]
        self.tuner = tuner(agent_dims, members=self.n_agents)
        self.critic_tuner = tuner(self.joint_dim)
        log_scale = log_action_scale(spec)  # [N, A], 0 on padding
        self.tuner.set_action_scale(log_scale)
        self.critic_tuner.set_action_scale(log_scale.reshape(-1))
        self.actor_optimizer = MemberAdam(
            self.actor.parameters(), self.actor.optimizer_members, actor_lr
        )
        self.optimizers["actor"] = self.actor_optimizer
        self.optimizers["critic"] = self.critic_optimizer = adam(
            self.critic.parameters(), critic_lr
        )
        if self.tuner.optimizer is not None:
            self.optimizers["alpha"] = self.tuner.optimizer
        if self.critic_tuner.optimizer is not None:
            self.optimizers["critic_alpha"] = self.critic_tuner.optimizer
        self.update_order: list[int] = []  # agent order of the last sequential actor update

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [E, N, O]`` -> ``action [E, N, A]`` in (-1, 1) (padding 0)."""
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    @torch.no_grad()
    def critic_target(self, batch: Batch) -> torch.Tensor:
        """``y = R + discount * (min Q'(s', a') - alpha_c sum_i log pi_i(a'_i|o'_i))``, ``[K, B]``.
        """
        assert batch.next_state is not None
        next_action, next_log_prob, _ = self.actor.sample(batch.next_obs)
        next_value = self.target_critic.next_value(batch.next_state, self.joint(next_action))
        joint_log_prob = self.critic_tuner.to_units(next_log_prob.sum(-1))
        soft_value = next_value - self.critic_tuner.alpha * joint_log_prob
        return batch.reward + batch.discount * soft_value

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        assert batch.state is not None
        alpha_c = self.critic_tuner.alpha
        target = self.critic_target(batch)
        critic_loss, q = self.critic.td_loss(batch.state, self.joint(batch.action), target)
        self.step(self.critic_optimizer, critic_loss)
        metrics = self.update_actors(batch.obs, batch.state)
        polyak_update(self.target_critic, self.critic, self.tau)
        self.updates += 1
        metrics.update({
            "loss/critic": critic_loss.detach(),
            "stats/q_mean": q.detach().mean(),
            "stats/critic_alpha": alpha_c,
        })
        return metrics

    def update_actors(self, obs: torch.Tensor, state: torch.Tensor) -> dict[str, torch.Tensor]:
        """The sequential update (module docstring); then the temperatures."""
        alpha = self.tuner.alpha.reshape(-1)
        alpha = alpha.expand(self.n_agents) if alpha.numel() == 1 else alpha
        shift = self.tuner.log_prob_shift.reshape(-1).expand(self.n_agents)  # entropy units
        with torch.no_grad():
            joint_sample = self.actor.sample(obs)[0]  # [B, N, A]: old policies
        order = torch.randperm(self.n_agents, device="cpu").tolist()
        self.update_order = order
        actor_losses: list[torch.Tensor] = [torch.zeros(())] * self.n_agents
        log_probs: list[torch.Tensor] = [torch.zeros(())] * self.n_agents  # pre-update samples
        for position, agent in enumerate(order):
            # One pass of every (current) policy: agent's sample carries the gradient; the
            # previous agent's, drawn from its just-updated policy, replaces its old sample.
            action, log_prob, _ = self.actor.sample(obs)
            if position > 0:
                previous = order[position - 1]
                joint_sample[:, previous] = action[:, previous].detach()
            mixed = joint_sample.clone()
            mixed[:, agent] = action[:, agent]
            with frozen(self.critic):
                q_pi = self.critic.actor_value(self.critic(state, self.joint(mixed)))
            agent_log_prob = log_prob[:, agent] + shift[agent]
            loss = (alpha[agent] * agent_log_prob - q_pi).mean()
            self.actor_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.actor_optimizer.step(self.actor.member_of(agent))
            actor_losses[agent] = loss.detach()
            log_probs[agent] = agent_log_prob.detach()
        pre_update = torch.stack(log_probs)  # [N, B], in entropy units
        alpha_loss = self.tuner.update(pre_update)
        critic_alpha_loss = self.critic_tuner.update(pre_update.sum(0))
        metrics = {
            "loss/actor": torch.stack(actor_losses).sum(),
            "loss/alpha": alpha_loss,
            "loss/critic_alpha": critic_alpha_loss,
            "stats/entropy": -pre_update.mean(),
        }
        for i in range(self.n_agents):
            metrics[f"loss/actor/agent_{i}"] = actor_losses[i]
            metrics[f"stats/alpha/agent_{i}"] = alpha[i]
        return metrics
