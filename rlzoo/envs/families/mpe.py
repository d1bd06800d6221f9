"""MPE (``mpe2``, the Multi Particle Environments), continuous actions: the ``mpe`` env family.

``env.scenario`` is an ``mpe2`` module name (``simple_spread_v3``), made as
``mpe2.<scenario>.parallel_env(continuous_actions=True, **env.kwargs)`` (e.g. ``max_cycles``,
``local_ratio``, ``N``); actions are ``Box(0, 1, (k,))`` per agent; episodes last ``max_cycles``
steps. ``env.backend=batched`` simulates the same scenarios as torch tensors, all envs at once
(``rlzoo.envs.mpe_batched``).

Exact resume saves the AEC env's ``np_random`` bit-generator state, its step counter and
bookkeeping (agents, selector, rewards, terminations, truncations, pending actions), and the
world: for every entity (agents then landmarks) all plain attributes (positions, velocities,
communication, colours, sizes, ...) with references to other entities stored as
``{"entity": index}`` (e.g. simple_reference's goals), plus the scenario's plain attributes
(e.g. curriculum stage). **Not captured:** ``infos`` (restored as empty dicts; they are unused
here) and numpy's *global* RNG, which MPE only uses for motor / communication noise
(``u_noise``/``c_noise``), None in every shipped mpe2 scenario.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from rlzoo.envs.family import PETTINGZOO, Family
from rlzoo.envs.snapshot import plain_scalar, rng_state


class _NotPlain:
    """Marker for attribute values that are not plain data (callables, fonts, ...)."""


_NOT_PLAIN = _NotPlain()


def _encode(value: Any, index: dict[int, int]) -> Any:
    """Plain-data copy of ``value``; MPE entity references become ``{"entity": i}``."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return plain_scalar(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in index:
        return {"entity": index[id(value)]}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, index) for v in value]
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in items) else items
    return _NOT_PLAIN


