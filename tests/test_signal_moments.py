"""A signal at any moment of a run stops it: before training with "nothing was kept" (exit 128 +
the signal, the fresh run dir removed), during training with a checkpoint that exists and the
command that continues from it (exit 0), at its end as a finished run; in every case the process
exits, no env worker outlives it, and nothing is printed but rlzoo's lines.

Each moment is made exact by tests/signal_moments.py, which sends the signal from inside the
chosen call (an at-fork hook of the env workers' forks included), not by a timer."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from conftest import TINY, assert_gone, read_summary, run_cli

from rlzoo.run.signals import LaunchSignals, LaunchStopped, StopSignals
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint

RUN = ["algo=sac", "env=Pendulum", *TINY, "num_envs=3", "env_workers=2", "total_steps=300",
       "algo.learning_starts=100", "algo.batch_size=32", "eval.every=150", "eval.episodes=1",
       "checkpoint.every=150", "log.progress=false"]

BEFORE_TRAINING = [
    "fork:before:1",  # inside the first worker's fork (logging's at-fork hook runs there too)
    "fork:parent:1",
    "fork:child:1",  # the child, being born, signals the trainer
    "fork:before:2",  # the second worker's fork, the first worker already running
    "fork:child:2",
    "rlzoo.envs.workers:serve",  # a worker signals the trainer while it makes its envs
    "rlzoo.run.loop:Trainer.start",
    "rlzoo.run.signals:StopSignals.__enter__",  # the hand-over to the loop
]
DURING_TRAINING = [
    "rlzoo.run.collect:Collector.collect",  # the first env step
    "rlzoo.run.loop:Trainer.learn:after",
    "rlzoo.run.loop:Trainer.evaluate_and_log",  # the evaluation at step 150
    "rlzoo.run.loop:Trainer.save",  # the checkpoint at step 150
]
AT_THE_END = [
    "rlzoo.run.loop:write_summary",
    "rlzoo.run.signals:StopSignals.__exit__:after",  # the loop has given the signals back
]


def signalled(tmp_path: Path, at: str, sig: str = "TERM", count: int = 1,
              args: list[str] | None = None, run_dir: Path | None = None):
    """``rlzoo.train`` (``args``, default :data:`RUN` into ``tmp_path / "run"``) that sends
    itself ``count`` ``SIG<sig>`` at the moment ``at``; the process and the pids it forked."""
    pids = tmp_path / "pids"
    pids.unlink(missing_ok=True)
    target = [] if run_dir is None else [f"hydra.run.dir={run_dir}"]
    proc = run_cli([f"--at={at}", f"--signal={sig}", f"--signals={count}", f"--pids={pids}",
                    *(RUN if args is None else args), *target], module="tests.signal_moments",
                   timeout=240)
    children = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    return proc, children


def assert_only_rlzoo_lines(stderr: str) -> None:
    """Nothing but rlzoo's own lines: no traceback, no 'Exception ignored in' of an at-fork
    hook that swallowed the signal's exception."""
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    assert all(line.startswith("rlzoo: ") for line in stderr.splitlines() if line.strip()), \
        stderr[-3000:]


@pytest.mark.parametrize("at", BEFORE_TRAINING)
def test_a_signal_before_training_keeps_nothing_and_exits(tmp_path: Path, at: str) -> None:
    run_dir = tmp_path / "run"
    proc, children = signalled(tmp_path, at, run_dir=run_dir)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert_only_rlzoo_lines(proc.stderr)
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "rlzoo: stopped by SIGTERM before training started; nothing was kept"), proc.stderr
    assert not run_dir.exists()
    assert_gone(children)


