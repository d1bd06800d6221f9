"""Test-only gymnasium envs that break the env contract on purpose, one way each.

``env=gym env.id=tests.faulty_envs:<Id>`` imports this module, which registers them (a run dir
that names them resumes with ``trust=[tests]``). Each is Pendulum (observation ``(3,)``, action
``(1,)``) with one fault; ``...Worker-v0`` ids break only inside an env worker process
(``env_workers``: a process named ``rlzoo-env-*``), so the same run with ``env_workers=0`` is
healthy:

* ``FailsInit-v0``: ``__init__`` raises ``RuntimeError("no simulator licence on this host")``.
* ``ShortObs-v0``: observations of shape ``(1,)`` from step 5 on (and at every reset for
  ``ShortObsReset-v0``), which numpy would broadcast into all three features.
* ``LongObs-v0``: observations of shape ``(4,)`` from step 5.
* ``WideReward-v0``, ``ShortReward-v0``: rewards of shape ``(2,)`` and ``(1,)`` from step 5.
* ``WideFlags-v0``: ``terminated`` of shape ``(2,)`` from step 5.
* ``FailsEval-v0``: raises ``RuntimeError("eval env broke")`` stepping an eval env (seeds from
  10_000 on, rlzoo's eval seeds) after its first episode step, unless ``RLZOO_TEST_EVAL_FAULT=0``
  (so a first leg can finish and a resumed one fail).
"""

from __future__ import annotations

import multiprocessing
import os

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


def in_worker() -> bool:
    return multiprocessing.current_process().name.startswith("rlzoo-env")


class Faulty(PendulumEnv):
    def __init__(self, fault: str = "", worker_only: bool = False, **kwargs):  # type: ignore[no-untyped-def]
        self.fault = fault if (in_worker() or not worker_only) else ""
        if self.fault == "init":
            raise RuntimeError("no simulator licence on this host")
        super().__init__(**kwargs)
        self.steps = 0
        self.seed_used: int | None = None

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        if seed is not None:
            self.seed_used = seed
        obs, info = super().reset(seed=seed, options=options)
        if self.fault == "obs1-reset":
            obs = obs[:1]
        return obs, info

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.fault == "eval" and (self.seed_used or 0) >= 10_000 and \
                os.environ.get("RLZOO_TEST_EVAL_FAULT", "1") == "1":
            raise RuntimeError("eval env broke")
        if self.steps >= 5:
            if self.fault == "obs1":
                obs = obs[:1]
            elif self.fault == "obs4":
                obs = np.concatenate([obs, obs[:1]])
            elif self.fault == "reward2":
                reward = np.array([reward, reward])
            elif self.fault == "reward1":
                reward = np.array([reward])
            elif self.fault == "flags2":
                terminated = np.array([False, False])
        return obs, reward, terminated, truncated, info


FAULTS = {  # each also as <Name>Worker-v0, broken only inside an env worker
    "FailsInit": "init",
    "ShortObs": "obs1",
    "ShortObsReset": "obs1-reset",
    "LongObs": "obs4",
    "WideReward": "reward2",
    "ShortReward": "reward1",
    "WideFlags": "flags2",
    "FailsEval": "eval",
}

for _name, _fault in FAULTS.items():
    for _id, _worker_only in ((f"{_name}-v0", False), (f"{_name}Worker-v0", True)):
        if _id not in gym.registry:
            gym.register(_id, entry_point=Faulty, max_episode_steps=200,
                         kwargs={"fault": _fault, "worker_only": _worker_only})
