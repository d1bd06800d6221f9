"""Keys added to the algorithms, actors, critics and tuners after runs were written without them.

The constructors in ``rlzoo/nets`` and ``rlzoo/tuners`` take every hyperparameter they are given
and have no default of their own (each is declared once, with its meaning, in ``rlzoo/conf``).
A run dir's ``.hydra/config.yaml`` (or a ``policy.pt``'s config) written before one of these keys
existed lacks it; :func:`with_added_keys` gives such a config the value that run was built with
(the record :data:`rlzoo.conf.history.ADDED`, which rlzoo.compare reads too), so that it still
resumes, evaluates and loads bit for bit (``tests/fixtures/pre_one_loop``). The root keys of the
run's settings added later (:data:`rlzoo.conf.history.SETTINGS_ADDED`: ``seeds``,
``env_workers``, ``normalize``, ...) are filled the same way by :func:`with_added_settings`. A
config that has the key, as every config composed today does, is left as it is."""

from __future__ import annotations

import copy
import inspect
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from rlzoo.conf.history import ADDED, SETTINGS_ADDED, current_target


def with_added_keys(cfg: DictConfig) -> DictConfig:
    """``cfg`` (a run's config, its ``_target_`` keys already trusted) with the values of
    :data:`rlzoo.conf.history.ADDED` its ``algo``, ``algo.actor``, ``critic`` and ``tuner`` nodes
    lack, and the root keys of :func:`with_added_settings`; ``cfg`` itself when none is missing
    (every config composed today), else a copy."""
    out = with_added_settings(cfg)
    for path in ("algo", "algo.actor", "critic", "tuner"):
        node = OmegaConf.select(cfg, path, default=None, throw_on_missing=False)
        if not isinstance(node, DictConfig) or "_target_" not in node:
            continue
        missing = missing_keys(node, path)
        if missing:
            out = cfg.copy() if out is cfg else out
            for key, value in missing.items():
                OmegaConf.update(out, f"{path}.{key}", value, merge=False, force_add=True)
    return out


def with_added_settings(cfg: DictConfig) -> DictConfig:
    """``cfg`` (a run's config, or any composed one) with the root keys of
    :data:`rlzoo.conf.history.SETTINGS_ADDED` it lacks set to what a run written before them did;
    ``cfg`` itself when none is missing (every config composed today), else a copy. Imports
    nothing the config names, so it may run before its ``_target_`` keys are trusted."""
    missing = {key: value for key, value in SETTINGS_ADDED.items()
               if OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT}
    if not missing:
        return cfg
    out = cfg.copy()
    for key, value in missing.items():
        OmegaConf.update(out, key, value, merge=False, force_add=True)
    return out


_ABSENT = object()  # OmegaConf.select's value for a key the config does not have


def missing_keys(node: DictConfig, path: str) -> dict[str, Any]:
    """The :data:`rlzoo.conf.history.ADDED` values (key -> value) for the node at ``path`` that
    ``node``'s class takes and ``node`` lacks."""
    try:
        cls = get_class(str(node._target_))
    except Exception:  # noqa: BLE001 - an unknown target is refused when it is built
        return {}
    if not isinstance(cls, type):
        return {}
    takes = inspect.signature(cls).parameters
    return {key: value for added in ADDED if added.node == path
            and any(issubclass(cls, get_class(name)) for name in added.classes)
            for key, value in added.values.items() if key in takes and key not in node}


def _moved_targets(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, new target)`` of every ``_target_`` in ``value`` (a plain container) that names a
    moved module (:data:`rlzoo.conf.history.MOVED`)."""
    found: list[tuple[tuple[Any, ...], str]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        if key == "_target_" and isinstance(item, str) and current_target(item) != item:
            found.append(((*path, key), current_target(item)))
        else:
            found += _moved_targets(item, (*path, key))
    return found


def with_current_targets(cfg: Any) -> Any:
    """``cfg`` (a run dir's config: a DictConfig, or a ``policy.pt``'s plain dict) with every
    ``_target_`` that names a moved module (``rlzoo.tuners.entropy.AutoAlpha``, written before the
    tuners moved to ``rlzoo.optim.entropy``) naming it where it is now; ``cfg`` itself when none
    does, else a copy. Applied where a run dir's config is read, before its targets are checked."""
    plain = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    moved = _moved_targets(plain)
    if not moved:
        return cfg
    out = cfg.copy() if isinstance(cfg, DictConfig) else copy.deepcopy(cfg)
    for path, target in moved:
        node = out
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = target
    return out