def _decode(value: Any, entities: list[Any]) -> Any:
    """Inverse of ``_encode`` on state already passed through ``restore_arrays``."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return entities[value["entity"]]
    if isinstance(value, list):
        return [_decode(v, entities) for v in value]
    return value


def _encode_vars(obj: Any, index: dict[int, int], exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for key, value in vars(obj).items():
        if key in exclude:
            continue
        enc = _encode(value, index)
        if enc is not _NOT_PLAIN:
            out[key] = enc
    return out


def _scalars(values: dict[str, Any]) -> dict[str, Any]:
    """Copy of a per-agent dict (rewards) with numpy scalars tagged to keep their dtype."""
    return {k: plain_scalar(v) if isinstance(v, np.generic) else v for k, v in values.items()}


def _decode_vars(obj: Any, saved: dict[str, Any], entities: list[Any]) -> None:
    for key, value in saved.items():
        setattr(obj, key, _decode(value, entities))


def _mpe_parts(env: Any) -> tuple[Any, list[Any]]:
    """(raw AEC env, [AEC wrappers outermost first]) of an aec_to_parallel_wrapper."""
    layers = [env.aec_env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers[-1], layers[:-1]

def _get_mpe_state(env: Any) -> dict[str, Any]:
    """Plain-data state of one MPE parallel env (:meth:`MPE.get_state`)."""
    raw, wrappers = _mpe_parts(env)
    world = raw.world
    entities = world.entities
    index = {id(ent): i for i, ent in enumerate(entities)}
    ents = []
    for ent in entities:
        item = {
            "attrs": _encode_vars(ent, index, exclude=("state", "action")),
            "state": _encode_vars(ent.state, index),
        }
        if hasattr(ent, "action"):
            item["action"] = _encode_vars(ent.action, index)
        ents.append(item)
    sel = raw._agent_selector
    return {
        "np_random": rng_state(raw.np_random),
        "steps": int(raw.steps),
        "aec": {
            "agents": list(getattr(raw, "agents", [])),
            "agent_selection": getattr(raw, "agent_selection", None),
            "rewards": _scalars(getattr(raw, "rewards", {})),
            "cumulative_rewards": _scalars(getattr(raw, "_cumulative_rewards", {})),
            "terminations": dict(getattr(raw, "terminations", {})),
            "truncations": dict(getattr(raw, "truncations", {})),
            "current_actions": [
                None if a is None else np.array(a, copy=True) for a in raw.current_actions
            ],
            "selector": [list(sel.agent_order), int(sel._current_agent), sel.selected_agent],
        },
        "wrapper_has_reset": [bool(getattr(w, "_has_reset", False)) for w in wrappers],
        "parallel_agents": list(getattr(env, "agents", [])),
        "world": _encode_vars(world, index, exclude=("agents", "landmarks")),
        "entities": ents,
        "scenario": _encode_vars(raw.scenario, index),
    }

def _set_mpe_state(env: Any, saved: dict[str, Any]) -> None:
    """Put back what :func:`_get_mpe_state` returned (after ``restore_arrays``)."""
    raw, wrappers = _mpe_parts(env)
    world = raw.world
    entities = world.entities
    if len(entities) != len(saved["entities"]):
        raise ValueError("set_state: the MPE world has a different number of entities")
    raw.np_random.bit_generator.state = saved["np_random"]
    raw.steps = int(saved["steps"])
    aec = saved["aec"]
    raw.agents = list(aec["agents"])
    raw.agent_selection = aec["agent_selection"]
    raw.rewards = dict(aec["rewards"])
    raw._cumulative_rewards = dict(aec["cumulative_rewards"])
    raw.terminations = dict(aec["terminations"])
    raw.truncations = dict(aec["truncations"])
    raw.infos = {agent: {} for agent in raw.agents}
    raw.current_actions = [
        None if a is None else np.array(a, copy=True) for a in aec["current_actions"]
    ]
    order, current, selected = aec["selector"]
    raw._agent_selector.agent_order = list(order)
    raw._agent_selector._current_agent = int(current)
    raw._agent_selector.selected_agent = selected
    for wrapper, has_reset in zip(wrappers, saved["wrapper_has_reset"], strict=True):
        if hasattr(wrapper, "_has_reset"):
            wrapper._has_reset = has_reset
    env.agents = list(saved["parallel_agents"])
    _decode_vars(world, saved["world"], entities)
    for ent, item in zip(entities, saved["entities"], strict=True):
        _decode_vars(ent, item["attrs"], entities)
        _decode_vars(ent.state, item["state"], entities)
        if "action" in item:
            _decode_vars(ent.action, item["action"], entities)
    _decode_vars(raw.scenario, saved["scenario"], entities)


class MPE(Family):
    """The ``mpe`` family (module docstring)."""

    name, title = "mpe", "MPE"
    backends = (PETTINGZOO, "batched")

    def scenarios(self) -> list[str]:
        """Every ``mpe2`` scenario module name, sorted."""
        from mpe2.all_modules import mpe_environments

        return sorted(name.split("/", 1)[1] for name in mpe_environments)

    def check(self, scenario: str, kwargs: dict[str, Any]) -> None:
        """``ValueError`` for a scenario ``mpe2`` does not have."""
        names = self.scenarios()
        if scenario not in names:
            raise ValueError(f"unknown mpe scenario {scenario!r}; available: {', '.join(names)}")

    def make_env(self, scenario: str, kwargs: dict[str, Any]) -> Any:
        """``mpe2.<scenario>.parallel_env(continuous_actions=True, **kwargs)``."""
        kwargs = dict(kwargs)
        if kwargs.pop("continuous_actions", True) is not True:
            raise ValueError("mpe: only continuous_actions=True is supported (Box(0, 1) actions)")
        module = importlib.import_module(f"mpe2.{scenario}")
        return module.parallel_env(continuous_actions=True, **kwargs)

    def max_episode_steps(self, env: Any) -> int | None:
        """``max_cycles`` of the raw env."""
        return int(env.unwrapped.max_cycles)

    def get_state(self, env: Any) -> dict[str, Any]:
        """The world, AEC bookkeeping and RNG (module docstring)."""
        return _get_mpe_state(env)

    def set_state(self, env: Any, saved: dict[str, Any]) -> None:
        """Put back :meth:`get_state`'s state."""
        _set_mpe_state(env, saved)

    def make_backend(self, backend: str, scenario: str, num_envs: int, seed: int,
                     **kwargs: Any) -> Any:
        """``env.backend=batched``: ``rlzoo.envs.mpe_batched.BatchedMPE`` (draws nothing)."""
        from rlzoo.envs.mpe_batched import BatchedMPE

        if kwargs.get("render_mode") is not None:
            raise ValueError("env.backend=batched draws nothing; film with env.backend=pettingzoo")
        return BatchedMPE(scenario, num_envs, seed, **kwargs)


FAMILY = MPE()
