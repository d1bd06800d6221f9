"""Multi-agent environments: PettingZoo *parallel* envs behind one array interface.

``make_multi_agent_env(family, scenario, num_envs, seed, **kwargs)`` builds ``num_envs`` independent
copies of a PettingZoo parallel env and returns a :class:`MultiAgentVecEnv` that speaks numpy arrays
shaped ``[E, N, ...]`` (E = ``num_envs``, N = number of agents, agent order fixed to
``env.possible_agents``).

Families
--------
What differs between families is in one adapter each (``rlzoo.envs.family.Family``), found by
name in ``rlzoo.envs.families``:

* ``"mpe"`` (``rlzoo/envs/families/mpe.py``):
  ``mpe2.<scenario>.parallel_env(continuous_actions=True, **kwargs)``, e.g.
  ``scenario="simple_spread_v3", max_cycles=25``. Actions are ``Box(0, 1, (k,))`` per agent.
* ``"mamujoco"`` (``rlzoo/envs/families/mamujoco.py``):
  ``gymnasium_robotics.mamujoco_v1.parallel_env(scenario, agent_conf, **kwargs)``, e.g.
  ``scenario="HalfCheetah", agent_conf="2x3"``. Actions are the joint ranges (``[-1, 1]`` for the
  shipped configs). Episodes are cut by the single-agent env's ``TimeLimit`` (1000 steps unless
  ``max_episode_steps`` is passed).

Conventions
-----------
* **Padding.** Agents may differ in observation and action sizes (MaMuJoCo Hopper 3x1 has
  observation sizes 8, 9, 8). Everything is padded with zeros to the largest size
  (``obs_dim``/``act_dim``); ``obs_mask``/``act_mask`` (``[N, obs_dim]``/``[N, act_dim]`` bool) are
  True on real entries. Padded action entries are ignored.
* **Actions** come in ``[-1, 1]``, shaped ``[E, N, act_dim]``. They are clipped to ``[-1, 1]`` and
  mapped affinely onto each agent's own Box, ``low + (a + 1) / 2 * (high - low)`` -- the only place
  in rlzoo where actions are scaled.
* **Episode end.** An env's episode ends when *any* agent is terminated or truncated (in MPE and
  MaMuJoCo all agents end together anyway). ``terminated`` = true end (no bootstrap);
  ``truncated`` = time limit and not terminated.
* **Autoreset (gymnasium 1.x NEXT_STEP).** When env e's episode ends at call t, call t returns the
  final observation/state with the flags set. At call t+1 env e ignores its action, resets and
  returns the reset observation/state with reward 0, ``terminated = truncated = False`` and
  ``reset_step[e] = True`` (no transition happened). A replay buffer can therefore store each
  observation exactly once per env column and must skip transitions whose *next* step has
  ``reset_step`` set.
* **Seeding.** Env e is seeded once, at the first ``reset`` (with ``seed + e``, where ``seed`` is
  the argument of ``reset`` or, if None, of ``make_multi_agent_env``); later resets (autoresets and
  ``reset(seed=None)``) continue each env's own RNG stream. ``reset(seed=s)`` re-seeds all envs.
* **Rewards.** ``StepResult.reward [E]`` is rlzoo's team reward, per step the **mean over agents**
  of their rewards (the episode return is its sum over the episode's steps); each agent's own
  reward is in ``agent_reward [E, N]`` (MaMuJoCo gives every agent the same team reward).
* **Global state** is ``env.state()`` (``[E, state_dim]``): MPE concatenates all agents'
  observations (simple_spread: 54); MaMuJoCo gives the full single-agent observation
  (HalfCheetah: 17).

All arrays are numpy; this module does not import torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlzoo.envs.base import EnvError, VecEnv, check_shape
from rlzoo.envs.families import FAMILIES, check_family_backend, get_family
from rlzoo.envs.family import PETTINGZOO, Family
from rlzoo.envs.snapshot import restore_arrays

__all__ = ["MultiAgentVecEnv", "make_multi_agent_env", "make_family_env", "FAMILIES"]

# --------------------------------------------------------------------------------------------------
# construction
# --------------------------------------------------------------------------------------------------


def make_multi_agent_env(
    family: str | Family, scenario: str, num_envs: int = 1, seed: int = 0, **kwargs: Any
) -> MultiAgentVecEnv:
    """Make ``num_envs`` copies of a PettingZoo parallel env behind the array interface.

    Args:
        family: a family's name (``"mpe"``, ``"mamujoco"``: ``rlzoo.envs.families``) or its
            adapter (an ``rlzoo.envs.family.Family``).
        scenario: MPE module name (``"simple_spread_v3"``) or MaMuJoCo task (``"HalfCheetah"``).
        num_envs: number of independent env copies E.
        seed: default seed of the first ``reset`` (env e gets ``seed + e``).
        **kwargs: passed to the family's constructor (``Family.make_env``). MPE: e.g.
            ``max_cycles``, ``local_ratio``, ``N`` (``continuous_actions`` is forced to True).
            MaMuJoCo: ``agent_conf`` (required, e.g. ``"2x3"``; None = single agent),
            ``agent_obsk``, and gymnasium MuJoCo kwargs such as ``max_episode_steps``.

    Raises:
        ValueError: unknown family or scenario, bad ``agent_conf``, ``num_envs < 1``.
        TypeError: ``family`` is neither a name nor a ``Family``.
    """
    adapter = get_family(family)
    adapter.check(scenario, kwargs)
    if int(num_envs) < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    envs = [adapter.make_env(scenario, kwargs) for _ in range(int(num_envs))]
    return MultiAgentVecEnv(envs, family=adapter, scenario=scenario, seed=seed)


def make_family_env(
    family: str | Family, scenario: str, num_envs: int = 1, seed: int = 0,
    backend: str = PETTINGZOO, **kwargs: Any,
) -> VecEnv:
    """:func:`make_multi_agent_env` on ``env.backend=pettingzoo``; on another backend of the
    family, its own vector env (``Family.make_backend``, e.g. MPE's ``batched``).

    Raises:
        ValueError: as :func:`make_multi_agent_env`, or a backend the family does not run on.
    """
    adapter = get_family(family)
    check_family_backend(adapter, backend)
    if backend == PETTINGZOO:
        return make_multi_agent_env(adapter, scenario, num_envs, seed, **kwargs)
    return adapter.make_backend(backend, scenario, num_envs, seed, **kwargs)


# --------------------------------------------------------------------------------------------------
# the vector env
# --------------------------------------------------------------------------------------------------


class MultiAgentVecEnv(VecEnv):
    """``num_envs`` PettingZoo parallel envs as arrays ``[E, N, ...]`` (see the module docstring).

    Attributes:
        family, scenario: what was made.
        num_envs: E. n_agents: N. agent_ids: ``env.possible_agents`` (fixed order).
        obs_dims, act_dims: true per-agent sizes. obs_dim, act_dim: max over agents (padded size).
        state_dim: size of ``env.state()``.
        obs_mask: ``[N, obs_dim]`` bool. act_mask: ``[N, act_dim]`` bool (True = real entry).
        max_episode_steps: the env's time limit (MPE ``max_cycles``; MaMuJoCo ``TimeLimit``), or
            None if unknown.
    """

    def __init__(self, envs: list[Any], family: str | Family, scenario: str,
                 seed: int = 0) -> None:
        """Wrap already-built PettingZoo parallel envs (use :func:`make_multi_agent_env`);
        ``family``: a family's name or its adapter."""
        self.adapter = get_family(family)
        self.family: str = self.adapter.name
        self.scenario = scenario
        self._envs = envs
        self._start(len(envs), seed)
        env0 = envs[0]
        self.agent_ids: list[str] = list(env0.possible_agents)
        self.n_agents = len(self.agent_ids)

        obs_spaces = [env0.observation_space(a) for a in self.agent_ids]
        act_spaces = [env0.action_space(a) for a in self.agent_ids]
        for agent, space in zip(self.agent_ids, act_spaces, strict=True):
            if not (hasattr(space, "low") and len(space.shape) == 1):
                raise ValueError(f"{self.family}/{scenario}: agent {agent} has non-Box "
                                 f"action {space}")
            if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
                raise ValueError(f"{self.family}/{scenario}: agent {agent} has unbounded "
                                 f"action {space}")
        self.obs_spaces = {f"agent {a}": s for a, s in zip(self.agent_ids, obs_spaces)}
        self.obs_dims: list[int] = [int(np.prod(s.shape)) for s in obs_spaces]
        self.act_dims: list[int] = [int(s.shape[0]) for s in act_spaces]
        self.obs_dim = max(self.obs_dims)
        self.act_dim = max(self.act_dims)
        self._act_dtypes = [s.dtype for s in act_spaces]

        n = self.n_agents
        self.obs_mask = np.zeros((n, self.obs_dim), dtype=bool)
        self.act_mask = np.zeros((n, self.act_dim), dtype=bool)
        # Padded entries map to 0 (low = high = 0).
        self.action_low = np.zeros((n, self.act_dim), dtype=np.float64)
        self.action_high = np.zeros((n, self.act_dim), dtype=np.float64)
        for i, (od, ad, space) in enumerate(
            zip(self.obs_dims, self.act_dims, act_spaces, strict=True)
        ):
            self.obs_mask[i, :od] = True
            self.act_mask[i, :ad] = True
            self.action_low[i, :ad] = np.asarray(space.low, dtype=np.float64)
            self.action_high[i, :ad] = np.asarray(space.high, dtype=np.float64)

        # MPE advertises state_space (and refuses state() before reset); MaMuJoCo has no
        # state_space but its state() works before reset. The first reset checks the size.
        state_space = getattr(env0, "state_space", None)
        if state_space is not None:
            self.state_dim = int(np.prod(state_space.shape))
        else:
            self.state_dim = int(np.asarray(env0.state()).size)
        self.max_episode_steps = self._find_max_episode_steps(env0)
        self.obs_shape, self.act_shape = (n, self.obs_dim), (n, self.act_dim)

    # ------------------------------------------------------------------ public API

    def _step_one(
        self, e: int, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]:
        """Step env ``e`` with its scaled actions ``[N, act_dim]``; an episode ends when any
        agent is terminated or truncated."""
        env = self._envs[e]
        action_dict = {
            agent: action[i, : self.act_dims[i]].astype(self._act_dtypes[i])
            for i, agent in enumerate(self.agent_ids)
        }
        obs_d, rew_d, term_d, trunc_d, _ = env.step(action_dict)
        for agent in self.agent_ids:  # each a single number: no broadcast into the row
            for what, values in (("a reward", rew_d), ("a terminated flag", term_d),
                                 ("a truncated flag", trunc_d)):
                if agent in values:
                    check_shape(self.label, e, "step", f"{what} for agent {agent}",
                                values[agent], ())
        reward = np.array([rew_d.get(agent, 0.0) for agent in self.agent_ids], dtype=np.float32)
        term = any(bool(v) for v in term_d.values())
        trunc = any(bool(v) for v in trunc_d.values())
        return self._pack_obs(obs_d, e, "step"), self._get_state_vec(env), reward, term, trunc

    def render_env(self, e: int = 0) -> Any:
        """Env ``e``'s PettingZoo parallel env (rendering is per env)."""
        return self._envs[e]

    def close(self) -> None:
        """Close every env."""
        for env in self._envs:
            env.close()

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically, as plain data.

        Contents: the seeding flag, per-env pending-reset flags, and per env what its family's
        adapter saves (``Family.get_state``; what MPE and MaMuJoCo capture, and what they do not,
        is in ``rlzoo.envs.families.mpe`` and ``rlzoo.envs.families.mamujoco``).

        Returns:
            A dict of lists, ints, floats, bools, strs, None and numpy arrays (the RNG states are
            nested dicts of Python ints; numpy scalars are ``snapshot.plain_scalar`` tags), which
            :meth:`set_state` accepts as is or as a checkpoint gives it back (arrays as tensors).
        """
        return {
            "family": self.family,
            "scenario": self.scenario,
            "num_envs": self.num_envs,
            "seed": self._seed,
            "seeded": self._seeded,
            "needs_reset": [bool(x) for x in self._needs_reset],
            "envs": [self.adapter.get_state(env) for env in self._envs],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (same family, scenario, num_envs and kwargs),
        also after a checkpoint round trip: the tensors a checkpoint stores arrays as come back
        as numpy arrays of their saved dtype (``snapshot.restore_arrays``)."""
        state = restore_arrays(state)
        for key in ("family", "scenario", "num_envs"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"set_state: saved {key} {state[key]!r} != this env's {getattr(self, key)!r}"
                )
        self._seed = int(state["seed"])
        self._seeded = bool(state["seeded"])
        self._needs_reset = np.asarray(state["needs_reset"], dtype=bool).copy()
        for env, saved in zip(self._envs, state["envs"], strict=True):
            self.adapter.set_state(env, saved)

    # ------------------------------------------------------------------ internals

    def _check_action(self, actions: np.ndarray) -> np.ndarray:
        """``[E, N, act_dim]`` in [-1, 1] -> each agent's Box (float64; padding -> 0)."""
        a = np.asarray(actions, dtype=np.float64)
        expected = (self.num_envs, self.n_agents, self.act_dim)
        if a.shape != expected:
            raise ValueError(f"actions must have shape {expected} [E, N, act_dim], got {a.shape}")
        a = np.where(self.act_mask, a, 0.0)  # padding is ignored, whatever it holds
        if not np.all(np.isfinite(a)):
            raise ValueError("actions contain NaN or inf")
        a = np.clip(a, -1.0, 1.0)
        scaled = self.action_low + (a + 1.0) * 0.5 * (self.action_high - self.action_low)
        return np.clip(scaled, self.action_low, self.action_high)

    @property
    def label(self) -> str:
        return f"{self.family}/{self.scenario}"

    def _pack_obs(self, obs_dict: dict[str, Any], e: int, call: str) -> np.ndarray:
        """Dict of per-agent obs (env ``e``'s, from ``call``) -> ``[N, obs_dim]`` float32, zero
        padded (missing agent -> 0); an agent's observation must have its space's shape."""
        out = np.zeros((self.n_agents, self.obs_dim), dtype=np.float32)
        for i, agent in enumerate(self.agent_ids):
            if agent in obs_dict:
                space = self.obs_spaces[f"agent {agent}"]
                check_shape(self.label, e, call, f"an observation for agent {agent}",
                            obs_dict[agent], tuple(space.shape))
                out[i, : self.obs_dims[i]] = np.asarray(obs_dict[agent]).reshape(-1)
        return out

    def _get_state_vec(self, env: Any) -> np.ndarray:
        state = np.asarray(env.state(), dtype=np.float32).reshape(-1)
        if state.size != self.state_dim:  # not broadcast into the row either
            raise EnvError(
                f"{self.family}/{self.scenario}: env.state() has {state.size} entries, "
                f"expected {self.state_dim}"
            )
        return state

    def _reset_one(self, e: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        env = self._envs[e]
        obs_dict, _ = env.reset(seed=seed)
        return self._pack_obs(obs_dict, e, "reset"), self._get_state_vec(env)

    def _find_max_episode_steps(self, env: Any) -> int | None:
        return self.adapter.max_episode_steps(env)
