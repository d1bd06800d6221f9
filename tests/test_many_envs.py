"""The trainer with many envs (issue 41 item 4): ``algo.utd`` below 1 with ``num_envs=N``, and
``algo=flashsac_gpu`` (FlashSAC's GPU-simulator settings).

Steps are env steps summed over the N envs, and a run makes exactly
``int(utd x (total_steps - learning_starts))`` updates, whatever N (the loop's update credit,
``rlzoo.run.saved_state.Clock.earn``); a run stopped while it holds a fraction of an update and
resumed ends bit-identical to the run that never stopped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, read_summary, run_cli
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf
from test_resume_split import STATE_KEYS, assert_identical, final_checkpoint

from rlzoo.algos.base import EnvSpec
from rlzoo.conf.keys import keys_text
from rlzoo.config.build import build_algorithm
from rlzoo.config.settings import read_settings
from rlzoo.run.saved_state import Clock

PENDULUM = ["algo=sac", "env=Pendulum", "algo.batch_size=16", "algo.buffer_size=3000",
            "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
            "seed=3", *TINY]


def updates_made(utd: float, num_envs: int, learning_starts: int, total: int) -> int:
    """The updates the loop makes over a run, vector step by vector step (``Trainer.learn``)."""
    clock, made = Clock(), 0
    for step in range(num_envs, total + 1, num_envs):
        past = step - max(clock.step, learning_starts)
        clock.step = step
        if past > 0:
            clock.earn(utd, step - past - learning_starts, step - learning_starts)
        while clock.update_credit >= 1.0:
            clock.update_credit -= 1.0
            made += 1
    return made


@pytest.mark.parametrize("utd", [0.1, 0.3, 1 / 3, 0.25, 0.7, 1.0, 1.5, 20.0])
@pytest.mark.parametrize("num_envs", [1, 3, 8, 64])
def test_updates_are_int_of_utd_times_steps(utd: float, num_envs: int) -> None:
    for vector_steps in (50, 333, 1000):
        total = num_envs * vector_steps
        for learning_starts in (0, 7 * num_envs, 7 * num_envs + 1):
            want = int(utd * (total - learning_starts))
            assert updates_made(utd, num_envs, learning_starts, total) == want, (
                utd, num_envs, total, learning_starts)


def test_exact_sums_keep_todays_credit() -> None:
    """Integer and binary-fraction ``utd`` (1, 0.5, 20): the credit is the float of today's
    ``credit + utd x delta``, so their runs and checkpoints are unchanged."""
    for utd in (0.5, 1.0, 1.5, 20.0):
        clock, old = Clock(), 0.0
        for before, after in ((0, 3), (3, 6), (6, 7), (7, 12)):
            clock.earn(utd, before, after)
            old += utd * (after - before)
            assert clock.update_credit == old
            whole = math.floor(old)
            clock.update_credit -= whole
            old -= whole
    clock = Clock(update_credit=2.5)  # 2 updates a signal cut short, 0.5 of the next
    clock.earn(0.5, 1, 4)  # 0.5 x 4 = 2.0: 2 + (2 - 0) + 0
    assert clock.update_credit == 4.0


def test_fractional_utd_with_three_envs_counts_and_resumes(tmp_path: Path) -> None:
    """utd 0.3, 3 envs: 63 updates over 300 - 90 steps (summing 0.9 per vector step in floats
    made 62); stopped at step 201 holding 0.3 of an update (33.3 earned), resumed to 300: the
    checkpoint and summary equal the straight run's bit for bit."""
    args = [*PENDULUM, "num_envs=3", "algo.utd=0.3", "algo.learning_starts=90"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    proc = run_cli([*args, "total_steps=300"], straight)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(straight)["updates"] == 63 == int(0.3 * 210)
    proc = run_cli([*args, "total_steps=201"], split)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stopped = final_checkpoint(split)
    assert stopped["counters"]["step"] == 201 and stopped["algo"]["updates"] == 33
    assert 0.29 < stopped["counters"]["update_credit"] < 0.31  # mid-credit
    proc = run_cli([f"resume={split}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    for key in ("total_steps", "updates", "episodes", "final_eval_return"):
        assert read_summary(straight)[key] == read_summary(split)[key], key


# ----------------------------------------------------------------------------- algo=flashsac_gpu
def composed(*overrides: str) -> dict:
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return OmegaConf.to_container(cfg)


def differences(a: dict, b: dict, path: str = "") -> dict[str, tuple]:
    """``{dotted key: (a's value, b's value)}`` where the two nested dicts differ."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return {} if a == b else {path[1:]: (a, b)}
    out: dict[str, tuple] = {}
    for key in sorted(set(a) | set(b)):
        out.update(differences(a.get(key), b.get(key), f"{path}.{key}"))
    return out


def test_flashsac_gpu_is_flashsac_with_the_gpu_simulator_settings() -> None:
    """conf/algo/flashsac_gpu.yaml: the reference's GPU-simulator scripts' env count, replay,
    batch and update ratio (2 updates per vector step of 1024 envs), all else algo=flashsac."""
    gpu, cpu = composed("algo=flashsac_gpu", "env=Humanoid"), composed("algo=flashsac",
                                                                       "env=Humanoid")
    assert differences(gpu, cpu) == {
        "num_envs": (1024, 1), "algo.noise_envs": (1024, 1),
        "algo.name": ("flashsac_gpu", "flashsac"), "algo.batch_size": (2048, 512),
        "algo.buffer_size": (10_000_000, 1_000_000), "algo.learning_starts": (100_000, 10_000),
        "algo.utd": (2 / 1024, 1)}
    cfg = compose_cfg("algo=flashsac_gpu", "env=Humanoid", "device=cpu")
    settings = read_settings(cfg)  # every default passes validation
    assert (settings.num_envs, settings.utd * settings.num_envs) == (1024, 2.0)
    built = build_algorithm(cfg, EnvSpec(348, 17, max_episode_steps=1000), settings.device)
    assert built.lr_decay_updates == int(1_000_000 * 2 / 1024)  # the run's own updates
    # --keys documents the keys it inherits from algo/flashsac.yaml, and its own
    lines = {line.split()[0]: line for line in keys_text(["algo=flashsac_gpu"]).splitlines()
             if line.startswith("  algo.")}
    assert "polyak rate of the target critic's parameters" in lines["algo.tau"]
    assert "updates_per_interaction_step=2" in lines["algo.utd"]


def compose_cfg(*overrides: str) -> DictConfig:
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_flashsac_gpu_trains_a_few_updates_on_the_cpu(tmp_path: Path) -> None:
    """16 envs at its update ratio 2/1024: int((2048 - 256) x 2 / 1024) = 3 updates."""
    args = ["algo=flashsac_gpu", "env=Pendulum", "device=cpu", "num_envs=16", "total_steps=2048",
            "algo.learning_starts=256", "algo.batch_size=64", "algo.buffer_size=4096",
            "algo.actor.network.hidden_dim=8", "critic.network.hidden_dim=8",
            "critic.network.num_blocks=1", "algo.actor.network.num_blocks=1", "eval.every=0",
            "eval.episodes=1", "log.progress=false"]
    proc = run_cli(args, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path / "run")
    assert (summary["algo"], summary["total_steps"], summary["updates"]) == ("flashsac_gpu",
                                                                             2048, 3)
    assert math.isfinite(summary["final_eval_return"])


# ----------------------------------------------------------------------------- env.backend=warp
def test_warp_observations_stay_tensors_and_equal_the_numpy_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """env.backend=warp on Warp's CPU device: the collector keeps the observations as tensors
    on the env's device (to the policy and into the replay without a numpy round trip) and the
    run equals the numpy path's bit for bit, with a split mid-episode (Hopper's episodes outlast
    48 steps of 2 worlds at the start) resumed to the end: every tensor of the final
    checkpoints (weights, optimizers, replay, env, loop, counters, generators) and the
    summaries' numbers, the final evaluation (on the warp backend, its observations tensors
    too) included; with both normalizers on (they take in the tensors)."""
    pytest.importorskip("mujoco_warp")
    import rlzoo
    from rlzoo.envs.mujoco_warp import WarpMuJoCo
    from rlzoo.run.collect import Collector

    args = ["algo=sac", "env=Hopper", "env.backend=warp", "device=cpu", "num_envs=2", *TINY,
            "algo.learning_starts=30", "algo.batch_size=16", "algo.buffer_size=1000",
            "algo.utd=0.5", "normalize.obs=true", "normalize.reward=true", "eval.every=0",
            "eval.episodes=1", "checkpoint.every=0", "log.progress=false", "seed=5",
            "torch_threads=1"]
    seen: list[type] = []
    numpy_steps: list[int] = []  # WarpMuJoCo.step's calls (numpy out), by world count
    collect, step = Collector.collect, WarpMuJoCo.step

    def spy(self: Collector) -> None:
        seen.append(type(self.obs))
        collect(self)

    def numpy_step(self: WarpMuJoCo, *args: Any, **kwargs: Any) -> Any:
        numpy_steps.append(self.num_envs)
        return step(self, *args, **kwargs)

    monkeypatch.setattr(Collector, "collect", spy)
    monkeypatch.setattr(WarpMuJoCo, "step", numpy_step)
    finals = {}
    for tensors in (True, False):
        monkeypatch.setattr(WarpMuJoCo, "keeps_tensors", tensors)
        run_dir = tmp_path / f"tensors-{tensors}"
        rlzoo.train(*args, "total_steps=48", run_dir=run_dir)
        rlzoo.resume(run_dir, "total_steps=80")
        finals[tensors] = (final_checkpoint(run_dir), read_summary(run_dir))
        assert set(seen) == {torch.Tensor if tensors else np.ndarray}, seen
        # training (2 worlds) and evaluation (1) step without numpy, or both with it
        assert set(numpy_steps) == (set() if tensors else {1, 2}), set(numpy_steps)
        seen.clear()
        numpy_steps.clear()
    (want, s_want), (got, s_got) = finals[False], finals[True]
    assert want["counters"]["step"] == 80 and want["algo"]["updates"] == 25  # int(50 x 0.5)
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    for key in ("total_steps", "updates", "episodes", "final_eval_return"):
        assert s_want[key] == s_got[key], key
