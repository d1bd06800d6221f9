"""Every default is declared once, in YAML: a constructor Hydra builds from a config node has no
default of its own for a key that node declares (they drifted apart before: SAC's critic_lr was
3e-4 in sac.py and 1e-3 in conf/algo/sac.yaml)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class
from omegaconf import DictConfig

from rlzoo.config.settings import LOOP_KEYS
from tests.from_yaml import composed

CONF = Path(__file__).resolve().parents[1] / "rlzoo" / "conf"
EXAMPLES = "hydra.searchpath=[pkg://examples.conf]"

# Defaults a constructor may keep for a key its YAML declares, and why. Each such default must
# equal the value the component's own YAML file declares (test below), so the two cannot differ.
# (The keys of actors, critics and tuners added after runs were written have no constructor
# default: rlzoo.config.added_keys gives an old run dir the value it was built with.)
COMPAT = {
    "network": "actors and critics: an optional trunk builder (null = the MLP) that net=... sets; "
               "algo files cannot declare it for the actor, or they would override net=simbav2",
    "lr_warmup_rate": "FlashSAC: added with the run-length schedule (older run dirs hold a "
                      "numeric lr_warmup_updates, which never reads it)",
}
# Defaulted parameters no YAML declares: the building code passes them, never a user.
PLUMBING = {
    "members": "per-agent actors and temperatures: the algorithm passes its N",
    "n_agents": "one critic per agent: MADDPG passes its N",
    "heads": "outputs per member of a network: the actor or critic passes it",
    "run_updates": "SimbaV2/FlashSAC schedules: rlzoo.config.build passes int(total_steps x utd)",
}


def options(group: str) -> list[str]:
    return sorted(str(p.relative_to(CONF / group).with_suffix("")) for p in
                  (CONF / group).rglob("*.yaml"))


def compositions() -> Iterator[tuple[str, DictConfig]]:
    """Every algo with its own parts, and with each critic, tuner and net swapped in; and the
    examples' algorithms and critics."""
    jobs = [[f"algo={a}"] for a in options("algo")]
    jobs += [["algo=sac", f"critic={c}"] for c in options("critic")]
    jobs += [["algo=sac", f"tuner={t}"] for t in options("tuner")]
    jobs += [[f"algo={a}", "net=simbav2"] for a in ("sac", "td3", "maddpg", "hasac", "coma")]
    jobs += [[f"algo={a}", f"net={n}"] for a in ("sac", "td3") for n in ("batch_norm",
                                                                         "batch_renorm")]
    jobs += [[EXAMPLES, "algo=ppo"], [EXAMPLES, "algo=sac_quick"],
             [EXAMPLES, "critic=pessimistic"]]
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        for job in jobs:
            try:
                yield " ".join(job), compose("config", overrides=job)
            except ConfigCompositionException:
                continue


def built_nodes(node: DictConfig, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    """``(path, node)`` of every node with a ``_target_`` under ``node``."""
    if "_target_" in node:
        yield path, node
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none():
            yield from built_nodes(child, f"{path}.{key}" if path else str(key))


def declared_keys(path: str, node: DictConfig) -> set[str]:
    """The keys of ``node`` that reach its constructor."""
    keys = {str(k) for k in node if not str(k).startswith("_")}
    if path == "algo":  # the loop reads these; build_algorithm masks them out
        keys -= {"name", *LOOP_KEYS}
    return keys


def defaults_of(target: str) -> dict[str, object]:
    sig = inspect.signature(get_class(target))
    return {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}


def test_no_constructor_default_duplicates_its_yaml() -> None:
    duplicated, undeclared, checked = [], [], set()
    for job, cfg in compositions():
        for path, node in built_nodes(cfg):
            defaults = defaults_of(node._target_)
            checked.add(node._target_)
            for key in sorted(declared_keys(path, node) & set(defaults)):
                if key not in COMPAT:
                    duplicated.append(f"{node._target_}({key}={defaults[key]!r}) and {path}.{key} "
                                      f"in `{job}`")
            for key in sorted(set(defaults) - declared_keys(path, node) - set(PLUMBING)
                              - set(COMPAT)):
                undeclared.append(f"{node._target_}({key}={defaults[key]!r}): `{job}` has no "
                                  f"{path}.{key}")
    assert not duplicated, "a default both in a constructor and in YAML:\n" + "\n".join(
        sorted(set(duplicated)))
    assert not undeclared, "a hyperparameter default no YAML declares:\n" + "\n".join(
        sorted(set(undeclared)))
    # the walk reached every kind of component
    assert {"rlzoo.algos.SAC", "rlzoo.algos.TD3", "rlzoo.algos.COMA", "rlzoo.nets.TwinCritic",
            "rlzoo.nets.TanhGaussianActor", "rlzoo.optim.entropy.AutoAlpha",
            "rlzoo.nets.HypersphericalMLP", "rlzoo.nets.TruncatedQuantileCritic",
            "rlzoo.nets.BatchNormMLP", "rlzoo.nets.EnsembleBatchRenorm", "examples.ppo.PPO",
            "examples.custom_critic.PessimisticCritic"} <= checked, checked


@pytest.mark.parametrize(("overrides", "path"), [
    (["algo=sac"], "algo.actor"), (["algo=td3"], "algo.actor"), (["algo=sac"], "critic"),
    (["algo=sac"], "tuner"), (["algo=flashsac"], "algo"),
    *[([f"critic={c}"], "critic") for c in options("critic")],
])
def test_compatibility_defaults_equal_the_yaml(overrides: list[str], path: str) -> None:
    """A COMPAT default is the value the component's own YAML file declares."""
    node = composed(*overrides)
    for part in path.split("."):
        node = node[part]
    defaults = defaults_of(node._target_)
    for key in COMPAT:
        if key in node and key in defaults:
            assert defaults[key] == node[key], (node._target_, key, defaults[key], node[key])
