"""A categorical value distribution on a fixed support (C51's, as SimbaV2 and FlashSAC use it).

Member i of ``CategoricalCritic`` gives, for each ``(s, a)``, probabilities ``p_i(s, a) [N]`` on
the fixed atoms ``z_k = v_min + k (v_max - v_min) / (N - 1)``, ``k = 0..N-1``; its Q value is the
expected value ``sum_k p_ik z_k``. The TD target is a distribution too:

* target member: per sample, the member j of the target critic with the smallest pessimistic
  value ``E[Z'_j] - beta std[Z'_j]`` at ``(s', a')`` (with ``n = 2`` and ``beta = 0``: the
  member with the smaller expected value, as SimbaV2's ``update_critic`` with ``use_cdq`` and
  FlashSAC's ``_select_min_q_log_probs`` take it; ``n = 1``: SimbaV2 without clipped double Q);
* ``next_value`` returns that member's atoms and probabilities as a :class:`DiscreteReturn`,
  atoms shifted by ``-beta std[Z'_j]`` (STAC's pessimism, ``pessimism = beta``; 0: off).
  The algorithm's one target line ``y = r + discount (next_value - alpha log pi)`` moves every
  atom affinely and keeps the probabilities: ``y_k = r + discount (z_k - beta std - alpha log pi)``;
* ``td_loss`` projects ``(y, p'_j)`` onto the support (:func:`project_onto_support`: clip to
  ``[v_min, v_max]``, split each atom's mass between its two neighbours in proportion to
  closeness) and sums over members the batch mean of the cross-entropy
  ``-sum_k m_k log p_ik(s, a)`` (SimbaV2 sums the two members' losses; FlashSAC averages them,
  half the gradient, which Adam all but undoes).

``forward`` gives ``E[Z_i] - beta std[Z_i]`` per member, and the actor ascends ``actor_reduce``
over members of it. See
docs/critics.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rlzoo.nets.critics import Critic, _check_reduction, reduce_members
from rlzoo.nets.ensemble import NetworkFactory, make_network


@dataclass(frozen=True)
class DiscreteReturn:
    """A return distribution with K atoms per sample: ``atoms [K, B]`` with ``probs [K, B]``.

    What a distributional critic's ``next_value`` may return instead of a ``[K, B]`` tensor.
    Adding, subtracting and multiplying by tensors broadcastable to ``[K, B]`` (``[B]``
    rewards, discounts, entropy terms) act on the atoms and keep the probabilities: the
    distribution of ``r + d X`` for ``X`` distributed as ``self``. So the algorithm writes its
    target ``r + discount * (next_value - alpha log pi)`` once for every critic kind.
    """

    atoms: torch.Tensor
    probs: torch.Tensor

    def _moved(self, atoms: torch.Tensor) -> DiscreteReturn:
        return DiscreteReturn(atoms, self.probs)

    def __add__(self, other: torch.Tensor | float) -> DiscreteReturn:
        return self._moved(self.atoms + other)

    __radd__ = __add__

    def __sub__(self, other: torch.Tensor | float) -> DiscreteReturn:
        return self._moved(self.atoms - other)

    def __mul__(self, other: torch.Tensor | float) -> DiscreteReturn:
        return self._moved(self.atoms * other)

    __rmul__ = __mul__

    def __neg__(self) -> DiscreteReturn:
        return self._moved(-self.atoms)

    def mean(self) -> torch.Tensor:
        """The expected value ``[B]``."""
        return (self.atoms * self.probs).sum(0)


def project_onto_support(
    values: torch.Tensor, probs: torch.Tensor, v_min: float, v_max: float, atoms: int
) -> torch.Tensor:
    """C51's projection of a discrete distribution onto the fixed support.

    ``values [..., K]`` carrying ``probs [..., K]`` -> ``[..., atoms]``: each value is clipped
    to ``[v_min, v_max]``; at fractional index ``b = (v - v_min) / dz`` its mass goes to atoms
    ``floor(b)`` and ``floor(b) + 1`` with weights ``1 - frac(b)`` and ``frac(b)`` (all of it
    to ``b`` when ``b`` is a whole number). The same target as SimbaV2's
    ``categorical_td_loss`` and FlashSAC's ``_compute_categorical_td_target``; here without
    in-place writes, so it runs under ``torch.vmap``.
    """
    width = (v_max - v_min) / (atoms - 1)
    index = (values.clamp(v_min, v_max) - v_min) / width  # [..., K] in [0, atoms - 1]
    lower = index.floor().clamp(max=atoms - 2)  # so that lower + 1 is an atom
    upper_weight = index - lower  # in [0, 1]; 1 puts all the mass on the top atom
    lower = lower.long()
    out = torch.zeros(*values.shape[:-1], atoms, dtype=probs.dtype, device=probs.device)
    out = out.scatter_add(-1, lower, probs * (1.0 - upper_weight))
    return out.scatter_add(-1, lower + 1, probs * upper_weight)


def check_support(v_min: float, v_max: float, atoms: int) -> None:
    """Refuse a support that cannot hold a distribution: ``v_min >= v_max`` or ``atoms < 2``."""
    if not v_min < v_max:
        raise ValueError(
            f"critic.v_min must be below critic.v_max, got v_min={v_min}, v_max={v_max}; set "
            "them around the env's discounted returns, e.g. critic.v_min=-100 critic.v_max=100 "
            "(with normalize.reward=true, around the scaled ones: +-normalize.reward_g_max)"
        )
    if isinstance(atoms, bool) or not isinstance(atoms, int) or atoms < 2:
        raise ValueError(f"critic.atoms must be a whole number >= 2, got {atoms!r}; SimbaV2 and "
                         "FlashSAC use 101")


class CategoricalCritic(Critic):
    """E categorical value distributions on one fixed support, as one batched ensemble.

    Args:
        obs_dim: observation size (the centralized input size for a multi-agent critic).
        act_dim: action size (the joint action size for a centralized critic).
        n: E, members.
        v_min, v_max: the support's ends, in return units (after any reward scaling).
        atoms: N, atoms on the support (101, SimbaV2 and FlashSAC).
        pessimism: beta >= 0, STAC's shift of the target and the actor's value by ``-beta std``
            (0: none).
        actor_reduce: reduction over members for the actor: ``min``, ``mean``,
            ``first``.
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm: LayerNorm after each hidden layer.
        dropout, network: the trunk, as ``EnsembleCritic``'s (``net=simbav2``: SimbaV2's
            ``HyperCategoricalValue`` is the ``HypersphericalMLP`` head with ``atoms`` logits).
        n_agents: G, independent critics of ``n`` members each, one per agent (MADDPG passes its
            N; default 1: one critic). Member ``g n + j`` is member j of agent g's critic; the
            target member is chosen within each agent's critic, and ``next_value`` returns atoms
            and probabilities ``[N, G, B]`` (the atoms axis first, so per-agent rewards
            ``[G, B]`` broadcast onto them).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n: int,
        v_min: float,
        v_max: float,
        atoms: int,
        pessimism: float,
        actor_reduce: str,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None = None,
        n_agents: int = 1,
    ) -> None:
        super().__init__()
        if n < 1:
            raise ValueError(f"critic.n must be >= 1, got {n}")
        if n_agents < 1:
            raise ValueError(f"CategoricalCritic needs n_agents >= 1, got {n_agents}")
        check_support(v_min, v_max, atoms)
        if pessimism < 0:
            raise ValueError(f"critic.pessimism must be >= 0, got {pessimism}")
        _check_reduction(actor_reduce)
        self.groups, self.per_agent = n_agents, n
        self.members, self.actor_reduce, self.pessimism = n_agents * n, actor_reduce, pessimism
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.v_min, self.v_max, self.atoms = float(v_min), float(v_max), atoms
        self.net = make_network(
            network, self.members, obs_dim + act_dim, atoms, 1, hidden, activation, layer_norm,
            dropout,
        )
        # z_k; not saved (it follows from the config)
        self.register_buffer("support", torch.linspace(v_min, v_max, atoms), persistent=False)

    def log_probs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]`` (or ``[E, B, O]``; per agent ``[G, B, O]``), ``action [B, A]`` (likewise)
        -> ``log p [E, B, N]``."""
        x = self.member_inputs(torch.cat([obs, action], dim=-1))
        return F.log_softmax(self.net(x), dim=-1)

    def moments(self, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log p [..., N]`` -> mean and std ``[...]`` of the distribution on the support."""
        probs = log_probs.exp()
        mean = (probs * self.support).sum(-1)
        var = (probs * (self.support - mean.unsqueeze(-1)).pow(2)).sum(-1)
        return mean, var.clamp(min=0.0).sqrt()

    def pessimistic(self, log_probs: torch.Tensor) -> torch.Tensor:
        """``E[Z] - beta std[Z]`` ``[...]`` (the expected value when ``pessimism = 0``)."""
        mean, std = self.moments(log_probs)
        return mean - self.pessimism * std if self.pessimism else mean

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The members' values ``E[Z_i] - beta std[Z_i]`` ``[E, B]``: the expected values when
        ``pessimism = 0``; what the actor ascends (STAC's policy improvement uses the same
        pessimistic value as its target)."""
        return self.pessimistic(self.log_probs(obs, action))

    def outputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``log p [E, B, N]`` (:meth:`log_probs`): what the joint pass splits."""
        return self.log_probs(obs, action)

    def next_value_from(self, outputs: torch.Tensor) -> DiscreteReturn:
        """``next_value``: from the members' ``log p [E, B, N]`` at ``(s', a')``, the target
        member's distribution, atoms ``[N, B]`` shifted by ``-beta std`` and probabilities
        ``[N, B]`` (see the module docstring); with G per-agent critics ``[N, G, B]``, the
        member chosen within each agent's critic."""
        log_probs = self.by_agent(outputs)  # [G, n, B, N]
        mean, std = self.moments(log_probs)  # [G, n, B]
        value = mean - self.pessimism * std
        member = value.argmin(dim=1, keepdim=True)  # [G, 1, B]
        index = member.unsqueeze(-1).expand(-1, -1, -1, self.atoms)
        probs = log_probs.gather(1, index)[:, 0].exp().permute(2, 0, 1)  # [N, G, B]
        shift = self.pessimism * std.gather(1, member)  # [G, 1, B]
        atoms = self.support[:, None, None] - shift.transpose(0, 1)  # [N, G, B]
        if self.groups == 1:  # one critic: [N, B]
            atoms, probs = atoms[:, 0], probs[:, 0]
        return DiscreteReturn(atoms.expand_as(probs), probs)

    def target_probs(self, target: DiscreteReturn) -> torch.Tensor:
        """``target`` (atoms and probabilities ``[N, B]``) projected onto the support ``[B, N]``
        (per agent: ``[N, G, B]`` -> ``[G, B, N]``)."""
        return project_onto_support(
            target.atoms.movedim(0, -1), target.probs.movedim(0, -1),
            self.v_min, self.v_max, self.atoms,
        )

    def td_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: DiscreteReturn
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each agent's critic's loss ``[G]`` (the sum over its members) and ``q [E, B]``."""
        losses, q = self.member_losses(obs, action, target)
        return self.by_agent(losses).sum(1), q

    def td_loss_from(
        self, outputs: torch.Tensor, target: DiscreteReturn
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``td_loss``: the sum over members of ``mean_B(-sum_k m_k log p_ik(s, a))``, ``m``
        the projected target, from the members' ``log p [E, B, N]`` at ``(s, a)``; also the
        members' expected values ``[E, B]``."""
        losses, q = self.member_losses_from(outputs, target)
        return losses.sum(), q

    def member_losses(
        self, obs: torch.Tensor, action: torch.Tensor, target: DiscreteReturn
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's ``mean_B(-sum_k m_k log p_ik(s, a))`` ``[E]``, ``m`` its (agent's)
        projected target, and the members' expected values ``[E, B]``."""
        return self.member_losses_from(self.log_probs(obs, action), target)

    def member_losses_from(
        self, log_probs: torch.Tensor, target: DiscreteReturn
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`member_losses` from the members' ``log p [E, B, N]`` at ``(s, a)``."""
        projected = self.target_probs(target).detach()  # [B, N] or per agent [G, B, N]
        if projected.dim() == 3:
            projected = projected.repeat_interleave(self.per_agent, dim=0)  # [E, B, N]
        cross_entropy = -(projected * log_probs).sum(-1)  # [E, B]
        return cross_entropy.mean(dim=1), self.moments(log_probs.detach())[0]

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        return reduce_members(q, self.actor_reduce)

    def agent_values(self, q: torch.Tensor) -> torch.Tensor:
        """``actor_reduce`` within each agent's critic: ``q [E, B]`` -> ``[G, B]``."""
        return reduce_members(self.by_agent(q).transpose(0, 1), self.actor_reduce)
