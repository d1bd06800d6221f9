"""Env families as adapters (issue 43 item 5): a registry that finds them by name, no family
named in a comparison outside its adapter file, and a family of one's own (a toy PettingZoo
parallel env defined here) that trains through the real trainer from a config folder of its own,
without a file of rlzoo changed (docs/extending.md, "A new env family")."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from omegaconf import OmegaConf
from pettingzoo.utils.env import ParallelEnv

import rlzoo
from rlzoo.config.build import make_env
from rlzoo.envs.families import FAMILIES, check_family_backend, get_family
from rlzoo.envs.family import Family
from rlzoo.envs.pettingzoo import make_multi_agent_env
from rlzoo.envs.snapshot import rng_state
from rlzoo.errors import UserError

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rlzoo"
ADAPTERS = PACKAGE / "envs" / "families"


# --------------------------------------------------------------------------- the registry


def test_the_registry_lists_every_adapter_file_by_name() -> None:
    files = sorted(p.stem for p in ADAPTERS.glob("*.py") if p.stem != "__init__")
    assert files == ["mamujoco", "mpe", "vmas"]
    assert sorted(FAMILIES) == files
    for name, family in FAMILIES.items():
        assert isinstance(family, Family) and family.name == name
        assert get_family(name) is family and get_family(family) is family
        assert ("pettingzoo" in family.backends) == (name != "vmas")
    assert FAMILIES["mpe"].backends == ("pettingzoo", "batched")
    assert FAMILIES["vmas"].backends == ("batched",)  # vectorized: no PettingZoo envs


def test_unknown_family_and_backend_are_one_line() -> None:
    with pytest.raises(ValueError, match="unknown multi-agent env family 'nope'; available: "
                                         "mamujoco, mpe, vmas"):
        get_family("nope")
    with pytest.raises(ValueError, match="env.backend=batched simulates MPE and VMAS only"):
        check_family_backend(FAMILIES["mamujoco"], "batched")
    with pytest.raises(ValueError, match="must be one of pettingzoo, batched, got 'jax'"):
        check_family_backend(FAMILIES["mpe"], "jax")
    cfg = OmegaConf.create({"env": {"name": "x", "kind": "multi", "family": "nope",
                                    "scenario": "simple_spread_v3"}})
    with pytest.raises(UserError, match="unknown multi-agent env family 'nope'") as err:
        make_env(cfg, 1, 0)
    assert "\n" not in str(err.value)
    cfg.env.family = {"_target_": "collections.OrderedDict"}  # builds, but is no Family
    with pytest.raises(UserError, match="env.family must be a family name or a Family"):
        make_env(cfg, 1, 0)


# --------------------------------------------------------------------------- no family branches


def family_comparisons(source: str, where: str, names: tuple[str, ...]) -> list[str]:
    """``where:line`` of every comparison (``==``, ``!=``, ``in``, a ``match`` case) in ``source``
    with a family's name as a literal operand: a branch on the family outside its adapter."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        literals = {n.value for op in operands for n in ast.walk(op) if isinstance(n, ast.Constant)}
        if literals & set(names):
            found.append(f"{where}:{node.lineno}")
    return found


def test_the_scan_finds_a_family_branch() -> None:
    """The rule below would pass vacuously if the scan missed the branches it is about."""
    names = ("mpe", "mamujoco")
    for branch in ('if cfg.env.family == "mpe": pass', 'ok = "mamujoco" != family',
                   'ok = family in ("mpe", "x")',
                   'match family:\n    case "mpe":\n        pass'):
        assert len(family_comparisons(branch, "x.py", names)) == 1, branch
    assert family_comparisons('name = "mpe"\nok = name == "warp"', "x.py", names) == []


def test_no_family_is_named_in_a_comparison_outside_its_adapter() -> None:
    names = tuple(FAMILIES)
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if ADAPTERS not in path.parents
             for hit in family_comparisons(path.read_text(), str(path.relative_to(REPO)), names)]
    assert not found, ("a branch on an env family's name outside rlzoo/envs/families/ (ask the "
                       "family's adapter, rlzoo.envs.family.Family, instead):\n"
                       + "\n".join(found))


# --------------------------------------------------------------------------- a family of one's own


