"""On-policy rollout storage: ``T`` consecutive vector steps of ``E`` envs, used once, then cleared.

Layout: ``K`` independent rollouts (one for a single run) on a leading axis, each time-major like
the replay buffer's ring but without wrapping: row ``t`` of column ``e`` holds the observation env
``e`` acted on at step ``t`` and that step's action, its pre-tanh sample (so the policy's
log-probability at the executed action is exact), rewards and end flags; the next observation is
row ``t + 1``, and row ``T`` holds the observation after the last step (the one a segment's last
transition bootstraps from). Environments use next-step autoreset: the call that only resets an
env is stored with ``valid = 0`` and is never a transition. The K rollouts fill together (one
``add`` writes a vector step of each); after an update, :meth:`RolloutBuffer.clear` keeps row
``T`` as the new row 0, so no observation is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rlzoo.buffers.storage import leading_rows, load_tensors, to_storage
from rlzoo.store.state_match import match_state


@dataclass
class Rollout:
    """``T`` vector steps of ``E`` envs, on the training device. Shapes are given for a
    multi-agent env (``N`` agents); a single-agent env drops the ``N`` axis (obs ``[T + 1, E, O]``,
    action ``[T, E, A]``) and has no ``state`` or ``agent_reward`` (None). ``RolloutBuffer``
    hands over K of them as one, every tensor ``[K, ...]``; ``update`` sees one.

    Attributes:
        obs: ``[T + 1, E, N, O]``; row ``t + 1`` is the observation after step ``t``.
        state: ``[T + 1, E, S]`` global state, rows as ``obs`` (None without one).
        action: ``[T, E, N, A]`` executed actions in [-1, 1] (padding 0).
        pre_tanh: ``[T, E, N, A]`` the Gaussian samples ``u`` with ``action = tanh(u)``.
        reward: ``[T, E]`` team reward (mean over agents).
        agent_reward: ``[T, E, N]`` per-agent rewards (None for a single-agent env).
        terminated: ``[T, E]`` 1.0 where the step ended the episode for good (no bootstrap).
        ended: ``[T, E]`` 1.0 where the step ended the episode (terminated or truncated).
        valid: ``[T, E]`` 1.0 for real transitions, 0.0 for reset calls.
    """

    obs: torch.Tensor
    state: torch.Tensor | None
    action: torch.Tensor
    pre_tanh: torch.Tensor
    reward: torch.Tensor
    agent_reward: torch.Tensor | None
    terminated: torch.Tensor
    ended: torch.Tensor
    valid: torch.Tensor

    @property
    def steps(self) -> int:
        """T, the number of vector steps (of one rollout)."""
        return self.action.shape[0]


class RolloutBuffer:
    """Preallocated storage for ``K`` rollouts of ``steps`` vector steps each, one tensor
    ``[K, T (+ 1), E, ...]`` per field.

    Args:
        steps: T, vector steps per rollout (per env; reset calls included).
        num_envs: E.
        obs_shape: ``(N, O)`` (``(O,)`` for a single-agent env).
        action_shape: ``(N, A)`` (``(A,)``).
        state_dim: S, size of the global state (0 = none).
        device: where the storage lives.
        agent_rewards: N, per-agent rewards stored beside the team reward (0 = none). Default:
            ``obs_shape[0]`` when there is a global state (a multi-agent env), else 0.
        num_buffers: K, the rollouts filled together (1: one).
    """

    def __init__(
        self,
        steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        state_dim: int = 0,
        device: torch.device | str = "cpu",
        agent_rewards: int | None = None,
        num_buffers: int = 1,
    ) -> None:
        if steps < 1:
            raise ValueError(f"algo.rollout_steps must be >= 1, got {steps}")
        self.device = torch.device(device)
        self.steps, self.num_envs, self.num_buffers = steps, num_envs, num_buffers
        K, T, E = num_buffers, steps, num_envs
        N = (obs_shape[0] if state_dim else 0) if agent_rewards is None else agent_rewards
        with torch.device(self.device):
            self.obs = torch.zeros((K, T + 1, E, *obs_shape))
            self.state = torch.zeros((K, T + 1, E, state_dim)) if state_dim else None
            self.action = torch.zeros((K, T, E, *action_shape))
            self.pre_tanh = torch.zeros((K, T, E, *action_shape))
            self.reward = torch.zeros((K, T, E))
            self.agent_reward = torch.zeros((K, T, E, N)) if N else None
            self.terminated = torch.zeros((K, T, E))
            self.ended = torch.zeros((K, T, E))
            self.valid = torch.zeros((K, T, E))
        self.ptr = 0  # next row to write (of every rollout)
        self.started = False

    def add(
        self,
        obs: np.ndarray | torch.Tensor,
        action: np.ndarray | torch.Tensor,
        reward: np.ndarray | torch.Tensor,
        next_obs: np.ndarray | torch.Tensor,
        terminated: np.ndarray,
        truncated: np.ndarray,
        reset_step: np.ndarray,
        state: np.ndarray | torch.Tensor | None = None,
        next_state: np.ndarray | torch.Tensor | None = None,
        agent_reward: np.ndarray | torch.Tensor | None = None,
        pre_tanh: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        """Store one vector step of all K rollouts (the replay buffer's ``add`` and arguments,
        plus the policy's ``pre_tanh`` sample ``[K, E, ...]`` of the action); ``[K, E, ...]``
        arrays."""
        if self.full:
            raise RuntimeError("the rollout is full; update and clear() it first")
        if pre_tanh is None:
            raise ValueError("an on-policy rollout needs the pre_tanh sample of every action")
        p = self.ptr
        if not self.started:
            self.obs[:, p] = self._t(obs)
            if self.state is not None:
                self.state[:, p] = self._t(state)
            self.started = True
        valid = ~np.asarray(reset_step, dtype=bool)
        terminated = np.asarray(terminated, dtype=bool) & valid
        ended = (terminated | np.asarray(truncated, dtype=bool)) & valid
        self.action[:, p], self.pre_tanh[:, p] = self._t(action), self._t(pre_tanh)
        self.reward[:, p] = self._t(reward)
        if self.agent_reward is not None:
            self.agent_reward[:, p] = self._t(agent_reward)
        self.terminated[:, p], self.ended[:, p] = self._t(terminated), self._t(ended)
        self.valid[:, p] = self._t(valid)
        self.obs[:, p + 1] = self._t(next_obs)
        if self.state is not None:
            self.state[:, p + 1] = self._t(next_state)
        self.ptr += 1

    def _t(self, x: Any) -> torch.Tensor:
        return to_storage(x, self.device, torch.float32)

    @property
    def full(self) -> bool:
        return self.ptr == self.steps

    def __len__(self) -> int:
        """Rows written since the last clear (vector steps, reset calls included)."""
        return self.ptr

    def rollout(self) -> Rollout:
        """The complete rollouts, every tensor ``[K, ...]`` (views of the storage: use them
        before ``clear``)."""
        if not self.full:
            raise RuntimeError(f"the rollout holds {self.ptr} of {self.steps} steps")
        return Rollout(**{f.name: getattr(self, f.name) for f in fields(Rollout)})

    def clear(self) -> None:
        """Start the next rollouts from their last observations."""
        self.obs[:, 0] = self.obs[:, self.ptr]
        if self.state is not None:
            self.state[:, 0] = self.state[:, self.ptr]
        self.ptr = 0

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the storage tensors (all K rollouts)."""
        return sum(t.numel() * 4 for t in self._tensors().values())

    def used_nbytes(self, k: int) -> int:
        """Rollout k's share of :attr:`nbytes`: every rollout fills its whole store (it is
        cleared after each update, so the rows written now say nothing of what was used)."""
        del k  # every rollout holds the same
        return self.nbytes // self.num_buffers

    def _tensors(self) -> dict[str, torch.Tensor]:
        """The storage tensors by field name (the fields this buffer has)."""
        return {f.name: getattr(self, f.name) for f in fields(Rollout)
                if getattr(self, f.name) is not None}

    def state_dict(self, k: int = 0) -> dict[str, Any]:
        """Rollout k's tensors and the plain ints (a checkpoint mid-rollout continues it
        exactly); on the CPU the tensors share the storage's memory (save them before the next
        ``add``)."""
        return {
            "tensors": {name: leading_rows(t[k], t.shape[1]) for name, t in
                        self._tensors().items()},
            "ptr": self.ptr, "started": self.started,
        }

    def check_state(self, state: Any) -> None:
        """Refuse a :meth:`state_dict` (read from a file) that a rollout of this store could not
        have written, before anything of it is used: its ``tensors`` exactly a rollout's, each
        of its shape, dtype and layout (``rlzoo.store.state_match.match_state``: never cast),
        ``ptr``
        an integer in ``[0, steps]`` and ``started`` a bool. ``ValueError`` names the first
        that is not."""
        if not isinstance(state, dict) or set(state) != {"tensors", "ptr", "started"}:
            raise ValueError("rollout state is not a mapping of tensors, ptr and started")
        ptr, started = state.get("ptr"), state.get("started")
        if not isinstance(ptr, int) or isinstance(ptr, bool) or not 0 <= ptr <= self.steps \
                or not isinstance(started, bool):
            raise ValueError(f"rollout ptr={ptr!r} started={started!r} is not an integer in "
                             f"[0, {self.steps}] and a bool")
        match_state(state["tensors"], {name: t[0] for name, t in self._tensors().items()},
                    "rollout tensors", loaded_on="*")

    def check_states(self, states: list[Any]) -> None:
        """Refuse the saved states of all K rollouts (``states[k]``: rollout k's) unless each
        fits (:meth:`check_state`) and they are at the same ``ptr`` and ``started`` (the
        rollouts fill together), before any of them is loaded."""
        if len(states) != self.num_buffers:
            raise ValueError(f"{len(states)} rollout states for {self.num_buffers} rollouts")
        for k, state in enumerate(states):
            self.check_state(state)
            if k:
                self._fills_with(state, states[0]["ptr"], states[0]["started"], k)

    def _fills_with(self, state: dict[str, Any], ptr: int, started: bool, k: int) -> None:
        """``ValueError`` unless rollout k's ``state`` is at rollout 0's ``ptr`` and
        ``started``."""
        if (state["ptr"], state["started"]) != (ptr, started):
            raise ValueError(f"rollout {k} is at ptr={state['ptr']} started={state['started']}, "
                             f"rollout 0 at ptr={ptr} started={started}; they fill together")

    def load_state_dict(self, state: dict[str, Any], k: int = 0) -> None:
        """Put back :meth:`state_dict` as rollout k (copied into the storage), checked first
        (:meth:`check_state`; for k > 0 its ``ptr`` and ``started`` must be rollout 0's: the
        rollouts fill together): nothing is changed unless all of it fits."""
        self.check_state(state)
        if k:
            self._fills_with(state, self.ptr, self.started, k)
        part = SimpleNamespace(**{name: t[k] for name, t in self._tensors().items()})
        load_tensors(part, state["tensors"], "rollout")
        self.ptr, self.started = state["ptr"], state["started"]
