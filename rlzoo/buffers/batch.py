"""The batch an algorithm's ``update`` receives: a small dataclass of tensors on the device."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class Batch:
    """A sampled batch. ``B`` = batch size.

    ``reward`` and ``discount`` already fold in multi-step returns: a target is always
    ``y = reward + discount * V(next_obs)``, with ``discount = gamma^k (1 - terminated)`` where
    ``k`` is the number of steps actually taken (cut at an episode end or the write head).

    Attributes:
        obs: ``[B, O]`` (multi-agent: ``[B, N, O]``).
        action: ``[B, A]``; for an action chunk ``[B, H * A]`` (multi-agent ``[B, N, A]``).
        reward: ``[B]`` discounted sum of the k rewards (team reward for multi-agent).
        next_obs: ``[B, O]`` the observation k steps later, bootstrapped from.
        discount: ``[B]`` ``gamma^k (1 - terminated)``.
        terminated: ``[B]`` 1.0 where the window ended in a true termination.
        state, next_state: ``[B, S]`` global state (multi-agent only).
        agent_reward: ``[B, N]`` per-agent discounted reward sums (multi-agent only).
        action_mask: ``[B, H]`` 1.0 for chunk steps inside the episode (action chunks only).
    """

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    discount: torch.Tensor
    terminated: torch.Tensor
    state: torch.Tensor | None = None
    next_state: torch.Tensor | None = None
    agent_reward: torch.Tensor | None = None
    action_mask: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor on ``device``."""
        return Batch(**{
            f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
            for f in fields(self)
        })

    def tensors(self) -> dict[str, torch.Tensor]:
        """The fields that hold a tensor, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def clone(self) -> Batch:
        """A copy with fresh storage for every tensor (static inputs of a CUDA graph)."""
        return Batch(**{name: t.clone() for name, t in self.tensors().items()})
