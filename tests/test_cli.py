"""The CLI contract: real runs through `python -m rlzoo.train`, their run dirs, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY, assert_user_error, read_summary, run_cli
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlzoo.buffers import ReplayBuffer
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint

SUMMARY_KEYS = {"algo", "env", "seed", "total_steps", "final_eval_return", "final_eval_return_std",
                "wall_time_s", "steps_per_sec", "buffer_bytes"}


def scalar_tags(run_dir: Path) -> set[str]:
    tags: set[str] = set()
    for events in run_dir.glob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


@pytest.mark.parametrize("algo", ["sac", "td3"])
@pytest.mark.parametrize("env", ["Hopper", "Humanoid"])
def test_smoke_run_writes_the_run_dir_contract(tmp_path: Path, algo: str, env: str) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli([f"algo={algo}", f"env={env}", "total_steps=300", "algo.learning_starts=100",
                    "algo.batch_size=32", "eval.every=150", "eval.episodes=2", "log.every=50",
                    "checkpoint.every=200", "algo.buffer_size=10000", "seed=3", *TINY], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert SUMMARY_KEYS <= set(summary)
    assert summary["algo"] == algo and summary["env"] == env and summary["seed"] == 3
    assert summary["total_steps"] == 300
    assert summary["steps_per_sec"] > 0
    # the buffer's allocation (10,000 rows of this env's obs and action) and the rows written:
    # 300 steps' and the first observation's (a reset after an episode's end adds none or one)
    obs, act = {"Hopper": (11, 3), "Humanoid": (348, 17)}[env]
    capacity = ReplayBuffer(10_000, (obs,), (act,)).nbytes
    assert summary["buffer_bytes"]["capacity"] == capacity
    rows, rest = divmod(summary["buffer_bytes"]["used"] * 10_000, capacity)
    assert rest == 0 and 301 <= rows <= 301 + summary["episodes"], (rows, summary)
    assert isinstance(summary["final_eval_return"], float)
    assert (run_dir / ".hydra" / "config.yaml").is_file()  # the resolved config recorded
    tags = scalar_tags(run_dir)
    assert {"train/episode_return", "eval/return", "perf/sps", "loss/critic", "loss/actor",
            "stats/q_mean"} <= tags, tags
    if algo == "sac":
        assert "stats/alpha" in tags
    ckpts = list_checkpoints(run_dir / "checkpoints")
    assert [p.name for p in ckpts] == ["step_0000000200.pt", "step_0000000300.pt"]
    state = load_checkpoint(ckpts[-1])
    assert state["counters"]["step"] == 300 and state["algo_name"] == algo


def test_default_run_dir_layout_and_generic_gym_env(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "env=gym", "env.id=MountainCarContinuous-v0", "total_steps=120",
                    "algo.learning_starts=60", "algo.batch_size=16", "eval.episodes=1",
                    "+env.kwargs.max_episode_steps=50", "algo.buffer_size=1000", *TINY],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list((tmp_path / "runs" / "MountainCarContinuous-v0" / "sac").iterdir())
    assert len(runs) == 1 and runs[0].name.endswith("-s0")
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["env"] == "MountainCarContinuous-v0"


def test_num_envs_and_fractional_utd(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=sac", "env=Pendulum", "num_envs=3", "total_steps=300",
                    "algo.learning_starts=90", "algo.utd=0.5", "algo.batch_size=16",
                    "eval.episodes=1", "algo.buffer_size=3000", *TINY], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["total_steps"] == 300
    assert summary["updates"] == 105  # (300 - 90) * 0.5
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    # 100 vector steps of 3 envs and the newest observation, of the ring's 1000 rows
    assert state["members"][0]["buffer"]["tensors"]["obs"].shape == (101, 3, 3)
    assert isinstance(state["rng"]["torch"], torch.Tensor)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["total_steps=-5"], ["total_steps must be >= 1"]),
        (["algo.batch_size=4096", "algo.buffer_size=1000"], ["larger than algo.buffer_size"]),
        (["env=gym", "env.id=NoSuchEnv-v0"], ["unknown gymnasium env id", "env.id"]),
        (["env=gym", "env.id=CartPole-v1"], ["Discrete action space"]),
        (["algo=td3", "tuner=auto"], ["no entropy temperature"]),
        (["device=cuda"] if not torch.cuda.is_available() else ["device=tpu"], ["device"]),
        (["critic.activation=swish9"], ["unknown activation"]),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, args: list[str], fragments: list[str]
) -> None:
    proc = run_cli(["env=Pendulum", "total_steps=50", *args], tmp_path / "run")
    assert_user_error(proc, *fragments)
