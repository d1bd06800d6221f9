"""MPE simulated as batched torch tensors: thousands of envs in one set of tensor ops, on the GPU
or the CPU (``env.backend=batched``).

This is mpe2's particle world (``mpe2._mpe_utils.core.World.step``) and the scenarios rlzoo ships
(``simple_spread_v3``, ``simple_speaker_listener_v4``, ``simple_reference_v3``) written over a
leading env axis ``E``: positions ``[E, M, 2]`` for the ``M`` entities (agents, then landmarks),
velocities ``[E, M, 2]``, communication ``[E, N, C]``. Given the same state and actions, a step
gives mpe2's observations, rewards, global state and time limit (tests/test_mpe_batched.py
compares whole episodes against mpe2, in float64 to 1e-9 and in float32 to 1e-5). What it does
not copy is mpe2's random stream: mpe2 draws each env's resets from its own numpy generator
(``seed + e``); here one torch generator on the device draws every env's resets, so runs are
reproducible from ``seed`` but do not repeat the PettingZoo backend's episodes.

The physics, as mpe2 (and the original MPE of Lowe et al., 2017, github.com/openai/multiagent-
particle-envs) computes it, per step of ``dt = 0.1``:

* an agent's force is its move action: ``u = 5 * (a[2] - a[1], a[4] - a[3])`` from its
  ``Box(0, 1)`` action; pairs of colliding entities push each other with
  ``100 * delta / |delta| * softplus(-(|delta| - r_a - r_b) / 1e-3) * 1e-3``;
* ``pos += vel * dt``; ``vel = vel * (1 - 0.25) + force / mass * dt`` (mass 1);
* a speaking agent's communication state is its comm action; a silent one's is 0.

The vector-env contract is :class:`rlzoo.envs.base.VecEnv`'s (actions ``[E, N, act_dim]`` in
``[-1, 1]``, padded agents, team reward = mean over agents, next-step autoreset); :meth:`step`
returns numpy arrays like every other backend. The trainer steps it with :meth:`step_device`
(``rlzoo.envs.tensor_env``): the observations and the global state stay float32 tensors on the
env's device; :meth:`step_tensors` gives the whole step as tensors there, with no host sync.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlzoo.envs.tensor_env import TensorStep, TensorVecEnv

__all__ = ["BatchedMPE", "SCENARIOS", "TensorStep"]

DT = 0.1  # seconds per step (mpe2 World.dt)
DAMPING = 0.25  # velocity damping per step (World.damping)
CONTACT_FORCE = 1e2  # World.contact_force
CONTACT_MARGIN = 1e-3  # World.contact_margin (softplus width of the penetration)
SENSITIVITY = 5.0  # move action -> force (SimpleEnv._set_action, agent.accel None)


@dataclass(frozen=True)
class _Scenario:
    """The fixed properties of one mpe2 scenario (``n_agents`` agents, then the landmarks)."""

    n_agents: int
    n_landmarks: int
    dim_c: int  # communication channels
    sizes: tuple[float, ...]  # radius of every entity, agents first
    movable: tuple[bool, ...]  # agents only (landmarks never move)
    silent: tuple[bool, ...]  # agents only
    collide: tuple[bool, ...]  # every entity
    landmark_colors: tuple[tuple[float, float, float], ...]
    uses_local_ratio: bool  # the scenario's reward mixes global and local with local_ratio


def _spread() -> _Scenario:
    return _Scenario(
        n_agents=3, n_landmarks=3, dim_c=2, sizes=(0.15,) * 3 + (0.05,) * 3,
        movable=(True,) * 3, silent=(True,) * 3, collide=(True,) * 3 + (False,) * 3,
        landmark_colors=((0.25, 0.25, 0.25),) * 3, uses_local_ratio=True,
    )


def _speaker_listener() -> _Scenario:
    return _Scenario(
        n_agents=2, n_landmarks=3, dim_c=3, sizes=(0.075, 0.075, 0.04, 0.04, 0.04),
        movable=(False, True), silent=(False, True), collide=(False,) * 5,
        landmark_colors=((0.65, 0.15, 0.15), (0.15, 0.65, 0.15), (0.15, 0.15, 0.65)),
        uses_local_ratio=False,
    )


def _reference() -> _Scenario:
    return _Scenario(
        n_agents=2, n_landmarks=3, dim_c=10, sizes=(0.05,) * 5,
        movable=(True, True), silent=(False, False), collide=(False,) * 5,
        landmark_colors=((0.75, 0.25, 0.25), (0.25, 0.75, 0.25), (0.25, 0.25, 0.75)),
        uses_local_ratio=True,
    )


SCENARIOS = {
    "simple_spread_v3": _spread,
    "simple_speaker_listener_v4": _speaker_listener,
    "simple_reference_v3": _reference,
}


class BatchedMPE(TensorVecEnv):
    """``num_envs`` copies of an mpe2 scenario stepped together as tensors (module docstring).

    Args:
        scenario: ``simple_spread_v3``, ``simple_speaker_listener_v4`` or ``simple_reference_v3``.
        num_envs: E.
        seed: the generator's seed at the first :meth:`reset` (``reset(seed=s)`` re-seeds).
        max_cycles: steps per episode (mpe2's ``max_cycles``, default 25).
        local_ratio: weight of each agent's own reward against the shared one (spread and
            reference; mpe2's default 0.5); refused for speaker_listener, which has none.
        device: where the tensors live (default CPU).
        dtype: ``torch.float32`` (default) or ``torch.float64`` (mpe2 computes in float64).
        N: agents (and landmarks) of simple_spread; only 3 is built here.
    """

    def __init__(self, scenario: str, num_envs: int = 1, seed: int = 0, max_cycles: int = 25,
                 local_ratio: float | None = None, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, N: int = 3,
                 continuous_actions: bool = True) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"env.backend=batched has no mpe scenario {scenario!r}; it has "
                             f"{', '.join(SCENARIOS)} (use env.backend=pettingzoo for the rest)")
        if continuous_actions is not True:
            raise ValueError("mpe: only continuous_actions=True is supported (Box(0, 1) actions)")
        if int(N) != 3:
            raise ValueError(f"env.backend=batched builds simple_spread with N=3 only, got N={N}")
        if int(num_envs) < 1 or int(max_cycles) < 1:
            raise ValueError(f"num_envs and max_cycles must be >= 1, got {num_envs}, {max_cycles}")
        spec = SCENARIOS[scenario]()
        if local_ratio is not None and not spec.uses_local_ratio:
            raise ValueError(f"{scenario} has no local_ratio (its reward is shared)")
        if spec.uses_local_ratio and local_ratio is None:
            local_ratio = 0.5
        if local_ratio is not None and not 0.0 <= float(local_ratio) <= 1.0:
            raise ValueError(f"local_ratio must be in [0, 1], got {local_ratio}")
        self.family, self.scenario, self.spec = "mpe", scenario, spec
        self.device, self.dtype = torch.device(device), dtype
        self.max_cycles, self.local_ratio = int(max_cycles), local_ratio
        self.max_episode_steps = self.max_cycles
        self._start(int(num_envs), seed)
        self.generator = torch.Generator(device=self.device)
        n, m = spec.n_agents, spec.n_agents + spec.n_landmarks
        self.n_agents, self._m = n, m
        self.agent_ids = self._agent_names()
        self.act_dims = [5 * mv + spec.dim_c * (not sl)
                         for mv, sl in zip(spec.movable, spec.silent, strict=True)]
        self.obs_dims = self._obs_dims()
        self.obs_dim, self.act_dim = max(self.obs_dims), max(self.act_dims)
        self.state_dim = sum(self.obs_dims)
        self.obs_shape, self.act_shape = (n, self.obs_dim), (n, self.act_dim)
        self.obs_mask = np.arange(self.obs_dim)[None] < np.array(self.obs_dims)[:, None]
        self.act_mask = np.arange(self.act_dim)[None] < np.array(self.act_dims)[:, None]
        self.action_low = np.zeros((n, self.act_dim))
        self.action_high = self.act_mask.astype(np.float64)
        self._act_mask = torch.as_tensor(self.act_mask, device=self.device)
        # columns of the flattened [N * obs_dim] observation that make the global state (each
        # agent's real entries, in agent order: mpe2's state())
        self._state_cols = torch.as_tensor(np.flatnonzero(self.obs_mask.reshape(-1)),
                                           device=self.device)
        t = dict(device=self.device, dtype=dtype)
        self._size = torch.tensor(spec.sizes, **t)
        self._movable = torch.tensor(list(spec.movable) + [False] * spec.n_landmarks,
                                     device=self.device)
        self._collide = torch.tensor(spec.collide, device=self.device)
        self._any_collide = any(spec.collide)  # a Python bool: no device read per step
        self._agent_movable = torch.tensor(spec.movable, device=self.device)
        self._silent = torch.tensor(spec.silent, device=self.device)
        start = torch.tensor([5 if mv else 0 for mv in spec.movable], device=self.device)
        comm_idx = start[:, None] + torch.arange(spec.dim_c, device=self.device)[None]
        self._comm_idx = comm_idx.clamp(max=max(self.act_dims) - 1)  # [N, C] action columns
        self._colors = torch.tensor(spec.landmark_colors, **t)
        E = self.num_envs
        self.pos = torch.zeros(E, m, 2, **t)
        self.vel = torch.zeros(E, m, 2, **t)
        self.comm = torch.zeros(E, n, spec.dim_c, **t)
        self.goal = torch.zeros(E, n, dtype=torch.long, device=self.device)  # landmark per agent
        self.steps = torch.zeros(E, dtype=torch.long, device=self.device)
        self._pending = torch.ones(E, dtype=torch.bool, device=self.device)

    # ------------------------------------------------------------------ the contract
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Reset every env (the generator seeded with ``seed``, or the constructor's at the
        first reset); returns ``obs [E, N, obs_dim]`` and ``state [E, S]`` as numpy float32."""
        if seed is None and not self._seeded:
            seed = self._seed
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self._reset_envs(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self._seeded = True
        self._needs_reset[:] = False
        obs = self._observe()
        return self._np(obs), self._np(obs.reshape(self.num_envs, -1)[:, self._state_cols])

    def step_tensors(self, action: torch.Tensor, active: torch.Tensor | None = None) -> TensorStep:
        """Step every env (or those where ``active [E]``) with ``action [E, N, act_dim]`` in
        ``[-1, 1]`` on the env's device; next-step autoreset as :class:`VecEnv`. No host sync."""
        live, resetting, stepping = self._tensor_masks(action, active, self._pending)
        E = self.num_envs
        box = (action.to(self.dtype).clamp(-1.0, 1.0) + 1.0) * 0.5  # [-1, 1] -> Box(0, 1)
        box = torch.where(self._act_mask, box, 0.0)
        before = (self.pos, self.vel, self.comm)
        self._world_step(box)  # new tensors: the worlds not stepped keep theirs
        kept = [torch.where(stepping[:, None, None], new, old) for new, old in
                zip((self.pos, self.vel, self.comm), before, strict=True)]
        self.pos, self.vel, self.comm = kept
        self.steps = torch.where(stepping, self.steps + 1, self.steps)
        agent_reward = torch.where(stepping[:, None], self._rewards(), 0.0)
        truncated = stepping & (self.steps >= self.max_cycles)
        self._reset_envs(resetting)
        self._pending = torch.where(live, truncated, self._pending)
        obs = self._observe()
        zeros = torch.zeros(E, dtype=torch.bool, device=self.device)
        return TensorStep(obs, obs.reshape(E, -1)[:, self._state_cols], agent_reward.mean(1),
                          agent_reward, zeros, truncated, resetting)

    def get_state(self) -> dict[str, Any]:
        """The world, counters and generator, as numpy arrays and plain data."""
        return {
            "family": self.family, "scenario": self.scenario, "num_envs": self.num_envs,
            "seed": self._seed, "seeded": self._seeded, "backend": "batched",
            "tensors": {k: getattr(self, k).cpu().numpy().copy()
                        for k in ("pos", "vel", "comm", "goal", "steps", "_pending")},
            "generator": self.generator.get_state().numpy().copy(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`get_state` was taken (arrays may come back as
        tensors); a state of another scenario, size or backend is refused."""
        for key in ("family", "scenario", "num_envs"):
            if state.get(key) != getattr(self, key):
                raise ValueError(f"set_state: saved {key} {state.get(key)!r} != this env's "
                                 f"{getattr(self, key)!r}")
        if state.get("backend") != "batched":
            raise ValueError("set_state: the saved env state is not env.backend=batched's")
        for key, value in state["tensors"].items():
            old = getattr(self, key)
            new = torch.as_tensor(np.asarray(value)).to(device=self.device, dtype=old.dtype)
            if new.shape != old.shape:
                raise ValueError(f"set_state: {key} has shape {tuple(new.shape)}, expected "
                                 f"{tuple(old.shape)}")
            setattr(self, key, new.clone())
        self.generator.set_state(torch.as_tensor(np.asarray(state["generator"]),
                                                 dtype=torch.uint8).cpu())
        self._seed, self._seeded = int(state["seed"]), bool(state["seeded"])
        self._needs_reset = self._pending.cpu().numpy().copy()

    def render_env(self, e: int = 0) -> Any:
        raise NotImplementedError("env.backend=batched does not render; use the pettingzoo one")

    def close(self) -> None:
        """Nothing to release (tensors are freed with the object)."""

    # ------------------------------------------------------------------ mpe2, over [E, ...]
    def _reset_envs(self, mask: torch.Tensor) -> None:
        """Fresh episodes where ``mask [E]``: uniform(-1, 1) positions, zero velocity and
        communication, a goal landmark per agent; draws for every env, keeps the masked ones
        (so the stream does not depend on which envs ended)."""
        E, m, n = self.num_envs, self._m, self.n_agents
        g, t = self.generator, dict(device=self.device, dtype=self.dtype)
        pos = torch.rand(E, m, 2, generator=g, **t) * 2.0 - 1.0
        goal = torch.randint(self.spec.n_landmarks, (E, n), generator=g, device=self.device)
        self.pos = torch.where(mask[:, None, None], pos, self.pos)
        self.vel = torch.where(mask[:, None, None], 0.0, self.vel)
        self.comm = torch.where(mask[:, None, None], 0.0, self.comm)
        self.goal = torch.where(mask[:, None], goal, self.goal)
        self.steps = torch.where(mask, 0, self.steps)
        self._pending = self._pending & ~mask

    def _world_step(self, box: torch.Tensor) -> None:
        """``World.step`` with the agents' actions ``box [E, N, act_dim]`` in Box(0, 1)."""
        n = self.n_agents
        u = torch.stack([box[..., 2] - box[..., 1], box[..., 4] - box[..., 3]], -1) * SENSITIVITY
        force = torch.zeros_like(self.pos)
        force[:, :n] = torch.where(self._agent_movable[:, None], u, 0.0)
        force = force + self._contact_forces()
        moving = self._movable[None, :, None]
        new_pos = self.pos + self.vel * DT
        new_vel = self.vel * (1 - DAMPING) + force * DT  # mass 1
        self.pos = torch.where(moving, new_pos, self.pos)
        self.vel = torch.where(moving, new_vel, self.vel)
        said = torch.gather(box, 2, self._comm_idx.expand(box.shape[0], n, -1))
        self.comm = torch.where(self._silent[None, :, None], 0.0, said)

    def _contact_forces(self) -> torch.Tensor:
        """``[E, M, 2]``: the summed pairwise soft contact forces between colliding entities."""
        if not self._any_collide:
            return torch.zeros_like(self.pos)
        delta = self.pos[:, :, None] - self.pos[:, None]  # [E, M, M, 2], a minus b
        dist = delta.pow(2).sum(-1).sqrt()
        dist_min = self._size[:, None] + self._size[None]
        pen = torch.logaddexp(torch.zeros_like(dist), -(dist - dist_min) / CONTACT_MARGIN)
        pen = pen * CONTACT_MARGIN
        pair = self._collide[:, None] & self._collide[None] & ~torch.eye(
            self._m, dtype=torch.bool, device=self.device)
        f = CONTACT_FORCE * delta / dist.clamp_min(1e-30)[..., None] * pen[..., None]
        f = torch.where(pair[None, :, :, None], f, 0.0)
        return f.sum(2) * self._movable[None, :, None]

    def _dist(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a - b).pow(2).sum(-1).sqrt()

    def _rewards(self) -> torch.Tensor:
        """``[E, N]`` each agent's reward after a step, as the scenario computes it."""
        n, E = self.n_agents, self.num_envs
        agents, landmarks = self.pos[:, :n], self.pos[:, n:]
        if self.scenario == "simple_spread_v3":
            d = self._dist(agents[:, :, None], landmarks[:, None])  # [E, N, L]
            shared = -d.min(1).values.sum(-1)  # [E]
            pair = self._dist(agents[:, :, None], agents[:, None])  # [E, N, N]
            hit = pair < (self._size[:n, None] + self._size[None, :n])
            hit = hit & ~torch.eye(n, dtype=torch.bool, device=self.device)
            own = -hit.to(self.dtype).sum(-1)
        elif self.scenario == "simple_speaker_listener_v4":
            goal = landmarks[torch.arange(E, device=self.device), self.goal[:, 0]]
            r = -(agents[:, 1] - goal).pow(2).sum(-1)
            return r[:, None].expand(E, n).clone()
        else:  # simple_reference_v3: agent i wants the other agent at its goal landmark
            goal = torch.gather(landmarks, 1, self.goal[..., None].expand(E, n, 2))  # [E, N, 2]
            own = -self._dist(agents.flip(1), goal)
            shared = own.sum(-1) / n
        lr = float(self.local_ratio)  # type: ignore[arg-type]
        return shared[:, None] * (1 - lr) + own * lr

    def _observe(self) -> torch.Tensor:
        """``[E, N, obs_dim]`` float32, each agent's observation zero-padded."""
        n, E = self.n_agents, self.num_envs
        vel, pos = self.vel[:, :n], self.pos[:, :n]
        rel_lm = self.pos[:, None, n:] - pos[:, :, None]  # [E, N, L, 2]
        parts: list[list[torch.Tensor]] = []
        if self.scenario == "simple_spread_v3":
            for i in range(n):
                others = [j for j in range(n) if j != i]
                parts.append([vel[:, i], pos[:, i], rel_lm[:, i].reshape(E, -1),
                              (pos[:, others] - pos[:, i:i + 1]).reshape(E, -1),
                              self.comm[:, others].reshape(E, -1)])
        elif self.scenario == "simple_speaker_listener_v4":
            parts.append([self._colors[self.goal[:, 0]]])
            parts.append([vel[:, 1], rel_lm[:, 1].reshape(E, -1), self.comm[:, 0]])
        else:
            for i in range(n):
                parts.append([vel[:, i], rel_lm[:, i].reshape(E, -1),
                              self._colors[self.goal[:, i]], self.comm[:, 1 - i]])
        obs = torch.zeros(E, n, self.obs_dim, device=self.device, dtype=torch.float32)
        for i, p in enumerate(parts):
            row = torch.cat(p, -1).to(torch.float32)
            obs[:, i, : row.shape[-1]] = row
        return obs

    # ------------------------------------------------------------------ helpers
    def _agent_names(self) -> list[str]:
        if self.scenario == "simple_speaker_listener_v4":
            return ["speaker_0", "listener_0"]
        return [f"agent_{i}" for i in range(self.n_agents)]

    def _obs_dims(self) -> list[int]:
        L, C, n = self.spec.n_landmarks, self.spec.dim_c, self.n_agents
        if self.scenario == "simple_spread_v3":
            return [4 + 2 * L + 2 * (n - 1) + C * (n - 1)] * n
        if self.scenario == "simple_speaker_listener_v4":
            return [3, 2 + 2 * L + C]
        return [2 + 2 * L + 3 + C] * n

    @staticmethod
    def _np(x: torch.Tensor) -> np.ndarray:
        return x.detach().cpu().numpy().astype(np.float32, copy=False)