class LineEnv(ParallelEnv):
    """Two agents on a line push a point toward 0: obs ``[x, t / steps, agent]``, action
    ``Box(-1, 1, (1,))`` each, team reward ``-|x|``, truncated after ``steps`` steps."""

    metadata = {"name": "line_v0"}

    def __init__(self, steps: int = 10, render_mode: str | None = None) -> None:
        self.possible_agents = ["a0", "a1"]
        self.agents: list[str] = []
        self.steps, self.t, self.x = steps, 0, 0.0
        self.rng = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    def state(self) -> np.ndarray:
        return np.array([self.x, self.t / self.steps], dtype=np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.x, self.t / self.steps, i], dtype=np.float32)
                for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents, self.t, self.x = list(self.possible_agents), 0, float(self.rng.uniform(-1, 1))
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, np.ndarray]) -> tuple[dict, dict, dict, dict, dict]:
        self.x += 0.1 * sum(float(actions[a][0]) for a in self.agents)
        self.t += 1
        reward = {a: -abs(self.x) for a in self.agents}
        done = {a: self.t >= self.steps for a in self.agents}
        return self._obs(), reward, {a: False for a in self.agents}, done, \
            {a: {} for a in self.agents}


class ToyFamily(Family):
    """The ``toy`` family: scenario ``line`` (:class:`LineEnv`); what an adapter needs."""

    name, title = "toy", "Toy"

    def check(self, scenario: str, kwargs: dict[str, Any]) -> None:
        if scenario != "line":
            raise ValueError(f"unknown toy scenario {scenario!r}; available: line")

    def make_env(self, scenario: str, kwargs: dict[str, Any]) -> LineEnv:
        return LineEnv(**kwargs)

    def max_episode_steps(self, env: LineEnv) -> int:
        return env.steps

    def get_state(self, env: LineEnv) -> dict[str, Any]:
        return {"t": env.t, "x": env.x, "agents": list(env.agents), "rng": rng_state(env.rng)}

    def set_state(self, env: LineEnv, saved: dict[str, Any]) -> None:
        env.t, env.x, env.agents = int(saved["t"]), float(saved["x"]), list(saved["agents"])
        env.rng.bit_generator.state = saved["rng"]


def test_a_family_of_ones_own_is_a_vector_env_with_exact_state() -> None:
    env = make_multi_agent_env(ToyFamily(), "line", num_envs=2, seed=3, steps=4)
    assert (env.family, env.n_agents, env.obs_dim, env.act_dim, env.state_dim) == \
        ("toy", 2, 3, 1, 2)
    assert env.max_episode_steps == 4
    env.reset()
    actions = np.full((2, 2, 1), 0.5)
    env.step(actions)
    saved = env.get_state()
    assert saved["family"] == "toy"
    after = [env.step(actions).reward for _ in range(5)]
    env.set_state(saved)
    assert np.array_equal([env.step(actions).reward for _ in range(5)], after)
    with pytest.raises(ValueError, match="unknown toy scenario"):
        make_multi_agent_env(ToyFamily(), "circle")


def write_family_config(folder: Path) -> None:
    """The config folder of the toy family, as a user's package would hold it."""
    (folder / "env" / "toy").mkdir(parents=True)
    (folder / "env" / "toy" / "line.yaml").write_text(
        "name: toy-line\n"
        "kind: multi\n"
        f"family: {{_target_: {ToyFamily.__module__}.ToyFamily}}\n"
        "scenario: line\n"
        "backend: pettingzoo\n"
        "kwargs: {steps: 10}\n"
        "total_steps: 1000\n"
    )


def test_a_family_of_ones_own_trains_from_its_config_folder(tmp_path: Path) -> None:
    """Trained from its config folder (``hydra.searchpath``), stopped mid-episode and resumed
    (trusting its module, as any code of one's own): the same weights as a run never stopped."""
    write_family_config(tmp_path / "conf")
    args = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "env=toy/line", "algo=maddpg",
            "algo.actor.hidden=[16]", "critic.hidden=[16]", "algo.learning_starts=60",
            "algo.batch_size=16", "eval.every=0", "eval.episodes=2", "log.progress=false"]
    rlzoo.train(*args, "total_steps=125", run_dir=tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env"] == "toy-line" and summary["total_steps"] == 125
    assert summary["updates"] > 0
    assert -30 <= summary["final_eval_return"] <= 0  # 10 steps of -|x|, |x| <= 1 + 10 * 0.2
    module = ToyFamily.__module__
    with pytest.raises(UserError, match=f"trust.*{module}|{module}.*trust"):
        rlzoo.resume(tmp_path / "run", "total_steps=140")
    rlzoo.resume(tmp_path / "run", "total_steps=140", trust=[module])
    rlzoo.train(*args, "total_steps=140", run_dir=tmp_path / "straight")
    resumed, straight = (torch.load(tmp_path / name / "checkpoints" / f"step_{140:010d}.pt",
                                    weights_only=True)["algo"]["modules"]
                         for name in ("run", "straight"))
    assert resumed.keys() == straight.keys()
    assert all(torch.equal(resumed[key], straight[key]) for key in resumed)
