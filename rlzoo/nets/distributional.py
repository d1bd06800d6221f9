"""DSAC-T's distributional critic: a Gaussian return per ensemble member and its TD loss with
the running std, clipping boundary and gradient-adjustment ratio (see the class docstring).

It answers the same four questions as every critic kind (``rlzoo/nets/critics.py``) and, with
``n_agents``, serves MADDPG as G independent critics. See docs/critics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rlzoo.nets.critics import Critic, _check_reduction, reduce_members
from rlzoo.nets.ensemble import NetworkFactory, make_network


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
        dropout: float,
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
