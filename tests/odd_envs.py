"""Test-only environments with shapes and bounds rlzoo must handle or refuse.

``gym.make("tests.odd_envs:ZeroObs-v0")`` imports this module, which registers the ids.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ZeroObs(gym.Env):
    """An env whose observation has no entries (``Box(shape=(0,))``)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(0,), dtype=np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        return np.zeros(0, dtype=np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        return np.zeros(0, dtype=np.float32), 0.0, False, False, {}


if "ZeroObs-v0" not in gym.registry:
    gym.register("ZeroObs-v0", entry_point=ZeroObs, max_episode_steps=10)
