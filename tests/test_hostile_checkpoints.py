"""Issue 39 items 3-4: hostile run-dir files cost bounded work and a poisoned checkpoint is
skipped for the previous one, which is never pruned first. No timings: each hostile structure
is refused by a cap (asserted by its message), so a test that passes cannot have hung."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TINY, assert_user_error, run_cli

from rlzoo.nets.normalizers import ObservationNormalizer
from rlzoo.store.bounded import BoundError, check_interpolations, check_tree, load_yaml
from rlzoo.store.checkpoint import CheckpointError, list_checkpoints, load_checkpoint

PENDULUM = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
            "eval.every=200", "eval.episodes=2", "checkpoint.every=100", "log.every=50",
            "log.progress=false", "algo.buffer_size=5000", "seed=7", "checkpoint.keep=5", *TINY]


def dag(levels: int, width: int = 2) -> list[Any]:
    x: list[Any] = [torch.zeros(1)]
    for _ in range(levels):
        x = [x] * width
    return x


def deep(levels: int) -> list[Any]:
    x: list[Any] = []
    for _ in range(levels):
        x = [x]
    return x


def test_check_tree_counts_shared_references_without_walking_them() -> None:
    assert check_tree({"a": [1, (2, 3)]}) == 7  # dict, key, list, 1, tuple, 2, 3
    with pytest.raises(BoundError, match="more than 2,000,000 items"):
        check_tree(dag(10, width=10))  # 10**10 items, 11 deep
    with pytest.raises(BoundError, match="more than 32 deep"):
        check_tree(dag(45))
    with pytest.raises(BoundError, match="more than 32 deep"):
        check_tree(deep(5000))
    cycle: list[Any] = [1]
    cycle.append(cycle)
    with pytest.raises(BoundError, match="cycle"):
        check_tree(cycle)


@pytest.mark.parametrize(("text", "match"), [
    ("a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b]\n",
     "YAML alias"),
    ("a0: " + "x" * 100 + "\n" + "".join(f"a{i}: " + f"${{a{i - 1}}}" * 100 + "\n"
                                        for i in range(1, 5)), "resolve to more than"),
    ("a0: 1\n" + "".join(f"a{i}: ${{a{i - 1}}}\n" for i in range(1, 100)), "more than 8 levels"),
    ("a: ${b}\nb: ${a}\n", "refers to itself"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "more than 32 levels"),
    ("a: " + "x" * (1 << 20) + "\n", "larger than 1 MiB"),
])
def test_yaml_configs_are_read_at_bounded_cost(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(BoundError, match=match):
        load_yaml(path)


def test_yaml_with_ordinary_interpolations_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("seed: 3\nenv:\n  id: Pendulum-v1\n  name: ${.id}\ntotal: ${seed}\n")
    cfg = load_yaml(path)
    assert cfg.env.name == "Pendulum-v1" and cfg.total == 3
    # root 1, "a" its 8 characters plus b twice, "b" 2
    assert check_interpolations({"a": "${b}${b}", "b": "xy"}) == 1 + (8 + 2 * 2) + 2


def test_normalizer_with_impossible_statistics_is_refused_on_load() -> None:
    norm = ObservationNormalizer((3,), 1e-8)
    for name, value in (("var", -1.0), ("count", -5.0), ("mean", math.nan)):
        state = norm.state_dict()
        state[name] = torch.full_like(state[name], value)
        with pytest.raises(ValueError, match=f"normalizer statistic {name}"):
            norm.load_state_dict(state)
    assert torch.equal(norm.var, torch.ones(3))  # nothing was loaded


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("hostile") / "run"
    proc = run_cli([*PENDULUM, "total_steps=300"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


def _set(*keys: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(state: dict[str, Any]) -> None:
        node = state
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return edit


def _buffer(state: dict[str, Any]) -> dict[str, Any]:
    return state["members"][0]["buffer"]


def _index_far(state: dict[str, Any]) -> None:
    _buffer(state)["tensors"]["index"][0] = 10**9


def _ptr_past_filled(state: dict[str, Any]) -> None:
    _buffer(state)["ptr"] = _buffer(state)["filled"]


def _max_steps(state: dict[str, Any]) -> None:
    state["members"][0]["env"]["envs"][0]["wrappers"][1]["_max_episode_steps"] = 3


def _env_attribute(state: dict[str, Any]) -> None:
    state["members"][0]["env"]["envs"][0]["attributes"]["_max_episode_steps"] = 3


def _two_seeds(state: dict[str, Any]) -> None:  # a group's weights in a single run's file
    modules = state["algo"]["modules"]
    key = next(iter(modules))
    modules[key] = torch.cat([modules[key], modules[key]])


POISONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "format-str": _set("format", value="3"),
    "format-future": _set("format", value=99),
    "weights-of-two-seeds": _two_seeds,
    "shared-references": _set("algo", "extra", value=dag(45)),
    "nested-200": _set("algo", "extra", value=deep(200)),  # torch.save recurses too
    "step-str": _set("counters", "step", value="abc"),
    "member-step-negative": _set("members", 0, "counters", "step", value=-5),
    "credit-huge": _set("counters", "update_credit", value=1e12),
    "credit-nan": _set("counters", "update_credit", value=math.nan),
    "filled-none": lambda s: _buffer(s).__setitem__("filled", None),
    "index-1e9": _index_far,
    "ptr-past-filled": _ptr_past_filled,
    "head-1e15": lambda s: _buffer(s).__setitem__("head", 10**15),
    "rng-10-bytes": _set("rng", "torch", value=torch.zeros(10, dtype=torch.uint8)),
    "wrapper-max-episode-steps": _max_steps,
    "env-attribute-new": _env_attribute,
    "buffer-generator-short": lambda s: _buffer(s).__setitem__(
        "generator", torch.zeros(10, dtype=torch.uint8)),
}


@pytest.mark.parametrize("poison", list(POISONS))
def test_poisoned_newest_checkpoint_falls_back_and_keeps_the_good_ones(
        finished_run: Path, tmp_path: Path, poison: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    ckpts = list_checkpoints(run_dir / "checkpoints")
    newest = ckpts[-1]
    state = load_checkpoint(newest)
    POISONS[poison](state)
    torch.save(state, newest)
    proc = run_cli([f"resume={run_dir}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    skipped = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: warning: skipping")]
    assert len(skipped) == 1 and newest.name in skipped[0], proc.stderr[-3000:]
    assert "from step_0000000200.pt at step 200" in proc.stderr
    names = [p.name for p in list_checkpoints(run_dir / "checkpoints")]
    assert names[:2] == ["step_0000000100.pt", "step_0000000200.pt"]  # nothing good pruned
    assert "step_0000000400.pt" in names


def test_resume_prunes_no_good_checkpoint_behind_a_skipped_newer_one(
        finished_run: Path, tmp_path: Path) -> None:
    """keep=2: the run restored from 200 writes 300 (over the poisoned file) and 400; the
    checkpoints kept are those it can go back to, never the skipped file in their place."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    bad = run_dir / "checkpoints" / "step_0000000900.pt"
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    state["counters"]["update_credit"] = math.nan
    torch.save(state, bad)
    (run_dir / "checkpoints" / "step_0000000300.pt").unlink()
    run_dir.joinpath(".hydra", "config.yaml").write_text(
        run_dir.joinpath(".hydra", "config.yaml").read_text().replace("keep: 5", "keep: 2"))
    proc = run_cli([f"resume={run_dir}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = [p.name for p in list_checkpoints(run_dir / "checkpoints")]
    assert names == ["step_0000000300.pt", "step_0000000400.pt", "step_0000000900.pt"], names


def test_hostile_policy_config_is_one_line(finished_run: Path, tmp_path: Path) -> None:
    import rlzoo
    from rlzoo.errors import UserError

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    record = load_checkpoint(run_dir / "policy.pt")
    record["config"]["extra"] = dag(45)
    torch.save(record, run_dir / "policy.pt")
    with pytest.raises(UserError, match="more than 32 deep"):
        rlzoo.load_policy(run_dir)
    with pytest.raises(CheckpointError):
        load_checkpoint(run_dir / "policy.pt")


@pytest.mark.parametrize("command", ["resume", "evaluate"])
def test_alias_bomb_in_config_is_one_line(finished_run: Path, tmp_path: Path,
                                          command: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    bomb = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
                   for i in range(1, 12))
    (run_dir / ".hydra" / "config.yaml").write_text("l0: &l0 [lol]\n" + bomb)
    args = ([f"resume={run_dir}", "total_steps=400"] if command == "resume"
            else [str(run_dir), "--episodes", "1"])
    proc = run_cli(args, module="rlzoo.train" if command == "resume" else "rlzoo.evaluate")
    assert_user_error(proc, "YAML alias")


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_killed_run_with_poisoned_newest_checkpoint_resumes_bit_exact(tmp_path: Path) -> None:
    """A run stopped at 300 whose newest checkpoint was then damaged (negative head) resumes
    from 200 and ends exactly as an unbroken 400-step run: the skipped file left no trace."""
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert run_cli([*PENDULUM, "total_steps=400"], straight).returncode == 0
    assert run_cli([*PENDULUM, "total_steps=300"], split).returncode == 0
    newest = list_checkpoints(split / "checkpoints")[-1]
    state = load_checkpoint(newest)
    state["members"][0]["buffer"]["head"] = -1
    torch.save(state, newest)
    proc = run_cli([f"resume={split}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "from step_0000000200.pt at step 200" in proc.stderr
    a = load_checkpoint(list_checkpoints(straight / "checkpoints")[-1])
    b = load_checkpoint(list_checkpoints(split / "checkpoints")[-1])
    assert a["counters"]["step"] == b["counters"]["step"] == 400
    assert a["algo"]["modules"].keys() == b["algo"]["modules"].keys()
    for key, value in a["algo"]["modules"].items():
        assert torch.equal(value, b["algo"]["modules"][key]), key
    assert torch.equal(a["members"][0]["buffer"]["tensors"]["obs"],
                       b["members"][0]["buffer"]["tensors"]["obs"])


def test_wrapper_fields_go_back_only_where_the_env_holds_them() -> None:
    """A fresh, never-reset env's TimeLimit holds ``_elapsed_steps=None`` (gymnasium sets it on
    reset): a checkpoint's int goes back there. A field the env does not have, a changed
    ``_max_episode_steps``, a field on a layer that does not own it, a negative count or a value
    of another type are refused before anything is set."""
    import gymnasium as gym

    from rlzoo.envs.snapshot import get_wrapper_state, set_wrapper_state

    def fresh() -> Any:
        return gym.make("Pendulum-v1", max_episode_steps=10)

    env = fresh()
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    saved = get_wrapper_state(env)
    assert saved[:2] == [{"_elapsed_steps": 3}, {"_has_reset": True}]
    target = fresh()
    assert get_wrapper_state(target)[0] == {"_elapsed_steps": None}
    set_wrapper_state(target, saved)
    assert get_wrapper_state(target) == saved
    del vars(target)["_elapsed_steps"]  # a TimeLimit that creates it lazily
    set_wrapper_state(target, saved)
    assert target._elapsed_steps == 3
    for layer, fields, match in [
        (0, {"_max_episode_steps": 3}, "_max_episode_steps=3 is not one"),
        (0, {"_elapsed_steps": -1}, "negative"),
        (0, {"_elapsed_steps": True}, "is not one this TimeLimit has"),
        (0, {"_elapsed_steps": 2.0}, "is not one this TimeLimit has"),
        (1, {"_elapsed_steps": 3}, "is not one this OrderEnforcing has"),
        (1, {"_has_reset": 1}, "is not one this OrderEnforcing has"),
        (2, {"_has_reset": True}, "is not one this PassiveEnvChecker has"),
        (3, {"_counter": 3}, "is not one this PendulumEnv has"),
    ]:
        bad = [{} for _ in saved]
        bad[layer] = fields
        target = fresh()
        with pytest.raises(ValueError, match=match):
            set_wrapper_state(target, bad)
        assert get_wrapper_state(target)[:2] == [{"_elapsed_steps": None}, {"_has_reset": False}]
