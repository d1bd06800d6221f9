"""Every file rlzoo writes into a run dir goes through here, so a run dir cannot reach outside
itself: a downloaded or copied run dir may hold symbolic links (``train.log`` pointing at a login
script, ``.hydra`` at another run's folder) or FIFOs and devices where rlzoo expects its own
files. Each writer refuses them in one line (``UserError``, exit status 2) before it writes a
byte, and never follows a link or truncates what one points at.

* :func:`atomic_file` / :func:`write_atomic`: replace a file (checkpoints, ``policy.pt``,
  ``summary.json``, ``.hydra`` configs, ``group.json``, an exported policy) through a temporary
  file unique to this process (:func:`temp_path`; created with ``O_EXCL``), fsync,
  ``rename``: a reader sees the old or the new file, never a mix.
* :func:`open_regular`: open (or create) a file in place, ``O_NOFOLLOW``, and check with
  ``fstat`` that it is a regular file (the run dir's lock, ``train.log``).
* :func:`check_inside` / :func:`make_dir`: ``lstat`` every component below a root (the run dir,
  which itself may be a link the user made), refusing links and entries of the wrong kind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rlzoo.errors import UserError

# ``.<name>.<host>.<pid>.<random>.tmp``: unique per process (and per call), so two writers of the
# same path never share a temporary file; host and pid tell whether its writer is still alive
# (``rlzoo.run.checkpoint.remove_stale_temps`` removes those of dead writers).
TEMP_PATTERN = re.compile(
    r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9-]*)\.(?P<pid>\d+)\.[0-9a-f]{16}\.tmp$"
)
_KINDS = {stat.S_IFREG: "a regular file", stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO",
          stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symbolic link"}


def host_name() -> str:
    """This machine's name as it appears in temporary file names (``[A-Za-z0-9-]`` only)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64]


def temp_path(path: Path) -> Path:
    """A temporary name beside ``path`` that no other process (or call) uses:
    ``.<name>.<host>.<pid>.<16 hex digits>.tmp``."""
    return path.with_name(f".{path.name}.{host_name()}.{os.getpid()}.{secrets.token_hex(8)}.tmp")


def refusal(path: Path, mode: int, want: str = "file") -> UserError:
    """The one line for ``path``, found to be of ``mode`` (``st_mode``) where rlzoo reads or
    writes its own ``want`` (``"file"`` or ``"folder"``)."""
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            kind = f"a symbolic link to {os.readlink(path)}"
    return UserError(
        f"{path} is {kind}, not a {want} of the run's own; rlzoo never writes through links or "
        f"into special files (a copied or downloaded run dir may hold them): replace it with "
        f"a real {want} (or remove it); nothing was written"
    )


def check_inside(root: Path, path: Path, want: str = "file") -> bool:
    """``lstat`` each component of ``path`` below ``root`` (``root`` itself is not checked):
    the folders must be real folders and ``path`` a real ``want`` (``"file"`` or ``"folder"``)
    or absent. Returns whether ``path`` exists; raises :func:`refusal`'s ``UserError``."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = (path.name,)
        root = path.parent
    current = root
    for k, part in enumerate(parts):
        current = current / part
        last = k == len(parts) - 1
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return False
        except NotADirectoryError:  # a component above is not a folder (caught below first)
            return False
        ok = stat.S_ISREG(mode) if last and want == "file" else stat.S_ISDIR(mode)
        if not ok:
            raise refusal(current, mode, want if last else "folder")
    return True


def make_dir(path: Path, root: Path | None = None) -> Path:
    """``mkdir -p path`` below ``root`` (default: ``path``'s parent) that never goes through a
    link: every component is ``lstat``-checked before and after it is made. Returns ``path``."""
    root = path.parent if root is None else root
    check_inside(root, path, "folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # something not a folder appeared in the meantime
        pass
    check_inside(root, path, "folder")
    if not path.is_dir():
        raise UserError(f"cannot create the folder {path}; nothing was written")
    return path


def open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags | O_NOFOLLOW | O_NONBLOCK)`` and check that it opened a regular
    file (never a link, FIFO, device or folder; the non-blocking open never waits on a FIFO).
    Returns the descriptor; raises :func:`refusal`'s ``UserError``, or the ``OSError`` of any
    other failure."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            with contextlib.suppress(OSError):
                raise refusal(path, os.lstat(path).st_mode) from None
        raise
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        raise refusal(path, kind)
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def atomic_file(path: Path, root: Path | None = None,
                tmp: Path | None = None) -> Iterator[BinaryIO]:
    """Replace ``path`` with what is written to the yielded binary file: a new temporary file
    (``tmp``, default :func:`temp_path`), flushed and fsynced, renamed over ``path``. ``path``
    and its folders below ``root`` (default: its parent) are ``lstat``-checked first
    (:func:`check_inside`): a link or special file there is refused before anything is written.
    On any failure the temporary file is removed, ``path`` is unchanged and the error is raised
    as it is (an ``OSError`` for the caller to word)."""
    check_inside(path.parent if root is None else root, path, "file")
    tmp = temp_path(path) if tmp is None else tmp
    try:
        # "x": O_CREAT | O_EXCL, which never follows a link (the builtin ``open``, looked up
        # here: tests stand in a full disk for it)
        with open(tmp, "xb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a second SIGTERM (SystemExit) must not leave the temporary file
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: str | bytes, root: Path | None = None) -> None:
    """Replace the small file ``path`` (a config, ``summary.json``, ``group.json``) with
    ``data`` (text is UTF-8) through :func:`atomic_file`; ``root`` as there. A failed write is
    one ``UserError`` line, ``path`` unchanged."""
    try:
        with atomic_file(path, root) as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except OSError as err:
        raise UserError(
            f"cannot write {path} ({err.strerror or err}); {path} is unchanged"
        ) from None
