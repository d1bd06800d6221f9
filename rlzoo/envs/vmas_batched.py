"""VMAS scenarios as one vector env: ``num_envs`` worlds stepped together as torch tensors on the
CPU or a CUDA device (``env=vmas/<scenario>``; ``pip install 'rlzoo[vmas]'``).

VMAS (Bettini et al. 2022, "VMAS: A Vectorized Multi-Agent Simulator for Collective Robot
Learning", https://arxiv.org/abs/2207.03530; github.com/proroklab/VectorizedMultiAgentSimulator)
simulates every env of a scenario as a row of the same tensors. This adapter speaks the vector-env
contract of :class:`rlzoo.envs.base.VecEnv` over it, as ``rlzoo.envs.mpe_batched`` does for MPE:

* **Actions** ``[E, N, act_dim]`` in ``[-1, 1]`` are mapped affinely onto each agent's own Box
  (VMAS's ``[-u_range, u_range]`` per action entry: 1 in most scenarios, 0.5 in give_way; agents'
  sizes may differ and are padded).
* **Observations** ``[E, N, obs_dim]``, each agent's zero-padded; the **global state** for
  centralized critics is the agents' real observation entries concatenated ``[E, S]`` (VMAS has no
  global state; BenchMARL's critics take the same concatenation).
* **Rewards**: each agent's ``[E, N]``; the team reward ``[E]`` is their mean.
* **Episode ends**: the scenario's ``done()`` is a termination (no bootstrap); reaching
  ``max_steps`` is a truncation (rlzoo bootstraps there). BenchMARL's TorchRL VMAS wrapper
  reports the ``max_steps`` end as terminated instead. Next-step autoreset as every backend.
* **Seeding.** VMAS keeps one random state for all its envs in a process (``Environment.
  vmas_random_state``: torch's CPU, numpy's and Python's generators); this adapter gives each
  vector env a state of its own (plus the CUDA generator's on a GPU) and swaps it in around every
  call into VMAS, so a training env, its evaluation env and a seed group's envs draw independent,
  reproducible streams, and the caller's global generators are left as they were.
* **Resume**: :meth:`get_state` saves every tensor and number of the VMAS env's objects (world,
  entities, scenario) and the random state; :meth:`set_state` copies them back in place.

:meth:`step` returns numpy arrays like every backend. The trainer steps it with :meth:`step_device`
(``rlzoo.envs.tensor_env``): the observations and the global state stay float32 tensors on the
env's device, into the policy, the normalizers and the replay; the rewards and flags come back as
numpy in one copy. :meth:`step_tensors` gives the whole step as tensors on the device.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from rlzoo.envs.tensor_env import TensorStep, TensorVecEnv
from rlzoo.envs.vmas_state import get_vmas_state, set_vmas_state

__all__ = ["VMAS_OWN_KWARGS", "VmasVecEnv"]

# make_env arguments rlzoo sets itself (refused in env.kwargs)
VMAS_OWN_KWARGS = ("num_envs", "device", "continuous_actions", "wrapper", "seed", "dict_spaces",
                   "multidiscrete_actions", "clamp_actions", "grad_enabled",
                   "terminated_truncated", "wrapper_kwargs")


class VmasVecEnv(TensorVecEnv):
    """``num_envs`` worlds of one VMAS scenario (module docstring).

    Args:
        scenario: a name in ``vmas.scenarios`` or ``vmas.mpe_scenarios`` (e.g. ``navigation``).
        num_envs: E.
        seed: the random state's seed at the first :meth:`reset` (``reset(seed=s)`` re-seeds).
        max_steps: steps per episode before truncation (BenchMARL's VMAS tasks use 100-500).
        device: where the worlds live (CPU or a CUDA device).
        scenario_kwargs: the scenario's own options (``n_agents=3``, ...); one the scenario does
            not use is refused (``ValueError``).
    """

    def __init__(self, scenario: str, num_envs: int = 1, seed: int = 0, max_steps: int = 100,
                 device: str | torch.device = "cpu", **scenario_kwargs: Any) -> None:
        import vmas

        if int(num_envs) < 1 or int(max_steps) < 1:
            raise ValueError(f"num_envs and max_steps must be >= 1, got {num_envs}, {max_steps}")
        self.family, self.scenario = "vmas", scenario
        self.device = torch.device(device)
        self.max_steps = self.max_episode_steps = int(max_steps)
        self._start(int(num_envs), seed)
        self._rng = _seeded_rng(self._seed, self.device)
        with warnings.catch_warnings(record=True) as caught, self._own_rng():
            warnings.simplefilter("always")
            self._env = vmas.make_env(scenario, num_envs=self.num_envs, device=self.device,
                                      continuous_actions=True, seed=self._seed,
                                      clamp_actions=True, **scenario_kwargs)
        unused = [k for w in caught if "passed but not used" in str(w.message)
                  for k in scenario_kwargs if repr(k) in str(w.message)]
        if unused:
            raise ValueError(f"vmas {scenario} has no option {', '.join(unused)}; its options "
                             f"are the kwargs.pop(...) calls of make_world in "
                             f"vmas/scenarios/{scenario}.py")
        self._setup_spaces()
        E = self.num_envs
        self.steps = torch.zeros(E, dtype=torch.long, device=self.device)
        self._pending = torch.ones(E, dtype=torch.bool, device=self.device)

    def _setup_spaces(self) -> None:
        """Per-agent sizes and bounds from VMAS's spaces; padded shapes, masks, state columns."""
        spaces = list(self._env.action_space.spaces)
        self.n_agents = n = len(spaces)
        self.agent_ids = [a.name for a in self._env.agents]
        self.act_dims = [int(s.shape[0]) for s in spaces]
        obs = self._env.get_from_scenario(True, False, False, False)[0]
        self._observe_list(obs)  # refuses dict observations
        self.obs_dims = [int(o.reshape(o.shape[0], -1).shape[1]) for o in obs]
        self.obs_dim, self.act_dim = max(self.obs_dims), max(self.act_dims)
        self.state_dim = sum(self.obs_dims)
        self.obs_shape, self.act_shape = (n, self.obs_dim), (n, self.act_dim)
        self.obs_mask = np.arange(self.obs_dim)[None] < np.array(self.obs_dims)[:, None]
        self.act_mask = np.arange(self.act_dim)[None] < np.array(self.act_dims)[:, None]
        self.action_low, self.action_high = np.zeros(self.act_shape), np.zeros(self.act_shape)
        for i, s in enumerate(spaces):
            self.action_low[i, : self.act_dims[i]] = s.low
            self.action_high[i, : self.act_dims[i]] = s.high
        t = dict(device=self.device, dtype=torch.float32)
        self._low = torch.tensor(self.action_low, **t)
        self._high = torch.tensor(self.action_high, **t)
        self._state_cols = torch.as_tensor(np.flatnonzero(self.obs_mask.reshape(-1)),
                                           device=self.device)

    # ------------------------------------------------------------------ the contract
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reset every env (the random state seeded with ``seed``, or the constructor's at the
        first reset); returns ``obs [E, N, obs_dim]`` and ``state [E, S]`` as numpy float32."""
        if seed is None and not self._seeded:
            seed = self._seed
        with self._own_rng():
            obs = self._observe_list(self._env.reset(seed=None if seed is None else int(seed)))
        self.steps.zero_()
        self._pending.zero_()
        self._seeded = True
        self._needs_reset[:] = False
        return _np(obs), _np(self._state(obs))

    def step_tensors(self, action: torch.Tensor, active: torch.Tensor | None = None) -> TensorStep:
        """Step every env (or those where ``active [E]``) with ``action [E, N, act_dim]`` in
        ``[-1, 1]``; next-step autoreset as :class:`VecEnv`. VMAS steps all its worlds at once:
        those outside ``active`` move too, but their results are dropped and their counters kept
        (an evaluation no longer reads an env whose episode ended). Reads the device once
        (whether any world resets: VMAS resets worlds by index), as VMAS's own step does (it
        checks every agent's action for NaN)."""
        live, resetting, stepping = self._tensor_masks(action, active, self._pending)
        E = self.num_envs
        a = action.to(device=self.device, dtype=torch.float32).clamp(-1.0, 1.0)
        env_a = self._low + (a + 1.0) * 0.5 * (self._high - self._low)
        with self._own_rng():
            obs_list, rews, dones, _ = self._env.step(
                [env_a[:, i, : self.act_dims[i]] for i in range(self.n_agents)])
        obs = self._observe_list(obs_list)
        rew = torch.stack([r.reshape(E) for r in rews], 1).float()  # [E, N]
        agent_reward = torch.where(stepping[:, None], rew, 0.0)
        self.steps = torch.where(stepping, self.steps + 1, self.steps)
        terminated = stepping & dones.to(self.device).bool()
        truncated = stepping & ~terminated & (self.steps >= self.max_steps)
        if bool(resetting.any()):
            obs = torch.where(resetting[:, None, None], self._reset_where(resetting), obs)
            self.steps = torch.where(resetting, 0, self.steps)
        self._pending = torch.where(live, terminated | truncated, self._pending)
        return TensorStep(obs, self._state(obs), agent_reward.mean(1), agent_reward, terminated,
                          truncated, resetting)

    def get_state(self) -> dict[str, Any]:
        """Every tensor and number of the VMAS env's objects, the counters and the random state,
        as numpy arrays and plain data (module docstring)."""
        return {"family": self.family, "scenario": self.scenario, "num_envs": self.num_envs,
                "seed": self._seed, "seeded": self._seeded, "backend": "batched",
                "world": get_vmas_state(self._env), "rng": _rng_to_plain(self._rng),
                "counters": {k: getattr(self, k).cpu().numpy().copy()
                             for k in ("steps", "_pending")}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`get_state` was taken (arrays may come back as tensors);
        a state of another scenario, size or backend, or of objects this env lacks, is refused."""
        for key in ("family", "scenario", "num_envs"):
            if state.get(key) != getattr(self, key):
                raise ValueError(f"set_state: saved {key} {state.get(key)!r} != this env's "
                                 f"{getattr(self, key)!r}")
        if state.get("backend") != "batched":
            raise ValueError("set_state: the saved env state is not env=vmas's")
        with self._own_rng():  # one step makes what VMAS creates lazily (actions, forces)
            self._env.step([torch.zeros(self.num_envs, d, device=self.device)
                            for d in self.act_dims])
        set_vmas_state(self._env, state["world"], self.device)
        for key, value in state["counters"].items():
            old = getattr(self, key)
            setattr(self, key, torch.as_tensor(np.asarray(value)).to(old.device, old.dtype).clone())
        self._rng = _rng_from_plain(state["rng"], self.device)
        self._seed, self._seeded = int(state["seed"]), bool(state["seeded"])
        self._needs_reset = self._pending.cpu().numpy().copy()

    def render_env(self, e: int = 0) -> Any:
        raise NotImplementedError("env=vmas does not film in rlzoo (VMAS renders with pyglet)")

    def close(self) -> None:
        """Nothing to release (tensors are freed with the object)."""

    # ------------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Swap this env's random state into VMAS's shared one (and the CUDA generator's) for
        the duration of a call into VMAS, and keep what the call left there."""
        from vmas.simulator.environment.environment import Environment

        shared = Environment.vmas_random_state
        shared[0], shared[1], shared[2] = self._rng[0], self._rng[1], self._rng[2]
        cuda = self.device.type == "cuda"
        if cuda:
            theirs = torch.cuda.get_rng_state(self.device)
            torch.cuda.set_rng_state(self._rng[3], self.device)
        try:
            yield
        finally:
            mine = [shared[0], shared[1], shared[2]]
            if cuda:
                mine.append(torch.cuda.get_rng_state(self.device))
                torch.cuda.set_rng_state(theirs, self.device)
            self._rng = mine

    def _reset_where(self, mask: torch.Tensor) -> torch.Tensor:
        """Fresh episodes where ``mask [E]``: every env at once when all end together (VMAS's
        ``reset``), else one ``reset_at`` each; the observations ``[E, N, obs_dim]`` after."""
        with self._own_rng():
            if bool(mask.all()):
                obs = self._env.reset()
            else:
                for i in torch.nonzero(mask).flatten().tolist():
                    self._env.reset_at(i, return_observations=False)
                obs = self._env.get_from_scenario(True, False, False, False)[0]
        return self._observe_list(obs)

    def _observe_list(self, obs: Any) -> torch.Tensor:
        """VMAS's per-agent observations ``[E, O_i]`` as one ``[E, N, obs_dim]`` float32 tensor,
        each agent's zero-padded (a dict observation is refused)."""
        rows = []
        for o in obs:
            if not torch.is_tensor(o):
                raise ValueError(f"vmas {self.scenario}: its observations are "
                                 f"{type(o).__name__}s; rlzoo takes tensor observations only")
            rows.append(o.reshape(o.shape[0], -1).float())
        width = max(r.shape[1] for r in rows)
        return torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[1])) for r in rows], 1)

    def _state(self, obs: torch.Tensor) -> torch.Tensor:
        """``[E, S]``: the agents' real observation entries, concatenated in agent order."""
        return obs.reshape(obs.shape[0], -1)[:, self._state_cols]


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy().astype(np.float32, copy=False)


