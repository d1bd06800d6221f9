"""Single-agent gymnasium environments behind the vector-env contract of ``rlzoo.envs.base``.

Every env is wrapped so its actions live in ``[-1, 1]`` (``RescaleAction``: the one place actions
are scaled to the env's bounds) and stepped with the contract's next-step autoreset.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from rlzoo.envs.base import VecEnv
from rlzoo.envs.snapshot import env_settings, get_env_state, restore_arrays, set_env_state

_NO_STATE = np.zeros(0, dtype=np.float32)  # a single-agent env has no global state


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


class SingleAgentVecEnv(VecEnv):
    """``num_envs`` copies of a gymnasium env with actions in ``[-1, 1]``, stepped in turn.

    Args:
        env_id: a registered gymnasium id with a ``Box`` action space.
        num_envs: E.
        seed: env ``e`` is seeded with ``seed + e`` at the first reset; later resets continue
            each env's own random stream.
        kwargs: passed to ``gym.make`` (e.g. ``render_mode="rgb_array"``).

    Autoreset is next-step (``rlzoo.envs.base``), implemented there rather than by gymnasium's
    ``SyncVectorEnv`` so that ``get_state``/``set_state`` own every piece of state.
    """

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0, **kwargs: Any) -> None:
        check_env_id(env_id)
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.envs = [make_single_env(env_id, **kwargs) for _ in range(int(num_envs))]
        self._start(num_envs, seed)
        self.env_id = env_id
        obs_space, bounds = self.envs[0].observation_space, self.envs[0].env.action_space
        self.obs_dim, self.act_dim = int(obs_space.shape[0]), int(bounds.shape[0])
        self.obs_spaces = {env_id: obs_space}  # the raw space (checked by normalize.obs)
        spec = self.envs[0].spec  # its time limit (a max_episode_steps kwarg included), or None
        self.max_episode_steps: int | None = spec.max_episode_steps if spec is not None else None
        self.obs_shape, self.act_shape = (self.obs_dim,), (self.act_dim,)
        self.act_mask = np.ones(self.act_shape, dtype=bool)
        # the env's own Box, inside RescaleAction
        self.action_low = np.asarray(bounds.low, dtype=np.float64)
        self.action_high = np.asarray(bounds.high, dtype=np.float64)

    def _reset_one(self, e: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        return self.envs[e].reset(seed=seed)[0], _NO_STATE

    @property
    def label(self) -> str:
        return self.env_id

    def _step_one(self, e: int, action: np.ndarray) -> tuple[Any, np.ndarray, Any, Any, Any]:
        obs, reward, terminated, truncated, _ = self.envs[e].step(action)
        return obs, _NO_STATE, reward, terminated, truncated  # checked by VecEnv.step

    def get_state(self) -> dict[str, Any]:
        """Every env's simulation, RNG and wrapper state plus the pending resets (plain data)."""
        return {"envs": [get_env_state(env) for env in self.envs],
                "ended": self._needs_reset.copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where ``get_state`` was taken (after this object's ``reset``), also
        after a checkpoint round trip (arrays come back as numpy, see ``restore_arrays``)."""
        state = restore_arrays(state)
        ended = state["ended"]
        if not isinstance(ended, np.ndarray) or ended.dtype != bool \
                or ended.shape != self._needs_reset.shape:
            raise ValueError(f"saved env state 'ended' is not {len(self.envs)} bools")
        # every env here is made from one spec: one probe, only for envs saved by attributes
        settings = env_settings(self.envs[0]) if any(
            isinstance(saved, dict) and saved.get("attributes") for saved in state["envs"]) \
            else {}
        for env, saved in zip(self.envs, state["envs"], strict=True):
            set_env_state(env, saved, settings)
        self._needs_reset = ended.copy()
        self._seeded = True

    def render_env(self, e: int = 0) -> gym.Env:
        return self.envs[e]

    def close(self) -> None:
        for env in self.envs:
            env.close()
