"""Snapshot and restore envs mid-episode, as plain data, for bit-exact resume.

gymnasium envs (:func:`get_env_state` / :func:`set_env_state`):

* every wrapper's per-episode counters (``TimeLimit._elapsed_steps``, ``OrderEnforcing``'s
  ``_has_reset``);
* the base env's random generator state (``np_random``, as plain ints);
* MuJoCo envs: the full integration state (``mj_getState(..., mjSTATE_INTEGRATION)``: time,
  positions, velocities, warm-start accelerations, controls, ...) plus ``xpos``/``xipos``, derived
  kinematics that Ant and Humanoid read before stepping and that cannot be recomputed from the
  integration state;
* any other env (classic control, Box2D, ...): the base env's numeric attributes (numpy arrays,
  numbers, bools), which is their whole simulation state for the envs gymnasium ships.

PettingZoo parallel envs: each env family's adapter saves its own envs
(``rlzoo.envs.family.Family.get_state``; MPE's world in ``rlzoo.envs.families.mpe``, MaMuJoCo's
single-agent MuJoCo env, with the helpers here, in ``rlzoo.envs.families.mamujoco``).

Values are numpy arrays, numpy scalars (as :func:`plain_scalar` tags) and Python scalars.
``rlzoo.store.checkpoint`` stores arrays as tensors and would turn numpy scalars into Python
numbers; :func:`restore_arrays` undoes both, so a restored env holds numpy arrays and scalars of
the dtypes it saved (the MPE physics, for one, calls ``np.sum(..., axis=...)`` on its arrays, which
a tensor does not accept, and a float64 scalar promotes differently from a Python float).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

MUJOCO_DERIVED_FIELDS = ("xpos", "xipos")
WRAPPER_FIELDS = ("_elapsed_steps", "_has_reset")
# each wrapper field's type and the gymnasium wrapper that owns it: a fresh, never-reset env may
# hold None there (TimeLimit's _elapsed_steps until its first reset) while a checkpoint holds
# a value of this type
WRAPPER_FIELD_TYPES: dict[str, tuple[type, type]] = {
    "_elapsed_steps": (int, gym.wrappers.TimeLimit),
    "_has_reset": (bool, gym.wrappers.OrderEnforcing),
}
SCALAR_TAG = "__numpy_scalar__"


def plain_scalar(value: np.generic) -> dict[str, np.ndarray]:
    """A numpy scalar as saved env state: ``{SCALAR_TAG: 0-d array}``, so it keeps its dtype
    through a checkpoint (which would make it a Python number); :func:`restore_arrays` undoes it."""
    return {SCALAR_TAG: np.asarray(value)}


def _is_tensor(value: Any) -> bool:
    # duck-typed so that the env modules need not import torch
    return all(hasattr(value, name) for name in ("detach", "cpu", "numpy", "dtype"))


def restore_arrays(value: Any) -> Any:
    """Saved env state, as a checkpoint gives it back, as the env saved it (recursively).

    Tensors (``rlzoo.store.checkpoint`` stores every numpy array as one, on whichever device the
    checkpoint was loaded to) become numpy arrays of the same dtype and shape, copied to the CPU;
    :func:`plain_scalar` tags become numpy scalars of their dtype; numpy arrays are copied; dicts,
    lists and tuples are rebuilt with their own type; anything else is returned as is. State that
    never went through a checkpoint (or went through ``pickle``) passes unchanged, so this is safe
    to apply more than once.
    """
    if isinstance(value, np.ndarray):
        return value.copy()
    if _is_tensor(value):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, dict):
        if set(value) == {SCALAR_TAG}:
            return np.asarray(restore_arrays(value[SCALAR_TAG]))[()]
        return {k: restore_arrays(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(restore_arrays(v) for v in value)
    return value


def wrapper_chain(env: Any) -> list[Any]:
    """A gymnasium env and all the envs it wraps, outermost first."""
    chain = [env]
    while hasattr(chain[-1], "env"):
        chain.append(chain[-1].env)
    return chain


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def get_mujoco_state(model: Any, data: Any) -> dict[str, np.ndarray]:
    """Integration state and the derived positions some envs read before stepping."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    physics = np.empty(mujoco.mj_stateSize(model, spec), dtype=np.float64)
    mujoco.mj_getState(model, data, physics, spec)
    return {"physics": physics, **{k: getattr(data, k).copy() for k in MUJOCO_DERIVED_FIELDS}}


