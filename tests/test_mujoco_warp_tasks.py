"""rlzoo/envs/mujoco_warp_tasks.py's definitions against gymnasium's own ``<Task>-v5`` methods,
on gymnasium's float64 MuJoCo data (no Warp needed: this runs wherever gymnasium's MuJoCo envs
do). For states along random episodes and states pushed across the health limits, the task's
observation, health and contact cost computed from the data equal gymnasium's ``_get_obs``,
``is_healthy`` and ``contact_cost``."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import mujoco
import numpy as np
import pytest
import torch

from rlzoo.envs.mujoco_warp_tasks import TASKS

FIELDS = ("qpos", "qvel", "ctrl", "xpos", "xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext")


def _views(data: mujoco.MjData) -> SimpleNamespace:
    """One env's data as the ``[1, ...]`` float64 views a task reads."""
    return SimpleNamespace(**{k: torch.as_tensor(np.array(getattr(data, k)))[None]
                              for k in FIELDS})


def _states(env_id: str, seed: int = 0, steps: int = 40) -> list[tuple[np.ndarray, np.ndarray]]:
    """(qpos, qvel) along a random episode, then the same states with qpos[1:3] (planar: height
    and angle) or qpos[2] (Ant, Humanoid: height) spread over [-1.5, 2.5] around their limits."""
    env = gym.make(env_id)
    u = env.unwrapped
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        out.append((u.data.qpos.copy(), u.data.qvel.copy()))
        if term or trunc:
            env.reset()
    pushed = []
    for qpos, qvel in out:
        q = qpos.copy()
        cols = [1, 2] if TASKS[env_id].x_of == "qpos" else [2]
        q[cols] = rng.uniform(-1.5, 2.5, len(cols))
        pushed.append((q, qvel * rng.choice([1.0, 30.0])))
    env.close()
    return out + pushed


@pytest.mark.parametrize("env_id", list(TASKS))
def test_observation_health_and_contact_cost_equal_gymnasiums(env_id: str) -> None:
    task = TASKS[env_id]
    env = gym.make(env_id)
    u = env.unwrapped
    env.reset(seed=1)
    healthy_seen = set()
    for qpos, qvel in _states(env_id):
        u.set_state(qpos, qvel)  # mj_forward
        u.data.ctrl[:] = np.linspace(-0.3, 0.3, u.model.nu)
        mujoco.mj_rnePostConstraint(u.model, u.data)  # as after gymnasium's do_simulation
        v = _views(u.data)
        np.testing.assert_allclose(task.observe(v)[0].numpy(), u._get_obs(), rtol=0, atol=1e-12)
        if task.healthy is not None:
            ours = bool(task.healthy(v)[0])
            assert ours == bool(u.is_healthy), (env_id, qpos, qvel)
            healthy_seen.add(ours)
        if task.contact_cost is not None:
            np.testing.assert_allclose(float(task.contact_cost(v)[0]), u.contact_cost,
                                       rtol=1e-12, atol=1e-15)
    assert task.healthy is None or healthy_seen == {True, False}
    env.close()


@pytest.mark.parametrize("env_id", list(TASKS))
def test_weights_frame_skip_and_noise_are_gymnasiums_defaults(env_id: str) -> None:
    task, u = TASKS[env_id], gym.make(env_id).unwrapped
    assert task.frame_skip == u.frame_skip and task.noise == u._reset_noise_scale
    assert task.forward_weight == u._forward_reward_weight
    assert task.ctrl_weight == u._ctrl_cost_weight
    assert task.healthy_reward == getattr(u, "_healthy_reward", 0.0)
    assert task.xml == u.fullpath.split("/")[-1]