@pytest.mark.parametrize("at", DURING_TRAINING)
def test_a_signal_while_training_checkpoints_says_how_to_continue_and_exits(
        tmp_path: Path, at: str) -> None:
    run_dir = tmp_path / "run"
    proc, children = signalled(tmp_path, at, run_dir=run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_only_rlzoo_lines(proc.stderr)
    last = proc.stderr.strip().splitlines()[-1]
    (checkpoint,) = list_checkpoints(run_dir / "checkpoints")
    step = int(load_checkpoint(checkpoint)["counters"]["step"])
    assert 0 < step < 300
    assert last == (f"rlzoo: stopped by SIGTERM at step {step}; checkpoint {checkpoint}; "
                    f"continue with: python -m rlzoo.train resume={run_dir}"), last
    assert not (run_dir / "summary.json").exists()
    assert len(children) == 2
    assert_gone(children)


@pytest.mark.parametrize("at", AT_THE_END)
def test_a_signal_as_the_run_ends_lets_it_finish_and_exit(tmp_path: Path, at: str) -> None:
    run_dir = tmp_path / "run"
    proc, children = signalled(tmp_path, at, run_dir=run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_only_rlzoo_lines(proc.stderr)
    assert "before training started" not in proc.stderr and "nothing was kept" not in proc.stderr
    assert read_summary(run_dir)["total_steps"] == 300
    assert f"run dir {run_dir}" in proc.stdout.strip().splitlines()[-1]
    assert_gone(children)


def test_ctrl_c_while_the_workers_fork_and_while_training(tmp_path: Path) -> None:
    proc, children = signalled(tmp_path, "fork:before:1", sig="INT", run_dir=tmp_path / "a")
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr[-3000:]
    assert_only_rlzoo_lines(proc.stderr)
    assert "stopped by SIGINT before training started; nothing was kept" in proc.stderr
    assert not (tmp_path / "a").exists()
    assert_gone(children)
    proc, children = signalled(tmp_path, "rlzoo.run.collect:Collector.collect", sig="INT",
                               run_dir=tmp_path / "b")
    assert proc.returncode == 0 and "stopped by SIGINT at step 3; checkpoint" in proc.stderr
    assert list_checkpoints(tmp_path / "b" / "checkpoints")
    assert_gone(children)


def test_a_second_signal_while_checkpointing_exits_at_once(tmp_path: Path) -> None:
    """The first SIGTERM asks for a checkpoint, the second ends the process there and then
    (status 143), workers included."""
    proc, children = signalled(tmp_path, "rlzoo.run.loop:Trainer.save", count=2,
                               run_dir=tmp_path / "run")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert len(children) == 2
    assert_gone(children)


def test_a_signal_while_a_resume_starts_its_workers_changes_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc, _ = signalled(tmp_path, "rlzoo.run.loop:Trainer.save", run_dir=run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    proc, children = signalled(tmp_path, "fork:before:1",
                               args=[f"resume={run_dir}", "total_steps=300"])
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert_only_rlzoo_lines(proc.stderr)
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlzoo: stopped by SIGTERM before the run continued; nothing was changed: continue it "
        "with the same command")
    after = {p.name: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k != ".rlzoo.lock"} == \
        {k: v for k, v in before.items() if k != ".rlzoo.lock"}
    assert_gone(children)


class DropsExceptions:
    """Signals this process from ``__del__``, where Python prints and drops any exception: the
    handler's ``LaunchStopped`` is raised there and lost, as inside an at-fork hook."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        total = 0
        for i in range(100):  # the handler runs at a bytecode boundary, in here
            total += i


def test_a_launch_stop_that_a_library_dropped_stops_the_launch_before_training(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: dropped.append(
        unraisable.exc_type))  # where Python puts the exceptions it drops
    with LaunchSignals() as launch:
        launch.arm()
        DropsExceptions()  # made and collected at once: its __del__ runs here
        assert launch.signum == signal.SIGTERM and dropped == [LaunchStopped]
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal is still ignored
        with pytest.raises(LaunchStopped):
            with StopSignals():
                pytest.fail("training began after a signal")


def test_a_signal_outside_the_loop_once_it_ran_is_only_remembered() -> None:
    """After the loop took the signals over, one that comes as the run ends (the loop gave them
    back) no longer stops a launch that is over; a next job of the process does not start."""
    with LaunchSignals() as launch:
        launch.arm()
        with StopSignals():
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        assert launch.signum == signal.SIGTERM
        launch.done()
        with pytest.raises(LaunchStopped):
            launch.arm()


def test_a_signal_after_a_multirun_job_finished_starts_no_next_job(tmp_path: Path) -> None:
    """``-m seed=0,1``: SIGTERM as job 0 ends (the loop has given the signals back) lets job 0
    finish and keeps it; job 1 does not start, and the process exits with the signal's status."""
    proc = run_cli(["--at=rlzoo.run.signals:StopSignals.__exit__:after", "-m", "seed=0,1",
                    "algo=sac", "env=Pendulum", *TINY, "total_steps=150",
                    "algo.learning_starts=50", "eval.episodes=1", "log.progress=false",
                    f"hydra.sweep.dir={tmp_path}"], module="tests.signal_moments", timeout=240)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlzoo: stopped by SIGTERM after a job of the multirun finished; the next one did not "
        "start")
    assert read_summary(tmp_path / "Pendulum" / "sac" / "0-s0")["total_steps"] == 150
    assert not (tmp_path / "Pendulum" / "sac" / "1-s1" / "checkpoints").exists()
