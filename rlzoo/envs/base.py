"""The one vector-env contract: every env rlzoo trains on or evaluates is a :class:`VecEnv`.

A ``VecEnv`` holds ``E = num_envs`` copies of an env and speaks numpy arrays with a leading env
axis. Single-agent envs (gymnasium, ``rlzoo.envs.gym``) have observations ``[E, O]`` and actions
``[E, A]``; multi-agent envs (PettingZoo, ``rlzoo.envs.pettingzoo``) have ``[E, N, O]`` and
``[E, N, A]`` (agents padded to the largest size) plus a global state ``[E, S]``. The loop, the
evaluator and the storage see only this contract.

* **Actions** are in ``[-1, 1]``; each adapter maps them affinely onto the env's own bounds
  (``action_low``/``action_high``), the one place actions are scaled.
* **Reward.** ``StepResult.reward [E]`` is the team reward: the env's reward for a single agent,
  the mean over agents of their rewards for several (each agent's own in ``agent_reward [E, N]``).
  An episode return is the sum of ``reward`` over the episode's steps.
* **Next-step autoreset** (gymnasium 1.x's ``NEXT_STEP``), implemented once, in :meth:`VecEnv.step`:
  the call that ends env ``e``'s episode returns its final observation with ``terminated`` or
  ``truncated`` set; the next call resets env ``e``, ignores its action and returns the reset
  observation with reward 0, both flags False and ``reset_step[e] = True`` (no transition
  happened). Storage can therefore keep each observation once per env column.
* **Seeding.** Env ``e`` is seeded with ``seed + e`` at the first :meth:`VecEnv.reset` (``seed`` is
  the constructor's unless ``reset(seed=s)`` is given); later resets (autoresets) continue each
  env's own random stream, and ``reset(seed=s)`` re-seeds every env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlzoo.errors import UserError

__all__ = ["EnvError", "Episodes", "StepResult", "VecEnv", "check_shape", "run_episodes",
           "tensor_device"]


# the types of a single value an env usually returns as its reward or flag (the fast check)
_SCALARS = frozenset({bool, int, float, np.bool_, np.float16, np.float32, np.float64, np.int32,
                      np.int64})


class EnvError(UserError):
    """An env broke the contract (an array of the wrong shape) or its worker process failed:
    one line; the loop adds where the run can continue from."""


def check_shape(label: str, e: int, call: str, what: str, value: Any,
                shape: tuple[int, ...]) -> None:
    """Refuse (:class:`EnvError`) ``what`` (``"an observation"``, ``"a reward"``, ...) that env
    ``e`` of ``label`` returned from ``call`` (``step`` or ``reset``) unless its shape is
    ``shape``: written into its row, numpy would broadcast a wrong one (an observation of shape
    ``(1,)`` into all three features of a ``(3,)`` space) or fail with a traceback."""
    try:
        got: Any = np.shape(value)
    except ValueError:  # a ragged sequence
        got = "ragged"
    if got != shape:
        want = f"of shape {shape}" if shape else "that is a single value (shape ())"
        raise EnvError(
            f"{label}: env {e}'s {call}() returned {what} of shape {got}, not one {want}; "
            f"rlzoo refuses it rather than broadcast it into the run's arrays: make {call}() "
            f"return {what} {want}")


@dataclass
class StepResult:
    """One vector step. ``E`` = envs, ``N`` = agents (multi-agent envs only).

    Attributes:
        obs: ``[E, *obs_shape]`` float32, the observation after the step (the final one at an
            episode end, a fresh reset observation where ``reset_step``).
        reward: ``[E]`` float32 team reward (mean over agents for a multi-agent env; 0 on reset
            calls).
        terminated: ``[E]`` bool, a true end: no bootstrap.
        truncated: ``[E]`` bool, a time-limit end (and not terminated): bootstrap from ``obs``.
        reset_step: ``[E]`` bool, this call only reset the env.
        state: ``[E, S]`` float32 global state after the step (multi-agent), else None.
        agent_reward: ``[E, N]`` float32 per-agent rewards (multi-agent), else None.
    """

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    reset_step: np.ndarray
    state: np.ndarray | None = None
    agent_reward: np.ndarray | None = None


@dataclass
class Episodes:
    """What :func:`run_episodes` measured. ``E`` = episodes, ``N`` = agents.

    Attributes:
        returns: ``[E]`` undiscounted team returns.
        lengths: ``[E]`` episode lengths in env steps.
        agent_returns: ``[E, N]`` each agent's own return (multi-agent), else None.
    """

    returns: np.ndarray
    lengths: np.ndarray
    agent_returns: np.ndarray | None = None


class VecEnv:
    """``num_envs`` envs behind one array interface (see the module docstring).

    Subclasses set the attributes below in their constructor and implement :meth:`_reset_one`,
    :meth:`_step_one`, :meth:`get_state`, :meth:`set_state`, :meth:`render_env` and
    :meth:`close`; :meth:`reset` and :meth:`step` (seeding and autoreset) are shared.

    Attributes:
        num_envs: E.
        obs_shape: one env's observation shape, ``(O,)`` or ``(N, O)``.
        act_shape: one env's action shape, ``(A,)`` or ``(N, A)``.
        n_agents: N (1 for a single-agent env).
        state_dim: S, size of the global state (0 = none: single-agent envs).
        act_mask: ``act_shape`` bool, True on real action entries (False on agents' padding).
        action_low, action_high: ``act_shape`` float64, the env's own bounds (0 on padding).
    """

    num_envs: int
    obs_shape: tuple[int, ...]
    act_shape: tuple[int, ...]
    n_agents: int = 1
    state_dim: int = 0
    act_mask: np.ndarray
    action_low: np.ndarray
    action_high: np.ndarray

    def _start(self, num_envs: int, seed: int) -> None:
        """Set up the shared seeding and autoreset bookkeeping (call from ``__init__``)."""
        self.num_envs, self._seed = int(num_envs), int(seed)
        self._seeded = False
        self._needs_reset = np.ones(self.num_envs, dtype=bool)

    def _tensor_masks(self, action: torch.Tensor, active: torch.Tensor | None,
                      pending: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For an env that keeps its worlds as tensors on ``self.device`` (``step_tensors``):
        refuse a step before :meth:`reset` and an ``action`` not ``[E, *act_shape]``; return
        ``live`` (``active``, default all), ``resetting = live & pending`` and ``stepping = live
        & ~pending``, each ``[E]`` bool on the device (``pending [E]``: episodes that ended)."""
        if not self._seeded:
            raise RuntimeError("call reset() before step()")
        want = (self.num_envs, *self.act_shape)
        if tuple(action.shape) != want:
            axes = "[E, N, act_dim]" if len(self.act_shape) > 1 else "[E, act_dim]"
            raise ValueError(f"actions must have shape {want} {axes}, got {tuple(action.shape)}")
        device = self.device  # type: ignore[attr-defined]
        live = (torch.ones(self.num_envs, dtype=torch.bool, device=device) if active is None
                else active.to(device=device, dtype=torch.bool))
        return live, live & pending, live & ~pending

    @property
    def multi_agent(self) -> bool:
        return self.state_dim > 0 or self.n_agents > 1

    @property
    def label(self) -> str:
        """What the env's one-line errors call it (its id; the adapter's class by default)."""
        return type(self).__name__

    # ------------------------------------------------------------------ the contract
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Reset every env; env ``e`` is seeded with ``seed + e`` (default: the constructor's
        seed at the first reset, no re-seeding later). Returns ``obs [E, *obs_shape]`` float32
        and the global ``state [E, S]`` float32 (None for a single-agent env)."""
        if seed is None and not self._seeded:
            seed = self._seed
        obs = np.zeros((self.num_envs, *self.obs_shape), dtype=np.float32)
        state = np.zeros((self.num_envs, self.state_dim), dtype=np.float32)
        for e in range(self.num_envs):
            obs[e], state[e] = self._checked(e, "reset", *self._reset_one(
                e, None if seed is None else int(seed) + e))
        self._needs_reset[:] = False
        self._seeded = True
        return obs, (state if self.state_dim else None)

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> StepResult:
        """Step every env (or only those where ``active [E]`` is True: the others are left as
        they are and report reward 0 and no flags) with ``action [E, *act_shape]`` in
        ``[-1, 1]`` (clipped here), with next-step autoreset."""
        if not self._seeded:
            raise RuntimeError("call reset() before step()")
        action = self._check_action(action)
        E, N = self.num_envs, self.n_agents
        obs = np.zeros((E, *self.obs_shape), dtype=np.float32)
        state = np.zeros((E, self.state_dim), dtype=np.float32)
        reward = np.zeros((E, N) if self.multi_agent else E, dtype=np.float32)
        terminated, truncated = np.zeros(E, dtype=bool), np.zeros(E, dtype=bool)
        reset_step = np.zeros(E, dtype=bool)
        obs_shape, state_shape, reward_shape = self.obs_shape, state.shape[1:], reward.shape[1:]
        for e in range(E):
            if active is not None and not active[e]:
                continue
            if self._needs_reset[e]:
                obs[e], state[e] = self._checked(e, "reset", *self._reset_one(e, None))
                reset_step[e], self._needs_reset[e] = True, False
                continue
            o, st, r, term, trunc = self._step_one(e, action[e])
            if not (type(o) is np.ndarray and o.shape == obs_shape  # the usual types, checked
                    and type(st) is np.ndarray and st.shape == state_shape  # fast
                    and (type(r) in _SCALARS if not reward_shape else
                         type(r) is np.ndarray and r.shape == reward_shape)
                    and type(term) in _SCALARS and type(trunc) in _SCALARS):
                self._check_step(e, o, st, r, term, trunc)  # any other: each shape checked
            obs[e], state[e], reward[e], term, trunc = o, st, r, bool(term), bool(trunc)
            terminated[e], truncated[e] = term, trunc and not term
            self._needs_reset[e] = term or trunc
        if not self.multi_agent:
            return StepResult(obs, reward, terminated, truncated, reset_step)
        return StepResult(obs, reward.mean(axis=1), terminated, truncated, reset_step,
                          state=state, agent_reward=reward)

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically, as plain data and numpy arrays."""
        raise NotImplementedError

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`get_state` was taken (after a :meth:`reset`), also
        after a checkpoint round trip (arrays may come back as tensors)."""
        raise NotImplementedError

    def render_env(self, e: int = 0) -> Any:
        """Env ``e``'s underlying env object (gymnasium or PettingZoo), for ``render()``."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ adapter hooks
    def _checked(self, e: int, call: str, obs: Any, state: Any) -> tuple[Any, Any]:
        """``obs`` and ``state`` of env ``e`` from ``call``, refused unless of the contract's
        shapes (``obs_shape``; ``[S]``, ``[0]`` for a single-agent env)."""
        check_shape(self.label, e, call, "an observation", obs, self.obs_shape)
        check_shape(self.label, e, call, "a global state", state, (self.state_dim,))
        return obs, state

    def _check_step(self, e: int, obs: Any, state: Any, reward: Any, terminated: Any,
                    truncated: Any) -> None:
        """Refuse what ``_step_one`` returned for env ``e`` unless each has its shape: the
        observation and state as :meth:`_checked`, the reward one number (``[N]`` for several
        agents), each flag a single truth value."""
        self._checked(e, "step", obs, state)
        check_shape(self.label, e, "step", "a reward", reward,
                    (self.n_agents,) if self.multi_agent else ())
        check_shape(self.label, e, "step", "a terminated flag", terminated, ())
        check_shape(self.label, e, "step", "a truncated flag", truncated, ())

    def _check_action(self, action: np.ndarray) -> np.ndarray:
        """``[E, *act_shape]`` actions as the adapter steps them (clipped to ``[-1, 1]``)."""
        return np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)

    def _reset_one(self, e: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Reset env ``e`` (re-seeded if ``seed`` is given): ``(obs, state)``, where ``state``
        is an empty array for a single-agent env."""
        raise NotImplementedError

    def _step_one(
        self, e: int, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, Any, bool, bool]:
        """Step env ``e``: ``(obs, state, reward, terminated, truncated)``; ``reward`` is a
        number (single agent) or ``[N]`` (per agent), the flags are single truth values (the
        shapes are checked by :meth:`step`)."""
        raise NotImplementedError


def tensor_device(envs: Sequence[VecEnv]) -> torch.device | None:
    """The device on which ``envs`` keep their worlds as tensors (``env.backend=warp``,
    ``env.backend=batched`` MPE, ``env=vmas``: their observations, and a multi-agent env's global
    state, can stay there, ``step_device``), when every one of them does; else None."""
    if all(getattr(env, "keeps_tensors", False) for env in envs):
        return envs[0].device  # type: ignore[attr-defined]
    return None


def run_episodes(
    envs: Sequence[VecEnv],
    obs: Sequence[np.ndarray],
    policy: Callable[[np.ndarray], np.ndarray],
    horizon: int = 1,
    on_step: Callable[[int, int], None] | None = None,
    tensors: bool = False,
    rows: bool = False,
) -> list[Episodes]:
    """Run one episode in each env of each of the K vector envs ``envs`` (a run's seeds; all with
    the same number of envs ``E``, already reset; first observations ``obs[k]`` ``[E, ...]``).

    ``policy`` maps the observations ``[K, B, *obs_shape]`` of the envs still running (in any of
    the K; ``B <= E``, the same env indices for every k) to action chunks ``[K, B, horizon * A]``
    (or ``[K, B, horizon, *act_shape]``); each chunk runs open-loop for ``horizon`` steps. Envs
    whose episode has ended are not stepped again. ``on_step(k, e)`` is called after every step
    of env ``e`` of ``envs[k]`` (e.g. to film it). Returns one :class:`Episodes` per k.
    With ``tensors`` and envs that keep their worlds as tensors (``tensor_device``), the
    observations stay a tensor on their device and ``policy`` gets them so (``torch.as_tensor``
    takes either); the numbers are the same. With ``rows``, ``policy`` also gets which of the
    ``B`` envs still run in each of the K, ``[K, B]`` bool (a seed group's evaluation computes
    each seed on its own running envs only, as its single run does).
    """
    K, E = len(envs), envs[0].num_envs
    act_shape = envs[0].act_shape
    returns, lengths = np.zeros((K, E)), np.zeros((K, E), dtype=np.int64)
    agent_returns = np.zeros((K, E, envs[0].n_agents)) if envs[0].multi_agent else None
    active = np.ones((K, E), dtype=bool)
    current: Any = np.stack([np.asarray(o) for o in obs])
    device = tensor_device(envs) if tensors else None
    if device is not None:
        current = torch.as_tensor(current).to(device)
    action = np.zeros((K, E, *act_shape), dtype=np.float32)
    while active.any():
        idx = np.flatnonzero(active.any(axis=0))
        batch = current[:, idx]
        chunk = np.asarray(policy(batch, active[:, idx]) if rows else policy(batch))
        chunk = chunk.reshape(K, len(idx), horizon, *act_shape)
        for h in range(horizon):
            action[:, idx] = chunk[:, :, h]
            for k, env in enumerate(envs):
                if not active[k].any():
                    continue
                result = (env.step(action[k], active=active[k]) if device is None else
                          env.step_device(action[k], active=active[k]))  # type: ignore[attr-defined]
                live = active[k].copy()
                current[k][live] = result.obs[live]
                returns[k][live] += result.reward[live]
                if agent_returns is not None:
                    agent_returns[k][live] += result.agent_reward[live]  # type: ignore[index]
                lengths[k][live] += 1
                if on_step is not None:
                    for e in np.flatnonzero(live):
                        on_step(k, int(e))
                active[k] &= ~(result.terminated | result.truncated)
            if not active[:, idx].any():
                break
    return [Episodes(returns[k], lengths[k], None if agent_returns is None else agent_returns[k])
            for k in range(K)]
