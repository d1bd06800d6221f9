"""Learning tests (slow, run by CI): SAC, TD3, SimbaV2 and FlashSAC solve Pendulum-v1 within 15k
env steps, and TD3 solves InvertedPendulum-v5 (action bounds ±3) from a 1000-step warm-up as the
TD3 paper's curves do (1000 from 25k steps on; its defaults follow the paper for that reason).

A random policy scores about -1200 on Pendulum-v1 and a solved one -150 to -200. The threshold
-300 leaves room for seed noise while still failing any run that has not learned to swing up.
Both use a 1000-step warm-up here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_summary, run_cli

THRESHOLD = -300.0
SMALL = ["algo.actor.hidden=[64,64]", "critic.hidden=[64,64]"]


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "steps"), [("sac", 5000), ("td3", 8000)])
def test_pendulum_is_solved(tmp_path: Path, algo: str, steps: int) -> None:
    """64x64 networks (the defaults are 256x256 and 400x300, which took 8,000 and 10,000 steps
    at several times the update cost). Seed 1: final eval return -135 (SAC) and -141 (TD3), 160
    above the threshold; -167 and -218 1,000 steps before these budgets. Broken on purpose, the
    same runs end far below it: SAC with actor_lr=1e-9 at -1229, TD3 with critic_lr=1e-9 at
    -1624."""
    run_dir = tmp_path / algo
    proc = run_cli([f"algo={algo}", "env=Pendulum", f"total_steps={steps}",
                    "algo.learning_starts=1000", "eval.every=0", "eval.episodes=10",
                    "checkpoint.every=0", "seed=1", *SMALL], run_dir, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["total_steps"] == steps <= 15000
    assert summary["final_eval_return"] >= THRESHOLD, summary


@pytest.mark.slow
def test_td3_solves_inverted_pendulum(tmp_path: Path) -> None:
    """With CleanRL's settings (lr 3e-4, 256x256, batch 256) TD3 stayed at 40-115 up to 15k steps
    on seeds 0 and 1; with the paper's (the defaults) it reached 1000 by 15k-25k on seeds 0-2.
    Seed 0 here: eval return 149 at 10k steps and 1000 from 11k on (5 episodes every 1k steps;
    a random policy scores about 5-10, stuck policies 35-150); 12k steps end at 1000 (13k did
    too). The paper's 400x300 networks matter at this budget: 64x64 stayed at 36-59 to 12k steps
    and 128x128 and 256x256 at 35-87 to 14k and 10k steps."""
    run_dir = tmp_path / "td3"
    proc = run_cli(["algo=td3", "env=InvertedPendulum", "total_steps=12000",
                    "algo.learning_starts=1000", "eval.every=0", "eval.episodes=5",
                    "checkpoint.every=0", "seed=0"], run_dir, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(run_dir)["final_eval_return"] >= 900.0


@pytest.mark.slow
def test_simbav2_solves_pendulum(tmp_path: Path) -> None:
    """algo=simbav2 with its own components (hyperspherical networks, categorical twin critic,
    observation and reward normalization, its update order and learning rates) at smaller widths
    than its MuJoCo defaults, and gamma from the reference's heuristic for 200-step episodes
    (0.975). On seed 1 with a 128/64-wide network it was at -151 by 4,000 steps."""
    run_dir = tmp_path / "simbav2"
    proc = run_cli(["algo=simbav2", "env=Pendulum", "total_steps=5000",
                    "algo.learning_starts=1000", "eval.every=0", "eval.episodes=10",
                    "checkpoint.every=0", "seed=1", "critic.network.hidden_dim=64",
                    "critic.network.num_blocks=1", "algo.actor.network.hidden_dim=32",
                    "algo.gamma=0.975"], run_dir, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(run_dir)["final_eval_return"] >= THRESHOLD


@pytest.mark.slow
def test_flashsac_solves_pendulum(tmp_path: Path) -> None:
    """algo=flashsac with its own components (norm-bounded batch-normalized networks, categorical
    twin critic, reward scaling, joint (s, s') batches, the actor every 2nd update, repeated
    exploration noise, warm-up + cosine learning rates) at smaller widths and batch than its
    MuJoCo defaults, the cosine ending with the run. On seed 1 these settings gave -171 at 6,000
    steps and -148 +- 50 at 8,000 (5 eval episodes; 30 min wall on the 2 shared cores at load
    average 13, so well over the 2-minute goal there; the same with the cosine ending at 6,000
    steps was at -867 at 6,000, and batch 128 with gamma 0.98 at -306 at 8,000)."""
    run_dir = tmp_path / "flashsac"
    proc = run_cli(["algo=flashsac", "env=Pendulum", "total_steps=8000",
                    "algo.learning_starts=1000", "eval.every=0", "eval.episodes=10",
                    "checkpoint.every=0", "seed=1", "critic.network.hidden_dim=64",
                    "critic.network.num_blocks=1", "algo.actor.network.hidden_dim=32",
                    "algo.actor.network.num_blocks=1", "algo.batch_size=256",
                    "algo.lr_decay_updates=8000"], run_dir, timeout=2400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(run_dir)["final_eval_return"] >= THRESHOLD
