"""Multi-agent networks: per-agent actors as one batched ensemble, per-agent centralized critics.

Layout convention: agent-indexed tensors are ``[..., N, X]`` (batch dimensions first, then the
agent, then features), exactly as the replay buffer stores them (``obs [B, N, O]``). Agents may
differ in action size; actions are padded to the largest size ``A`` and ``act_mask [N, A]`` marks
the real entries. Padded entries are always exactly 0 and never count in a log-probability.

* :class:`AgentActors` wraps one actor class from ``nets/actors.py``: ``members = N`` gives every
  agent its own network inside one batched ensemble (``[N, B, O] -> [N, B, A]``, one kernel);
  ``shared = True`` gives all agents one network whose input is the observation with the agent's
  one-hot id appended (parameter sharing, for agents of equal shape).
* :class:`AgentCritics` is N centralized critics ``Q_i(x, a_1..a_N)`` (MADDPG) as one ensemble with
  a member per agent; member ``i`` is agent ``i``'s critic and is never reduced with the others.
  Other kinds that take ``n_agents`` (``DistributionalCritic``) serve MADDPG the same way; see
  ``rlzoo/nets/critics.py``.
* :func:`joint_action` flattens ``[..., N, A]`` to the real entries only, ``[..., sum_i |A_i|]``:
  what a centralized critic sees, so padding cannot leak into any critic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from rlzoo.nets.actors import tanh_gaussian_log_prob
from rlzoo.nets.critics import Critic
from rlzoo.nets.ensemble import NetworkFactory, dropout_off, make_network


def action_mask(act_dims: Sequence[int], act_dim: int) -> torch.Tensor:
    """``[N, A]`` float mask: 1.0 on agent ``i``'s first ``act_dims[i]`` entries, else 0.0."""
    dims = torch.as_tensor(list(act_dims), dtype=torch.int64)
    if dims.numel() == 0 or int(dims.min()) < 1 or int(dims.max()) > act_dim:
        raise ValueError(f"per-agent action sizes {list(act_dims)} must be in [1, {act_dim}]")
    return (torch.arange(act_dim)[None, :] < dims[:, None]).float()


def joint_action(action: torch.Tensor, joint_index: torch.Tensor) -> torch.Tensor:
    """``action [..., N, A]`` -> the real entries in agent order ``[..., sum_i |A_i|]``.

    ``joint_index`` holds the flat positions (in ``N * A``) of the real entries, from
    ``act_mask.flatten().nonzero()``; with equal action sizes it is simply every position.
    """
    return action.flatten(-2).index_select(-1, joint_index)


