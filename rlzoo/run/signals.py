"""How a run stops early: NaN/inf (``NonFiniteError``), a signal (``StopSignals`` ->
``Interrupted``), or nothing left to do (``AlreadyFinished``)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any


class NonFiniteError(Exception):
    """Training produced NaN or inf; the message names the quantity and the step."""


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
