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
* log-probs are in the tuner's ``entropy_units`` (``optim/entropy.py``); HARL's are of the
  ``[-1, 1]`` action (``normalized``, the default in ``conf/algo/hasac.yaml``)
* targets: ``theta' <- (1 - tau) theta' + tau theta``
* ``critic=distributional``: the centralized critic is DSAC-T's Gaussian critic over (global
  state, joint action), the same class as single-agent DSAC-T's: ``min_j Q'_j`` above becomes its
  ``[min mean, sampled value]`` pair, ``J_Q`` its loss, and the actors ascend the min of its means
  (``nets/critics.py``); nothing else changes

``actor_update=simultaneous`` (``algo=masac``: MASAC, as BenchMARL's, with HASAC's critic,
temperatures and n-step returns) replaces the sequential scheme: one draw ``a~_i ~ pi_i(.|o_i)``
of every agent with gradient, one loss ``sum_i alpha_i log pi_i(a~_i|o_i) - min_j Q_j(s, a~)``
and one step of every actor, so each agent optimises against the other agents' samples of the
same (pre-update) policies and the same critic values.

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
from rlzoo.nets.categorical import CategoricalCritic
from rlzoo.nets.centralized import AgentActors
from rlzoo.nets.critics import Critic, EnsembleCritic
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.target import frozen, make_target, polyak_update
from rlzoo.optim.adam import MemberAdam
from rlzoo.optim.entropy import Tuner

ACTOR_UPDATES = ("sequential", "simultaneous")  # algo.actor_update: HASAC's, MASAC's