class AgentActors(nn.Module):
    """N per-agent policies evaluated together: ``obs [..., N, O] -> [..., N, A]``.

    Args:
        actor: builds one actor from ``(obs_dim, act_dim, members=...)`` (a
            ``TanhGaussianActor`` or ``DeterministicActor`` partial).
        obs_dim: O, the padded observation size.
        act_dim: A, the padded action size.
        act_dims: each agent's real action size (``[N]``); padding beyond it stays 0.
        shared: one network for all agents (requires equal action sizes), the agent's one-hot id
            appended to its observation; otherwise one ensemble member per agent (the
            algorithm passes its ``algo.share_actor``).

    Stochastic actors (with ``log_std_min``, i.e. ``TanhGaussianActor``) support ``sample``,
    ``log_prob`` and ``mode``; deterministic ones support ``mode`` (``forward``).
    """

    def __init__(
        self,
        actor: Callable[..., nn.Module],
        obs_dim: int,
        act_dim: int,
        act_dims: Sequence[int],
        shared: bool,
    ) -> None:
        super().__init__()
        self.n_agents, self.obs_dim, self.act_dim = len(act_dims), obs_dim, act_dim
        self.shared = shared
        if shared and len(set(act_dims)) > 1:
            raise ValueError(
                f"algo.share_actor=true needs agents with equal action sizes, got {list(act_dims)}"
                "; use algo.share_actor=false"
            )
        if shared:
            self.net = actor(obs_dim + self.n_agents, act_dim, members=1)
            self.register_buffer("agent_id", torch.eye(self.n_agents))
        else:
            self.net = actor(obs_dim, act_dim, members=self.n_agents)
        self.register_buffer("act_mask", action_mask(act_dims, act_dim))
        self.stochastic = hasattr(self.net, "log_std_min")

    @property
    def optimizer_members(self) -> int:
        """Leading size of every parameter: N, or 1 for a shared actor."""
        return 1 if self.shared else self.n_agents

    def _run(self, obs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Evaluate the network on ``obs [..., N, O]``; outputs come back as ``[..., N, X]``."""
        shape = (*obs.shape[:-2], self.n_agents, -1)
        flat = obs.reshape(-1, self.n_agents, self.obs_dim)  # [B, N, O]
        if self.shared:
            ids = self.agent_id.expand(flat.shape[0], -1, -1)
            out = self.net(torch.cat([flat, ids], dim=-1).reshape(-1, self.obs_dim + self.n_agents))

            def to_agents(o: torch.Tensor) -> torch.Tensor:
                return o.reshape(shape)  # [B * N, X] -> [..., N, X]
        else:
            out = self.net(flat.transpose(0, 1))  # [N, B, X]

            def to_agents(o: torch.Tensor) -> torch.Tensor:
                return o.transpose(0, 1).reshape(shape)
        return tuple(map(to_agents, out)) if isinstance(out, tuple) else to_agents(out)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action ``[..., N, A]`` (tanh of the mean for a Gaussian), padding 0; no
        dropout."""
        with dropout_off(self.net):
            out = self._run(obs)
        mean = out[0] if isinstance(out, tuple) else out
        action = torch.tanh(mean) if isinstance(out, tuple) else mean
        return action * self.act_mask

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterized sample of every agent.

        Returns ``action [..., N, A]`` (padding 0), ``log_prob [..., N]`` (tanh-corrected, over
        each agent's real entries only) and ``pre_tanh [..., N, A]`` (padding 0).
        """
        mean, log_std = self._run(obs)
        noise = torch.randn_like(mean)
        pre_tanh = (mean + noise * log_std.exp()) * self.act_mask
        log_prob = (tanh_gaussian_log_prob(noise, log_std, pre_tanh) * self.act_mask).sum(-1)
        return torch.tanh(pre_tanh), log_prob, pre_tanh

    def log_prob(self, obs: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
        """Exact log-probability ``[..., N]`` of the actions ``tanh(pre_tanh [..., N, A])``."""
        mean, log_std = self._run(obs)
        noise = (pre_tanh - mean) * torch.exp(-log_std)
        return (tanh_gaussian_log_prob(noise, log_std, pre_tanh) * self.act_mask).sum(-1)


class AgentCritics(Critic):
    """One centralized critic per agent, ``Q_i(x, a_1..a_N)``, as one batched ensemble (MADDPG).

    Member ``i`` is agent ``i``'s critic. Inputs are either shared by all agents (``x [B, X]``,
    ``joint [B, J]``) or per agent (``[N, B, X]``, ``[N, B, J]``, e.g. when agent ``i``'s own
    action is replaced by its policy's). Values are ``[N, B]``; nothing is reduced over agents.

    Args:
        obs_dim: X, the centralized input (global state) size.
        act_dim: J, the joint action size (sum of the agents' real action sizes).
        n_agents: N, one member per agent (the algorithm passes it).
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm: LayerNorm after each hidden layer.
        dropout: dropout probability after each hidden layer, in ``[0, 1)``.
        network: builds the trunk instead of the MLP (``rlzoo.nets.ensemble.make_network``).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None = None,
        n_agents: int = 1,
    ) -> None:
        super().__init__()
        if n_agents < 1:
            raise ValueError(f"AgentCritics needs n_agents >= 1, got {n_agents}")
        self.members = self.groups = n_agents
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.net = make_network(
            network, n_agents, obs_dim + act_dim, 1, 1, hidden, activation, layer_norm, dropout
        )

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, X]`` or ``[N, B, X]``, ``action [B, J]`` or ``[N, B, J]`` -> ``q [N, B]``."""
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """``[N, B]``: every agent's own bootstrap value ``Q'_i(x', a')``."""
        return self(next_obs, next_action)

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over agents of ``mean_B (Q_i - y_i)^2`` with ``target [N, B]``; also ``q [N, B]``."""
        losses, q = self.td_losses(obs, action, target)
        return losses.sum(), q

    def td_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each agent's ``mean_B (Q_i - y_i)^2`` ``[N]`` with ``target [N, B]``; ``q [N, B]``."""
        q = self(obs, action)
        return self.agent_losses(q, target), q

    @staticmethod
    def agent_losses(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``[N]``: each agent's mean squared TD error."""
        return (q - target).pow(2).mean(dim=1)

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        """Agents are not reduced: ``q [N, B]`` is returned as is."""
        return q

    def agent_values(self, q: torch.Tensor) -> torch.Tensor:
        """Agent ``i``'s value is its own critic's: ``q [N, B]`` as is."""
        return q
