"""Single-agent gymnasium environments as a vector env with one autoreset rule.

Every env is wrapped so its actions live in ``[-1, 1]`` (``RescaleAction``: the one place actions
are scaled to the env's bounds) and stepped with next-step autoreset, as gymnasium 1.x vector envs
do: the step that ends an episode returns the final observation, the next call resets that env,
ignores its action and reports ``reset_step = True`` (no transition happened).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlzoo.envs.gym_state import get_env_state, restore_arrays, set_env_state


@dataclass
class StepResult:
    """One vector step. ``E`` = number of envs.

    Attributes:
        obs: ``[E, O]`` float32, the observation after the step (the final one at an episode end,
            a fresh reset observation where ``reset_step``).
        reward: ``[E]`` float32.
        terminated: ``[E]`` bool, a true end: no bootstrap.
        truncated: ``[E]`` bool, a time-limit end: bootstrap from ``obs``.
        reset_step: ``[E]`` bool, this call only reset the env.
    """

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    reset_step: np.ndarray


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` in one line if ``env_id`` is not a registered env.

    ``module:Name-v0`` ids (gymnasium's syntax) first import ``module``, which registers them.
    """
    if ":" in env_id:
        module = env_id.split(":", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ValueError(f"cannot import {module!r} for env id {env_id!r} ({err})") from None
        env_id = env_id.split(":", 1)[1]
    if env_id not in gym.registry:
        close = [k for k in gym.registry if env_id.split("-")[0].lower() in k.lower()][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"unknown gymnasium env id {env_id!r}{hint}; set env.id to a registered id"
        )


def make_single_env(env_id: str, **kwargs: Any) -> gym.Env:
    """One env with actions in ``[-1, 1]``, mapped affinely onto its Box bounds."""
    env = gym.make(env_id, **kwargs)
    space, obs_space = env.action_space, env.observation_space
    if not isinstance(space, gym.spaces.Box):
        env.close()
        raise ValueError(
            f"{env_id} has a {type(space).__name__} action space; rlzoo needs continuous "
            "(Box) actions"
        )
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        env.close()
        raise ValueError(f"{env_id} needs a flat Box observation space, got {obs_space}")
    return gym.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))


def run_episodes(
    envs: list[gym.Env],
    obs: np.ndarray,
    policy: Callable[[np.ndarray], np.ndarray],
    horizon: int = 1,
    on_step: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run one episode in each of ``envs`` (already reset, first observations ``obs [E, O]``).

    ``policy`` maps the observations of the still-running envs ``[B, O]`` to action chunks
    ``[B, horizon * A]``; each chunk runs open-loop for ``horizon`` steps. ``on_step(e)`` is called
    after every step of env ``e`` (e.g. to film it). Returns ``(returns [E], lengths [E])``.
    """
    episodes, act_dim = len(envs), envs[0].action_space.shape[0]
    returns, lengths = np.zeros(episodes), np.zeros(episodes, dtype=np.int64)
    active = np.ones(episodes, dtype=bool)
    obs = obs.copy()
    while active.any():
        idx = np.flatnonzero(active)
        chunk = policy(obs[idx]).reshape(len(idx), horizon, act_dim)
        for h in range(horizon):
            for j, e in enumerate(idx):
                if not active[e]:
                    continue
                o, r, term, trunc, _ = envs[e].step(np.clip(chunk[j, h], -1.0, 1.0))
                obs[e] = o
                returns[e] += float(r)
                lengths[e] += 1
                if on_step is not None:
                    on_step(e)
                if term or trunc:
                    active[e] = False
    return returns, lengths


class SingleAgentVecEnv:
    """``num_envs`` copies of a gymnasium env with actions in ``[-1, 1]``, stepped in turn.

    Args:
        env_id: a registered gymnasium id with a ``Box`` action space.
        num_envs: E.
        seed: env ``e`` is seeded with ``seed + e`` at the first reset; later resets continue
            each env's own random stream.
        kwargs: passed to ``gym.make``.

    Autoreset is next-step (see the module docstring), implemented here rather than by
    gymnasium's ``SyncVectorEnv`` so that ``get_state``/``set_state`` own every piece of state.
    """

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0, **kwargs: Any) -> None:
        check_env_id(env_id)
        self.envs = [make_single_env(env_id, **kwargs) for _ in range(num_envs)]
        space, obs_space = self.envs[0].action_space, self.envs[0].observation_space
        self.env_id, self.num_envs, self.seed = env_id, num_envs, seed
        self.obs_dim = int(obs_space.shape[0])
        self.act_dim = int(space.shape[0])
        self._ended = np.zeros(num_envs, dtype=bool)

    def reset(self) -> np.ndarray:
        """First reset of every env with its seed; returns ``obs [E, O]`` float32."""
        self._ended[:] = False
        return np.stack([
            env.reset(seed=self.seed + e)[0] for e, env in enumerate(self.envs)
        ]).astype(np.float32)

    def step(self, action: np.ndarray) -> StepResult:
        """``action [E, A]`` in ``[-1, 1]`` (clipped here) -> ``StepResult``."""
        action = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        E = self.num_envs
        obs = np.empty((E, self.obs_dim), dtype=np.float32)
        reward = np.zeros(E, dtype=np.float32)
        terminated, truncated = np.zeros(E, dtype=bool), np.zeros(E, dtype=bool)
        reset_step = self._ended.copy()
        for e, env in enumerate(self.envs):
            if reset_step[e]:
                obs[e] = env.reset()[0]
            else:
                obs[e], reward[e], terminated[e], truncated[e], _ = env.step(action[e])
        self._ended = terminated | truncated
        return StepResult(obs, reward, terminated, truncated, reset_step)

    def get_state(self) -> dict[str, Any]:
        """Every env's simulation, RNG and wrapper state plus the pending resets (plain data)."""
        return {"envs": [get_env_state(env) for env in self.envs], "ended": self._ended.copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where ``get_state`` was taken (after this object's ``reset``), also
        after a checkpoint round trip (arrays come back as numpy, see ``restore_arrays``)."""
        state = restore_arrays(state)
        for env, saved in zip(self.envs, state["envs"], strict=True):
            set_env_state(env, saved)
        self._ended = np.asarray(state["ended"], dtype=bool).copy()

    def render_env(self) -> gym.Env:
        return self.envs[0]

    def close(self) -> None:
        for env in self.envs:
            env.close()
