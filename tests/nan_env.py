"""A test-only environment: Pendulum whose rewards turn NaN after a number of steps.

``gym.make("tests.nan_env:NaNPendulum-v0")`` imports this module, which registers the id.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

NAN_AFTER = 400  # env steps (over all episodes of this env object) before rewards become NaN


class NaNPendulum(PendulumEnv):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.steps_taken = 0

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps_taken += 1
        if self.steps_taken > NAN_AFTER:
            reward = float("nan")
        return obs, reward, terminated, truncated, info


if "NaNPendulum-v0" not in gym.registry:
    gym.register("NaNPendulum-v0", entry_point=NaNPendulum, max_episode_steps=200)
