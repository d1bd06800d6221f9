"""Critics. Every critic kind is a batched ensemble and answers four questions for an algorithm:

* ``forward(obs, action) -> q [E, B]``: the expected value of each member;
* ``next_value(next_obs, next_action) -> [K, B]``: the bootstrap value(s) a target is built from
  (``K = 1`` for point critics; the distributional critic returns its mean and a sampled value);
* ``td_loss(obs, action, target [K, B]) -> (loss, q [E, B])``: the kind's own TD loss;
* ``actor_value(q [E, B]) -> [B]``: how members are reduced for the actor.

So the algorithm writes ``y = r + discount * (next_value - alpha log pi)`` once, and the critic
kind decides the reductions and the loss. A new critic is one subclass and one YAML file.

The same classes are the centralized critics of the multi-agent algorithms: there ``obs`` is the
global state and ``action`` the joint action (HASAC: one critic, as above). A kind that also takes
``n_agents = G`` holds G independent critics, one per agent (MADDPG), as one ensemble of ``G * n``
members, member ``g * n + j`` being member j of agent g's critic; members are reduced within an
agent's critic, never across agents. Its inputs may then be per agent (``[G, B, D]``), its targets
per agent (``[K, G, B]``), and two more methods answer per agent: ``td_losses -> [G]`` and
``agent_values(q) -> [G, B]`` (``groups`` is G; 1 for a single critic).

Kinds: ``TwinCritic`` (clipped double Q), ``EnsembleCritic`` (REDQ's N members with a random
subset-min), ``DistributionalCritic`` (DSAC-T's Gaussian return per member and its TD loss) and
``ActionSequenceCritic`` (Q of an observation and an H-step action chunk). See docs/critics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rlzoo.nets.ensemble import NetworkFactory, make_network

REDUCTIONS = ("min", "mean", "first")


def reduce_members(q: torch.Tensor, how: str) -> torch.Tensor:
    """Reduce ``q [E, B]`` over members: ``min``, ``mean`` or ``first`` (member 0) -> ``[B]``."""
    if how == "min":
        return q.min(dim=0).values
    if how == "mean":
        return q.mean(dim=0)
    return q[0]


def _check_reduction(actor_reduce: str) -> None:
    if actor_reduce not in REDUCTIONS:
        raise ValueError(
            f"critic.actor_reduce must be one of {REDUCTIONS}, got {actor_reduce!r}"
        )


class Critic(nn.Module):
    """Base class of all critic kinds; see the module docstring for the contract.

    Attributes:
        members: E, the number of ensemble members.
        action_horizon: H, the number of consecutive actions the critic scores (1 for Q(s, a)).
    """

    members: int = 1
    action_horizon: int = 1
    groups: int = 1

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, H * A]`` -> the members' expected values ``[E, B]``."""
        raise NotImplementedError

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """The bootstrap value(s) ``[K, B]`` at ``(s', a')`` (called on the target critic)."""
        raise NotImplementedError

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``target [K, B]`` built from ``next_value`` -> (scalar loss, ``q [E, B]``)."""
        raise NotImplementedError

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        """Reduce ``q [E, B]`` to the ``[B]`` value the actor ascends."""
        raise NotImplementedError

    def stats(self) -> dict[str, torch.Tensor]:
        """Scalar tensors about the last ``td_loss`` call, keyed ``stats/<name>`` (none here)."""
        return {}

    def td_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each agent's critic's TD loss ``[G]`` (their sum is ``td_loss``) and ``q [E, B]``; a
        single critic (G = 1) gives ``[1]``."""
        loss, q = self.td_loss(obs, action, target)
        return loss[None], q

    def agent_values(self, q: torch.Tensor) -> torch.Tensor:
        """Each agent's critic's value for its actor, ``[G, B]``, from ``q [E, B]`` (``[1, B]``
        for a single critic)."""
        return self.actor_value(q)[None]

    # Helpers of the kinds that hold G per-agent critics of ``per_agent`` members each.
    per_agent: int = 1

    def member_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, D]`` (shared by every member) or ``[G, B, D]`` (agent g's input for its
        critic's members) -> the ensemble's input, ``[B, D]`` or ``[G * n, B, D]``."""
        if x.dim() == 3 and self.per_agent > 1:
            return x.repeat_interleave(self.per_agent, dim=0)
        return x

    def member_targets(self, target: torch.Tensor) -> torch.Tensor:
        """One target row ``[B]`` (every member) or ``[G, B]`` (per agent) -> ``[E, B]``."""
        if target.dim() == 2 and self.per_agent > 1:
            target = target.repeat_interleave(self.per_agent, dim=0)
        return target.expand(self.members, target.shape[-1])

    def by_agent(self, x: torch.Tensor) -> torch.Tensor:
        """``[E, ...]`` -> ``[G, n, ...]``: the members grouped by agent."""
        return x.reshape(self.groups, self.per_agent, *x.shape[1:])


class EnsembleCritic(Critic):
    """N Q-networks as one batched ensemble (REDQ's critic; the twin critic is N = M = 2).

    Targets take the min over a random subset of M distinct members, drawn anew at every call
    (all members when M = N); the actor sees ``actor_reduce`` over all members.

    Args:
        obs_dim: observation size.
        act_dim: action size (the critic's action input; ``H * |A|`` for an action chunk).
        n: N, the number of members.
        subset: M, members in the target's min.
        actor_reduce: ``mean`` (REDQ), ``min`` or ``first``.
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm: LayerNorm after each hidden layer.
        dropout: dropout probability after each hidden layer, in ``[0, 1)`` (active in the
            online and the target critic alike, as DroQ).
        network: builds each member's trunk instead of the MLP (``make_network``; e.g.
            ``net=simbav2``); ``hidden``/``activation``/``layer_norm``/``dropout`` then unused.

    Every critic's hyperparameters are required: their defaults are declared once, in
    ``conf/critic/*.yaml`` (an algorithm file may change them). ``dropout`` and ``network`` keep
    a default (off, and the MLP) only so that run dirs written before those keys existed still
    build; ``tests/test_yaml_defaults.py`` checks that it equals the YAML's.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        subset: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float = 0.0,
        network: NetworkFactory | None = None,
    ) -> None:
        super().__init__()
        if n < 1 or not 1 <= subset <= n:
            raise ValueError(
                f"critic needs n >= 1 and 1 <= subset <= n, got n={n}, subset={subset}"
            )
        _check_reduction(actor_reduce)
        self.members, self.subset, self.actor_reduce = n, subset, actor_reduce
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.net = make_network(
            network, n, obs_dim + act_dim, 1, 1, hidden, activation, layer_norm, dropout
        )

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, A]`` -> ``q [E, B]``."""
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)

    def subset_min(self, q: torch.Tensor) -> torch.Tensor:
        """Min over a fresh random subset of M distinct members of ``q [E, B]`` -> ``[B]``.

        One subset per call, shared by the whole batch (REDQ draws one per update).
        """
        if self.subset == self.members:
            return q.min(dim=0).values
        # argsort of uniform keys: a uniformly random subset, drawn on the device without a
        # host sync (capturable in a CUDA graph)
        members = torch.rand(self.members, device=q.device).argsort()[: self.subset]
        return q.index_select(0, members).min(dim=0).values

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """``[1, B]``: the subset-min of the members' values at ``(s', a')``."""
        return self.subset_min(self(next_obs, next_action)).unsqueeze(0)

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over members of the mean squared TD error to ``target [1, B]``."""
        q = self(obs, action)
        return (q - target).pow(2).mean(dim=1).sum(), q

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        return reduce_members(q, self.actor_reduce)


class TwinCritic(EnsembleCritic):
    """Clipped double Q (SAC, TD3): two members, min of both for targets.

    Args as ``EnsembleCritic`` without ``n``/``subset``; ``actor_reduce`` is ``min`` for SAC
    (``conf/critic/twin.yaml``), ``first`` for TD3 (the paper's actor ascends Q1).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float = 0.0,
        network: NetworkFactory | None = None,
    ) -> None:
        super().__init__(
            obs_dim, act_dim, 2, 2, actor_reduce, hidden, activation, layer_norm, dropout, network
        )


class ActionSequenceCritic(EnsembleCritic):
    """``Q(s_t, a_t .. a_{t+H-1})``: an ensemble critic of an observation and an H-step chunk.

    Q-chunking's design (Li et al. 2025): the chunk ``[B, H * |A|]`` (flattened step-major,
    ``a_t`` first) is concatenated with the observation and fed to the batched-ensemble MLP.
    Steps of a window after an episode end arrive as zeros (the buffer's ``action_mask`` is 0
    there), so a cut chunk is a distinct input. Targets are the usual subset-min; the reward and
    discount of the H-step window are folded into the target by the buffer.

    Args:
        obs_dim: observation size.
        act_dim: |A|, the size of one env action (the chunk is ``horizon * act_dim``).
        horizon: H, actions per chunk.
        n: members.
        subset: members in the target's min.
        actor_reduce: ``min`` (SAC), ``mean`` or ``first`` (TD3).
        hidden, activation, layer_norm, dropout, network: as ``EnsembleCritic``.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        horizon: int,
        n: int,
        subset: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float = 0.0,
        network: NetworkFactory | None = None,
    ) -> None:
        if horizon < 1:
            raise ValueError(f"critic.horizon must be >= 1, got {horizon}")
        super().__init__(
            obs_dim, horizon * act_dim, n, subset, actor_reduce, hidden, activation, layer_norm,
            dropout, network,
        )
        self.action_horizon, self.step_act_dim = horizon, act_dim


class DistributionalCritic(Critic):
    """DSAC-T's value distribution (Duan et al., "Distributional Soft Actor-Critic with Three
    Refinements", IEEE TPAMI 2025; official code Jingliang-Duan/DSAC-v2, ``dsac_v2.py``).

    Member i models the soft return as ``N(mu_i(s, a), sigma_i(s, a)^2)`` with
    ``sigma_i = softplus(raw_i)``. ``forward`` returns the means ``[E, B]``; ``distribution``
    returns ``(mu, sigma)``. ``next_value`` returns ``[2, B]``: the min of the target means and
    the sampled value ``mu + clamp(z, -c, c) sigma`` of the member with the smaller mean. From the
    two targets ``y`` (mean) and ``y_s`` (sample) ``td_loss`` computes, per member i,

    * running std: ``ms_i <- (1 - tau_b) ms_i + tau_b mean_B(sigma_i)`` (the first batch's mean
      on the first call), kept as a buffer so it survives checkpoints;
    * clipping boundary ``b_i = k ms_i``, ``y_b = mu_i + clamp(y_s - mu_i, -b_i, b_i)``
      (``mu_i`` detached);
    * with ``sd = max(sigma_i, 0)`` detached and ``ratio = clamp(ms_i^2 / (sd^2 + bias), lo, hi)``:
      ``loss_i = mean_B(ratio * (huber(mu_i, y) + sigma_i (sd^2 - huber(mu_i.detach(), y_b))
      / (sd + bias)))``,

    and the loss is ``sum_i loss_i``. As HASAC's centralized critic the input is (global state,
    joint action) and nothing else changes; as MADDPG's (``n_agents = N``) agent g's critic is
    members ``g n .. g n + n - 1``, learning from its own targets ``(y_g, y_s,g)``, and the min and
    the argmin above are taken within it. Only the online critic's ``td_loss`` updates ``ms``; the
    target copy's ``ms`` is polyak-averaged like any float buffer but never read.

    Args:
        obs_dim: observation size.
        act_dim: action size.
        n: members.
        actor_reduce: reduction of the means for the actor: ``min`` (DSAC-T).
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm: LayerNorm after each hidden layer.
        dropout, network: the trunk, as ``EnsembleCritic``'s (the network has 2 heads: mean
            and raw std).
        sample_clip: c, clamp of the standard normal z in the sampled value (3).
        boundary: k, the clipping boundary in running stds (3).
        std_tau: tau_b, rate of the running std (0.005, the polyak rate).
        huber_delta: Huber threshold, ``0.5 x^2`` inside it (50).
        std_bias: bias added to ``sd^2`` and ``sd`` (0.1).
        ratio_min, ratio_max: clamp of the gradient-adjustment ratio (0.1, 10).
        n_agents: G, independent critics of ``n`` members each, one per agent (MADDPG passes
            its N; default 1: one critic). Members are reduced within an agent's critic only.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        sample_clip: float,
        boundary: float,
        std_tau: float,
        huber_delta: float,
        std_bias: float,
        ratio_min: float,
        ratio_max: float,
        dropout: float = 0.0,
        network: NetworkFactory | None = None,
        n_agents: int = 1,
    ) -> None:
        super().__init__()
        if n < 1:
            raise ValueError(f"critic.n must be >= 1, got {n}")
        if n_agents < 1:
            raise ValueError(f"DistributionalCritic needs n_agents >= 1, got {n_agents}")
        _check_reduction(actor_reduce)
        if not 0.0 < std_tau <= 1.0:
            raise ValueError(f"critic.std_tau must be in (0, 1], got {std_tau}")
        if min(sample_clip, boundary, huber_delta, std_bias) <= 0 or not 0 < ratio_min <= ratio_max:
            raise ValueError(
                "critic.sample_clip, boundary, huber_delta, std_bias must be > 0 and "
                f"0 < ratio_min <= ratio_max, got ratio_min={ratio_min}, ratio_max={ratio_max}"
            )
        self.groups, self.per_agent = n_agents, n
        self.members, self.actor_reduce = n_agents * n, actor_reduce
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.sample_clip, self.boundary, self.std_tau = sample_clip, boundary, std_tau
        self.huber_delta, self.std_bias = huber_delta, std_bias
        self.ratio_min, self.ratio_max = ratio_min, ratio_max
        self.net = make_network(
            network, self.members, obs_dim + act_dim, 2, 2, hidden, activation, layer_norm,
            dropout,
        )
        # ms_i, the running mean of each member's std, and whether it has seen a batch yet.
        self.register_buffer("running_std", torch.zeros(self.members, 1))
        self.register_buffer("running_std_ready", torch.zeros((), dtype=torch.bool))
        self._stats: dict[str, torch.Tensor] = {}

    def distribution(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [B, O]``, ``action [B, A]`` (or per agent, ``[G, B, ...]``) -> mean ``[E, B]``
        and std ``[E, B]`` (> 0)."""
        x = self.member_inputs(torch.cat([obs, action], dim=-1))
        mean, raw_std = self.net(x).unbind(-1)
        return mean, F.softplus(raw_std)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The members' means ``[E, B]``."""
        return self.distribution(obs, action)[0]

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """``[2, B]``: ``min_i mu_i`` and ``mu_j + clamp(z, -c, c) sigma_j``, j = argmin_i mu_i;
        with G per-agent critics ``[2, G, B]``, the min and argmin taken within each agent's."""
        mean, std = self.distribution(next_obs, next_action)
        z = torch.randn_like(mean).clamp(-self.sample_clip, self.sample_clip)
        mean, sample = self.by_agent(mean), self.by_agent(mean + z * std)  # [G, n, B]
        smaller = mean.argmin(dim=1, keepdim=True)  # [G, 1, B]
        value = torch.stack([mean.gather(1, smaller), sample.gather(1, smaller)])[:, :, 0]
        return value[:, 0] if self.groups == 1 else value  # [2, B] or [2, G, B]

    @torch.no_grad()
    def update_running_std(self, std: torch.Tensor) -> None:
        """``ms <- (1 - tau_b) ms + tau_b mean_B(std)``, or ``mean_B(std)`` on the first call."""
        batch_std = std.mean(dim=1, keepdim=True)  # [E, 1]
        averaged = torch.lerp(self.running_std, batch_std, self.std_tau)
        self.running_std.copy_(torch.where(self.running_std_ready, averaged, batch_std))
        self.running_std_ready.fill_(True)

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """DSAC-T's critic loss (see the class docstring) from ``target [2, B]`` = (y, y_s)
        (per agent: ``[2, G, B]``), summed over members."""
        losses, mean = self.member_losses(obs, action, target)
        return losses.sum(), mean

    def td_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each agent's critic's loss ``[G]`` (the sum over its members) and the means."""
        losses, mean = self.member_losses(obs, action, target)
        return self.by_agent(losses).sum(1), mean

    def member_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``loss_i`` of every member ``[E]`` and the means ``[E, B]``; see the class docstring."""
        mean, std = self.distribution(obs, action)  # [E, B] each
        self.update_running_std(std.detach())
        running_std = self.running_std  # [E, 1]
        target_mean, target_sample = self.member_targets(target[0]), self.member_targets(target[1])
        mean_detached = mean.detach()
        bound = self.boundary * running_std
        target_bound = mean_detached + (target_sample - mean_detached).clamp(-bound, bound)
        sd = std.detach().clamp(min=0.0)
        bias = self.std_bias
        ratio = (running_std.pow(2) / (sd.pow(2) + bias)).clamp(self.ratio_min, self.ratio_max)
        huber_mean = F.huber_loss(mean, target_mean, reduction="none", delta=self.huber_delta)
        huber_bound = F.huber_loss(
            mean_detached, target_bound, reduction="none", delta=self.huber_delta
        )
        per_sample = ratio * (huber_mean + std * (sd.pow(2) - huber_bound) / (sd + bias))
        self._stats = {
            "stats/q_std": sd.mean(),
            "stats/running_std": running_std.mean(),
        }
        return per_sample.mean(dim=1), mean

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        """``actor_reduce`` over the members of ``q [E, B]`` (one critic) -> ``[B]``."""
        return reduce_members(q, self.actor_reduce)

    def agent_values(self, q: torch.Tensor) -> torch.Tensor:
        """``actor_reduce`` within each agent's critic: ``q [E, B]`` -> ``[G, B]``."""
        return reduce_members(self.by_agent(q).transpose(0, 1), self.actor_reduce)

    def stats(self) -> dict[str, torch.Tensor]:
        return self._stats
