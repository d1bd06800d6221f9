"""MaMuJoCo (``gymnasium_robotics.mamujoco_v1``): the ``mamujoco`` env family.

``env.scenario`` is a MuJoCo task (``HalfCheetah``), made as
``mamujoco_v1.parallel_env(scenario, agent_conf, **rest of env.kwargs)``: ``agent_conf`` (required,
e.g. ``"2x3"``; None = single agent), ``agent_obsk``, and gymnasium MuJoCo kwargs such as
``max_episode_steps``. Actions are the joint ranges (``[-1, 1]`` for the shipped configs). Episodes
are cut by the single-agent env's ``TimeLimit`` (1000 steps unless ``max_episode_steps`` is
passed).

Exact resume saves ``mujoco.mj_getState(model, data, mjSTATE_INTEGRATION)`` of the single-agent
env, the derived ``xpos``/``xipos`` arrays that v5 envs read before stepping, the ``np_random``
bit-generator state, the gymnasium wrappers' ``_elapsed_steps`` / ``_has_reset`` and the parallel
env's live ``agents`` list. Other derived mjData quantities are recomputed by the next
``mj_step`` before anything reads them.
"""

from __future__ import annotations

from typing import Any

from rlzoo.envs.family import Family
from rlzoo.envs.snapshot import (
    get_mujoco_state,
    get_wrapper_state,
    rng_state,
    set_mujoco_state,
    set_wrapper_state,
    wrapper_chain,
)

# Scenarios accepted by gymnasium_robotics' MultiAgentMujocoEnv (mujoco_multi.py).
SCENARIOS = (
    "Ant",
    "CoupledHalfCheetah",
    "HalfCheetah",
    "Hopper",
    "Humanoid",
    "HumanoidStandup",
    "InvertedDoublePendulum",
    "InvertedPendulum",
    "ManySegmentAnt",
    "ManySegmentSwimmer",
    "Pusher",
    "Reacher",
    "Swimmer",
    "Walker2d",
)


class MaMuJoCo(Family):
    """The ``mamujoco`` family (module docstring)."""

    name, title = "mamujoco", "MaMuJoCo"

    def check(self, scenario: str, kwargs: dict[str, Any]) -> None:
        """``ValueError`` for a task MaMuJoCo does not have or a missing ``agent_conf``."""
        if scenario not in SCENARIOS:
            names = ", ".join(SCENARIOS)
            raise ValueError(f"unknown mamujoco scenario {scenario!r}; available: {names}")
        if "agent_conf" not in kwargs:
            raise ValueError(f"mamujoco {scenario}: pass agent_conf, e.g. agent_conf='2x3'")

    def make_env(self, scenario: str, kwargs: dict[str, Any]) -> Any:
        """``mamujoco_v1.parallel_env(scenario, agent_conf, **kwargs)``, the env checker off."""
        from gymnasium_robotics import mamujoco_v1

        kwargs = dict(kwargs)
        agent_conf = kwargs.pop("agent_conf")
        # gymnasium's PassiveEnvChecker only warns, costs time per step and crashes when a restored
        # (set_state) env steps before its first reset; turn it off unless asked for.
        kwargs.setdefault("disable_env_checker", True)
        try:
            return mamujoco_v1.parallel_env(scenario, agent_conf, **kwargs)
        except Exception as err:  # the library raises a bare Exception for a bad agent_conf
            if "UNKNOWN" in str(err):
                raise ValueError(
                    f"mamujoco {scenario}: unknown agent_conf {agent_conf!r} ({err})"
                ) from None
            raise

    def max_episode_steps(self, env: Any) -> int | None:
        """The single-agent env's ``TimeLimit``."""
        for layer in wrapper_chain(env.single_agent_env):
            limit = getattr(layer, "_max_episode_steps", None)
            if limit is not None:
                return int(limit)
        return None

    def get_state(self, env: Any) -> dict[str, Any]:
        """The single-agent MuJoCo env's state and the live agents (module docstring)."""
        single = env.single_agent_env
        base = single.unwrapped
        return {
            "mujoco": get_mujoco_state(base.model, base.data),
            "np_random": rng_state(base.np_random),
            "wrappers": get_wrapper_state(single),
            "parallel_agents": list(env.agents),
        }

    def set_state(self, env: Any, saved: dict[str, Any]) -> None:
        """Put back :meth:`get_state`'s state."""
        single = env.single_agent_env
        base = single.unwrapped
        set_mujoco_state(base.model, base.data, saved["mujoco"])
        base.np_random.bit_generator.state = saved["np_random"]
        set_wrapper_state(single, saved["wrappers"])
        env.agents = list(saved["parallel_agents"])


FAMILY = MaMuJoCo()
