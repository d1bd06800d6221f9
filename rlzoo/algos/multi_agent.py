"""What the multi-agent algorithms share: the env layout, action masks, and a per-agent Adam.

Tensors follow the replay buffer's layout: ``obs [B, N, O]``, ``action [B, N, A]`` (padded to the
largest agent, padding exactly 0), ``state [B, S]``, ``reward [B]`` (team reward: the mean over
agents per step, summed over the n steps), ``agent_reward [B, N]``.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.nets.centralized import action_mask, joint_action
from rlzoo.nets.critics import Critic


class MultiAgentAlgorithm(Algorithm):
    """Base of MADDPG, HASAC and COMA: checks the spec and holds the masks.

    Buffers: ``act_mask [N, A]`` (1.0 on real action entries) and ``joint_index`` (the flat
    positions of the real entries, so ``joint(action)`` is ``[B, sum_i |A_i|]``).
    """

    multi_agent: ClassVar[bool] = True

    def __init__(self, spec: EnvSpec, gamma: float, n_step: int) -> None:
        super().__init__(spec, gamma, n_step)
        if spec.state_dim < 1:
            raise ValueError(
                f"{self.name} needs a global state (env.state()); this env has state_dim "
                f"{spec.state_dim}"
            )
        self.n_agents = spec.n_agents
        self.act_dims = tuple(spec.act_dims) or (spec.act_dim,) * spec.n_agents
        if len(self.act_dims) != self.n_agents:
            raise ValueError(f"spec.act_dims has {len(self.act_dims)} entries for "
                             f"{self.n_agents} agents")
        mask = action_mask(self.act_dims, spec.act_dim)
        self.register_buffer("act_mask", mask)
        self.register_buffer("joint_index", mask.flatten().nonzero().squeeze(-1))
        self.joint_dim = sum(self.act_dims)

    def check_critic(self, critic: Critic) -> None:
        """As ``Algorithm.check_critic``; a multi-agent critic scores one joint action (H = 1)."""
        super().check_critic(critic)
        if critic.action_horizon != 1:
            raise ValueError(
                f"{self.name} cannot train an action-sequence critic (horizon "
                f"{critic.action_horizon}); use critic=twin, critic=ensemble or the algo's default"
            )

    def joint(self, action: torch.Tensor) -> torch.Tensor:
        """``action [..., N, A]`` -> joint action of real entries ``[..., sum_i |A_i|]``."""
        return joint_action(action, self.joint_index)
