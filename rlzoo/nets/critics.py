"""Critics. Every critic kind is a batched ensemble of E heads (``members`` in the code and the
config: an ensemble slot, not a seed) and answers four questions for an algorithm:

* ``forward(obs, action) -> q [E, B]``: the expected value of each head;
* ``next_value(next_obs, next_action) -> [V, B]``: the V bootstrap value(s) a target is built
  from (``V = 1`` for point critics; the distributional critic returns its mean and a sampled
  value, V = 2);
* ``td_loss(obs, action, target [V, B]) -> (loss, q [E, B])``: the kind's own TD loss;
* ``actor_value(q [E, B]) -> [B]``: how heads are reduced for the actor.

So the algorithm writes ``y = r + discount * (next_value - alpha log pi)`` once, and the critic
kind decides the reductions and the loss. A new critic is one subclass and one YAML file.

The same classes are the centralized critics of the multi-agent algorithms: there ``obs`` is the
global state and ``action`` the joint action (HASAC: one critic, as above). A kind that also takes
``n_agents = G`` holds G independent critics, one per agent (MADDPG), as one ensemble of ``G * n``
heads, head ``g * n + j`` being head j of agent g's critic; heads are reduced within an
agent's critic, never across agents. Its inputs may then be per agent (``[G, B, D]``), its targets
per agent (``[V, G, B]``), and two more methods answer per agent: ``td_losses -> [G]`` and
``agent_values(q) -> [G, B]`` (``groups`` is G; 1 for a single critic).

Kinds: ``TwinCritic`` (clipped double Q), ``EnsembleCritic`` (REDQ's N heads with a random
subset-min), ``ActionSequenceCritic`` (Q of an observation and an H-step action chunk) here;
``DistributionalCritic`` (DSAC-T's Gaussian return per head and its TD loss) in
``rlzoo/nets/distributional.py``. See docs/critics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rlzoo.nets.ensemble import NetworkFactory, make_network

REDUCTIONS = ("min", "mean", "first")


def reduce_members(q: torch.Tensor, how: str) -> torch.Tensor:
    """Reduce ``q [E, B]`` over the heads: ``min``, ``mean`` or ``first`` (head 0) -> ``[B]``."""
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
        members: E, the number of ensemble heads.
        action_horizon: H, the number of consecutive actions the critic scores (1 for Q(s, a)).
    """

    members: int = 1
    action_horizon: int = 1
    groups: int = 1

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]``, ``action [B, H * A]`` -> the heads' expected values ``[E, B]``."""
        raise NotImplementedError

    def next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        """The bootstrap value(s) ``[V, B]`` at ``(s', a')`` (called on the target critic):
        ``next_value_from(outputs(s', a'))`` unless a kind overrides it."""
        return self.next_value_from(self.outputs(next_obs, next_action))

    def td_loss(
        self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``target [V, B]`` built from ``next_value`` -> (scalar loss, ``q [E, B]``):
        ``td_loss_from(outputs(s, a), target)`` unless a kind overrides it."""
        return self.td_loss_from(self.outputs(obs, action), target)

    # The joint pass (``rlzoo.nets.batch_norm.joint_pass``): a kind that splits its network pass
    # from what it computes with it runs ``(s, a)`` and ``(s', a')`` as one batch.
    def outputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """What one pass of the network gives for ``(obs, action)``, the batch on axis 1
        (``[E, B]`` values, ``[E, B, N]`` log-probabilities, ...)."""
        raise NotImplementedError(f"{type(self).__name__} defines no outputs()")

    def next_value_from(self, outputs: torch.Tensor) -> torch.Tensor:
        """``next_value`` from the outputs of ``(s', a')``."""
        raise NotImplementedError(f"{type(self).__name__} defines no next_value_from()")

    def td_loss_from(
        self, outputs: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``td_loss`` from the outputs of ``(s, a)`` (with their gradient)."""
        raise NotImplementedError(f"{type(self).__name__} defines no td_loss_from()")

    @classmethod
    def joins_passes(cls) -> bool:
        """Whether this kind can be trained with one joint pass over ``[s; s']``: it defines
        ``outputs``, ``next_value_from`` and ``td_loss_from``."""
        return all(getattr(cls, name) is not getattr(Critic, name)
                   for name in ("outputs", "next_value_from", "td_loss_from"))

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

    # Helpers of the kinds that hold G per-agent critics of ``per_agent`` heads each.
    per_agent: int = 1

    def member_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, D]`` (shared by every head) or ``[G, B, D]`` (agent g's input for its
        critic's heads) -> the ensemble's input, ``[B, D]`` or ``[G * n, B, D]``."""
        if x.dim() == 3 and self.per_agent > 1:
            return x.repeat_interleave(self.per_agent, dim=0)
        return x

    def member_targets(self, target: torch.Tensor) -> torch.Tensor:
        """One target row ``[B]`` (every head) or ``[G, B]`` (per agent) -> ``[E, B]``."""
        if target.dim() == 2 and self.per_agent > 1:
            target = target.repeat_interleave(self.per_agent, dim=0)
        return target.expand(self.members, target.shape[-1])

    def by_agent(self, x: torch.Tensor) -> torch.Tensor:
        """``[E, ...]`` -> ``[G, n, ...]``: the heads grouped by agent."""
        return x.reshape(self.groups, self.per_agent, *x.shape[1:])


class EnsembleCritic(Critic):
    """N Q-networks as one batched ensemble (REDQ's critic; the twin critic is N = M = 2).

    Targets take the min over a random subset of M distinct heads, drawn anew at every call
    (all heads when M = N); the actor sees ``actor_reduce`` over all heads.

    Args:
        obs_dim: observation size.
        act_dim: action size (the critic's action input; ``H * |A|`` for an action chunk).
        n: N, the number of heads.
        subset: M, heads in the target's min.
        actor_reduce: ``mean`` (REDQ), ``min`` or ``first``.
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm: LayerNorm after each hidden layer.
        dropout: dropout probability after each hidden layer, in ``[0, 1)`` (active in the
            online and the target critic alike, as DroQ).
        network: builds each head's trunk instead of the MLP (``make_network``; e.g.
            ``net=simbav2``); ``hidden``/``activation``/``layer_norm``/``dropout`` then unused.

    Every critic's hyperparameters are required: each is declared once, with its meaning, in
    ``conf/critic/*.yaml`` (an algorithm file may change them). ``network`` is ``None`` (the
    MLP) unless ``net=...`` sets ``critic.network``. A run dir written before a key existed is
    built with the value it ran with (``rlzoo.config.added_keys``).
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
        dropout: float,
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
        """Min over a fresh random subset of M distinct heads of ``q [E, B]`` -> ``[B]``.

        One subset per call, shared by the whole batch (REDQ draws one per update).
        """
        if self.subset == self.members:
            return q.min(dim=0).values
        # argsort of uniform keys: a uniformly random subset, drawn on the device without a
        # host sync (capturable in a CUDA graph)
        heads = torch.rand(self.members, device=q.device).argsort()[: self.subset]
        return q.index_select(0, heads).min(dim=0).values

    def outputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The heads' values ``q [E, B]`` (``forward``)."""
        return self(obs, action)

    def next_value_from(self, outputs: torch.Tensor) -> torch.Tensor:
        """``[1, B]``: the subset-min of the heads' values ``outputs [E, B]`` at ``(s', a')``."""
        return self.subset_min(outputs).unsqueeze(0)

    def td_loss_from(
        self, outputs: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over heads of the mean squared TD error of ``q = outputs [E, B]`` to
        ``target [1, B]``."""
        return (outputs - target).pow(2).mean(dim=1).sum(), outputs

    def actor_value(self, q: torch.Tensor) -> torch.Tensor:
        return reduce_members(q, self.actor_reduce)


class TwinCritic(EnsembleCritic):
    """Clipped double Q (SAC, TD3): two heads, min of both for targets.

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
        dropout: float,
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
        n: heads.
        subset: heads in the target's min.
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
        dropout: float,
        network: NetworkFactory | None = None,
    ) -> None:
        if horizon < 1:
            raise ValueError(f"critic.horizon must be >= 1, got {horizon}")
        super().__init__(
            obs_dim, horizon * act_dim, n, subset, actor_reduce, hidden, activation, layer_norm,
            dropout, network,
        )
        self.action_horizon = horizon
