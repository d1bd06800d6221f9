"""env_workers=W: the training envs stepped in worker processes, bit-identical to stepping them
in turn; a worker that dies or hangs ends the run in one line with its last checkpoint kept, and
no worker outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, alive, assert_gone, assert_user_error, read_summary, run_cli

from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.envs.pettingzoo import make_multi_agent_env
from rlzoo.envs.workers import EnvWorkerError, WorkerVecEnv
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint


def hopper(n: int, seed: int) -> SingleAgentVecEnv:
    return SingleAgentVecEnv("Hopper-v5", n, seed)


def spread(n: int, seed: int):
    return make_multi_agent_env("mpe", "simple_spread_v3", n, seed, max_cycles=25)


@pytest.mark.parametrize("make, workers", [(hopper, 2), (hopper, 3), (spread, 2)])
def test_workers_step_exactly_as_in_turn_across_autoresets_and_a_state_round_trip(make, workers):
    E = 5
    plain, split = make(E, 7), WorkerVecEnv(make, E, 7, workers)
    try:
        for a, b in zip(plain.reset(), split.reset(), strict=True):
            assert (a is None and b is None) or np.array_equal(a, b)
        rng = np.random.default_rng(1)
        actions = rng.uniform(-1, 1, (70, E, *plain.act_shape)).astype(np.float32)
        saved, actives = None, []
        for t, action in enumerate(actions):
            active = None if t % 9 else rng.random(E) < 0.6
            actives.append(active)
            x, y = plain.step(action, active=active), split.step(action, active=active)
            for name in ("obs", "reward", "terminated", "truncated", "reset_step", "state",
                         "agent_reward"):
                want, got = getattr(x, name), getattr(y, name)
                assert (want is None and got is None) or (
                    np.array_equal(want, got) and want.dtype == got.dtype), (t, name)
            if t == 33:
                saved = split.get_state()
        assert any(plain.step(actions[0]).reset_step.tolist() + [True])
        # a fresh worker env restored at step 33 repeats steps 34.. exactly
        again = WorkerVecEnv(make, E, 99, workers)
        again.reset()
        again.set_state(saved)
        ref = WorkerVecEnv(make, E, 7, workers)
        ref.reset()
        for action, active in zip(actions[:34], actives[:34], strict=True):
            ref.step(action, active=active)
        for action, active in zip(actions[34:50], actives[34:50], strict=True):
            assert np.array_equal(ref.step(action, active=active).obs,
                                  again.step(action, active=active).obs)
        with pytest.raises(ValueError, match="same env_workers"):
            WorkerVecEnv(make, E, 7, 1).set_state(saved)
        assert split.obs_shape == plain.obs_shape and split.max_episode_steps is not None
        again.close(), ref.close()
    finally:
        split.close()


class Float64Rewards(SingleAgentVecEnv):
    """Hopper whose rewards come as float64, outside the VecEnv contract's float32."""

    def step(self, action, active=None):  # type: ignore[no-untyped-def]
        result = super().step(action, active=active)
        result.reward = result.reward.astype(np.float64) * (1 + 1e-12)
        return result


@pytest.mark.parametrize("make, shared", [(hopper, True), (spread, True),
                                          (lambda n, s: Float64Rewards("Hopper-v5", n, s), False)])
def test_a_workers_step_comes_through_shared_memory_unless_its_arrays_break_the_contract(
        make, shared, monkeypatch):
    """Rewards and flags of the contract's dtypes come back through shared memory (no pickled
    arrays); another dtype comes back by pipe, unchanged (float64 stays float64)."""
    published = []
    real = WorkerVecEnv._published
    monkeypatch.setattr(WorkerVecEnv, "_published",
                        lambda self, a, b: published.append((a, b)) or real(self, a, b))
    E = 4
    plain, split = make(E, 3), WorkerVecEnv(make, E, 3, 1)
    try:
        plain.reset(), split.reset()
        rng = np.random.default_rng(5)
        for _ in range(40):
            action = rng.uniform(-1, 1, (E, *plain.act_shape)).astype(np.float32)
            x, y = plain.step(action), split.step(action)
            for name in ("obs", "reward", "terminated", "truncated", "reset_step", "state",
                         "agent_reward"):
                want, got = getattr(x, name), getattr(y, name)
                assert (want is None and got is None) or (
                    np.array_equal(want, got) and want.dtype == got.dtype), name
        assert (published == [(2, 4)] * 40) if shared else not published
    finally:
        split.close()


