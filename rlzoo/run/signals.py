"""How a run stops early: NaN/inf (``NonFiniteError``), a signal (``StopSignals`` ->
``Interrupted``; ``LaunchSignals`` -> ``LaunchStopped`` before training), or nothing left to do
(``AlreadyFinished``); and the lines that say where a stopped run can continue from.

A signal handler that raises (``LaunchSignals``) raises wherever Python happens to be; where
Python drops exceptions (an at-fork hook such as logging's, a ``__del__``) the signal would be
lost. So env workers are forked with the signals held (``rlzoo.envs.workers``), and a signal
whose exception never reached the launch stops it when training would begin
(:meth:`LaunchSignals.begin_training`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, ClassVar

from rlzoo.errors import python_str, resume_command, shell_quote

SIGNALS = (signal.SIGTERM, signal.SIGINT)  # the signals that stop a run


def stop_line(cause: str, step: int, checkpoint: Path, run_dir: Path) -> str:
    """``stopped by CAUSE at step N; checkpoint PATH; continue with: python -m rlzoo.train
    resume=RUN_DIR``, the path and the command quoted for a shell (``rlzoo.errors``)."""
    return (f"stopped by {cause} at step {step}; checkpoint {shell_quote(checkpoint)}; "
            f"continue with: {resume_command(run_dir)}")


def continue_note(run_dir: Path, checkpoint: Path | None, step: int) -> str:
    """Where a run stopped at ``step`` by a failure can continue from: ``checkpoint`` (its last,
    which must exist) and the command, or that it wrote none."""
    if checkpoint is None or not checkpoint.is_file():
        return (f"the run stops at step {step}, before its first checkpoint, so there is nothing "
                "to resume: launch it again")
    return (f"the run stops at step {step}; its last checkpoint {shell_quote(checkpoint)} is "
            f"kept: continue with: {resume_command(run_dir)}")


class NonFiniteError(Exception):
    """Training produced NaN or inf, or a checkpoint's weights or the returns an evaluation
    measured hold them (exit status 3); the message names the quantity and the step."""


class AlreadyFinished(Exception):  # noqa: N818 - it is the event, not an error
    """``resume=`` of a run that has reached its ``total_steps``: nothing to do or write."""


class Interrupted(Exception):  # noqa: N818 - it is the event, not an error
    """SIGTERM or SIGINT arrived; a checkpoint was written at ``step`` into ``path``.

    Its text says so and how to continue: ``stopped by SIGINT at step 300; checkpoint
    RUN/checkpoints/step_300.pt; continue with: python -m rlzoo.train resume=RUN (or
    rlzoo.resume('RUN'))``. ``signal_name`` is ``SIGINT`` or ``SIGTERM``.
    """

    def __init__(self, signum: int, path: Path, run_dir: Path, step: int) -> None:
        self.signum, self.path, self.run_dir, self.step = signum, path, run_dir, step
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"{self.line()} (or rlzoo.resume({python_str(run_dir)}))")

    def line(self) -> str:
        """The stop line of the command line and ``train.log``: the signal, the step, the
        checkpoint and the command that continues the run (:func:`stop_line`)."""
        return stop_line(self.signal_name, self.step, self.path, self.run_dir)


class StopSignals:
    """Within the block SIGTERM and SIGINT only set ``signum``; the loop then checkpoints and
    stops at the end of its current step. A second signal exits at once (status 130 or 143)."""

    def __init__(self) -> None:
        self.signum = 0
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum:
            raise SystemExit(128 + signum)
        self.signum = signum

    def __enter__(self) -> StopSignals:
        if LaunchSignals.active is not None:  # the command line: its launch phase ends here
            LaunchSignals.active.begin_training()
        for sig in SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self.handle)
            except ValueError:  # not the main thread (e.g. some launchers): no handler
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class LaunchStopped(BaseException):  # noqa: N818 - it is the event, not an error
    """SIGTERM or SIGINT arrived while a launch was starting (before training, or before a
    resumed run continued), or while it was finishing outside :class:`StopSignals`. A
    ``BaseException``, so that every ``except Exception`` lets it through to the clean-up that
    removes what the launch made (``rlzoo.train.main``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class LaunchSignals:
    """Outside the training loop's :class:`StopSignals`: before training the first SIGTERM or
    SIGINT raises :class:`LaunchStopped` (so a launch stopped before training can remove its
    dirs and say so in one line), later ones are ignored while that clean-up runs. Once the
    loop took over (:meth:`begin_training`) a signal outside it (while the stop or error of the
    loop goes up, or after :meth:`done`) is only remembered: the run has stopped with its
    checkpoint or finished, and the process is about to exit."""

    active: ClassVar[LaunchSignals | None] = None  # the one installed (the command line's)

    def __init__(self) -> None:
        self.signum = 0
        self.finished = False
        self.training = False
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum or self.finished or self.training:
            self.signum = self.signum or signum
            return
        self.signum = signum
        raise LaunchStopped(signum)

    def arm(self) -> None:
        """A (next) job of this process starts: a signal stops it again, and one remembered
        since the last job ended stops this one before it starts."""
        if self.signum:
            raise LaunchStopped(self.signum)
        self.finished = self.training = False

    def begin_training(self) -> None:
        """The training loop takes the signals over. A signal that came before and whose
        :class:`LaunchStopped` was dropped on its way (raised inside an at-fork hook or a
        ``__del__``, which print and drop exceptions) stops the launch here, before training."""
        if self.signum and not self.training:
            raise LaunchStopped(self.signum)
        self.training = True

    def done(self) -> None:
        self.finished = True

    def __enter__(self) -> LaunchSignals:
        for sig in SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self.handle)
            except ValueError:  # not the main thread
                pass
        LaunchSignals.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        LaunchSignals.active = None
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
