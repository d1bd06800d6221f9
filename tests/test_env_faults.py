"""Envs that break the contract, in this process and in env workers, end the run in one line
that says the cause: an observation, reward or flag of the wrong shape is refused (never
broadcast into the run's arrays), a constructor that raises is named with its error (the fresh
run dir removed, workers or not), a worker that dies says how, and every message about a
checkpoint names one that exists. An error after training (the final evaluation) exits non-zero
and leaves no summary.json claiming a finished run."""

from __future__ import annotations

import multiprocessing
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TINY, assert_user_error, read_summary, run_cli

import rlzoo
import tests.faulty_envs  # noqa: F401 - registers the faulty envs
from rlzoo.envs.base import EnvError
from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.envs.pettingzoo import make_multi_agent_env
from rlzoo.envs.workers import EnvWorkerError, WorkerVecEnv
from rlzoo.errors import UserError
from rlzoo.store.checkpoint import list_checkpoints

SHAPES = [  # env id, the one line's fragment
    ("ShortObs-v0", "step() returned an observation of shape (1,), not one of shape (3,)"),
    ("LongObs-v0", "step() returned an observation of shape (4,), not one of shape (3,)"),
    ("ShortObsReset-v0", "reset() returned an observation of shape (1,), not one of shape (3,)"),
    ("WideReward-v0", "step() returned a reward of shape (2,), not one that is a single value"),
    ("ShortReward-v0", "step() returned a reward of shape (1,), not one that is a single value"),
    ("WideFlags-v0", "step() returned a terminated flag of shape (2,), not one that is a single"),
]


def faulty(env_id: str):
    return lambda n, seed: SingleAgentVecEnv(f"tests.faulty_envs:{env_id}", n, seed)


def drive(env: Any, steps: int = 12) -> None:
    env.reset()
    for _ in range(steps):
        env.step(np.zeros((env.num_envs, *env.act_shape), dtype=np.float32))


@pytest.mark.filterwarnings("ignore:.*not within the observation space")  # gymnasium's own
@pytest.mark.parametrize("env_id, fragment", SHAPES)
def test_an_output_of_the_wrong_shape_is_refused_in_process(env_id: str, fragment: str) -> None:
    env = SingleAgentVecEnv(f"tests.faulty_envs:{env_id}", 2, 0)
    with pytest.raises(EnvError, match=re.escape(fragment)) as caught:
        drive(env)
    assert "\n" not in str(caught.value) and f"tests.faulty_envs:{env_id}: env 0's" in \
        str(caught.value)


@pytest.mark.parametrize("env_id, fragment", SHAPES)
def test_an_output_of_the_wrong_shape_is_refused_in_a_worker(env_id: str, fragment: str) -> None:
    """Env 1 steps in worker 1 (envs 1-1): its own refusal comes back as the worker's line
    (env 0 here is healthy: the fault is in the workers only)."""
    env_id = env_id.replace("-v0", "Worker-v0")
    env = WorkerVecEnv(faulty(env_id), 3, 0, 2)
    procs = list(env._procs)
    with pytest.raises(EnvWorkerError, match=r"^env worker 1 \(envs 1-1, pid \d+\) failed: "
                       + re.escape(f"tests.faulty_envs:{env_id}: env 0's {fragment}")):
        drive(env)
    env.close()
    assert not any(p.is_alive() for p in procs)


class Broken:
    """A PettingZoo parallel env whose ``step`` breaks agent 0's output from its third call:
    ``fault`` is ``obs`` (an observation of shape (1,)), ``reward`` (shape (2,)) or ``flags``
    (a terminated flag of shape (2,))."""

    def __init__(self, env: Any, fault: str) -> None:
        self._env, self._fault, self._calls = env, fault, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
        obs, reward, term, trunc, info = self._env.step(actions)
        self._calls += 1
        agent = self._env.possible_agents[0]
        if self._calls >= 3:
            if self._fault == "obs":
                obs[agent] = obs[agent][:1]
            elif self._fault == "reward":
                reward[agent] = np.array([reward[agent], reward[agent]])
            else:
                term[agent] = np.array([False, False])
        return obs, reward, term, trunc, info


