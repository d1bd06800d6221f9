"""Stops off the happy path: the run dir deleted while training, Ctrl-C while the output goes
through a pipe whose reader the same Ctrl-C stopped (``... 2>&1 | tee log``). Each ends in one
line and an exit status scripts can trust, and ``train.log`` says how the run stopped."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TINY, assert_user_error

import rlzoo
from rlzoo.errors import UserError
from rlzoo.store.checkpoint import list_checkpoints

SHORT = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "eval.episodes=1",
         "log.progress=false", "checkpoint.every=0", *TINY]
GONE = "was deleted or moved while training"

# The command line (rlzoo.train's main, through Hydra) with the run dir deleted right after the
# first evaluation, while TensorBoard's writer thread still has events to write.
DELETE_AFTER_FIRST_EVAL = """
import shutil, sys
from rlzoo.run.loop import Trainer
import rlzoo.train as cli

evaluate_and_log = Trainer.evaluate_and_log

def evaluate_then_delete(self):
    evaluate_and_log(self)
    self.logger.writer.add_scalar("x", 1.0, self.clock.step)  # pending for the writer thread
    while self.run_dir.exists():  # a writer thread may add a file while the tree goes
        shutil.rmtree(self.run_dir, ignore_errors=True)

Trainer.evaluate_and_log = evaluate_then_delete
sys.argv = ["rlzoo.train", *sys.argv[1:]]
cli.main()
"""


def test_cli_run_dir_deleted_while_training_is_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", DELETE_AFTER_FIRST_EVAL, *SHORT, "total_steps=600",
         "eval.every=200", f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    assert_user_error(proc, f"the run dir {run_dir} {GONE} (at step ", "start a new run")
    assert "Exception in thread" not in proc.stderr, proc.stderr[-3000:]
    assert not run_dir.exists()  # not recreated by a checkpoint or the event writer


def test_python_run_dir_deleted_while_training_raises_a_user_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(UserError, match=GONE):
        rlzoo.train(*SHORT, "total_steps=600", "eval.every=200", run_dir=run_dir,
                    on_eval=lambda ev: shutil.rmtree(ev.run_dir))
    assert not run_dir.exists()


def test_ctrl_c_with_the_output_pipe_closed_exits_0_and_train_log_says_how_to_resume(
    tmp_path: Path,
) -> None:
    """``python -m rlzoo.train ... 2>&1 | tee log`` and Ctrl-C: tee dies with the same SIGINT,
    so every later write to stdout or stderr fails (EPIPE). The run still checkpoints, exits 0
    (as after any Ctrl-C) and train.log holds the stop line with the resume command."""
    run_dir = tmp_path / "run"
    read, write = os.pipe()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlzoo.train", *SHORT, "total_steps=1000000",
         "algo.learning_starts=1000000", "eval.every=0", f"hydra.run.dir={run_dir}"],
        stdout=write, stderr=write, cwd=tmp_path, env=env,
    )
    os.close(write)
    with os.fdopen(read, "rb", buffering=0) as pipe:
        seen = b""
        deadline = time.time() + 240
        while b"run dir" not in seen and time.time() < deadline:
            seen += pipe.read(1)  # the trainer's first line: training has begun
        assert b"run dir" in seen, seen
        time.sleep(2.0)
    # the reader is gone now, as tee after Ctrl-C
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 0
    (checkpoint,) = list_checkpoints(run_dir / "checkpoints")
    last = (run_dir / "train.log").read_text().splitlines()[-1]
    assert last.endswith(
        f"stopped by SIGINT at step {int(checkpoint.stem.split('_')[1])}; checkpoint "
        f"{checkpoint}; continue with: python -m rlzoo.train resume={run_dir}"), last