def test_a_dead_worker_is_one_error_and_the_others_are_stopped():
    env = WorkerVecEnv(hopper, 4, 0, 2)
    env.reset()
    procs = list(env._procs)
    os.kill(procs[0].pid, signal.SIGKILL)  # slices: envs 0 here, 1-2 and 3 in workers 1, 2
    procs[0].join(5)
    with pytest.raises(EnvWorkerError,
                       match=r"env worker 1 \(envs 1-2, pid \d+\) died \(killed by SIGKILL\)$"):
        env.step(np.zeros((4, 3), dtype=np.float32))
    time.sleep(0.2)
    assert not any(p.is_alive() for p in procs)
    env.close()


def test_a_worker_that_does_not_answer_is_killed_as_hung(monkeypatch):
    import tests.worker_envs  # noqa: F401 - registers Doomed-v0

    monkeypatch.setenv("RLZOO_TEST_WORKER_FAULT", "hang:3")
    env = WorkerVecEnv(lambda n, s: SingleAgentVecEnv("Doomed-v0", n, s), 2, 0, 2, timeout=1.0)
    env.reset()
    env.step(np.zeros((2, 1), dtype=np.float32))
    env.step(np.zeros((2, 1), dtype=np.float32))
    with pytest.raises(EnvWorkerError, match="answered nothing for 1 s"):
        env.step(np.zeros((2, 1), dtype=np.float32))
    time.sleep(0.2)
    assert not any(p.is_alive() for p in env._procs)
    env.close()


