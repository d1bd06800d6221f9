"""What the analysis tells the user: one-line notes on stderr and the one user-facing error."""

from __future__ import annotations

import sys

from rlzoo.errors import UserError


class CompareError(UserError):
    """A user-facing error: the message is ``<what>; <how to fix>``.

    ``python -m rlzoo.compare`` prints it as one ``rlzoo: error: ...`` line and exits with status 2.
    """


def note(message: str) -> None:
    """Print a note on stderr, on one line (newlines in ``message`` become spaces)."""
    print(f"rlzoo: note: {' '.join(message.split())}", file=sys.stderr)