def _seeded_rng(seed: int, device: torch.device) -> list[Any]:
    """A fresh VMAS random state ``[torch CPU, numpy, python(, CUDA)]`` seeded with ``seed``."""
    state: list[Any] = [torch.Generator().manual_seed(int(seed)).get_state(),
                        np.random.RandomState(int(seed)).get_state(),
                        random.Random(int(seed)).getstate()]
    if device.type == "cuda":
        state.append(torch.Generator(device=device).manual_seed(int(seed)).get_state())
    return state


def _rng_to_plain(rng: list[Any]) -> dict[str, Any]:
    """The random state as numpy arrays and numbers (a checkpoint's plain data)."""
    kind, keys, pos, has_gauss, gauss = rng[1]
    version, internal, py_gauss = rng[2]
    plain = {"torch": rng[0].numpy().copy(), "np_keys": np.asarray(keys).copy(),
             "np_rest": [str(kind), int(pos), int(has_gauss), float(gauss)],
             "py_internal": np.asarray(internal, dtype=np.int64), "py_version": int(version),
             "py_gauss": [] if py_gauss is None else [float(py_gauss)]}
    if len(rng) > 3:
        plain["cuda"] = rng[3].numpy().copy()
    return plain


def _rng_from_plain(plain: dict[str, Any], device: torch.device) -> list[Any]:
    """:func:`_rng_to_plain` undone (arrays may come back as tensors)."""
    def arr(x: Any) -> np.ndarray:
        return np.asarray(x.cpu() if torch.is_tensor(x) else x)

    kind, pos, has_gauss, gauss = plain["np_rest"]
    gauss_py = plain["py_gauss"]
    rng: list[Any] = [torch.as_tensor(arr(plain["torch"]), dtype=torch.uint8),
                      (str(kind), arr(plain["np_keys"]).astype(np.uint32), int(pos),
                       int(has_gauss), float(gauss)),
                      (int(plain["py_version"]),
                       tuple(int(v) for v in arr(plain["py_internal"]).tolist()),
                       float(gauss_py[0]) if len(gauss_py) else None)]
    if device.type == "cuda":
        if "cuda" not in plain:
            raise ValueError("set_state: the saved VMAS state has no CUDA generator (saved on "
                             "the CPU); resume on the device it was written on")
        rng.append(torch.as_tensor(arr(plain["cuda"]), dtype=torch.uint8))
    return rng
