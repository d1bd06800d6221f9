"""``env.backend=gymnasium``: any registered gymnasium env with Box actions, one env object per
env, stepped one after another (``rlzoo.envs.gym.SingleAgentVecEnv``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlzoo.envs.backend import Backend
from rlzoo.envs.gym import SingleAgentVecEnv, check_env_id


class Gymnasium(Backend):
    """gymnasium's envs (``gymnasium.make(env.id, **env.kwargs)``); ``module:Name-v0`` ids
    import ``module`` first, which registers them."""

    name = "gymnasium"

    def check(self, env_id: str) -> None:
        check_env_id(env_id)

    def make(self, env_id: str, num_envs: int, seed: int, **kwargs: Any) -> SingleAgentVecEnv:
        try:
            return SingleAgentVecEnv(env_id, num_envs, seed, **kwargs)
        except gym.error.Error as err:  # gymnasium's refusals (an unknown id, a bad kwarg value)
            raise ValueError(str(err)) from None


BACKEND = Gymnasium()
