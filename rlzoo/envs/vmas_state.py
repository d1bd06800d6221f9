"""A VMAS env's state as plain data, for bit-exact resume mid-episode (``rlzoo.envs.vmas_batched``).

VMAS keeps its worlds in tensors spread over its objects: each entity's state and action, the
world's per-step forces, and whatever a scenario keeps between steps (goals, shaping terms,
counters). :func:`get_vmas_state` walks every attribute of VMAS's own objects (and the lists,
tuples and dicts they hold) from the env down and records each tensor and number by its path
(``env.scenario._world._agents.0._state._pos``), with which paths hold the same tensor;
:func:`set_vmas_state` puts them back into an env made with the same scenario and options, with
the same sharing, so that the env continues bit for bit.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import torch

__all__ = ["get_vmas_state", "set_vmas_state"]

Found = list[tuple[str, Any, Any, Any]]  # (path, owner, key in owner, value)
ENTITY = "@entity:"  # a saved reference to an entity, by name


@functools.cache
def _vmas_class(cls: type) -> bool:
    """Whether ``cls`` is defined in the vmas package: by its module, or by the file of its
    methods (vmas loads a scenario from its file as a module without a name)."""
    import vmas

    if cls.__module__.partition(".")[0] == vmas.__name__:
        return True
    root = os.path.dirname(vmas.__file__)
    return any(getattr(getattr(f, "__code__", None), "co_filename", "").startswith(root)
               for f in vars(cls).values())


def _label(key: Any) -> str:
    """A dict key in a path: itself (str, int) or a VMAS entity's name (VMAS keys its
    per-entity forces by the entity)."""
    if isinstance(key, str | int):
        return str(key)
    return f"@{getattr(key, 'name', type(key).__name__)}"


def _walk(obj: Any, path: str, seen: set[int], out: Found, owners: dict[str, Any],
          names: dict[int, str]) -> None:
    """Every tensor, number and None reachable from ``obj`` through VMAS objects' attributes,
    lists, tuples and dicts into ``out``; each container visited once, recorded in ``owners``
    by path. An entity of ``names`` (id -> name) met below is recorded as a reference
    ``"@entity:<name>"`` (which landmark is an agent's goal is state too)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    owners[path] = obj
    if isinstance(obj, dict):
        items: Any = [(_label(k), k, v) for k, v in obj.items()]
    elif isinstance(obj, list | tuple):
        items = [(str(i), i, v) for i, v in enumerate(obj)]
    elif _vmas_class(type(obj)):
        items = [(k, k, v) for k, v in vars(obj).items()]
    else:
        return
    for label, key, value in items:
        where = f"{path}.{label}"
        plain = value is None or isinstance(value, bool | int | float)
        if id(value) in names:
            if not isinstance(obj, tuple):
                out.append((where, obj, key, f"{ENTITY}{names[id(value)]}"))
        elif torch.is_tensor(value) or (plain and not isinstance(obj, tuple)):
            out.append((where, obj, key, value))
        elif isinstance(value, dict | list | tuple) or _vmas_class(type(value)):
            _walk(value, where, seen, out, owners, names)


def _walk_env(env: Any) -> tuple[Found, dict[str, Any], dict[str, Any]]:
    """:func:`_walk` of ``env``, each entity first under its own name (``entity.<name>``, so
    that its path does not depend on who refers to it); also the entities by name."""
    entities = {e.name: e for e in env.world.entities}
    if len(entities) != len(env.world.entities):
        raise ValueError("vmas: two entities share a name; rlzoo cannot save this env's state")
    found: Found = []
    owners: dict[str, Any] = {}
    seen: set[int] = set()
    names = {id(e): n for n, e in entities.items()}
    for name, entity in entities.items():
        _walk(entity, f"entity.{name}", seen, found, owners, names)
    _walk(env, "env", seen, found, owners, names)
    return found, owners, entities


def get_vmas_state(env: Any) -> dict[str, Any]:
    """``{"tensors": {path: array}, "same": {path: first path of its tensor}, "scalars":
    {path: number or None}}`` of the VMAS ``env`` (module docstring)."""
    found, _, _ = _walk_env(env)
    tensors: dict[str, np.ndarray] = {}
    same: dict[str, str] = {}
    first: dict[int, str] = {}
    for path, _, _, value in found:
        if not torch.is_tensor(value):
            continue
        if id(value) in first:
            same[path] = first[id(value)]
        else:
            first[id(value)] = path
            tensors[path] = value.detach().cpu().numpy().copy()
    scalars = {p: v for p, _, _, v in found if not torch.is_tensor(v)}  # entity refs too
    return {"tensors": tensors, "same": same, "scalars": scalars}


def set_vmas_state(env: Any, saved: dict[str, Any], device: torch.device) -> None:
    """Put :func:`get_vmas_state`'s state back into ``env`` (made with the same scenario and
    options, and stepped once so that what VMAS makes lazily exists). A tensor goes into the
    live one of its path in place when it has the same shape and dtype and no earlier path took
    it (so references VMAS keeps elsewhere see it), else it replaces it; paths that shared a
    tensor share it again. ``ValueError`` for a path this env has no container for."""
    found, owners, entities = _walk_env(env)
    live = {p: (owner, key, value) for p, owner, key, value in found}

    def place(path: str) -> tuple[Any, Any, Any]:
        if path in live:
            return live[path]
        parent, _, label = path.rpartition(".")
        owner = owners.get(parent)
        if owner is None or isinstance(owner, tuple):
            raise ValueError(f"set_state: this VMAS env has no {path} (saved by another "
                             f"scenario or options)")
        return owner, _key(owner, label, entities), None

    taken: set[int] = set()
    placed: dict[str, torch.Tensor] = {}
    for path, array in saved["tensors"].items():
        owner, key, old = place(path)
        new = torch.as_tensor(np.asarray(array.cpu() if torch.is_tensor(array) else array))
        if (torch.is_tensor(old) and id(old) not in taken and old.shape == new.shape
                and old.dtype == new.dtype and (old.numel() <= 1 or 0 not in old.stride())):
            old.copy_(new)
            new = old
        else:
            new = new.to(device=device).clone()
        taken.add(id(new))
        placed[path] = new
        _assign(owner, key, new, path)
    for path, target in saved["same"].items():
        owner, key, _ = place(path)
        _assign(owner, key, placed[target], path)
    for path, value in saved["scalars"].items():
        owner, key, _ = place(path)
        if isinstance(value, str):  # a reference to an entity
            if value[len(ENTITY):] not in entities:
                raise ValueError(f"set_state: this VMAS env has no entity {value!r}")
            value = entities[value[len(ENTITY):]]
        _assign(owner, key, value, path)


def _key(owner: Any, label: str, entities: dict[str, Any]) -> Any:
    """A path's last part as the key ``owner`` holds it by (a list's index, a dict's key: an
    entity found by its name in ``entities``)."""
    if isinstance(owner, list):
        return int(label)
    if isinstance(owner, dict):
        if label.startswith("@"):
            if label[1:] not in entities:
                raise ValueError(f"set_state: this VMAS env has no entity {label[1:]!r}")
            return entities[label[1:]]
        return int(label) if label.lstrip("-").isdigit() else label
    return label


def _assign(owner: Any, key: Any, value: Any, path: str) -> None:
    """``owner[key] = value`` (dict, list) or the attribute, bypassing property setters."""
    if isinstance(owner, tuple):
        if owner[key] is not value:
            raise ValueError(f"set_state: {path} is in a tuple and cannot be replaced")
    elif isinstance(owner, dict | list):
        owner[key] = value
    else:
        vars(owner)[key] = value
