"""User-facing errors: one line on stderr, exit status 2, never a traceback."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn, TextIO


def one_line(message: object, limit: int = 200) -> str:
    """``message`` on one line (whitespace runs become one space), cut to ``limit`` characters."""
    line = " ".join(str(message).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _plain(text: str) -> bool:
    """Whether ``text`` prints as itself on one line, and stays itself when a message is made
    one line (:func:`one_line`, :func:`exit_with`): printable, no whitespace but single spaces
    between other characters."""
    return text.isprintable() and " ".join(text.split()) == text


def _escape(char: str, shell: bool) -> str:
    """``char`` as backslash escapes: for bash's ``$'...'`` its file-name bytes (UTF-8, or the
    byte of a non-UTF-8 name that Python keeps as a surrogate), each ``\\xHH``; for a Python
    literal its code point."""
    if shell:
        return "".join(f"\\x{b:02x}" for b in os.fsencode(char))
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shell_quote(text: str | Path) -> str:
    """``text`` as one bash word that pastes back as exactly ``text`` and runs nothing (quotes,
    ``;``, ``$(...)``, backticks, ``!`` included), and that no whitespace folding of the line
    around it can change: :func:`shlex.quote` when ``text`` is printable with single spaces only,
    else ANSI-C quoting (``$'a\\nb'``) with every other whitespace, control character and
    ``!`` written as an escape."""
    text = str(text)
    if _plain(text):
        return shlex.quote(text)
    body = "".join(
        "\\" + c if c in "\\'" else c if c.isprintable() and not c.isspace() and c != "!"
        else _escape(c, shell=True) for c in text)
    return f"$'{body}'"


def python_str(text: str | Path) -> str:
    """``text`` as a Python string literal that no whitespace folding of the line around it can
    change (``repr``, with whitespace other than single spaces escaped)."""
    text = str(text)
    if _plain(text):
        return repr(text)
    body = "".join("\\" + c if c in "\\'" else c if c.isprintable() and not c.isspace()
                   else _escape(c, shell=False) for c in text)
    return f"'{body}'"


def resume_command(run_dir: str | Path, *options: str) -> str:
    """The command that continues ``run_dir``, ready to paste into a shell:
    ``python -m rlzoo.train resume=RUN_DIR [OPTIONS...]``, every word quoted
    (:func:`shell_quote`)."""
    words = [f"resume={run_dir}", *options]
    return "python -m rlzoo.train " + " ".join(shell_quote(w) for w in words)


class UserError(Exception):
    """A mistake the user can fix; the message reads ``<what>; <how to fix>``."""


class EnvFailed(UserError):
    """An env's own constructor raised ``cause`` (kept for callers that explain it better, as
    filming does for a GL back end that fails at ``import mujoco``)."""

    def __init__(self, message: str, cause: Exception) -> None:
        super().__init__(message)
        self.cause = cause


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
