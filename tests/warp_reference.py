"""Gymnasium's ``<Task>-v5`` side of the MuJoCo Warp comparisons (tests/test_mujoco_warp.py,
scripts/bench_mujoco_warp.py): a random-action episode recorded state by state, and the
distance between two steps' outputs."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import mujoco
import numpy as np


@dataclass
class Episode:
    """One gymnasium episode of T steps (float64, as gymnasium computes).

    Attributes:
        qpos ``[T, nq]``, qvel ``[T, nv]``, warmstart ``[T, nv]``: the state before each step.
        action ``[T, A]``: each step's action in ``[-1, 1]``.
        obs ``[T, O]``, reward ``[T]``, terminated ``[T]``: each step's outputs.
        first_obs ``[O]``: the reset observation.
    """

    qpos: np.ndarray
    qvel: np.ndarray
    warmstart: np.ndarray
    action: np.ndarray
    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    first_obs: np.ndarray


def record_episode(env_id: str, seed: int, max_steps: int = 1000, scale: float = 1.0) -> Episode:
    """Run ``env_id`` from ``reset(seed=seed)`` with uniform actions in ``[-scale, scale]``
    (drawn from ``seed``) until it ends or ``max_steps``. Before each step ``mj_forward``
    refreshes the body positions, so the step's ``x_before`` is the state's own (the trajectory
    is unchanged: ``mj_step`` recomputes everything from qpos, qvel and the warm start)."""
    env = gym.make(env_id)
    u = env.unwrapped
    first, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    low, high = u.model.actuator_ctrlrange[:, 0], u.model.actuator_ctrlrange[:, 1]
    rows: dict[str, list[np.ndarray]] = {k: [] for k in (
        "qpos", "qvel", "warmstart", "action", "obs", "reward", "terminated")}
    for _ in range(max_steps):
        mujoco.mj_forward(u.model, u.data)
        a = rng.uniform(-scale, scale, u.model.nu).astype(np.float32)
        rows["qpos"].append(u.data.qpos.copy())
        rows["qvel"].append(u.data.qvel.copy())
        rows["warmstart"].append(u.data.qacc_warmstart.copy())
        obs, reward, terminated, truncated, _ = env.step(low + (a + 1.0) / 2.0 * (high - low))
        rows["action"].append(a)
        rows["obs"].append(obs)
        rows["reward"].append(np.float64(reward))
        rows["terminated"].append(np.bool_(terminated))
        if terminated or truncated:
            break
    env.close()
    return Episode(**{k: np.stack(v) for k, v in rows.items()}, first_obs=first)


def rel_error(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``|ours - theirs| / (1 + |theirs|)`` elementwise: absolute near 0, relative for large
    values (Humanoid's contact forces reach thousands)."""
    theirs = np.asarray(theirs, dtype=np.float64)
    return np.abs(np.asarray(ours, dtype=np.float64) - theirs) / (1.0 + np.abs(theirs))
