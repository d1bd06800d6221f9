"""How the training loop's run ends other than by finishing, and what every ending shares: an
error after a whole step is checkpointed at that step first and says how to continue
(:meth:`Stopping.stopped_by`); an env's fault says where the run can continue from
(:meth:`Stopping.env_stopped`); the loggers and envs are closed. The loop's
:class:`~rlzoo.run.loop.Trainer` is a :class:`Stopping`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import torch

from rlzoo.envs.base import EnvError
from rlzoo.errors import python_str
from rlzoo.run import tracking
from rlzoo.run.logger import Logger
from rlzoo.run.member import Member
from rlzoo.run.restore import last_good_note
from rlzoo.run.saved_state import Clock
from rlzoo.run.signals import NonFiniteError, continue_note, stop_line
from rlzoo.store.checkpoint import CheckpointError, checkpoint_path, list_checkpoints
from rlzoo.store.rundir import RunDirGone


class Stopping:
    """The trainer's endings. It reads the trainer's ``run_dir``, ``checkpoint_dir``,
    ``members``, ``clock``, ``good`` (the checkpoint restored or written last), ``logger`` and
    ``wandb``, and calls its :meth:`save` and :meth:`check_finite`."""

    run_dir: Path
    checkpoint_dir: Path
    members: list[Member]
    clock: Clock
    good: Path | None
    logger: Logger | None
    wandb: Any

    def save(self, notify: bool = True) -> Path:
        raise NotImplementedError  # the trainer's

    def check_finite(self, metrics: dict[str, torch.Tensor]) -> None:
        raise NotImplementedError  # the trainer's

    def stopped_by(self, err: Exception, metrics: dict[str, torch.Tensor], start: float) -> None:
        """``err`` was raised after a whole step (by a callback, an evaluation, a logger):
        checkpoint that step unless it already is (never after NaN/inf, a deleted run dir or a
        failed checkpoint), say how to continue (stderr, ``train.log`` and a note on ``err``,
        which the caller re-raises; an env's fault says it in its own line, ``env_stopped``)
        and close the loggers and envs."""
        if isinstance(err, (NonFiniteError, RunDirGone, CheckpointError)):
            return
        step, path = self.clock.step, checkpoint_path(self.checkpoint_dir, self.clock.step)
        try:
            if self.good != path:
                self.clock.wall_time = time.perf_counter() - start
                self.check_finite(metrics)
                path = self.save(notify=False)
        except Exception:  # noqa: BLE001 - no checkpoint then; the first error is the one to see
            return
        if isinstance(err, EnvError):  # its one line names the checkpoint (env_stopped)
            return
        line = (f"{stop_line(type(err).__name__, step, path, self.run_dir)} (or "
                f"rlzoo.resume({python_str(self.run_dir)}))")
        err.add_note(f"rlzoo: {line}")
        with contextlib.suppress(Exception):
            assert self.logger is not None
            self.logger.announce(line)
            self.close_loggers()
        with contextlib.suppress(Exception):
            self.close_envs()

    def env_stopped(self, err: EnvError) -> EnvError:
        """``err`` (an env's fault: a worker gone, an array of the wrong shape) with where the
        run can continue from (its last checkpoint, which exists, or none); closes the envs."""
        with contextlib.suppress(Exception):
            self.close_envs()
        found = list_checkpoints(self.checkpoint_dir)
        last = self.good or (found[-1] if found else None)
        return type(err)(f"{err}; {continue_note(self.run_dir, last, self.clock.step)}")

    def close_envs(self) -> None:
        for member in self.members:
            member.close()

    def record(self, line: str) -> None:
        """``line`` into ``train.log`` (not on stderr), once the run's logger exists: how the
        run stopped, for whoever reads the log later."""
        if self.logger is not None:
            self.logger.record(line)

    def close_loggers(self) -> None:
        for member in reversed(self.members):  # the first member's text handlers last
            if member.logger is not None:
                member.logger.close()
        tracking.finish(self.wandb)
        self.wandb = None

    def last_good_checkpoint_note(self) -> str:
        """Where a stopped run can go back to (``rlzoo.run.restore.last_good_note``)."""
        return last_good_note(self.checkpoint_dir, self.good, self.restored, self.skip)
