"""What the multi-agent algorithms share: the env layout, action masks, and a per-agent Adam.

Tensors follow the replay buffer's layout: ``obs [B, N, O]``, ``action [B, N, A]`` (padded to the
largest agent, padding exactly 0), ``state [B, S]``, ``reward [B]`` (team reward: the mean over
agents per step, summed over the n steps), ``agent_reward [B, N]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
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

    def __init__(self, spec: EnvSpec, gamma: float = 0.99, n_step: int = 1) -> None:
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

    def check_critic_factory(self, factory: Callable[..., Critic]) -> None:
        """Refuse an unsupported critic class in one line before building it (the critic kinds
        take different constructor arguments, so building first would fail less clearly)."""
        cls = getattr(factory, "func", factory)
        if isinstance(cls, type) and not issubclass(cls, self.supported_critics):
            kinds = ", ".join(c.__name__ for c in self.supported_critics)
            raise ValueError(f"{self.name} cannot train a {cls.__name__}; it supports: {kinds}")

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


class MemberAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba 2015) that steps one ensemble member at a time.

    Every parameter has the member as its leading dimension (``[M, ...]``, as in
    ``EnsembleLinear``). ``step(member)`` applies exactly ``torch.optim.Adam``'s update to slice
    ``[member]`` of every parameter, with that member's own moment estimates and step count, and
    leaves the other members untouched (a shared Adam would move them by their momentum even with
    a zero gradient). Used for HASAC's sequential per-agent actor updates.

    Args:
        params: parameters, each ``[M, ...]``.
        members: M.
        lr: learning rate.
        betas: Adam's moment decay rates (0.9, 0.999).
        eps: Adam's epsilon (1e-8).
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        members: int,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if lr <= 0:
            raise ValueError(f"learning rates must be > 0, got {lr}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})
        self.members = members
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() == 0 or p.shape[0] != members:
                    raise ValueError(
                        f"MemberAdam needs parameters with {members} members first, got "
                        f"{tuple(p.shape)}"
                    )

    @torch.no_grad()
    def step(self, member: int = 0) -> None:  # type: ignore[override]
        """One Adam step on slice ``[member]`` of every parameter that has a gradient."""
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            # Parameters grouped by their step count (equal unless some had no gradient once),
            # each group updated with multi-tensor (foreach) ops.
            by_step: dict[float, list[list[torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    # Step counts on the host: bias corrections need no device read.
                    state["step"] = torch.zeros(self.members, dtype=torch.float64, device="cpu")
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                elif state["step"].device.type != "cpu":  # loaded with a map_location
                    state["step"] = state["step"].cpu()
                state["step"][member] += 1
                slices = by_step.setdefault(float(state["step"][member]), [[], [], [], []])
                for i, x in enumerate((p, p.grad, state["exp_avg"], state["exp_avg_sq"])):
                    slices[i].append(x[member])
            for t, (params, grads, exp_avgs, exp_avg_sqs) in by_step.items():
                torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
                denom = torch._foreach_sqrt(exp_avg_sqs)
                torch._foreach_div_(denom, math.sqrt(1.0 - beta2**t))
                torch._foreach_add_(denom, group["eps"])
                step_size = group["lr"] / (1.0 - beta1**t)
                torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)
