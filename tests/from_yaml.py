"""Components for tests, built with the keys rlzoo's YAML declares.

Every hyperparameter default lives once, in ``rlzoo/conf``; the constructors take what they are
given. So a test that builds a component by hand takes the YAML's keys and changes only what it
is about::

    TwinCritic(3, 2, **critic_args("twin", hidden=[8]))
    SAC(SPEC, actor("sac", hidden=[16]), critic("twin", hidden=[16]), tuner("auto"),
        **algo_args("sac", tau=0.01))

``*_args`` return the keyword arguments of a node (without ``_target_``/``_partial_``, the
algorithm's loop keys or its ``actor``); ``actor``/``critic``/``tuner``/``network`` return the
``functools.partial`` Hydra would build from that node. Compositions are cached.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from hydra import compose, initialize_config_module
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from rlzoo.config.settings import LOOP_KEYS

__all__ = [
    "actor", "actor_args", "algo_args", "composed", "critic", "critic_args", "critic_of", "network",
    "network_args", "tuner", "tuner_args",
]


@functools.cache
def _compose(config: str, overrides: tuple[str, ...]) -> DictConfig:
    with warnings.catch_warnings():  # tuner/auto_dsac_t composed alone has no _self_
        warnings.simplefilter("ignore", UserWarning)
        with initialize_config_module("rlzoo.conf", version_base="1.3"):
            cfg = compose(config, overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


def composed(*overrides: str) -> DictConfig:
    """rlzoo's root config composed with ``overrides`` (a copy: the caller may change it)."""
    return _compose("config", tuple(overrides)).copy()


def _kwargs(node: DictConfig, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in node:
        if str(key).startswith("_") or key in drop:
            continue
        value = node[key]
        if isinstance(value, DictConfig) and "_target_" in value:
            out[str(key)] = instantiate(value)  # e.g. a network builder (net=simbav2)
        elif isinstance(value, DictConfig) or OmegaConf.is_list(value):
            out[str(key)] = OmegaConf.to_container(value)
        else:
            out[str(key)] = value
    return out


def _partial(node: DictConfig, changes: dict[str, Any], drop: tuple[str, ...] = ()
             ) -> functools.partial:
    return functools.partial(get_class(node._target_), **{**_kwargs(node, drop), **changes})


EXAMPLES = "hydra.searchpath=[pkg://examples.conf]"
EXAMPLE_ALGOS, EXAMPLE_CRITICS = ("ppo", "sac_quick"), ("pessimistic",)


def _algo(algo: str) -> DictConfig:
    extra = (EXAMPLES,) if algo in EXAMPLE_ALGOS else ()
    return _compose("config", (*extra, f"algo={algo}")).algo


def _critic(name: str) -> DictConfig:
    if name in EXAMPLE_CRITICS:
        return _compose("config", (EXAMPLES, f"critic={name}")).critic
    return _compose(f"critic/{name}", ()).critic


def algo_args(algo: str = "sac", **changes: Any) -> dict[str, Any]:
    """The hyperparameters ``conf/algo/<algo>.yaml`` gives its algorithm's constructor (not its
    name, loop keys or actor), with ``changes``; the examples' algorithms (``examples/conf``)
    too."""
    node = _algo(algo)
    return {**_kwargs(node, ("name", "actor", *LOOP_KEYS)), **changes}


def actor_args(algo: str = "sac", **changes: Any) -> dict[str, Any]:
    """The keys of ``conf/algo/<algo>.yaml``'s ``algo.actor`` node, with ``changes``."""
    return {**_kwargs(_algo(algo).actor), **changes}


def actor(algo: str = "sac", **changes: Any) -> functools.partial:
    """``partial(<the actor class>, **actor_args(algo, **changes))``."""
    return _partial(_algo(algo).actor, changes)


def critic_args(name: str = "twin", **changes: Any) -> dict[str, Any]:
    """The keys of ``conf/critic/<name>.yaml`` alone (no algorithm file's changes)."""
    return {**_kwargs(_critic(name)), **changes}


def critic(name: str = "twin", **changes: Any) -> functools.partial:
    """``partial(<conf/critic/<name>.yaml's class>, **critic_args(name, **changes))``."""
    return _partial(_critic(name), changes)


def tuner_args(name: str = "auto", **changes: Any) -> dict[str, Any]:
    """The keys of ``conf/tuner/<name>.yaml`` alone (no algorithm file's changes)."""
    return {**_kwargs(_compose(f"tuner/{name}", ()).tuner), **changes}


def tuner(name: str = "auto", **changes: Any) -> functools.partial:
    """``partial(<conf/tuner/<name>.yaml's class>, **tuner_args(name, **changes))``."""
    return _partial(_compose(f"tuner/{name}", ()).tuner, changes)


def network_args(part: str = "critic", **changes: Any) -> dict[str, Any]:
    """The keys of ``conf/net/simbav2.yaml``'s network for ``part`` (``critic`` or ``actor``)."""
    return {**_kwargs(_network_node(part)), **changes}


def network(part: str = "critic", **changes: Any) -> functools.partial:
    """``partial(HypersphericalMLP, **network_args(part, **changes))``."""
    return _partial(_network_node(part), changes)


def _network_node(part: str) -> DictConfig:
    cfg = _compose("net/simbav2", ())
    return cfg.critic.network if part == "critic" else cfg.algo.actor.network


CRITIC_FILES = {"TwinCritic": "twin", "EnsembleCritic": "ensemble", "AgentCritics": "agents",
                "DistributionalCritic": "distributional", "CategoricalCritic": "categorical",
                "GaussianCritic": "gaussian", "ActionSequenceCritic": "action_sequence"}


def critic_of(kind: Any, **changes: Any) -> functools.partial:
    """``kind`` (a critic class, a subclass, or a ``partial`` of one) with the keys of its
    ``conf/critic`` file, the partial's own keywords and ``changes`` on top."""
    given = dict(kind.keywords) if isinstance(kind, functools.partial) else {}
    cls = kind.func if isinstance(kind, functools.partial) else kind
    name = next(CRITIC_FILES[c.__name__] for c in cls.__mro__ if c.__name__ in CRITIC_FILES)
    return functools.partial(cls, **critic_args(name, **{**given, **changes}))
