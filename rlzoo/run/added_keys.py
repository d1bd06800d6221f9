"""Keys added to the actors, critics and tuners after runs were written without them.

The constructors in ``rlzoo/nets`` and ``rlzoo/tuners`` take every hyperparameter they are given
and have no default of their own (each is declared once, with its meaning, in ``rlzoo/conf``).
A run dir's ``.hydra/config.yaml`` (or a ``policy.pt``'s config) written before one of these keys
existed lacks it; :func:`with_added_keys` gives such a config the value that run was built with,
so that it still resumes, evaluates and loads bit for bit (``tests/fixtures/pre_one_loop``).

These values are a record of what old runs did, not defaults: they never change, whatever
``rlzoo/conf`` declares today (``algo=stac`` now declares ``eval_samples: 10`` and
``alpha_optimizer: sgd``, but a STAC run written before those keys existed ran with 0 and
``adam``). A config that has the key, as every config composed today does, is left as it is.
"""

from __future__ import annotations

import inspect
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from rlzoo.nets.actors import DeterministicActor, TanhGaussianActor
from rlzoo.nets.critics import Critic
from rlzoo.tuners.entropy import AutoAlpha

OLD_RUN_VALUES: tuple[tuple[type, dict[str, Any]], ...] = (
    # actor LayerNorm and dropout (4909cb6): off before them
    (TanhGaussianActor, {"layer_norm": False, "dropout": 0.0,
                         # added with SimbaV2 (b9e2dda): log std clamped before it
                         "log_std_squash": "clamp",
                         # added with STAC's averaged evaluation action (f3b34c6): tanh(mean)
                         "eval_samples": 0}),
    (DeterministicActor, {"layer_norm": False, "dropout": 0.0}),
    # critic dropout (e9abd95): none before it (any critic, an example's subclass included)
    (Critic, {"dropout": 0.0}),
    # the temperature's loss form (b9e2dda, SimbaV2), target std (367edf0, FlashSAC) and
    # optimizer (f3b34c6, STAC): SAC's log_alpha loss, the -scale |A| target, Adam before them
    (AutoAlpha, {"loss_form": "log_alpha", "target_std": None, "alpha_optimizer": "adam"}),
)
"""``(class, {key: the value runs written before the key existed were built with})``; a node
whose ``_target_`` is that class or a subclass taking the key gets it when it lacks it."""


def with_added_keys(cfg: DictConfig) -> DictConfig:
    """``cfg`` (a run's config, its ``_target_`` keys already trusted) with the values of
    :data:`OLD_RUN_VALUES` its ``algo.actor``, ``critic`` and ``tuner`` nodes lack; ``cfg``
    itself when none is missing (every config composed today), else a copy."""
    out = cfg
    for path in ("algo.actor", "critic", "tuner"):
        node = OmegaConf.select(cfg, path, default=None, throw_on_missing=False)
        if not isinstance(node, DictConfig) or "_target_" not in node:
            continue
        missing = missing_keys(node)
        if missing:
            out = cfg.copy() if out is cfg else out
            for key, value in missing.items():
                OmegaConf.update(out, f"{path}.{key}", value, merge=False, force_add=True)
    return out


def missing_keys(node: DictConfig) -> dict[str, Any]:
    """The :data:`OLD_RUN_VALUES` (key -> value) that ``node``'s class takes and ``node`` lacks."""
    try:
        cls = get_class(str(node._target_))
    except Exception:  # noqa: BLE001 - an unknown target is refused when it is built
        return {}
    if not isinstance(cls, type):
        return {}
    takes = inspect.signature(cls).parameters
    return {key: value for base, added in OLD_RUN_VALUES if issubclass(cls, base)
            for key, value in added.items() if key in takes and key not in node}
