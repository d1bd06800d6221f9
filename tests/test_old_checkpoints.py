"""Run dirs written before the one-loop change (tests/fixtures/pre_one_loop, by commit 26669bf)
still resume and evaluate: the single-agent trainer's loop state, the multi-agent trainer's
per-agent episode returns and COMA's rollout all load into the one loop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import read_summary, run_cli
from test_resume_split import STATE_KEYS, assert_identical, final_checkpoint

from rlzoo.run.saved_state import has_seed_axis
from rlzoo.run.seed_layout import without_seed_axis
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "pre_one_loop"
CASES = {  # name: (step the old run stopped at, extra steps to train)
    "sac": (250, 60),  # mid-episode (Pendulum episodes are 200 steps)
    "sac_chunk": (252, 40),  # 2 envs, 4-step action chunks in flight
    "maddpg": (137, 30),  # MPE, mid-episode (25-step episodes)
    "coma": (130, 60),  # on-policy, mid-rollout (rollout_steps=50)
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_run_dir_resumes_and_evaluates(tmp_path: Path, name: str) -> None:
    old_step, extra = CASES[name]
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / name, run_dir)
    assert list_checkpoints(run_dir / "checkpoints")[-1].name == f"step_{old_step:010d}.pt"
    proc = run_cli([f"resume={run_dir}", f"total_steps={old_step + extra}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resuming {run_dir} from step_{old_step:010d}.pt at step {old_step}" in proc.stderr
    summary = read_summary(run_dir)
    assert summary["total_steps"] >= old_step + extra
    assert np.isfinite(summary["final_eval_return"])
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    loop = state["members"][0]["loop"]  # written in the one layout
    if name in ("maddpg", "coma"):  # the old per-agent returns became team + agent returns
        agent = loop["agent_return"].numpy()
        assert agent.shape == (1, 3) and loop["episode_return"].shape == (1,)
        assert np.allclose(loop["episode_return"].numpy(), agent.mean(axis=1))
        assert loop["env_state"].shape == (1, 54)
    else:
        assert "agent_return" not in loop and "env_state" not in loop
    proc = run_cli([str(run_dir), "--episodes", "2"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(next(run_dir.glob("eval_*.json")).read_text())
    assert record["step"] == summary["total_steps"] and len(record["returns"]) == 2


FORMAT2 = Path(__file__).parent / "fixtures" / "format2"
CONTINUED = torch.load(FORMAT2 / "continued.pt", weights_only=True)
FORMAT2_CASES = [("sac", 250, 310), ("hasac", 137, 170)]  # name, old step, resumed to


def _same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Equal to 1e-5 (integers exactly). continued.pt's numbers were computed on one machine, and
    a CPU of the same SIMD kind but another make rounds a matmul's sums differently (an AMD EPYC
    ends 2.9e-6 from the fixture's Intel numbers); bit for bit, on any CPU, is the next test's."""
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg=what)


def _fixture_args(name: str) -> list[str]:
    """The command line that wrote ``format2/<name>``, without its total_steps."""
    lines = (FORMAT2 / name / ".hydra" / "overrides.yaml").read_text().splitlines()
    return [line.removeprefix("- ") for line in lines if "total_steps=" not in line]