def spread(n: int, seed: int, fault: str, only_in_worker: bool = False) -> Any:
    env = make_multi_agent_env("mpe", "simple_spread_v3", n, seed, max_cycles=25)
    if not only_in_worker or multiprocessing.current_process().name.startswith("rlzoo-env"):
        env._envs = [Broken(e, fault) for e in env._envs]
    return env


MULTI = [("obs", "step() returned an observation for agent agent_0 of shape (1,), not one of "
                 "shape (18,)"),
         ("reward", "step() returned a reward for agent agent_0 of shape (2,), not one that is"),
         ("flags", "step() returned a terminated flag for agent agent_0 of shape (2,), not one")]


@pytest.mark.parametrize("fault, fragment", MULTI)
def test_a_multi_agent_output_of_the_wrong_shape_is_refused(fault: str, fragment: str) -> None:
    with pytest.raises(EnvError, match=re.escape(f"mpe/simple_spread_v3: env 0's {fragment}")):
        drive(spread(2, 0, fault))
    env = WorkerVecEnv(lambda n, s: spread(n, s, fault, only_in_worker=True), 3, 0, 2)
    with pytest.raises(EnvWorkerError, match=r"^env worker 1 \(envs 1-1, pid \d+\) failed: "
                       + re.escape(f"mpe/simple_spread_v3: env 0's {fragment}")):
        drive(env)
    env.close()


def test_a_worker_whose_envs_cannot_be_made_says_why_in_one_line(
        capfd: pytest.CaptureFixture[str]) -> None:
    """The constructor waits for every worker's envs: the cause comes back in one line (no
    traceback of the child), and every worker it started is gone."""
    children = set(multiprocessing.active_children())
    with pytest.raises(EnvWorkerError, match=r"^env worker 1 \(envs 1-1, pid \d+\) failed: "
                       r"RuntimeError: no simulator licence on this host$"):
        WorkerVecEnv(faulty("FailsInitWorker-v0"), 3, 0, 2)
    time.sleep(0.2)
    assert not [p for p in multiprocessing.active_children() if p not in children]
    assert "Traceback" not in capfd.readouterr().err


RUN = ["algo=sac", "env=gym", *TINY, "algo.learning_starts=100",
       "algo.batch_size=32", "eval.episodes=1", "log.progress=false"]


@pytest.mark.parametrize("env_id, workers", [("FailsInit-v0", 0), ("FailsInitWorker-v0", 2)])
def test_a_constructor_that_raises_is_one_line_and_leaves_no_run_dir(
        tmp_path: Path, env_id: str, workers: int) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli([*RUN, f"env.id=tests.faulty_envs:{env_id}", f"env_workers={workers}",
                    "num_envs=3", "total_steps=300"], run_dir)
    assert_user_error(proc, f"cannot make env=tests.faulty_envs:{env_id}: its constructor raised "
                      "RuntimeError: no simulator licence on this host")
    assert not run_dir.exists()


def test_a_wrong_observation_in_a_worker_ends_the_run_in_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli([*RUN, "env.id=tests.faulty_envs:ShortObsWorker-v0", "env_workers=2",
                    "num_envs=3", "total_steps=300", "checkpoint.every=0"], run_dir)
    assert_user_error(proc, "env worker 1 (envs 1-1, pid ", "failed: tests.faulty_envs:"
                      "ShortObsWorker-v0: env 0's step() returned an observation of shape (1,)",
                      "the run stops at step 12, before its first checkpoint, so there is "
                      "nothing to resume: launch it again")
    assert "checkpoint is kept" not in proc.stderr and not list_checkpoints(
        run_dir / "checkpoints")


