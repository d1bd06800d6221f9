"""A run far dearer than SAC per env step says so at the start, with the time it will take and
what to do (rlzoo.run.cost); compile=true says it is compiling while it does (rlzoo.run.accel)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from conftest import run_cli

from rlzoo.run.accel import SaysCompiling
from rlzoo.run.cost import cost_note, ms_per_step, sac_parameters

CPU = torch.device("cpu")


def test_sac_parameters_match_the_built_sac() -> None:
    """The reference is SAC's real size: 349,963 parameters for Hopper (built by the run)."""
    assert sac_parameters(11, 3) == 349_963


def test_a_heavy_network_on_a_cpu_is_said_with_its_time_and_what_to_do() -> None:
    heavy = torch.nn.Linear(4096, 4455)  # 18.3M parameters: SimbaV2's defaults on Hopper
    line = cost_note(heavy, CPU, 11, 3, 256, 1.0, 1_000_000, 5000, "simbav2")
    assert line is not None and "\n" not in line
    assert line.startswith("algo=simbav2 (18.3M parameters, batch 256, utd 1) costs about 30x "
                           "SAC per env step on a CPU: about 3 days, "), line
    assert "(~3.3 steps/s, estimated); use a GPU (device=cuda) or fewer steps " \
           "(total_steps=7000: about 0:10:" in line, line
    # already short: only the GPU is suggested; on a GPU, nothing is said
    short = cost_note(heavy, CPU, 11, 3, 256, 1.0, 6000, 5000, "simbav2")
    assert short is not None and short.endswith("use a GPU (device=cuda)"), short
    assert cost_note(heavy, torch.device("cuda"), 11, 3, 256, 1.0, 10**6, 5000, "x") is None


def test_sac_sized_short_runs_say_nothing() -> None:
    sac_sized = torch.nn.Linear(1, sac_parameters(11, 3) - 1)
    assert cost_note(sac_sized, CPU, 11, 3, 256, 1.0, 100_000, 5000, "sac") is None
    assert cost_note(sac_sized, CPU, 11, 3, 256, 5.0, 20_000, 5000, "sac") is None  # 5x
    assert "x SAC per env step" in str(cost_note(sac_sized, CPU, 11, 3, 256, 20.0, 10**6, 5000,
                                                 "sac"))
    assert cost_note(sac_sized, CPU, 11, 3, 256, 0.0, 10**6, 5000, "ppo") is None  # on-policy


def test_a_long_run_of_sacs_cost_is_told_its_time_at_start() -> None:
    """The README's first command, SAC on Humanoid-v5 (348 observations, 17 actions) to 1M
    steps: its learning time by the model, said at start; an hour of learning or more is said,
    less is not; on a GPU nothing is said."""
    humanoid = torch.nn.Linear(sac_parameters(348, 17) - 1, 1)  # SAC's size on Humanoid
    rate = 1000.0 / ms_per_step(sac_parameters(348, 17), 256, 1.0)
    assert 50 < rate < 70  # the model's; measured: 87 on 2 quiet cores (docs/performance.md)
    line = cost_note(humanoid, CPU, 348, 17, 256, 1.0, 1_000_000, 5000, "sac")
    hours = 995_000 / rate / 3600
    assert line is not None and line.startswith(
        f"total_steps=1000000: about {int(hours)}:{int(hours * 60) % 60:02d}:"), line
    assert f"(~{rate:.0f} steps/s, estimated from algo=sac's size" in line
    assert "the measured time left once learning starts" in line
    an_hour = 5000 + int(3600 * rate) + 1000
    assert cost_note(humanoid, CPU, 348, 17, 256, 1.0, an_hour, 5000, "sac") is not None
    assert cost_note(humanoid, CPU, 348, 17, 256, 1.0, an_hour - 2000, 5000, "sac") is None
    assert cost_note(humanoid, torch.device("cuda"), 348, 17, 256, 1.0, 10**6, 5000,
                     "sac") is None


def test_the_cli_says_it_once_at_start(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=simbav2", "env=Pendulum", "total_steps=400",
                    "algo.learning_starts=400", "eval.every=0", "eval.episodes=1",
                    "checkpoint.every=0", "torch_threads=1"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "x SAC per env step" in line]
    assert len(lines) == 1 and lines[0].startswith("rlzoo: warning: algo=simbav2 ("), lines
    summary = json.loads((run_dir / "summary.json").read_text())
    assert any("x SAC per env step" in w for w in summary["warnings"])


def test_compiling_is_said_while_it_happens() -> None:
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    log = logging.getLogger("rlzoo")
    handler, level = Keep(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        calls: list[int] = []

        def update(batch: int) -> dict[str, torch.Tensor]:
            calls.append(len(said))  # what had been said when the (compiling) call ran
            return {"loss": torch.tensor(float(batch))}

        update_fn = SaysCompiling(update)
        assert update_fn(1)["loss"] == 1.0 and update_fn(2)["loss"] == 2.0
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert calls == [1, 2], (calls, said)  # said before the first call, once
    assert said[0].startswith("compiling the networks (compile=true") and \
        said[1].startswith("compiled in ")
