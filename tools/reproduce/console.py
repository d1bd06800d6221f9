"""What the reproduce tool says: ``reproduce: ...`` lines on stdout, one ``reproduce: error:``
line on stderr with exit status 2 for a user mistake (argparse's included)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

PROG = "reproduce"


class UsageError(Exception):
    """A user mistake: one ``reproduce: error:`` line, exit status 2."""


def fail(message: str) -> NoReturn:
    """Say ``message`` as one ``reproduce: error:`` line on stderr and exit with status 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def progress(message: str) -> None:
    """One ``reproduce: <message>`` line on stdout, flushed (the runner's progress)."""
    print(f"{PROG}: {message}", flush=True)


class Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one ``reproduce: error:`` line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message}; see {self.prog} --help")
