"""The algorithm contract shared by every method in the zoo.

An ``Algorithm`` is an ``nn.Module`` that owns its networks, optimizers and tuner. The trainer
calls ``act`` to collect data and ``update`` with a ``Batch``; ``update`` returns scalar tensors
(never ``.item()``: the trainer converts when it logs, so CUDA never waits on the host).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from rlzoo.buffers.batch import Batch
from rlzoo.nets.critics import Critic
from rlzoo.optim import adam

__all__ = ["Algorithm", "EnvSpec", "adam", "check_tau"]


def check_tau(tau: float) -> float:
    """``tau``, the polyak rate of an algorithm's target networks, if ``0 < tau <= 1``."""
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"algo.tau must be in (0, 1], got {tau}")
    return tau


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about its environment.

    Attributes:
        obs_dim: observation size (per agent, padded to the largest, for multi-agent envs).
        act_dim: action size (per agent, padded likewise); actions live in ``[-1, 1]``.
        n_agents: N (1 for single-agent envs).
        state_dim: global state size (multi-agent; 0 otherwise).
        act_dims: true action size of each agent (multi-agent).
    """

    obs_dim: int
    act_dim: int
    n_agents: int = 1
    state_dim: int = 0
    act_dims: tuple[int, ...] = ()

    @property
    def multi_agent(self) -> bool:
        return self.n_agents > 1 or self.state_dim > 0


class Algorithm(nn.Module):
    """Base class. Subclasses set the class attributes and implement ``act`` and ``update``.

    Class attributes:
        supported_critics: critic classes this algorithm can train (checked at construction).
        on_policy: trains from fresh rollouts rather than a replay buffer.
        multi_agent: expects multi-agent envs (``[B, N, ...]`` observations).
        graph_safe: ``update`` branches only as ``update_phase()`` says, draws its randomness
            on the device and changes no host-side state but ``self.updates``, so
            ``cudagraphs=true`` can capture it (see ``rlzoo/accel.py``).
    """

    supported_critics: ClassVar[tuple[type[Critic], ...]] = (Critic,)
    on_policy: ClassVar[bool] = False
    multi_agent: ClassVar[bool] = False
    graph_safe: ClassVar[bool] = False

    def __init__(self, spec: EnvSpec, gamma: float = 0.99, n_step: int = 1) -> None:
        super().__init__()
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"algo.gamma must be in [0, 1], got {gamma}")
        if n_step < 1:
            raise ValueError(f"algo.n_step must be >= 1, got {n_step}")
        self.spec, self.gamma, self.n_step = spec, gamma, n_step
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.updates = 0  # number of update() calls so far

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def action_horizon(self) -> int:
        """H: how many consecutive env actions one call of ``act`` returns (action chunks)."""
        return 1

    def update_phase(self) -> Hashable:
        """Which branches the next ``update`` takes (e.g. TD3: whether the actor steps); one
        CUDA graph is captured per distinct value. Default: an update without branches."""
        return None

    def check_critic(self, critic: Critic) -> None:
        """Refuse a critic kind this algorithm cannot train, in one line."""
        if not isinstance(critic, self.supported_critics):
            kinds = ", ".join(c.__name__ for c in self.supported_critics)
            raise ValueError(
                f"{self.name} cannot train a {type(critic).__name__}; it supports: {kinds}"
            )

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [B, O]`` -> action ``[B, H * A]`` in ``[-1, 1]``, without gradient."""
        raise NotImplementedError

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient update; returns scalar tensors keyed ``loss/...`` and ``stats/...``."""
        raise NotImplementedError

    @staticmethod
    def step(
        optimizer: torch.optim.Optimizer, loss: torch.Tensor, max_grad_norm: float | None = None
    ) -> None:
        """``zero_grad -> backward -> [clip the gradients' global norm to max_grad_norm] -> step``.
        """
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm is not None:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """Networks, targets, tuner and every optimizer, plus the update counter."""
        if args or kwargs:  # called as a submodule: behave like nn.Module
            return super().state_dict(*args, **kwargs)
        return {
            "modules": super().state_dict(),
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> Any:  # type: ignore[override]
        if "modules" not in state:
            return super().load_state_dict(state, strict=strict)
        result = super().load_state_dict(state["modules"], strict=strict)
        missing = set(self.optimizers) ^ set(state["optimizers"])
        if missing:
            raise ValueError(f"checkpoint optimizers differ from this algorithm's: {missing}")
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        self.updates = int(state["updates"])
        return result