@pytest.mark.parametrize("die_at, checkpoints", [(20, False), (130, True)])
def test_a_dead_worker_names_only_a_checkpoint_that_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, die_at: int, checkpoints: bool) -> None:
    """Each worker steps 1 of 3 envs: dying at its 20th step is before the first checkpoint
    (step 100), at its 130th after it."""
    monkeypatch.setenv("RLZOO_TEST_WORKER_FAULT", f"die:{die_at}")
    run_dir = tmp_path / "run"
    proc = run_cli([*RUN, "env.id=tests.worker_envs:Doomed-v0", "env_workers=2",
                    "num_envs=3", "total_steps=600", "eval.every=0", "checkpoint.every=100"],
                   run_dir)
    assert_user_error(proc, "env worker ", "died (exit code 9)")
    line = next(x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error:"))
    found = list_checkpoints(run_dir / "checkpoints")
    if checkpoints:
        named = re.search(r"its last checkpoint (\S+) is kept: continue with: python -m "
                          r"rlzoo.train resume=(\S+)$", line)
        assert named and Path(named.group(1)) == found[-1] and named.group(2) == str(run_dir)
    else:
        assert not found and "checkpoint is kept" not in line
        assert line.endswith("before its first checkpoint, so there is nothing to resume: "
                             "launch it again")


def test_an_error_at_the_final_evaluation_exits_non_zero_without_a_stale_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished run extended by a resume whose final evaluation fails: the earlier leg's
    summary.json is gone once the resumed leg checkpointed past it, the run exits non-zero, a
    second resume evaluates again (not reusing the earlier leg's evaluation as this step's),
    and once the env works the summary is the new evaluation's."""
    run_dir = tmp_path / "run"
    monkeypatch.setenv("RLZOO_TEST_EVAL_FAULT", "0")
    args = [*RUN, "env.id=tests.faulty_envs:FailsEval-v0", "eval.every=0", "num_envs=1"]
    assert run_cli([*args, "total_steps=300"], run_dir).returncode == 0
    first = read_summary(run_dir)
    monkeypatch.setenv("RLZOO_TEST_EVAL_FAULT", "1")
    for _ in range(2):
        proc = run_cli([f"resume={run_dir}", "total_steps=400", "trust=[tests]"])
        assert proc.returncode != 0 and "eval env broke" in proc.stderr, proc.stderr[-2000:]
        assert not (run_dir / "summary.json").exists()
        assert "final eval return" not in proc.stdout
    monkeypatch.setenv("RLZOO_TEST_EVAL_FAULT", "0")
    proc = run_cli([f"resume={run_dir}", "total_steps=400", "trust=[tests]"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = read_summary(run_dir)
    assert summary["total_steps"] == 400
    assert summary["final_eval_return"] != first["final_eval_return"]


def test_an_error_writing_the_summary_is_raised_and_leaves_no_summary(tmp_path: Path) -> None:
    """summary.json is written last, after HPARAMS and the loggers' close: a run that cannot
    write it raises (the command line exits 2) and nothing says the run ended well."""
    run_dir = tmp_path / "run"

    def block_the_summary(checkpoint: Any) -> None:
        if checkpoint.step == 300:  # the last checkpoint: a directory where summary.json goes
            (checkpoint.run_dir / "summary.json").mkdir()

    with pytest.raises(UserError, match="summary.json"):
        rlzoo.train("algo=sac", "env=Pendulum", *TINY, "total_steps=300",
                    "algo.learning_starts=100", "eval.episodes=1", "log.progress=false",
                    run_dir=run_dir, on_checkpoint=block_the_summary)
    assert (run_dir / "summary.json").is_dir() and (run_dir / "policy.pt").is_file()


def test_an_error_after_the_final_evaluation_exits_non_zero_without_a_summary(
        tmp_path: Path) -> None:
    """The disk fills up while the run writes its HPARAMS (after its final evaluation and
    checkpoint): the command exits non-zero and no summary.json says the run ended well."""
    run_dir = tmp_path / "run"
    proc = run_cli(["--fail-at=rlzoo.run.loop:hparams", "algo=sac", "env=Pendulum", *TINY,
                    "total_steps=300", "algo.learning_starts=100", "eval.episodes=1",
                    "log.progress=false", f"hydra.run.dir={run_dir}"],
                   module="tests.signal_moments")
    assert proc.returncode != 0 and "No space left on device" in proc.stderr
    assert list_checkpoints(run_dir / "checkpoints") and not (run_dir / "summary.json").exists()
    assert "final eval return" not in proc.stdout
