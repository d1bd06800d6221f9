"""Test-only env for env_workers: Pendulum that dies or hangs inside an env worker process.

``env=gym env.id=tests.worker_envs:Doomed-v0`` imports this module. With
``RLZOO_TEST_WORKER_FAULT=die:N`` (or ``hang:N``) set, the N-th step taken in a worker process
(``rlzoo-env-*``) ends that process at once (``os._exit(9)``) or sleeps for an hour; outside a
worker it is plain Pendulum.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

_steps = 0


class Doomed(PendulumEnv):
    def step(self, action):  # type: ignore[no-untyped-def]
        global _steps
        fault = os.environ.get("RLZOO_TEST_WORKER_FAULT", "")
        if fault and multiprocessing.current_process().name.startswith("rlzoo-env"):
            _steps += 1
            kind, at = fault.split(":")
            if _steps >= int(at):
                if kind == "die":
                    os._exit(9)
                time.sleep(3600)
        return super().step(action)


if "Doomed-v0" not in gym.registry:
    gym.register("Doomed-v0", entry_point=Doomed, max_episode_steps=200)
