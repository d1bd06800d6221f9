"""User-facing errors: one line on stderr, exit status 2, never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn


def one_line(message: object, limit: int = 200) -> str:
    """``message`` on one line (whitespace runs become one space), cut to ``limit`` characters."""
    line = " ".join(str(message).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class UserError(Exception):
    """A mistake the user can fix; the message reads ``<what>; <how to fix>``."""


def exit_with(message: str, status: int = 2) -> NoReturn:
    """Print ``rlzoo: error: <message>`` as one line on stderr and exit (status 2 by default)."""
    line = " ".join(str(message).split())
    print(f"rlzoo: error: {line}", file=sys.stderr, flush=True)
    sys.exit(status)
