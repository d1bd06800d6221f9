"""The README's first commands as a newcomer runs them: the 20k-step Humanoid look evaluates
often enough to draw a curve and talks at least once a minute off a terminal; the multi-agent
short presets (``preset=short``) are named with their settings where a newcomer reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import TINY, assert_user_error, read_summary, run_cli
from from_yaml import composed

from rlzoo.run.logger import AUTO_EVERY_S, LONG_RUN_S

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def readme_train_commands() -> list[list[str]]:
    """The overrides of every ``python -m rlzoo.train`` command in the README's code blocks."""
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    commands = []
    for line in "\n".join(blocks).splitlines():
        for part in line.split("&&"):
            words = shlex.split(part.split("#", 1)[0])
            if words[:3] == ["python", "-m", "rlzoo.train"]:
                commands.append(words[3:])
    return commands


def test_the_first_look_evaluates_ten_times_and_is_under_an_hour() -> None:
    """Issue 57: the 20k-step Humanoid run evaluated at 10k and 20k only (two points); it must
    show a curve. At the README's ~51 learning steps/s it takes minutes, so the default
    progress interval (auto) is a minute."""
    first = readme_train_commands()[0]
    assert first[:2] == ["algo=sac", "env=Humanoid"], first
    cfg = composed(*first)
    assert cfg.total_steps == 20_000
    evaluations = cfg.total_steps // cfg.eval.every
    assert evaluations >= 10, first
    assert cfg.algo.learning_starts < cfg.eval.every * 3  # most points are after learning starts
    assert "ten points on its `eval/return` curve" in README and evaluations == 10
    assert cfg.log.progress_every_s == "auto"
    learning_s = (cfg.total_steps - cfg.algo.learning_starts) / 51.0
    assert learning_s < LONG_RUN_S and AUTO_EVERY_S == 60.0


def test_a_multi_agent_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    """The smoke set's multi-agent run (``pytest -m smoke``): MADDPG on MPE's simple_spread
    (PettingZoo, mpe2) through the CLI, 200 steps, then resumed to 300 from its checkpoint."""
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=maddpg", "env=mpe/simple_spread", "total_steps=200", *TINY,
                    "algo.learning_starts=100", "algo.batch_size=32", "eval.every=100",
                    "eval.episodes=1", "log.progress=false"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = read_summary(run_dir)
    assert first["total_steps"] == 200 and first["updates"] > 0, first
    assert len(first["final_eval_agent_returns"]) == 3  # simple_spread's three agents
    proc = run_cli([f"resume={run_dir}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = read_summary(run_dir)
    # 100 more learning steps at the same rate of updates as the first 100
    assert resumed["total_steps"] == 300 and resumed["updates"] == 2 * first["updates"], resumed
    assert "resuming" in (run_dir / "train.log").read_text()


def test_resume_of_a_parent_dir_lists_the_runs_inside(tmp_path: Path) -> None:
    """``resume=runs`` (the folder above the run dirs) is one line that names the run dirs it
    holds, the last by name (rlzoo's start with their time) when there are many; links are
    not followed; an empty dir says what a run dir holds."""
    runs = tmp_path / "runs"
    made = [runs / "Hopper" / "sac" / f"2026120{i}-101500-s0" for i in range(1, 8)]
    for run in made:
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text("algo: {name: sac}\nenv: {name: Hopper}\n")
    (runs / "Pendulum").mkdir()
    (runs / "Pendulum" / "elsewhere").symlink_to(made[0])  # never followed
    proc = run_cli([f"resume={runs}"])
    assert_user_error(proc, f"{runs} has no .hydra/config.yaml", "it holds 7 run dirs (the "
                      f"last 5 by name: {made[2]}, {made[3]}, {made[4]}, {made[5]}, {made[6]}); "
                      "pass one of them")
    proc = run_cli([f"resume={runs / 'Hopper' / 'sac'}", "total_steps=10"])
    assert_user_error(proc, f"it holds 7 run dirs (the last 5 by name: {made[2]}")
    proc = run_cli([f"resume={runs / 'Pendulum'}"])
    assert_user_error(proc, "pass the directory rlzoo.train wrote")


def test_the_readme_cost_table_gives_no_gpu_number_not_measured_on_this_code() -> None:
    """Issue 57: the GPU column mixed numbers measured before CUDA graphs became the default
    with "not measured"; nothing on a GPU has been measured on the current code."""
    lines = README.split("| algo | CPU, Hopper-v5 |", 1)[1].split("\n\n", 1)[0].splitlines()
    assert lines[0].strip().endswith("| GPU |"), lines[0]
    rows = [line for line in lines[2:] if line.startswith("| `")]
    assert len(rows) >= 9
    assert all(row.rstrip(" |").rsplit("|", 1)[1].strip() == "not measured" for row in rows)


@pytest.mark.parametrize("algo", ["maddpg", "hasac", "coma"])
def test_short_presets_are_named_and_evaluate_ten_times(algo: str) -> None:
    """preset=short, one per multi-agent algorithm: named in the README and docs/multi_agent.md
    with its minutes, shorter than the algorithm's default, ten evaluations."""
    default = composed(f"algo={algo}", "env=mpe/simple_spread")
    short = composed(f"algo={algo}", "env=mpe/simple_spread", "preset=short")
    assert short.total_steps < default.total_steps
    assert short.total_steps // short.eval.every == 10
    assert short.critic.hidden == [64, 64] and short.algo.actor.hidden == [64, 64]
    # a key on the command line still wins over the preset
    assert composed(f"algo={algo}", "env=mpe/simple_spread", "preset=short",
                    "total_steps=1000").total_steps == 1000
    guide = (REPO / "docs" / "multi_agent.md").read_text()
    command = f"algo={algo} env=mpe/simple_spread preset=short"
    assert command in guide and command in README
    (row,) = [line for line in guide.splitlines() if line.startswith(f"| `{algo}` |")]
    steps = f"{short.total_steps:,}"
    assert row.startswith(f"| `{algo}` | {steps} | ") and (" min |" in row or "not measured" in row)
