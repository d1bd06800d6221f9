"""How a run stops early: NaN/inf (``NonFiniteError``), a signal (``StopSignals`` ->
``Interrupted``), or nothing left to do (``AlreadyFinished``)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any


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
        super().__init__(f"{self.line()} (or rlzoo.resume({str(run_dir)!r}))")

    def line(self) -> str:
        """The stop line of the command line and ``train.log``: the signal, the step, the
        checkpoint and the command that continues the run."""
        return (f"stopped by {self.signal_name} at step {self.step}; checkpoint {self.path}; "
                f"continue with: python -m rlzoo.train resume={self.run_dir}")


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
        for sig in (signal.SIGTERM, signal.SIGINT):
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
    """Outside the training loop's :class:`StopSignals`: the first SIGTERM or SIGINT raises
    :class:`LaunchStopped` (so a launch stopped before training can remove its dirs and say so
    in one line), later ones are ignored while that clean-up runs. After :meth:`done` (the run
    finished) a signal is only remembered: the process is about to exit 0 anyway."""

    def __init__(self) -> None:
        self.signum = 0
        self.finished = False
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum or self.finished:
            self.signum = self.signum or signum
            return
        self.signum = signum
        raise LaunchStopped(signum)

    def arm(self) -> None:
        """A (next) job of this process starts: a signal stops it again."""
        self.finished, self.signum = False, 0

    def done(self) -> None:
        self.finished = True

    def __enter__(self) -> LaunchSignals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, self.handle)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