@pytest.mark.parametrize(("name", "old_step", "until"), FORMAT2_CASES)
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_the_format2_layout_resumes_bit_identically_on_this_cpu(
        tmp_path: Path, name: str, old_step: int, until: int) -> None:
    """This code's own checkpoint at the fixture's step, rewritten in format 2's layout (the
    fixture's keys; the weights and moments without the seed axis), resumes to exactly the
    weights, moments and loop state of a run that went straight through."""
    straight, first = tmp_path / "straight", tmp_path / "first"
    for run_dir, steps in ((straight, until), (first, old_step)):
        proc = run_cli([*_fixture_args(name), f"total_steps={steps}"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    state = final_checkpoint(first)
    fixture = final_checkpoint(FORMAT2 / name)
    old = {**state, "format": 2, "algo": without_seed_axis(state["algo"])}
    assert set(old) - {"torch_threads"} == set(fixture) - {"torch_threads"}
    for key, value in old["algo"]["modules"].items():  # the fixture's layout, key by key
        assert value.shape == fixture["algo"]["modules"][key].shape, key
    path = list_checkpoints(first / "checkpoints")[-1]
    save_checkpoint(path, old)
    assert not has_seed_axis(load_checkpoint(path))
    proc = run_cli([f"resume={first}", f"total_steps={until}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(first)
    assert got["format"] == want["format"] == 3 and got["counters"]["step"] == until
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)


@pytest.mark.parametrize(("name", "old_step", "until"), FORMAT2_CASES)
def test_a_single_run_saved_without_the_seed_axis_evaluates_and_resumes_as_it_would_have(
        tmp_path: Path, name: str, old_step: int, until: int) -> None:
    """Checkpoint format 2 (tests/fixtures/format2, written by commit 4c1f089: a single run's
    weights without the seed axis; sac on Pendulum mid-episode, hasac on MPE with MemberAdam's
    per-agent step counts). Evaluate reads the old checkpoint; resume continues to exactly the
    weights, moments and step counts that the old code's own resume reached (continued.pt), and
    the new checkpoint holds them with the seed axis first (``[1, ...]``), as a group's member."""
    run_dir = tmp_path / name
    shutil.copytree(FORMAT2 / name, run_dir)
    old = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    assert old["format"] == 2 and old["counters"]["step"] == old_step
    proc = run_cli([str(run_dir), "--episodes", "1"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(next(run_dir.glob("eval_*.json")).read_text())["step"] == old_step
    proc = run_cli([f"resume={run_dir}", f"total_steps={until}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    new = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    want = CONTINUED[name]["algo"]
    assert new["format"] == 3 and new["counters"]["step"] == CONTINUED[name]["step"] == until
    assert new["algo"]["updates"] == want["updates"] > old["algo"]["updates"]
    assert new["algo"]["modules"].keys() == want["modules"].keys()
    for key, value in want["modules"].items():
        got = new["algo"]["modules"][key]
        assert got.shape == (1, *value.shape), key
        _same(got[0], value, key)
    axes = set()
    for opt, saved in want["optimizers"].items():
        for index, entries in saved["state"].items():
            for key, value in entries.items():
                got = new["algo"]["optimizers"][opt]["state"][index][key]
                shared = key == "step" and value.dim() == 0  # Adam's one count, a group's too
                assert got.shape == (value.shape if shared else (1, *value.shape)), (opt, key)
                _same(got.reshape(value.shape), value, f"{opt} {index} {key}")
                axes.add((key, shared))
    assert {("exp_avg", False), ("step", True)} <= axes
    if name == "hasac":
        assert ("step", False) in axes  # MemberAdam's step counts per agent: [1, N]
    proc = run_cli([str(run_dir), "--episodes", "1"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_moved_components_old_target_builds_the_class_where_it_is_now() -> None:
    """Run dirs written before issue 53 name ``rlzoo.tuners.entropy.AutoAlpha`` (and the package's
    re-export ``rlzoo.tuners.AutoAlpha``); read from a run dir (a DictConfig) or a ``policy.pt``
    (a plain dict), they name ``rlzoo.optim.entropy``, where the tuners are now."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    from rlzoo.config.added_keys import with_current_targets
    from rlzoo.optim.entropy import AutoAlpha, FixedAlpha

    fixture = FORMAT2 / "sac" / ".hydra" / "config.yaml"
    assert "rlzoo.tuners.AutoAlpha" in fixture.read_text()  # the case is real
    cfg = OmegaConf.load(fixture)
    now = with_current_targets(cfg)
    assert get_class(now.tuner._target_) is AutoAlpha and now.algo._target_ == cfg.algo._target_
    assert cfg.tuner._target_ == "rlzoo.tuners.AutoAlpha"  # a copy: the input unchanged
    plain = {"tuner": {"_target_": "rlzoo.tuners.entropy.FixedAlpha"},
             "list": [{"_target_": "x.y"}]}
    assert with_current_targets(plain)["tuner"]["_target_"] == "rlzoo.optim.entropy.FixedAlpha"
    assert get_class(with_current_targets(plain)["tuner"]["_target_"]) is FixedAlpha
    assert with_current_targets(OmegaConf.create({"a": 1})) == {"a": 1}
