"""``env=vmas/<scenario>`` (rlzoo.envs.vmas_batched): VMAS's vectorized scenarios as one vector env.

What is checked: actions mapped onto VMAS's own bounds (0.5 in give_way, not 1), the global state
as the concatenated observations, ``max_steps`` as a truncation and the scenario's ``done`` as a
termination, next-step autoreset, seeding (same seed, same episodes; envs made in between do not
move an env's stream; the caller's generators untouched), a mid-episode ``get_state`` /
``set_state`` that continues bit for bit, one-line errors for bad names and options, and runs of
MADDPG and HASAC from the command line (run dir, evaluation, checkpoint, bit-identical repeats).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, read_summary, run_cli

pytestmark = pytest.mark.extra("vmas")

SMALL = ["num_envs=16", "algo.learning_starts=320", "algo.batch_size=32", "eval.every=400",
         "eval.episodes=2", "env.kwargs.max_steps=20", "log.progress=false", *TINY]


def make(scenario: str, num_envs: int = 4, seed: int = 0, **kw):
    from rlzoo.envs.vmas_batched import VmasVecEnv

    return VmasVecEnv(scenario, num_envs, seed, **kw)


def random_actions(env, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (env.num_envs, *env.act_shape)).astype(np.float32)
            for _ in range(n)]


def test_actions_are_mapped_onto_the_scenarios_own_bounds() -> None:
    """give_way's agents act in [-0.5, 0.5]: rlzoo's [-1, 1] reaches VMAS scaled by 0.5."""
    env = make("give_way", 3)
    env.reset()
    assert np.array_equal(env.action_low, np.full((2, 2), -0.5))
    assert np.array_equal(env.action_high, np.full((2, 2), 0.5))
    seen = []
    step = env._env.step
    env._env.step = lambda actions: (seen.append([a.clone() for a in actions]), step(actions))[1]
    action = np.array([[[1.0, -1.0], [0.0, 0.5]]] * 3, dtype=np.float32)
    env.step(action)
    assert torch.equal(seen[0][0], torch.tensor([[0.5, -0.5]] * 3))
    assert torch.equal(seen[0][1], torch.tensor([[0.0, 0.25]] * 3))


def test_shapes_state_truncation_and_autoreset() -> None:
    env = make("navigation", 4, max_steps=5)
    obs, state = env.reset()
    assert obs.shape == (4, 4, 18) and env.act_shape == (4, 2) and state.shape == (4, 72)
    assert np.array_equal(state, obs.reshape(4, -1))  # equal sizes: no padding to drop
    for t, action in enumerate(random_actions(env, 6)):
        r = env.step(action)
        assert np.array_equal(r.state, r.obs.reshape(4, -1))
        assert r.agent_reward.shape == (4, 4)
        assert np.allclose(r.reward, r.agent_reward.mean(1))
        assert not r.terminated.any()
        assert r.truncated.all() == (t == 4) and r.truncated.any() == (t == 4)
        assert r.reset_step.all() == (t == 5)
    assert np.array_equal(r.reward, np.zeros(4))  # the reset call: no transition


def test_padding_of_agents_with_other_sizes() -> None:
    """simple_speaker_listener: speaker acts in 5 dims, listener in 2; obs 3 and 11."""
    env = make("simple_speaker_listener", 2)
    obs, state = env.reset()
    assert env.act_shape == (2, 5) and env.act_dims == [5, 2] and env.obs_dims == [3, 11]
    assert env.act_mask.tolist() == [[True] * 5, [True, True, False, False, False]]
    assert state.shape == (2, 14) and np.array_equal(state, np.concatenate(
        [obs[:, 0, :3], obs[:, 1, :11]], 1))
    assert not obs[:, 0, 3:].any()


def test_the_scenarios_done_is_a_termination() -> None:
    env = make("navigation", 3)
    env.reset()
    env._env.scenario.done = lambda: torch.tensor([True, False, False])
    r = env.step(random_actions(env, 1)[0])
    assert r.terminated.tolist() == [True, False, False] and not r.truncated.any()
    r = env.step(random_actions(env, 1)[0])
    assert r.reset_step.tolist() == [True, False, False]
    assert env.steps.tolist() == [0, 2, 2]


def test_same_seed_same_episodes_and_streams_of_their_own() -> None:
    def rollout(env) -> np.ndarray:
        out = [env.reset()[0]]
        out += [env.step(a).obs for a in random_actions(env, 12)]
        return np.stack(out)

    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = make("balance", 4, seed=7, max_steps=5)
    first = rollout(a)
    other = make("balance", 4, seed=8, max_steps=5)  # VMAS shares one random state per process
    rollout(other)
    again = rollout(make("balance", 4, seed=7, max_steps=5))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, rollout(other))
    assert torch.equal(torch.rand(3), before)  # the caller's generator was left as it was


@pytest.mark.parametrize("scenario", ["navigation", "balance", "simple_speaker_listener",
                                      "football"])
def test_get_state_set_state_continues_bit_for_bit_mid_episode(scenario: str) -> None:
    """Saved after 3 steps of 7-step episodes, restored into an env of another seed, the next
    12 steps (two autoresets) give the same observations, rewards and flags. simple_speaker_
    listener's goal is an entity chosen at reset: saved as a reference, by name."""
    env = make(scenario, 4, seed=3, max_steps=7)
    env.reset()
    for action in random_actions(env, 3, seed=1):
        env.step(action)
    saved = env.get_state()
    actions = random_actions(env, 12, seed=2)
    want = [env.step(a) for a in actions]
    twin = make(scenario, 4, seed=99, max_steps=7)
    twin.reset()
    twin.set_state(saved)
    got = [twin.step(a) for a in actions]
    for w, g in zip(want, got, strict=True):
        for field in ("obs", "state", "reward", "agent_reward", "terminated", "truncated",
                      "reset_step"):
            assert np.array_equal(getattr(w, field), getattr(g, field)), field
    assert any(w.reset_step.any() for w in want)