class HASAC(MultiAgentAlgorithm):
    """Heterogeneous-Agent Soft Actor-Critic.

    Args:
        spec: environment sizes (multi-agent, with a global state).
        actor: builds the tanh-Gaussian actor from ``(obs_dim, act_dim, members=...)``.
        critic: builds the centralized critic from ``(state_dim, joint_act_dim)``: an
            ``EnsembleCritic`` (twin by default) or a ``DistributionalCritic``.
        tuner: builds a temperature from ``(act_dim, members=...)``; used twice: per-agent
            temperatures (``act_dim`` = each agent's ``|A_i|``) and the critic's (``sum |A_i|``).
        gamma: discount (0.99).
        tau: polyak rate of the target critic (0.005).
        actor_lr: actor learning rate (5e-4, HARL MPE).
        critic_lr: critic learning rate (5e-4, HARL MPE).
        share_actor: one actor for all agents with the agent id appended (False).
        n_step: n-step returns (20, HARL MPE).
        actor_update: ``sequential`` (HASAC's, in a random agent order) or ``simultaneous``
            (every agent at once: MASAC).

    The agent permutations are drawn where the weights live: on the CPU from torch's default
    CPU generator (``randperm``, seeded by the trainer and saved in checkpoints); on CUDA on the
    device (the argsort of uniform keys from the device's generator), so a CUDA update reads
    nothing from the host and can be captured as a CUDA graph (``cudagraphs``).
    """

    graph_safe = True
    supported_critics = (EnsembleCritic, DistributionalCritic, CategoricalCritic)

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
        share_actor: bool,
        n_step: int,
        actor_update: str,
    ) -> None:
        super().__init__(spec, gamma, n_step)
        check_tau(tau)
        if actor_update not in ACTOR_UPDATES:
            raise ValueError(f"algo.actor_update must be one of {', '.join(ACTOR_UPDATES)}, got "
                             f"{actor_update!r}")
        self.actor_update = actor_update
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
        # Agent order of the last sequential actor update ([N]).
        self.last_orders: torch.Tensor | None = None

    @property
    def update_order(self) -> list[int] | list[list[int]]:
        """The agent order of the last sequential actor update (a list of lists when several
        runs train as one group); read on the host when asked, never inside the update."""
        return [] if self.last_orders is None else self.last_orders.tolist()

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [E, N, O]`` -> ``action [E, N, A]`` in (-1, 1) (padding 0)."""
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    @torch.no_grad()
    def critic_target(self, batch: Batch) -> torch.Tensor:
        """``y = R + discount * (min Q'(s', a') - alpha_c sum_i log pi_i(a'_i|o'_i))``,
        ``[..., B]``."""
        assert batch.next_state is not None
        next_action, next_log_prob, _ = self.actor.sample(batch.next_obs)
        next_value = self.target_critic.next_value(batch.next_state, self.joint(next_action))
        joint_log_prob = self.critic_tuner.to_units(next_log_prob.sum(-1))
        soft_value = next_value - self.critic_tuner.alpha * joint_log_prob
        return batch.reward + batch.discount * soft_value

    def critic_terms(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``J_Q`` against ``critic_target``, the mean Q (scalars) and the critic kind's
        statistics."""
        assert batch.state is not None
        target = self.critic_target(batch)
        loss, q = self.critic.td_loss(batch.state, self.joint(batch.action), target)
        return loss, q.detach().mean(), self.critic.stats()

    def critic_and_actor_inputs(self, batch: Batch) -> tuple[
            torch.Tensor, torch.Tensor, dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        """``critic_terms`` and what the actor steps start from, in one ``compute`` call (one
        pass over a seed group's seeds, not three): the agents' temperatures before the steps
        ``[N]`` and, for the sequential update, every agent's sample of its old policy
        ``[B, N, A]`` (``old_joint_sample``; MASAC: an empty ``[0]``). Neither reads the critic,
        so the critic step after this call leaves them as they were, and the random draws come
        in the order they always did (the critic target's, then the old policies')."""
        loss, q_mean, stats = self.critic_terms(batch)
        alpha = self.agent_alphas()
        joint_sample = (self.old_joint_sample(batch.obs) if self.actor_update == "sequential"
                        else alpha.new_zeros(0))
        return loss, q_mean, stats, alpha, joint_sample

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The critic step, the sequential actor steps, the temperatures, the target critic.

        ``batch`` as the replay buffer gives it (``obs [B, N, O]``, ``state [B, S]``, ...).
        """
        assert batch.state is not None
        alpha_c = self.critic_tuner.alpha
        critic_loss, q_mean, critic_stats, alpha, joint_sample = self.compute(
            self.critic_and_actor_inputs, batch)
        self.step(self.critic_optimizer, critic_loss)
        metrics = (self.update_actors(batch.obs, batch.state, alpha, joint_sample)
                   if self.actor_update == "sequential"
                   else self.update_actors_at_once(batch.obs, batch.state, alpha))
        polyak_update(self.target_critic, self.critic, self.tau)
        self.updates += 1
        metrics.update({
            "loss/critic": critic_loss.detach(),
            "stats/q_mean": q_mean,
            "stats/critic_alpha": alpha_c,
            **critic_stats,
        })
        return metrics

    def draw_orders(self, device: torch.device) -> torch.Tensor:
        """The agent order of this update's sequential actor steps, ``[N]``. On the CPU from
        torch's default CPU generator (``randperm``); elsewhere on ``device``, from its
        generator, with no host read (:meth:`device_order`)."""
        if device.type != "cpu":
            return self.compute(self.device_order, device)
        return self.draw(lambda: torch.randperm(self.n_agents, device="cpu"))

    def device_order(self, device: torch.device) -> torch.Tensor:
        """A random agent order ``[N]`` drawn on ``device``: the argsort of uniform keys."""
        return torch.rand(self.n_agents, device=device).argsort(-1)

    def agent_alphas(self) -> torch.Tensor:
        """The agents' temperatures ``[N]`` (one shared temperature repeated)."""
        return self.tuner.alpha.reshape(-1).expand(self.n_agents)

    @torch.no_grad()
    def old_joint_sample(self, obs: torch.Tensor) -> torch.Tensor:
        """``a_i ~ pi_i(.|o_i)`` of every agent from the policies before the actor steps:
        ``obs [B, N, O]`` -> ``[B, N, A]``."""
        return self.actor.sample(obs)[0]

    def agent_terms(
        self, obs: torch.Tensor, state: torch.Tensor, joint_sample: torch.Tensor,
        agent: torch.Tensor, previous: torch.Tensor | None, alpha: torch.Tensor,
        losses: torch.Tensor, pre_update: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Agent ``agent``'s actor loss at its place in the sequential update.

        One pass of every (current) policy: ``agent``'s sample carries the gradient; the
        ``previous`` agent's, drawn from its just-updated policy, replaces its old sample in
        ``joint_sample``. Agents are 0-d index tensors (read on the device, never on the host);
        ``previous`` is None for the first agent.

        Args:
            obs: ``[B, N, O]``. state: ``[B, S]``.
            joint_sample: ``[B, N, A]``, each agent's latest sample (no gradient).
            alpha: ``[N]``, the agents' temperatures.
            losses: ``[N]``, the actor losses so far (this agent's entry is replaced).
            pre_update: ``[N, B]``, the pre-update log-probs so far, in entropy units (likewise).

        Returns the loss (a scalar, with gradient) and the new ``joint_sample``, ``losses`` and
        ``pre_update``.
        """
        agents = torch.arange(self.n_agents, device=obs.device)
        action, log_prob, _ = self.actor.sample(obs)
        if previous is not None:
            joint_sample = torch.where((agents == previous)[:, None], action.detach(),
                                       joint_sample)
        own = (agents == agent)[:, None]  # [N, 1]
        mixed = torch.where(own, action, joint_sample)
        with frozen(self.critic):
            q_pi = self.critic.actor_value(self.critic(state, self.joint(mixed)))
        shift = self.tuner.log_prob_shift.reshape(-1).expand(self.n_agents)  # entropy units
        # entry ``agent`` by index_select: indexing with a 0-d tensor reads it on the host
        pick = agent.reshape(1)
        agent_log_prob = log_prob.index_select(1, pick)[:, 0] + shift.index_select(0, pick)[0]
        loss = (alpha.index_select(0, pick)[0] * agent_log_prob - q_pi).mean()
        losses = torch.where(own[:, 0], loss.detach(), losses)
        pre_update = torch.where(own, agent_log_prob.detach()[None], pre_update)
        return loss, joint_sample, losses, pre_update

    def update_actors(self, obs: torch.Tensor, state: torch.Tensor,
                      alpha: torch.Tensor | None = None,
                      joint_sample: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The sequential update (module docstring); then the temperatures.

        ``obs [B, N, O]``, ``state [B, S]``; ``alpha [N]`` (the temperatures before the steps)
        and ``joint_sample [B, N, A]`` (every agent's sample of its old policy) as
        :meth:`critic_and_actor_inputs` gives them to ``update`` (None: computed here). Each
        agent's step moves only its own member (``MemberAdam``).
        """
        n, batch_size = self.n_agents, obs.shape[-3]
        if alpha is None or joint_sample is None:
            alpha = self.compute(self.agent_alphas)
            joint_sample = self.compute(self.old_joint_sample, obs)
        orders = self.draw_orders(obs.device)  # [N]
        self.last_orders = orders
        on_device = orders.to(obs.device)
        # the actor member of each agent in the orders: its own, or member 0 of a shared actor
        members = torch.zeros_like(on_device) if self.actor.shared else on_device
        losses = torch.zeros_like(alpha)  # [N]
        pre_update = alpha.new_zeros(*alpha.shape, batch_size)  # [N, B], in entropy units
        for position in range(n):
            previous = on_device[..., position - 1] if position > 0 else None
            loss, joint_sample, losses, pre_update = self.compute(
                self.agent_terms, obs, state, joint_sample, on_device[..., position], previous,
                alpha, losses, pre_update,
            )
            self.actor_optimizer.zero_grad(set_to_none=True)
            self.backward(loss)
            # the member of the agent at this position (an index tensor, as the orders are)
            self.actor_optimizer.step(members[..., position])
            self.apply_constraints(self.actor_optimizer)
        return self.update_temperatures(alpha, losses, pre_update)

    def joint_terms(self, obs: torch.Tensor, state: torch.Tensor, alpha: torch.Tensor,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """MASAC's actor loss: every agent's sample with gradient in one joint action,
        ``sum_i E[alpha_i log pi_i(a~_i|o_i)] - E[min_j Q_j(s, a~)]`` (so agent i's gradient is
        its own ``J(pi_i)``'s). ``obs [B, N, O]``, ``state [B, S]``, ``alpha [N]``; returns the
        loss (scalar), each agent's loss ``[N]`` and log-probs in entropy units ``[N, B]``."""
        action, log_prob, _ = self.actor.sample(obs)  # [B, N, A], [B, N]
        with frozen(self.critic):
            q_pi = self.critic.actor_value(self.critic(state, self.joint(action)))  # [B]
        shift = self.tuner.log_prob_shift.reshape(-1).expand(self.n_agents)
        agent_log_prob = (log_prob + shift).transpose(-1, -2)  # [N, B]
        per_agent = (alpha[:, None] * agent_log_prob - q_pi[None]).mean(-1)  # [N]
        loss = (alpha[:, None] * agent_log_prob).mean(-1).sum() - q_pi.mean()
        return loss, per_agent.detach(), agent_log_prob.detach()

    def update_actors_at_once(self, obs: torch.Tensor, state: torch.Tensor,
                              alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """MASAC's update (``actor_update=simultaneous``, module docstring): one step of every
        actor from one loss, then the temperatures. ``obs [B, N, O]``, ``state [B, S]``,
        ``alpha [N]`` (the temperatures before the step)."""
        loss, losses, pre_update = self.compute(self.joint_terms, obs, state, alpha)
        self.actor_optimizer.zero_grad(set_to_none=True)
        self.backward(loss)
        # each member stepped from its own gradient; the indices as each run of a group has them
        members = self.draw(lambda: torch.arange(self.actor.optimizer_members)).to(obs.device)
        for member in range(self.actor.optimizer_members):
            self.actor_optimizer.step(members[..., member])
        self.apply_constraints(self.actor_optimizer)
        return self.update_temperatures(alpha, losses, pre_update)

    def temperature_losses(self, pre_update: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``J(alpha_i)`` and ``J(alpha_c)`` (scalars) on the log-probs ``pre_update [N, B]``
        (entropy units, no gradient), in one ``compute`` call."""
        return self.tuner.loss(pre_update), self.critic_tuner.loss(pre_update.sum(-2))

    def step_each(self, steps: list[tuple[torch.optim.Optimizer | None, torch.Tensor]]) -> None:
        """``step(optimizer, loss)`` for each pair whose optimizer is not None, from one
        backward pass of the losses' sum: each loss reads only its own optimizer's parameters,
        so each gets exactly the gradient its own backward pass would give it."""
        steps = [(opt, loss) for opt, loss in steps if opt is not None]
        if not steps:
            return
        for opt, _ in steps:
            opt.zero_grad(set_to_none=True)
        total = steps[0][1]
        for _, loss in steps[1:]:
            total = total + loss
        self.backward(total)
        for opt, _ in steps:
            opt.step()
            self.apply_constraints(opt)

    def update_temperatures(self, alpha: torch.Tensor, losses: torch.Tensor,
                            pre_update: torch.Tensor) -> dict[str, torch.Tensor]:
        """The agents' and the critic's temperature steps on the log-probs ``pre_update
        [N, B]`` (entropy units) of the samples the actor losses used; the actor metrics
        (``alpha [N]``, the temperatures before; ``losses [N]``, the actor losses)."""
        n = self.n_agents
        alpha_loss, critic_alpha_loss = self.compute(self.temperature_losses, pre_update)
        self.step_each([(self.tuner.optimizer, alpha_loss),
                        (self.critic_tuner.optimizer, critic_alpha_loss)])
        metrics = {
            "loss/actor": losses.sum(-1),
            "loss/alpha": alpha_loss.detach(),
            "loss/critic_alpha": critic_alpha_loss.detach(),
            "stats/entropy": -pre_update,  # reported as its mean
        }
        for i in range(n):
            metrics[f"loss/actor/agent_{i}"] = losses[..., i]
            metrics[f"stats/alpha/agent_{i}"] = alpha[..., i]
        return metrics
