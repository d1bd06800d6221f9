"""Reading a file rlzoo may not have written, at bounded cost: never through a symbolic link at
its name, never waiting on a FIFO, never reading more than a cap (:func:`read_bytes`). The
parsers of :mod:`rlzoo.store.bounded` (JSON, YAML) and the run-dir readers of ``rlzoo.analysis``
(CSV, event files) read through here. Imports nothing of rlzoo.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_CONFIG_BYTES = 1 << 20  # a run's config.yaml is about 2 KB; group.json has the same cap


class BoundError(ValueError):
    """A file or structure beyond rlzoo's caps; the message is a short clause saying which."""


def open_file(path: Path) -> int:
    """A descriptor of ``path`` open for reading: never through a symbolic link at its name
    (``O_NOFOLLOW``), never waiting on a FIFO (``O_NONBLOCK``), and checked after opening
    (``fstat``) to be a regular file: a FIFO, a device (a link to ``/dev/zero`` is a link) or a
    folder is refused however ``stat`` described it before.

    Raises:
        BoundError: a link, or not a regular file.
        OSError: it cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise BoundError("it is a symbolic link; rlzoo reads only a run's own files") from None
        if err.errno in (errno.ENXIO, errno.EISDIR):
            raise BoundError("it is not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BoundError("it is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_bytes(path: Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_file`), at most ``limit``: the cap is
    on the bytes actually read, not on what ``stat`` says (a file that grows, or a size that
    lies).

    Raises:
        BoundError: a link, not a regular file, or larger than ``limit`` bytes.
        OSError: it cannot be read.
    """
    fd = open_file(Path(path))
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise BoundError(f"it is larger than {_size(limit)}")
    return b"".join(chunks)


def read_text(path: Path, limit: int = MAX_CONFIG_BYTES) -> str:
    """:func:`read_bytes` as UTF-8 text (``BoundError`` when it is not)."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise BoundError("it is not UTF-8 text") from None


def read_tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes (at most) of the regular file ``path`` (:func:`open_file`): a
    log's tail, whatever its size.

    Raises:
        BoundError: a link, or not a regular file.
        OSError: it cannot be read.
    """
    fd = open_file(Path(path))
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit))
    finally:
        os.close(fd)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n:,} bytes"
