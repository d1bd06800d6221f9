"""env.backend=warp (rlzoo/envs/mujoco_warp.py): gymnasium v5's locomotion tasks on MuJoCo Warp.

The equivalence tests put Warp's worlds in gymnasium's states (qpos, qvel and the solver's warm
start, recorded along a random-action episode, its terminal step included) and compare one env
step's observation, reward and termination with gymnasium's ``<Task>-v5`` step from the same
state, in float32 tolerance. Warp's worlds run on Warp's CPU device; without ``mujoco-warp``
installed (``pip install rlzoo[warp]``) those tests skip, and the refusal test runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from rlzoo.config.build import make_env
from rlzoo.envs import mujoco_warp as mw
from rlzoo.errors import UserError
from tests.warp_reference import record_episode, rel_error

TASKS = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5")
# One env step, |Warp - gymnasium| / (1 + |gymnasium|). Warp solves the constraints in float32
# to a tolerance it floors at 1e-6 (mujoco_warp/_src/io.py); where a stiff joint limit pushes a
# light Ant leg, that force error of ~3e-5 moves the velocities by ~4e-3 (seed 3, step 24).
TOL = {"Ant-v5": 1e-2}
TOL_DEFAULT = 1e-3


def _cfg(env_id: str = "Hopper-v5", backend: str = "warp") -> object:
    return OmegaConf.create({"device": "cpu", "env": {
        "name": env_id.split("-")[0], "kind": "single", "id": env_id, "backend": backend,
        "kwargs": {}}})


@pytest.fixture(scope="module")
def warp() -> None:
    pytest.importorskip("mujoco_warp")


def test_backend_refused_in_one_line_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mw.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"env.backend=warp needs MuJoCo Warp: pip install "
                                        r"rlzoo\[warp\]$"):
        make_env(_cfg(), 1, 0)
    with pytest.raises(UserError, match="env.backend of a single-agent env must be one of "
                                        "gymnasium, warp, got 'wrap'"):
        make_env(_cfg(backend="wrap"), 1, 0)


def test_a_task_warp_lacks_is_refused(warp: None) -> None:
    with pytest.raises(UserError, match="has no task 'Pendulum-v1'; it has Hopper-v5"):
        make_env(_cfg("Pendulum-v1"), 1, 0)


def _one_step_each(env_id: str, seed: int, picks: int) -> tuple[np.ndarray, ...]:
    """Warp's outputs from gymnasium's states at ``picks`` steps of an episode (the first and
    the last included), all in one batched Warp step: (episode, rows, obs, reward, term)."""
    ep = record_episode(env_id, seed, max_steps=60)
    rows = np.unique(np.linspace(0, len(ep.reward) - 1, picks).round().astype(int))
    env = mw.WarpMuJoCo(env_id, num_envs=len(rows))
    env.set_physics(torch.as_tensor(ep.qpos[rows]), torch.as_tensor(ep.qvel[rows]),
                    torch.as_tensor(ep.warmstart[rows]))
    out = env.step_tensors(torch.as_tensor(ep.action[rows]))
    return ep, rows, out.obs.numpy(), out.reward.numpy(), out.terminated.numpy()


@pytest.mark.parametrize("env_id", TASKS)
def test_one_step_from_gymnasiums_state_equals_gymnasiums(warp: None, env_id: str) -> None:
    ep, rows, obs, reward, terminated = _one_step_each(env_id, seed=3, picks=6)
    assert obs.shape == (len(rows), ep.obs.shape[1])
    tol = TOL.get(env_id, TOL_DEFAULT)
    assert rel_error(obs, ep.obs[rows]).max() < tol
    assert rel_error(reward, ep.reward[rows]).max() < tol
    np.testing.assert_array_equal(terminated, ep.terminated[rows])


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Walker2d-v5", "Humanoid-v5"])
def test_the_terminal_step_terminates_as_gymnasiums(warp: None, env_id: str) -> None:
    ep, rows, _, _, terminated = _one_step_each(env_id, seed=5, picks=2)
    assert ep.terminated[-1], f"{env_id}'s random episode should end inside 60 steps"
    assert terminated[-1] and not terminated[0]


def test_reset_noise_reproducible_next_step_autoreset_and_truncation(warp: None) -> None:
    env = mw.WarpMuJoCo("Hopper-v5", num_envs=2, seed=7, max_episode_steps=2)
    obs, state = env.reset()
    assert state is None and obs.shape == (2, 11)
    assert np.abs(env.v.qpos.numpy() - env._mjm.qpos0).max() <= 5e-3
    assert not np.allclose(obs[0], obs[1])  # each world its own noise
    again = mw.WarpMuJoCo("Hopper-v5", num_envs=2, seed=7)
    np.testing.assert_array_equal(again.reset()[0], obs)
    zero = np.zeros((2, 3), dtype=np.float32)
    first = env.step(zero)
    assert not first.truncated.any() and not first.reset_step.any()
    second = env.step(zero)
    assert second.truncated.all() and not second.terminated.any()
    third = env.step(zero)  # next-step autoreset: the action is ignored, reward 0
    assert third.reset_step.all() and (third.reward == 0).all()
    assert not (third.truncated | third.terminated).any()
    assert np.abs(third.obs[:, :5] - env._mjm.qpos0[1:]).max() <= 5e-3


def test_get_set_state_resumes_bit_for_bit_and_inactive_worlds_wait(warp: None) -> None:
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (6, 2, 3)).astype(np.float32)
    env = mw.WarpMuJoCo("Hopper-v5", num_envs=2, seed=1, max_episode_steps=3)
    env.reset()
    for a in actions[:2]:
        env.step(a)
    saved = env.get_state()
    tail = [env.step(a) for a in actions[2:]]
    other = mw.WarpMuJoCo("Hopper-v5", num_envs=2, seed=99, max_episode_steps=3)
    other.reset()
    other.set_state({**saved, "tensors": {k: torch.as_tensor(v)
                                          for k, v in saved["tensors"].items()}})
    for a, want in zip(actions[2:], tail, strict=True):
        got = other.step(a)
        for field in ("obs", "reward", "terminated", "truncated", "reset_step"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    qpos = other.v.qpos.clone()
    waited = other.step(actions[0], active=np.array([False, True]))
    assert waited.reward[0] == 0 and torch.equal(other.v.qpos[0], qpos[0])
    with pytest.raises(ValueError, match="env_id 'Walker2d-v5'"):
        other.set_state({**saved, "env_id": "Walker2d-v5"})


def test_the_cli_refuses_the_backend_in_one_line_without_the_extra(tmp_path) -> None:
    from conftest import TINY, assert_user_error, run_cli

    if mw.importlib.util.find_spec("mujoco_warp") is not None:
        pytest.skip("mujoco-warp is installed here (the refusal is for machines without it)")
    proc = run_cli(["algo=sac", "env=Hopper", "env.backend=warp", *TINY, "total_steps=10"],
                   tmp_path / "run")
    assert_user_error(proc, "env.backend=warp needs MuJoCo Warp: pip install rlzoo[warp]")


@pytest.mark.slow
def test_sac_trains_on_the_warp_backend_through_the_cli(warp: None, tmp_path) -> None:
    from conftest import TINY, read_summary, run_cli

    args = ["algo=sac", "env=Hopper", "env.backend=warp", "device=cpu", "num_envs=2", *TINY,
            "total_steps=60", "algo.learning_starts=30", "algo.batch_size=16", "eval.every=0",
            "eval.episodes=1", "log.progress=false"]
    proc = run_cli(args, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path / "run")
    assert summary["total_steps"] >= 60 and summary["updates"] > 0
    assert np.isfinite(summary["final_eval_return"])


@pytest.mark.slow
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_a_warp_run_resumes_bit_for_bit_through_the_cli(warp: None, tmp_path) -> None:
    """Split at env step 50 (2 worlds, mid-episode) and resumed to 80 equals a straight 80."""
    from conftest import TINY, read_summary, run_cli

    from tests.test_resume_split import STATE_KEYS, assert_identical, final_checkpoint

    args = ["algo=sac", "env=Hopper", "env.backend=warp", "device=cpu", "num_envs=2", *TINY,
            "algo.learning_starts=30", "algo.batch_size=16", "algo.buffer_size=1000",
            "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
            "seed=5"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    for run_dir, steps in ((straight, 80), (split, 50)):
        proc = run_cli([*args, f"total_steps={steps}"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([f"resume={split}", "total_steps=80"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    assert want["algo"]["updates"] > 0
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    for key in ("total_steps", "updates", "episodes", "final_eval_return"):
        assert read_summary(straight)[key] == read_summary(split)[key], key