def set_mujoco_state(model: Any, data: Any, saved: dict[str, Any]) -> None:
    """Put back :func:`get_mujoco_state`, each array checked first to be exactly what this
    model saves (float64 of its shape: nothing is cast or broadcast); ``ValueError`` names it."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    shapes = {"physics": (mujoco.mj_stateSize(model, spec),),
              **{k: getattr(data, k).shape for k in MUJOCO_DERIVED_FIELDS}}
    for key, shape in shapes.items():
        value = saved.get(key) if isinstance(saved, dict) else None
        if not isinstance(value, np.ndarray) or value.dtype != np.float64 or value.shape != shape:
            held = f"{value.dtype} {list(value.shape)}" if isinstance(value, np.ndarray) \
                else type(value).__name__
            raise ValueError(f"saved MuJoCo state {key} is {held}, not this model's float64 "
                             f"{list(shape)}")
    mujoco.mj_setState(model, data, saved["physics"], spec)
    for key in MUJOCO_DERIVED_FIELDS:
        getattr(data, key)[...] = saved[key]


def get_wrapper_state(env: Any) -> list[dict[str, Any]]:
    return [{k: getattr(layer, k) for k in WRAPPER_FIELDS if k in vars(layer)}
            for layer in wrapper_chain(env)]


def _check_wrapper_field(layer: Any, key: str, value: Any) -> None:
    """``ValueError`` unless ``value`` may be put back as ``layer.<key>``: ``key`` is one of
    :data:`WRAPPER_FIELDS` and the layer already holds it with a value of the same type, or
    holds ``None`` (or, on the gymnasium wrapper that owns the field, nothing yet: a fresh,
    never-reset ``TimeLimit`` holds ``_elapsed_steps=None``) while the saved value has the
    field's type (:data:`WRAPPER_FIELD_TYPES`); a saved int must be >= 0."""
    mine = vars(layer).get(key, _SKIP)
    kind, owner = WRAPPER_FIELD_TYPES.get(key, (None, None))
    lazy = mine is None or (mine is _SKIP and owner is not None and isinstance(layer, owner))
    if key not in WRAPPER_FIELDS or not (
            (mine is not _SKIP and type(value) is type(mine))
            or (lazy and type(value) is kind)):
        raise ValueError(f"saved env wrapper field {key}={value!r} is not one this "
                         f"{type(layer).__name__} has")
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise ValueError(f"saved env wrapper field {key}={value} is negative")


def set_wrapper_state(env: Any, saved: list[dict[str, Any]]) -> None:
    """Put back :func:`get_wrapper_state`; only :data:`WRAPPER_FIELDS` a layer already has (or
    creates lazily), of their type (:func:`_check_wrapper_field`; ``ValueError`` before anything
    is set): a saved ``_max_episode_steps`` would change the env, not continue it."""
    for layer, fields in zip(wrapper_chain(env), saved, strict=True):
        for key, value in fields.items():
            _check_wrapper_field(layer, key, value)
    for layer, fields in zip(wrapper_chain(env), saved, strict=True):
        for key, value in fields.items():
            setattr(layer, key, value)
        if hasattr(layer, "checked_step"):  # PassiveEnvChecker: its one-off checks are done
            layer.checked_reset = layer.checked_step = layer.checked_data_reuse = True
            layer._previous_data = None


def _plain_attributes(base: Any) -> dict[str, Any]:
    plain = {}
    for key, value in vars(base).items():
        if key.startswith("__") or key in ("np_random", "_np_random"):
            continue
        if isinstance(value, np.ndarray) and value.dtype != object:
            plain[key] = value.copy()
        elif isinstance(value, (np.number, np.bool_)):
            plain[key] = plain_scalar(value)
        elif isinstance(value, (bool, int, float)):
            plain[key] = value
    return plain


def get_env_state(env: gym.Env) -> dict[str, Any]:
    """Everything needed to continue ``env`` bit-identically (see the module docstring)."""
    base = env.unwrapped
    state: dict[str, Any] = {"wrappers": get_wrapper_state(env)}
    if getattr(base, "_np_random", None) is not None:
        state["np_random"] = rng_state(base.np_random)
    if hasattr(base, "model") and hasattr(base, "data") and hasattr(base, "init_qpos"):
        state["mujoco"] = get_mujoco_state(base.model, base.data)
    else:
        state["attributes"] = _plain_attributes(base)
    return state


