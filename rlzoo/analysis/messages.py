"""What the analysis tells the user: one-line notes on stderr, the one user-facing error and the
progress of a long read."""

from __future__ import annotations

import sys
import time

from rlzoo.errors import UserError


class CompareError(UserError):
    """A user-facing error: the message is ``<what>; <how to fix>``.

    ``python -m rlzoo.compare`` prints it as one ``rlzoo: error: ...`` line and exits with status 2.
    """


def note(message: str) -> None:
    """Print a note on stderr, on one line (newlines in ``message`` become spaces)."""
    print(f"rlzoo: note: {' '.join(message.split())}", file=sys.stderr)


PROGRESS_EVERY_S = 2.0  # seconds between progress lines of a long read


class Progress:
    """Progress of a long read on stderr: ``rlzoo: <what>: <done>[/<total>] (<s> s)`` at most
    every :data:`PROGRESS_EVERY_S` seconds, and a last line when it took longer than that (a
    quick read prints nothing)."""

    def __init__(self, what: str, total: int | None = None) -> None:
        self.what, self.total, self.count = what, total, 0
        self.start = self.last = time.monotonic()

    def line(self, now: float) -> str:
        done = f"{self.count:,}" + ("" if self.total is None else f"/{self.total:,}")
        return f"rlzoo: {self.what}: {done} ({now - self.start:.0f} s)"

    def advance(self, n: int = 1) -> None:
        """``n`` more items done; a line when :data:`PROGRESS_EVERY_S` passed since the last."""
        self.count += n
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            print(self.line(now), file=sys.stderr, flush=True)

    def close(self) -> None:
        """The last line, if the read took longer than :data:`PROGRESS_EVERY_S`."""
        now = time.monotonic()
        if now - self.start >= PROGRESS_EVERY_S:
            print(self.line(now) + ", done", file=sys.stderr, flush=True)
