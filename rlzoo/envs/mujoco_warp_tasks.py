"""Gymnasium v5's MuJoCo locomotion tasks written over a leading env axis, for
``env.backend=warp`` (rlzoo.envs.mujoco_warp).

Each task is the ``<Task>-v5`` env of gymnasium 1.x (``gymnasium/envs/mujoco/<task>_v5.py``) with
its default arguments: the same MJCF file, frame skip, observation, reward, termination and reset
noise, computed here as torch tensors ``[E, ...]`` from MuJoCo Warp's data (which holds one world
per env). The physics quantities are read exactly where gymnasium reads them, after
``frame_skip`` calls of ``mj_step`` and one ``mj_rnePostConstraint``:

* ``qpos [E, nq]``, ``qvel [E, nv]``, ``ctrl [E, nu]`` (the action mapped onto ``ctrlrange``);
* ``xpos``/``xipos [E, nbody, 3]``, ``cinert [E, nbody, 10]``, ``cvel [E, nbody, 6]``,
  ``qfrc_actuator [E, nv]`` and ``cfrc_ext [E, nbody, 6]``. MuJoCo computes the body quantities
  at the start of the last physics step (before its integration), and gymnasium reads them so;
  Warp's ``step`` does the same.

Rewards, per env step of ``dt = timestep * frame_skip`` seconds (``x`` below is ``qpos[0]`` for
Hopper, Walker2d and HalfCheetah, the torso's ``xpos`` for Ant, the centre of mass for Humanoid):
``forward_weight * (x_after - x_before) / dt + healthy_reward * healthy - ctrl_weight * |a|^2 -
contact cost``. Termination is ``not healthy`` (HalfCheetah never terminates); truncation is at
1,000 steps (gymnasium's registered ``max_episode_steps``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import torch

__all__ = ["TASKS", "Task"]

MAX_EPISODE_STEPS = 1000  # gymnasium's registered time limit of every <Task>-v5 here


@dataclass(frozen=True)
class Task:
    """One locomotion task: gymnasium ``<Task>-v5``'s defaults (module docstring).

    Attributes:
        env_id: the gymnasium id it reproduces. xml: the MJCF file in gymnasium's mujoco assets.
        frame_skip: MuJoCo steps per env step. forward_weight, ctrl_weight, healthy_reward,
            contact_weight: the reward's weights (contact_weight 0: no contact cost).
        noise: reset noise scale; qpos gets uniform(-noise, noise), qvel the same or, where
            ``normal_qvel``, ``noise * N(0, 1)`` (HalfCheetah, Ant).
        x_of: ``"qpos"``, ``"torso"`` or ``"mass_center"``: where the forward position is read.
        observe: ``(v) -> [E, obs_dim]`` from the physics views ``v`` (module docstring).
        healthy: ``(v) -> [E]`` bool, or None (never terminates).
        contact_cost: ``(v) -> [E]``, or None.
        uses_cfrc_ext: the task reads ``cfrc_ext`` (then ``rne_postconstraint`` runs per step).
    """

    env_id: str
    xml: str
    frame_skip: int
    forward_weight: float
    ctrl_weight: float
    healthy_reward: float
    noise: float
    normal_qvel: bool
    x_of: str
    observe: Callable[[SimpleNamespace], torch.Tensor]
    healthy: Callable[[SimpleNamespace], torch.Tensor] | None
    contact_cost: Callable[[SimpleNamespace], torch.Tensor] | None = None
    uses_cfrc_ext: bool = False


def _between(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    return (x > low) & (x < high)


def _planar_obs(clip: float | None) -> Callable[[SimpleNamespace], torch.Tensor]:
    """``qpos[1:]`` and ``qvel`` (clipped to ``[-clip, clip]`` when given)."""
    def observe(v: SimpleNamespace) -> torch.Tensor:
        qvel = v.qvel if clip is None else v.qvel.clamp(-clip, clip)
        return torch.cat([v.qpos[:, 1:], qvel], 1)
    return observe


def _hopper_healthy(v: SimpleNamespace) -> torch.Tensor:
    """Hopper-v5: |qpos[2:], qvel| < 100, z = qpos[1] > 0.7, |angle = qpos[2]| < 0.2."""
    state = torch.cat([v.qpos[:, 2:], v.qvel], 1)
    return (_between(state, -100.0, 100.0).all(1) & (v.qpos[:, 1] > 0.7)
            & _between(v.qpos[:, 2], -0.2, 0.2))


def _walker_healthy(v: SimpleNamespace) -> torch.Tensor:
    """Walker2d-v5: 0.8 < z = qpos[1] < 2, -1 < angle = qpos[2] < 1."""
    return _between(v.qpos[:, 1], 0.8, 2.0) & _between(v.qpos[:, 2], -1.0, 1.0)


def _ant_obs(v: SimpleNamespace) -> torch.Tensor:
    """Ant-v5: qpos[2:], qvel, cfrc_ext[1:] clipped to [-1, 1] (105 values)."""
    E = v.qpos.shape[0]
    return torch.cat([v.qpos[:, 2:], v.qvel, v.cfrc_ext[:, 1:].clamp(-1.0, 1.0).reshape(E, -1)], 1)


def _ant_healthy(v: SimpleNamespace) -> torch.Tensor:
    """Ant-v5: every qpos, qvel finite and 0.2 <= z = qpos[2] <= 1 (both ends included)."""
    finite = torch.isfinite(v.qpos).all(1) & torch.isfinite(v.qvel).all(1)
    return finite & (v.qpos[:, 2] >= 0.2) & (v.qpos[:, 2] <= 1.0)


def _ant_contact(v: SimpleNamespace) -> torch.Tensor:
    """Ant-v5: 5e-4 * sum of the squared clipped cfrc_ext of every body."""
    return 5e-4 * v.cfrc_ext.clamp(-1.0, 1.0).square().sum((1, 2))


def _humanoid_obs(v: SimpleNamespace) -> torch.Tensor:
    """Humanoid-v5: qpos[2:], qvel, cinert[1:], cvel[1:], qfrc_actuator[6:], cfrc_ext[1:]."""
    E = v.qpos.shape[0]
    return torch.cat([v.qpos[:, 2:], v.qvel, v.cinert[:, 1:].reshape(E, -1),
                      v.cvel[:, 1:].reshape(E, -1), v.qfrc_actuator[:, 6:],
                      v.cfrc_ext[:, 1:].reshape(E, -1)], 1)


def _humanoid_contact(v: SimpleNamespace) -> torch.Tensor:
    """Humanoid-v5: 5e-7 * sum of the squared cfrc_ext, at most 10."""
    return (5e-7 * v.cfrc_ext.square().sum((1, 2))).clamp(max=10.0)


TASKS: dict[str, Task] = {
    "Hopper-v5": Task("Hopper-v5", "hopper.xml", 4, 1.0, 1e-3, 1.0, 5e-3, False, "qpos",
                      _planar_obs(10.0), _hopper_healthy),
    "Walker2d-v5": Task("Walker2d-v5", "walker2d_v5.xml", 4, 1.0, 1e-3, 1.0, 5e-3, False, "qpos",
                        _planar_obs(10.0), _walker_healthy),
    "HalfCheetah-v5": Task("HalfCheetah-v5", "half_cheetah.xml", 5, 1.0, 0.1, 0.0, 0.1, True,
                           "qpos", _planar_obs(None), None),
    "Ant-v5": Task("Ant-v5", "ant.xml", 5, 1.0, 0.5, 1.0, 0.1, True, "torso", _ant_obs,
                   _ant_healthy, _ant_contact, uses_cfrc_ext=True),
    "Humanoid-v5": Task("Humanoid-v5", "humanoid.xml", 5, 1.25, 0.1, 5.0, 1e-2, False,
                        "mass_center", _humanoid_obs,
                        lambda v: _between(v.qpos[:, 2], 1.0, 2.0), _humanoid_contact,
                        uses_cfrc_ext=True),
}