def test_no_worker_outlives_a_killed_parent(tmp_path: Path):
    script = (
        "import sys, time\n"
        "from rlzoo.envs.gym import SingleAgentVecEnv\n"
        "from rlzoo.envs.workers import WorkerVecEnv\n"
        "env = WorkerVecEnv(lambda n, s: SingleAgentVecEnv('Pendulum-v1', n, s), 3, 0, 2)\n"
        "env.reset()\n"
        "print(' '.join(str(p.pid) for p in env._procs), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    pids = [int(p) for p in proc.stdout.readline().split()]  # type: ignore[union-attr]
    assert len(pids) == 2 and all(Path(f"/proc/{p}").exists() for p in pids)
    proc.kill()
    proc.wait()
    assert_gone(pids)


RUN = ["algo=sac", "env=gym", "env.id=tests.worker_envs:Doomed-v0", *TINY, "num_envs=2",
       "env_workers=2", "algo.learning_starts=100", "algo.batch_size=32", "eval.every=0",
       "eval.episodes=1", "checkpoint.every=100", "log.progress=false"]


@pytest.mark.usefixtures("fresh_interpreters")
def test_a_run_whose_worker_dies_ends_in_one_line_and_resumes_from_its_last_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    proc = run_cli([*RUN, "total_steps=400"], straight)
    assert proc.returncode == 0, proc.stderr[-3000:]
    monkeypatch.setenv("RLZOO_TEST_WORKER_FAULT", "die:130")  # each worker steps 1 of 2 envs
    proc = run_cli([*RUN, "total_steps=400"], broken)
    assert_user_error(proc, "env worker", "died", "resume=")
    steps = sorted(int(load_checkpoint(p)["counters"]["step"])
                   for p in list_checkpoints(broken / "checkpoints"))
    assert steps and max(steps) <= 260 and max(steps) % 100 == 0
    monkeypatch.delenv("RLZOO_TEST_WORKER_FAULT")
    proc = run_cli([f"resume={broken}", "total_steps=400", "trust=[tests]"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = read_summary(straight), read_summary(broken)
    assert want["final_eval_return"] == got["final_eval_return"]
    a, b = (load_checkpoint(list_checkpoints(d / "checkpoints")[-1]) for d in (straight, broken))
    assert a["counters"]["step"] == b["counters"]["step"] == 400
    for key, value in a["algo"]["modules"].items():
        assert torch.equal(value, b["algo"]["modules"][key]), key


def child_pids(pid: int) -> set[int]:
    """The live (non-zombie) children of ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_checkpoint_a_run_with_workers_and_leave_no_worker(
        tmp_path: Path, sig: signal.Signals):
    """The workers ignore the signal; the trainer takes it, saves every worker's env state in
    its checkpoint, stops the workers and says how to resume; the resumed run goes on."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlzoo.train", "algo=sac", "env=Pendulum", *TINY, "num_envs=3",
         "env_workers=2", "total_steps=1000000", "algo.learning_starts=1000000", "eval.every=0",
         "log.progress=false", f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    workers: set[int] = set()
    while len(workers) < 2 and time.time() < deadline:
        time.sleep(0.5)
        workers = child_pids(proc.pid)
    assert len(workers) >= 2, "the workers never started"
    while time.time() < deadline and not list(run_dir.glob("events.out.tfevents.*")):
        time.sleep(0.1)  # training has begun
    time.sleep(3.0)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-2000:]
    assert f"stopped by {sig.name}" in stderr and f"resume={run_dir}" in stderr
    assert not any(alive(p) for p in workers)
    (checkpoint,) = list_checkpoints(run_dir / "checkpoints")
    step = int(load_checkpoint(checkpoint)["counters"]["step"])
    assert 0 < step < 1000000
    resumed = run_cli([f"resume={run_dir}", f"total_steps={step + 30}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert read_summary(run_dir)["total_steps"] == step + 30


@pytest.mark.usefixtures("fresh_interpreters")
def test_a_seed_group_with_workers_is_the_group_stepped_in_turn(tmp_path: Path):
    """seeds=2 with env_workers=2 (every seed's envs in its own workers, stepped at once)
    trains exactly as the same group with its envs stepped in turn."""
    group = ["algo=sac", "env=Pendulum", *TINY, "seeds=2", "num_envs=2", "total_steps=300",
             "algo.learning_starts=100", "algo.batch_size=32", "eval.every=300",
             "eval.episodes=1", "log.progress=false"]
    last = {}
    for workers in (0, 2):
        run_dir = tmp_path / f"w{workers}"
        proc = run_cli([*group, f"env_workers={workers}"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        last[workers] = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    x, y = last[0], last[2]
    assert x["counters"]["step"] == y["counters"]["step"]
    for key, value in x["algo"]["modules"].items():
        assert torch.equal(value, y["algo"]["modules"][key]), key
    for k in range(2):
        assert torch.equal(x["members"][k]["buffer"]["tensors"]["obs"],
                           y["members"][k]["buffer"]["tensors"]["obs"])


def test_an_interpreter_that_exits_without_close_does_not_wait_for_its_workers(tmp_path: Path):
    """Workers ignore SIGTERM (multiprocessing's exit handler terminates daemon processes with
    it, then joins them); a script, or a run ending in an uncaught error, that never calls
    close() must still exit, and leave no worker."""
    script = (
        "from rlzoo.envs.gym import SingleAgentVecEnv\n"
        "from rlzoo.envs.workers import WorkerVecEnv\n"
        "env = WorkerVecEnv(lambda n, s: SingleAgentVecEnv('Pendulum-v1', n, s), 3, 0, 2)\n"
        "env.reset()\n"
        "print(' '.join(str(p.pid) for p in env._procs), flush=True)\n"
        "raise SystemExit('leaving without close')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 1 and "leaving without close" in proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2 and not any(alive(p) for p in pids)


@pytest.mark.parametrize("env_args", [["env=mpe/simple_spread", "env.backend=batched"],
                                      ["env=Hopper", "env.backend=warp"]])
def test_workers_with_a_backend_that_steps_all_its_envs_at_once_are_refused_in_one_line(
        tmp_path: Path, env_args: list[str]):
    """env.backend=warp (whose step_device the worker env passed on to its own slice only) and
    batched (one generator for every env's resets) step every env at once already."""
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=sac" if "Hopper" in env_args[0] else "algo=maddpg", *env_args,
                    "num_envs=4", "env_workers=1", "total_steps=8"], run_dir)
    assert_user_error(proc, f"{env_args[1]} steps all num_envs envs at once", "env_workers=0")
    assert not run_dir.exists()
