"""MuJoCo locomotion on MuJoCo Warp: ``num_envs`` worlds stepped together as tensors on the device
(``env.backend=warp``; ``pip install rlzoo[warp]``).

MuJoCo Warp (github.com/google-deepmind/mujoco_warp, the ``mujoco-warp`` package) is MuJoCo's
pipeline written in NVIDIA Warp: one model, ``E`` worlds, every kernel over all of them, on a GPU
or on Warp's CPU device. Its arrays are shared with torch (``wp.to_torch``, no copy), so the
observations, rewards and flags of :meth:`WarpMuJoCo.step_tensors` are computed and stay on the
env's device. What each task computes is in ``rlzoo.envs.mujoco_warp_tasks`` (gymnasium v5's
definitions); the model is gymnasium's own MJCF file.

How it differs from gymnasium's ``<Task>-v5`` (docs/mujoco_warp.md measures it):

* Warp computes in float32, MuJoCo in float64: one step from the same state agrees to float32
  rounding, and whole episodes of the chaotic tasks drift apart as any two float precisions do.
* Humanoid's MJCF asks for MuJoCo's PGS solver, which Warp lacks; Warp solves its (convex, same)
  constraint problem with Newton instead.
* Reset noise comes from one torch generator on the device (uniform or normal as gymnasium
  draws it), not from each env's numpy generator: reproducible from ``seed``, not gymnasium's
  episodes.

The vector-env contract is :class:`rlzoo.envs.base.VecEnv`'s (actions ``[E, A]`` in ``[-1, 1]``,
mapped affinely onto the actuators' ``ctrlrange``; next-step autoreset); :meth:`step` speaks numpy,
:meth:`step_tensors` tensors.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rlzoo.envs.base import StepResult, VecEnv
from rlzoo.envs.mujoco_warp_tasks import MAX_EPISODE_STEPS, TASKS, Task

__all__ = ["WarpMuJoCo", "WarpStep", "check_warp_installed"]

EXTRA = "pip install rlzoo[warp]"  # what installs mujoco-warp and warp-lang
_STATE = ("qpos", "qvel", "qacc_warmstart", "time")  # what a step carries over in MuJoCo


def check_warp_installed() -> None:
    """Raise ``ImportError`` in one line naming the extra when ``mujoco_warp`` is missing."""
    if importlib.util.find_spec("mujoco_warp") is None or importlib.util.find_spec("warp") is None:
        raise ImportError(f"env.backend=warp needs MuJoCo Warp: {EXTRA}")


@dataclass
class WarpStep:
    """One vector step as tensors on the env's device.

    Attributes:
        obs: ``[E, obs_dim]`` float32. reward: ``[E]`` float32 (0 where not stepped).
        terminated, truncated, reset_step: ``[E]`` bool (as :class:`StepResult`'s).
    """

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    reset_step: torch.Tensor


class WarpMuJoCo(VecEnv):
    """``num_envs`` worlds of a gymnasium v5 locomotion task on MuJoCo Warp (module docstring).

    Args:
        env_id: ``Hopper-v5``, ``Walker2d-v5``, ``HalfCheetah-v5``, ``Ant-v5`` or ``Humanoid-v5``.
        num_envs: E (Warp's ``nworld``).
        seed: the reset generator's seed at the first :meth:`reset`.
        device: torch/Warp device, ``cpu`` (Warp's CPU device, default) or ``cuda[:i]``.
        max_episode_steps: truncation (default 1,000, gymnasium's).
        nconmax, njmax: contacts and constraint rows allocated per world (default: Warp's
            guess from the model, enough for these tasks).
    """

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0,
                 device: str | torch.device = "cpu", max_episode_steps: int = MAX_EPISODE_STEPS,
                 nconmax: int | None = None, njmax: int | None = None) -> None:
        check_warp_installed()
        if env_id not in TASKS:
            raise ValueError(f"env.backend=warp has no task {env_id!r}; it has "
                             f"{', '.join(TASKS)}")
        if int(num_envs) < 1 or int(max_episode_steps) < 1:
            raise ValueError(f"num_envs and max_episode_steps must be >= 1, got {num_envs}, "
                             f"{max_episode_steps}")
        import mujoco
        import warp as wp
        wp.config.quiet = True  # no banner
        wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no line per kernel load
        import mujoco_warp as mjw

        self._wp, self._mjw = wp, mjw
        self.task: Task = TASKS[env_id]
        self.env_id, self.family = env_id, "warp"
        self.device = torch.device(device)
        self._wp_device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        self.max_episode_steps = int(max_episode_steps)
        self._start(int(num_envs), seed)
        mjm = mujoco.MjModel.from_xml_path(_asset(self.task.xml))
        if mjm.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
            mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON  # Warp has CG and Newton only
        self._mjm = mjm
        with wp.ScopedDevice(self._wp_device):
            self._m = mjw.put_model(mjm)
            self._d = mjw.make_data(mjm, nworld=self.num_envs, nconmax=nconmax, njmax=njmax)
        self.dt = float(mjm.opt.timestep) * self.task.frame_skip
        self.v = SimpleNamespace(**{k: wp.to_torch(getattr(self._d, k)) for k in (
            "qpos", "qvel", "ctrl", "xpos", "xipos", "cinert", "cvel", "qfrc_actuator",
            "cfrc_ext", "qacc_warmstart", "time")})
        t = dict(device=self.device, dtype=torch.float32)
        self._low = torch.tensor(mjm.actuator_ctrlrange[:, 0], **t)
        self._high = torch.tensor(mjm.actuator_ctrlrange[:, 1], **t)
        self._qpos0 = torch.tensor(mjm.qpos0, **t)
        self._mass = torch.tensor(mjm.body_mass, **t)
        self.obs_dim, self.act_dim = int(self.task.observe(self.v).shape[1]), int(mjm.nu)
        self.obs_shape, self.act_shape = (self.obs_dim,), (self.act_dim,)
        self.act_mask = np.ones(self.act_shape, dtype=bool)
        self.action_low = mjm.actuator_ctrlrange[:, 0].astype(np.float64)
        self.action_high = mjm.actuator_ctrlrange[:, 1].astype(np.float64)
        self.generator = torch.Generator(device=self.device)
        E = self.num_envs
        self.steps = torch.zeros(E, dtype=torch.long, device=self.device)
        self._pending = torch.ones(E, dtype=torch.bool, device=self.device)
        self._x_before = torch.zeros(E, **t)  # the forward position the next step starts from
        self._graph: Any = None

    keeps_tensors = True  # the trainer steps it with step_device (rlzoo.run.collect)

    # ------------------------------------------------------------------ the contract
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, None]:
        """Reset every world (the generator seeded with ``seed``, or the constructor's at the
        first reset); returns ``obs [E, obs_dim]`` float32 numpy and None (no global state)."""
        if seed is None and not self._seeded:
            seed = self._seed
        if seed is not None:
            self.generator.manual_seed(int(seed))
        obs = self._reset_envs(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self._seeded = True
        self._needs_reset[:] = False
        return _np(obs), None

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> StepResult:
        """:meth:`step_tensors` with numpy in and out (the contract every backend speaks)."""
        result = self.step_device(action, active)
        result.obs = _np(result.obs)  # type: ignore[arg-type]
        return result

    def step_device(self, action: np.ndarray | torch.Tensor,
                    active: np.ndarray | None = None) -> StepResult:
        """:meth:`step` with the observations left where the worlds are: ``obs`` is a float32
        tensor ``[E, obs_dim]`` on the env's device (the trainer's data path: to the policy and
        the replay without a host copy); rewards ``[E]`` and flags come back as numpy, as
        :meth:`step`'s (the loop's counters, episode returns and normalizers read them)."""
        a = torch.as_tensor(action if torch.is_tensor(action)
                            else np.asarray(action, dtype=np.float32), device=self.device)
        act = None if active is None else torch.as_tensor(np.asarray(active), device=self.device)
        s = self.step_tensors(a, act)
        self._needs_reset = self._pending.cpu().numpy().copy()
        return StepResult(s.obs.detach(), _np(s.reward), s.terminated.cpu().numpy(),
                          s.truncated.cpu().numpy(), s.reset_step.cpu().numpy())

    def step_tensors(self, action: torch.Tensor, active: torch.Tensor | None = None) -> WarpStep:
        """Step every world (or those where ``active [E]``) with ``action [E, act_dim]`` in
        ``[-1, 1]`` on the env's device; next-step autoreset as :class:`VecEnv`. Reads back to
        the host only on the CPU (whether any world resets); on a GPU it never syncs."""
        live, resetting, stepping = self._tensor_masks(action, active, self._pending)
        E, v, task = self.num_envs, self.v, self.task
        a = action.to(device=self.device, dtype=torch.float32).clamp(-1.0, 1.0)
        v.ctrl.copy_(self._low + (a + 1.0) * 0.5 * (self._high - self._low))
        held = None if active is None else [getattr(v, k).clone() for k in _STATE]
        self._physics()
        if held is not None:  # worlds not stepped keep their state
            for k, old in zip(_STATE, held, strict=True):
                new = getattr(v, k)
                new.copy_(torch.where(stepping.view(-1, *[1] * (new.dim() - 1)), new, old))
        x_after = self._x()
        reward = task.forward_weight * (x_after - self._x_before) / self.dt
        reward = reward - task.ctrl_weight * v.ctrl.square().sum(1)
        terminated = torch.zeros(E, dtype=torch.bool, device=self.device)
        if task.healthy is not None:
            healthy = task.healthy(v)
            reward = reward + task.healthy_reward * healthy.float()
            terminated = ~healthy
        if task.contact_cost is not None:
            reward = reward - task.contact_cost(v)
        obs = task.observe(v).float()
        self._x_before = torch.where(stepping, x_after, self._x_before)
        self.steps = torch.where(stepping, self.steps + 1, self.steps)
        terminated = stepping & terminated
        truncated = stepping & ~terminated & (self.steps >= self.max_episode_steps)
        reward = torch.where(stepping, reward, 0.0)
        if self.device.type != "cpu" or bool(resetting.any()):
            obs = torch.where(resetting[:, None], self._reset_envs(resetting), obs)
        self._pending = torch.where(live, terminated | truncated, self._pending)
        return WarpStep(obs, reward, terminated, truncated, resetting)

    def set_physics(self, qpos: torch.Tensor, qvel: torch.Tensor,
                    qacc_warmstart: torch.Tensor | None = None) -> torch.Tensor:
        """Put every world in the state ``qpos [E, nq]``, ``qvel [E, nv]`` (and the solver's
        warm start ``[E, nv]``, default kept) as gymnasium's ``set_state`` does (then
        ``mj_forward``); the next step starts from there. Returns the observation ``[E, O]``
        (``cfrc_ext`` 0, as after gymnasium's reset). For comparing with gymnasium."""
        v = self.v
        v.qpos.copy_(torch.as_tensor(qpos, dtype=torch.float32))
        v.qvel.copy_(torch.as_tensor(qvel, dtype=torch.float32))
        if qacc_warmstart is not None:
            v.qacc_warmstart.copy_(torch.as_tensor(qacc_warmstart, dtype=torch.float32))
        with self._on_device():
            self._mjw.forward(self._m, self._d)
        v.cfrc_ext.zero_()
        self._x_before = self._x()
        self._pending[:] = False
        self._seeded = True
        self._needs_reset[:] = False
        return self.task.observe(v).float()

    def get_state(self) -> dict[str, Any]:
        """The worlds' MuJoCo state, counters and generator, as numpy arrays and plain data."""
        tensors = {k: getattr(self.v, k).cpu().numpy().copy() for k in _STATE}
        tensors.update({k: getattr(self, k).cpu().numpy().copy()
                        for k in ("steps", "_pending", "_x_before")})
        return {"family": self.family, "env_id": self.env_id, "num_envs": self.num_envs,
                "seed": self._seed, "seeded": self._seeded, "backend": "warp",
                "tensors": tensors, "generator": self.generator.get_state().numpy().copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`get_state` was taken (arrays may come back as
        tensors); a state of another task, size or backend is refused."""
        for key in ("family", "env_id", "num_envs"):
            if state.get(key) != getattr(self, key):
                raise ValueError(f"set_state: saved {key} {state.get(key)!r} != this env's "
                                 f"{getattr(self, key)!r}")
        if state.get("backend") != "warp":
            raise ValueError("set_state: the saved env state is not env.backend=warp's")
        for key, value in state["tensors"].items():
            on_warp = key in _STATE
            old = getattr(self.v if on_warp else self, key)
            new = torch.as_tensor(np.asarray(value)).to(device=self.device, dtype=old.dtype)
            if new.shape != old.shape:
                raise ValueError(f"set_state: {key} has shape {tuple(new.shape)}, expected "
                                 f"{tuple(old.shape)}")
            if on_warp:
                old.copy_(new)  # Warp's memory, shared with the view
            else:
                setattr(self, key, new.clone())
        self.generator.set_state(torch.as_tensor(np.asarray(state["generator"]),
                                                 dtype=torch.uint8).cpu())
        self._seed, self._seeded = int(state["seed"]), bool(state["seeded"])
        self._needs_reset = self._pending.cpu().numpy().copy()

    def render_env(self, e: int = 0) -> Any:
        raise NotImplementedError("env.backend=warp does not render; film with the gymnasium "
                                  "backend (leave env.backend unset)")

    def close(self) -> None:
        """Nothing to release (Warp frees its arrays with the object)."""

    # ------------------------------------------------------------------ the worlds
    def _physics(self) -> None:
        """``frame_skip`` MuJoCo steps of every world, then ``rne_postconstraint`` where the task
        reads ``cfrc_ext`` (gymnasium's ``do_simulation``). On a GPU, one CUDA graph."""
        wp = self._wp
        with self._on_device():
            if self.device.type == "cuda":
                if self._graph is None:
                    with wp.ScopedCapture() as capture:
                        self._substeps()
                    self._graph = capture.graph
                wp.capture_launch(self._graph)
            else:
                self._substeps()

    @contextlib.contextmanager
    def _on_device(self) -> Iterator[None]:
        """Warp calls on the env's device and, on a GPU, on torch's current stream (so that
        torch's reads and writes of the shared arrays are ordered with Warp's kernels)."""
        wp = self._wp
        with wp.ScopedDevice(self._wp_device):
            if self.device.type != "cuda":
                yield
                return
            with wp.ScopedStream(wp.stream_from_torch(torch.cuda.current_stream(self.device))):
                yield

    def _substeps(self) -> None:
        for _ in range(self.task.frame_skip):
            self._mjw.step(self._m, self._d)
        if self.task.uses_cfrc_ext:
            self._mjw.rne_postconstraint(self._m, self._d)

    def _x(self) -> torch.Tensor:
        """``[E]`` the forward (x) position the task's reward differentiates."""
        v = self.v
        if self.task.x_of == "qpos":
            return v.qpos[:, 0].clone()
        if self.task.x_of == "torso":
            return v.xpos[:, 1, 0].clone()
        return (self._mass * v.xipos[..., 0]).sum(1) / self._mass.sum()

    def _reset_envs(self, mask: torch.Tensor) -> torch.Tensor:
        """Fresh episodes where ``mask [E]`` (gymnasium's ``reset_model``: ``qpos0`` plus
        uniform noise, ``qvel`` uniform or normal noise, then ``mj_forward``); draws for every
        world, keeps the masked ones. Returns the observation of every world ``[E, O]``."""
        task, v, g = self.task, self.v, self.generator
        E, nq, nv = self.num_envs, self._mjm.nq, self._mjm.nv
        t = dict(device=self.device, dtype=torch.float32, generator=g)
        qpos = self._qpos0 + (torch.rand(E, nq, **t) * 2.0 - 1.0) * task.noise
        if task.normal_qvel:
            qvel = torch.randn(E, nv, **t) * task.noise
        else:
            qvel = (torch.rand(E, nv, **t) * 2.0 - 1.0) * task.noise
        with self._on_device():
            self._mjw.reset_data(self._m, self._d, self._wp.from_torch(mask))
        v.qpos.copy_(torch.where(mask[:, None], qpos, v.qpos))
        v.qvel.copy_(torch.where(mask[:, None], qvel, v.qvel))
        with self._on_device():
            self._mjw.forward(self._m, self._d)
        v.cfrc_ext.copy_(torch.where(mask[:, None, None], 0.0, v.cfrc_ext))
        self._x_before = torch.where(mask, self._x(), self._x_before)
        self.steps = torch.where(mask, 0, self.steps)
        self._pending = self._pending & ~mask
        return self.task.observe(v).float()


def _asset(xml: str) -> str:
    """The path of gymnasium's MJCF file ``xml`` (gymnasium/envs/mujoco/assets)."""
    import gymnasium.envs.mujoco as gm
    return os.path.join(os.path.dirname(gm.__file__), "assets", xml)


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy().astype(np.float32, copy=False)
