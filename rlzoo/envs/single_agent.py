"""Single-agent gymnasium environments as a vector env with one autoreset rule.

Every env is wrapped so its actions live in ``[-1, 1]`` (``RescaleAction``: the one place actions
are scaled to the env's bounds) and stepped through gymnasium's ``SyncVectorEnv`` with next-step
autoreset: the step that ends an episode returns the final observation, the next call resets that
env, ignores its action and reports ``reset_step = True`` (no transition happened).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np


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
    """Raise ``ValueError`` in one line if ``env_id`` is not a registered env with Box actions."""
    if env_id not in gym.registry:
        close = [k for k in gym.registry if env_id.split("-")[0].lower() in k.lower()][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"unknown gymnasium env id {env_id!r}{hint}; set env.id to a registered id"
        )


def make_single_env(env_id: str, **kwargs: Any) -> gym.Env:
    """One env with actions in ``[-1, 1]``, mapped affinely onto its Box bounds."""
    env = gym.make(env_id, **kwargs)
    return gym.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))


class SingleAgentVecEnv:
    """``num_envs`` copies of a gymnasium env with actions in ``[-1, 1]``.

    Args:
        env_id: a registered gymnasium id with a ``Box`` action space.
        num_envs: E.
        seed: env ``e`` is seeded with ``seed + e`` at the first reset; later resets continue
            each env's own random stream.
        kwargs: passed to ``gym.make``.
    """

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0, **kwargs: Any) -> None:
        check_env_id(env_id)
        probe = gym.make(env_id, **kwargs)
        space, obs_space = probe.action_space, probe.observation_space
        probe.close()
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(
                f"{env_id} has a {type(space).__name__} action space; rlzoo needs continuous "
                "(Box) actions"
            )
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            raise ValueError(f"{env_id} needs a flat Box observation space, got {obs_space}")

        def make() -> gym.Env:
            return make_single_env(env_id, **kwargs)

        self.env_id, self.num_envs, self.seed = env_id, num_envs, seed
        self.envs = gym.vector.SyncVectorEnv(
            [make for _ in range(num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
        self.obs_dim = int(obs_space.shape[0])
        self.act_dim = int(space.shape[0])
        self._ended = np.zeros(num_envs, dtype=bool)

    def reset(self) -> np.ndarray:
        """First reset of every env with its seed; returns ``obs [E, O]`` float32."""
        obs, _ = self.envs.reset(seed=[self.seed + e for e in range(self.num_envs)])
        self._ended[:] = False
        return obs.astype(np.float32)

    def step(self, action: np.ndarray) -> StepResult:
        """``action [E, A]`` in ``[-1, 1]`` (clipped here) -> ``StepResult``."""
        action = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        obs, reward, terminated, truncated, _ = self.envs.step(action)
        reset_step = self._ended.copy()
        self._ended = np.asarray(terminated | truncated, dtype=bool)
        return StepResult(
            obs=obs.astype(np.float32),
            reward=np.asarray(reward, dtype=np.float32),
            terminated=np.asarray(terminated, dtype=bool),
            truncated=np.asarray(truncated, dtype=bool),
            reset_step=reset_step,
        )

    def render_env(self) -> gym.Env:
        return self.envs.envs[0]

    def close(self) -> None:
        self.envs.close()