def test_bad_scenario_and_options_are_one_line() -> None:
    from rlzoo.envs.families.vmas import FAMILY

    with pytest.raises(ValueError, match=r"unknown vmas scenario 'navigaton'; available: .*"
                                         r"navigation"):
        FAMILY.make_backend("batched", "navigaton", 2, 0)
    with pytest.raises(ValueError, match="has no option n_agnts"):
        FAMILY.make_backend("batched", "navigation", 2, 0, n_agnts=3)
    with pytest.raises(ValueError, match="env.kwargs.clamp_actions is set by rlzoo"):
        FAMILY.make_backend("batched", "navigation", 2, 0, clamp_actions=False)


def test_cli_refuses_bad_names_in_one_line(tmp_path: Path) -> None:
    for i, (args, want) in enumerate((
            (["env.scenario=navigaton"], "available: balance, "),
            (["+env.kwargs.n_agnts=3"], "has no option n_agnts"),
            (["env.backend=pettingzoo"], "env family vmas runs on env.backend=batched"))):
        proc = run_cli(["algo=maddpg", "env=vmas/navigation", "total_steps=100", *args],
                       tmp_path / str(i))
        assert proc.returncode == 2, proc.stderr[-2000:]
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rlzoo: error:")]
        assert len(lines) == 1 and want in lines[0], proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr


def test_maddpg_runs_repeats_bit_for_bit_and_evaluates(tmp_path: Path) -> None:
    from test_resume_split import assert_identical, final_checkpoint

    args = ["algo=maddpg", "env=vmas/navigation", "total_steps=800", "seed=3", *SMALL]
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        proc = run_cli(args, run)
        assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (read_summary(r) for r in runs)
    assert a["env"] == "vmas-navigation" and a["updates"] > 0 and a["episodes"] > 0
    assert a["final_eval_return"] == b["final_eval_return"]
    assert len(a["final_eval_agent_returns"]) == 4
    for key in ("algo", "members", "rng"):
        assert_identical(final_checkpoint(runs[0])[key], final_checkpoint(runs[1])[key], key)
    proc = run_cli([str(runs[0])], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(next(runs[0].glob("eval_*.json")).read_text())
    assert np.isfinite(report["mean"]) and report["lengths"] == [20] * len(report["lengths"])


def test_hasac_runs_on_give_way(tmp_path: Path) -> None:
    """HASAC on a scenario whose bounds are 0.5: a run dir, a final checkpoint, finite
    returns."""
    run = tmp_path / "hasac"
    proc = run_cli(["algo=hasac", "env=vmas/give_way", "total_steps=800", *SMALL], run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = read_summary(run)
    assert s["env"] == "vmas-give_way" and s["updates"] > 0
    assert np.isfinite(s["final_eval_return"])
    assert list((run / "checkpoints").glob("step_*.pt"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_worlds_live_on_the_cuda_device_and_resume_there() -> None:
    env = make("navigation", 8, seed=1, max_steps=5, device="cuda")
    env.reset()
    assert env._env.world.agents[0].state.pos.device.type == "cuda"
    s = env.step_tensors(torch.zeros(8, 4, 2, device="cuda"))
    assert s.obs.device.type == "cuda" and s.state.device.type == "cuda"
    saved = env.get_state()
    actions = random_actions(env, 8)
    want = [env.step(a).obs for a in actions]
    twin = make("navigation", 8, seed=5, max_steps=5, device="cuda")
    twin.reset()
    twin.set_state(saved)
    assert all(np.array_equal(w, twin.step(a).obs) for w, a in zip(want, actions, strict=True))
