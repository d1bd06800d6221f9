"""Reliability: bit-exact resume, crash safety, signals, NaN detection, safe loading, bad input."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY, assert_user_error, read_summary, run_cli
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint

PENDULUM = ["env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32", "eval.every=200",
            "eval.episodes=2", "checkpoint.every=100", "log.every=50", "log.progress=false",
            "algo.buffer_size=5000", "seed=7", *TINY]
MADDPG = ["algo=maddpg", "env=mpe/simple_spread", "algo.learning_starts=50", "algo.batch_size=32",
          "eval.every=100", "eval.episodes=2", "checkpoint.every=50", "log.every=50",
          "log.progress=false", "algo.buffer_size=2000", "seed=7", *TINY]


def final_modules(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])["algo"]["modules"]


def assert_same_run(a: Path, b: Path) -> None:
    ma, mb = final_modules(a), final_modules(b)
    assert ma.keys() == mb.keys()
    for key in ma:
        assert torch.equal(ma[key], mb[key]), key
    sa, sb = read_summary(a), read_summary(b)
    assert sa["total_steps"] == sb["total_steps"]
    assert sa["final_eval_return"] == sb["final_eval_return"]
    assert sa["updates"] == sb["updates"]


@pytest.mark.parametrize(
    ("args", "k", "n"),
    [(["algo=sac", *PENDULUM], 200, 400), (["algo=td3", *PENDULUM], 200, 400),
     (["algo=sac", "num_envs=2", *PENDULUM], 200, 400), (MADDPG, 100, 200)],
    ids=["sac", "td3", "sac-2envs", "maddpg"],
)
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_resume_is_bit_identical(tmp_path: Path, args: list[str], k: int, n: int) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert run_cli([*args, f"total_steps={n}"], straight).returncode == 0
    first = run_cli([*args, f"total_steps={k}"], split)
    assert first.returncode == 0, first.stderr[-2000:]
    second = run_cli([f"resume={split}", f"total_steps={n}"])
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"resuming {split}" in second.stderr
    assert_same_run(straight, split)
    # TensorBoard continues without duplicated steps
    acc = EventAccumulator(str(split), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [e.step for e in acc.Scalars("perf/sps")]
    assert steps == sorted(set(steps)) and steps[-1] == n


def start_run(args: list[str], run_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "rlzoo.train", *args,
                             f"hydra.run.dir={run_dir}"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_checkpoint(run_dir: Path, proc: subprocess.Popen[str], minimum: int) -> None:
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        found = list_checkpoints(run_dir / "checkpoints")
        if found and int(found[-1].stem.split("_")[1]) >= minimum:
            return
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint >= {minimum} appeared (exit {proc.poll()})")


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    args = ["algo=sac", *PENDULUM, "total_steps=600", "checkpoint.every=50"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert run_cli(args, straight).returncode == 0
    proc = start_run(args, killed)
    wait_for_checkpoint(killed, proc, 250)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # no half-written file under a checkpoint's name, at most a stray temporary one
    for path in list_checkpoints(killed / "checkpoints"):
        load_checkpoint(path)
    resumed = run_cli([f"resume={killed}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_same_run(straight, killed)


def test_sigterm_checkpoints_and_says_how_to_resume(tmp_path: Path) -> None:
    args = ["algo=sac", *PENDULUM, "total_steps=100000", "checkpoint.every=100000"]
    run_dir = tmp_path / "run"
    proc = start_run(args, run_dir)
    deadline = time.time() + 300
    while time.time() < deadline and not list(run_dir.glob("events.out.tfevents.*")):
        time.sleep(0.1)
    time.sleep(3.0)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-2000:]
    assert "stopped by SIGTERM" in stderr and f"resume={run_dir}" in stderr
    ckpt = list_checkpoints(run_dir / "checkpoints")
    assert len(ckpt) == 1
    step = load_checkpoint(ckpt[0])["counters"]["step"]
    assert 0 < step < 100000
    assert not (run_dir / "summary.json").exists()
    resumed = run_cli([f"resume={run_dir}", f"total_steps={step + 100}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert read_summary(run_dir)["total_steps"] == step + 100


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    proc = run_cli(["algo=sac", *PENDULUM, "total_steps=300", "checkpoint.keep=5"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(run_dir, target)
    return target


def test_truncated_latest_checkpoint_falls_back_with_a_warning(finished_run: Path,
                                                               tmp_path: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    latest = list_checkpoints(run_dir / "checkpoints")[-1]
    latest.write_bytes(latest.read_bytes()[:1000])
    proc = run_cli([f"resume={run_dir}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipping" in proc.stderr and latest.name in proc.stderr
    assert "resuming" in proc.stderr and "step_0000000200.pt" in proc.stderr
    assert read_summary(run_dir)["total_steps"] == 400


class _RunsCode:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))

    def __init__(self, marker: Path) -> None:
        self.marker = marker


def test_code_running_checkpoint_is_refused_without_running(finished_run: Path,
                                                            tmp_path: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    marker = tmp_path / "pwned"
    for path in list_checkpoints(run_dir / "checkpoints"):
        torch.save({"format": 1, "payload": _RunsCode(marker)}, path)
    proc = run_cli([f"resume={run_dir}", "total_steps=400"])
    assert_user_error(proc, "cannot resume", "3 unreadable")
    assert "refuses" in proc.stderr  # each hostile file is reported as such
    assert not marker.exists()


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=sac", "env=gym", "env.id=tests.nan_env:NaNPendulum-v0",
                    *[a for a in PENDULUM if not a.startswith("env=")], "total_steps=1000",
                    "checkpoint.every=100", "log.every=100"], run_dir)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error:")]
    # stopped where the NaN reward came out of the env, before it was stored
    assert len(line) == 1 and "non-finite reward" in line[0] and "step 401" in line[0], line
    ckpts = list_checkpoints(run_dir / "checkpoints")
    assert ckpts and int(ckpts[-1].stem.split("_")[1]) == 400  # rewards turn NaN after 400
    for value in load_checkpoint(ckpts[-1])["algo"]["modules"].values():
        assert torch.isfinite(value).all()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["resume=/no/such/run"], ["does not exist"]),
        (["resume=RUN", "algo=td3"], ["cannot be changed", "total_steps"]),
        (["resume=RUN", "total_steps=200"], ["not an rlzoo run dir"]),
    ],
)
def test_resume_mistakes_are_one_line(tmp_path: Path, args: list[str],
                                      fragments: list[str]) -> None:
    (tmp_path / "RUN").mkdir()
    args = [a.replace("RUN", str(tmp_path / "RUN")) for a in args]
    assert_user_error(run_cli(args), *fragments)


def test_resume_without_checkpoints_or_from_another_algo(finished_run: Path,
                                                        tmp_path: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    shutil.rmtree(run_dir / "checkpoints")
    assert_user_error(run_cli([f"resume={run_dir}"]), "no checkpoint")
    other = tmp_path / "td3"
    assert run_cli(["algo=td3", *PENDULUM, "total_steps=150"], other).returncode == 0
    shutil.copytree(other / "checkpoints", run_dir / "checkpoints")
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=400"]), "algo=td3", "algo=sac")
