"""User-facing errors: one line on stderr, exit status 2, never a traceback."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, TextIO


def one_line(message: object, limit: int = 200) -> str:
    """``message`` on one line (whitespace runs become one space), cut to ``limit`` characters."""
    line = " ".join(str(message).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class UserError(Exception):
    """A mistake the user can fix; the message reads ``<what>; <how to fix>``."""


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null (its reader is gone)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (e.g. captured): nothing to point
        pass


def say(line: str, stream: TextIO | None = None) -> None:
    """Print ``line`` on ``stream`` (stderr by default) and flush. A stream whose reader is gone
    (``... 2>&1 | tee log`` after the same Ctrl-C stopped ``tee``) is pointed at /dev/null, so
    neither this line nor Python's flush at exit turns a clean stop into a crash."""
    stream = sys.stderr if stream is None else stream
    try:
        print(line, file=stream, flush=True)
    except OSError:  # BrokenPipeError, EIO of a closed terminal
        _silence(stream)


def settle_streams() -> None:
    """Flush stdout and stderr; one that cannot be flushed any more is pointed at /dev/null
    (call before exiting with a status that must be kept)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            _silence(stream)
        except ValueError:  # closed
            pass


def exit_with(message: str, status: int = 2) -> NoReturn:
    """Print ``rlzoo: error: <message>`` as one line on stderr and exit (status 2 by default);
    a stderr whose reader is gone does not change the status."""
    line = " ".join(str(message).split())
    say(f"rlzoo: error: {line}")
    settle_streams()
    sys.exit(status)