def set_env_state(env: gym.Env, state: dict[str, Any],
                  settings: dict[str, Any] | None = None) -> None:
    """Restore what ``get_env_state`` captured (the env must have been made the same way), also
    after a checkpoint round trip (see :func:`restore_arrays`). ``settings``: the env's
    :func:`env_settings` when the caller has them (one probe for envs made alike), else probed."""
    state = restore_arrays(state)
    base = env.unwrapped
    for key, value in state.get("attributes", {}).items():  # checked before anything is set
        mine = vars(base).get(key, _SKIP)
        if mine is _SKIP or key.startswith("__") or key in ("np_random", "_np_random") or not (
                isinstance(value, (bool, int, float, np.number, np.bool_))
                or isinstance(value, np.ndarray) and value.dtype != object):
            raise ValueError(f"saved env attribute {key!r} is not a plain attribute this "
                             f"{type(base).__name__} has; only its own state is restored")
        if not _same_kind(value, mine):
            raise ValueError(f"saved env attribute {key!r} ({_kind(value)}) is not of the kind "
                             f"this {type(base).__name__} holds there ({_kind(mine)})")
    if state.get("attributes"):
        _check_settings(env, state["attributes"],
                        env_settings(env) if settings is None else settings)
    set_wrapper_state(env, state["wrappers"])
    if "np_random" in state:
        base.np_random.bit_generator.state = state["np_random"]
    if "mujoco" in state:
        set_mujoco_state(base.model, base.data, state["mujoco"])
    for key, value in state.get("attributes", {}).items():
        # Arrays keep their saved dtype: an env may change it during an episode (MountainCar's
        # state is float64 after reset, float32 after a step).
        setattr(base, key, value)


def env_settings(env: gym.Env, steps: int = 2) -> dict[str, Any]:
    """The base env's numeric attributes that are settings, not episode state: those a fresh env
    made from ``env.spec`` (the same id and keyword arguments) holds unchanged through a reset
    and ``steps`` random steps (Pendulum's ``g``, ``max_torque``, ``dt``; CartPole's masses).
    Empty for an env without a spec (made by its class, not ``gym.make``)."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return {}
    try:
        probe = gym.make(spec)
    except Exception:  # noqa: BLE001 - whatever a custom constructor raises: no settings known
        return {}
    try:
        before = _plain_attributes(probe.unwrapped)
        probe.reset(seed=0)
        for _ in range(steps):
            probe.step(probe.action_space.sample())
        after = _plain_attributes(probe.unwrapped)
    except Exception:  # noqa: BLE001 - an env that cannot be probed: no settings known
        return {}
    finally:
        probe.close()
    return {key: value for key, value in before.items() if not isinstance(value, bool)
            and key in after and _equal(value, after[key])}


def _check_settings(env: gym.Env, saved: dict[str, Any], settings: dict[str, Any]) -> None:
    """Refuse saved attributes that change one of the env's ``settings`` (:func:`env_settings`):
    a checkpoint continues the episode of the env the config makes, never another env."""
    for key, setting in settings.items():
        if key in saved and not _equal(saved[key], setting):
            raise ValueError(f"saved env attribute {key!r} is {_shown(saved[key])} where this "
                             f"{type(env.unwrapped).__name__} is made with {_shown(setting)} (a "
                             "setting, not episode state: set it in env.kwargs, not in a "
                             "checkpoint)")


def _equal(a: Any, b: Any) -> bool:
    a, b = (x[SCALAR_TAG] if isinstance(x, dict) and SCALAR_TAG in x else x for x in (a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc"))


def _shown(value: Any) -> str:
    value = value[SCALAR_TAG] if isinstance(value, dict) and SCALAR_TAG in value else value
    return repr(value.tolist() if isinstance(value, np.ndarray) and value.size <= 4
                else value)[:60]


def _kind(value: Any) -> str:
    """What :func:`_same_kind` compares: an array's dtype kind and shape, a scalar's kind."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype.kind} array {list(value.shape)}"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    return np.asarray(value).dtype.kind if isinstance(value, (int, float, np.number)) \
        else type(value).__name__


def _same_kind(saved: Any, mine: Any) -> bool:
    """Whether ``saved`` may replace the env's attribute ``mine``: an array of its shape and
    dtype kind (float for float: an env may change float32 to float64 within an episode), a
    scalar of its kind (bool, integer, float); anything when the env holds ``None`` there (set
    once used, as ``last_u``)."""
    return mine is None or _kind(saved) == _kind(mine)


class _Skip:
    """Marker for an attribute a layer does not have (``vars(layer).get(key, _SKIP)``)."""


_SKIP = _Skip()
