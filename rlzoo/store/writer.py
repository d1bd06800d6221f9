"""The one checked way to write in a run dir. Every file rlzoo writes there, and every file a
library writes there (TensorBoard's event files, the MP4 writer, W&B), goes through here, so a run
dir cannot reach outside itself: a downloaded or copied run dir may hold symbolic links
(``train.log`` pointing at a login script, ``wandb`` at another folder), hard links (``cp -al``
of a run dir: its ``train.log`` is the original's; ``ln ~/notes.txt RUN/.rlzoo.lock``) or FIFOs
and devices where rlzoo expects its own files. The rule, for every path written: it is absent,
or a regular file with one link (``st_nlink == 1``) whose folders below the run dir are real
folders; anything else is refused in one line (``UserError``, exit status 2) before a byte is
written, and no link is ever followed.

* :func:`atomic_file` / :func:`write_atomic`: new and replaced files (checkpoints, ``policy.pt``,
  ``summary.json``, ``.hydra`` configs, ``group.json``, ``eval_*.json``, an exported policy) are
  written to a temporary file unique to this process (:func:`temp_path`; created with
  ``O_EXCL``), fsynced and renamed into place: a reader sees the old or the new file, never a
  mix, and a link at the name is replaced, never written through.
* :func:`open_regular`: the files appended in place (the run dir's lock, ``train.log``), which
  cannot be renamed at each write: opened ``O_NOFOLLOW``, then checked on the descriptor
  (``fstat``: a regular file, one link, the same inode the name holds) before any write.
* :func:`library_file`: a file a library opens by name itself (ffmpeg's MP4): it writes into a
  fresh private folder rlzoo made (``mkdir``, mode 0700, a name nobody could have planted), and
  rlzoo checks what it left and renames it into place. :func:`private_dir` and
  :func:`move_in` do the same for a library's folder (W&B's run folders).
* :func:`check_inside` / :func:`make_dir` / :func:`check_all_below`: ``lstat`` every component
  below a root (the run dir, which itself may be a link the user made), refusing links, hard-linked
  files and entries of the wrong kind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rlzoo.errors import UserError

# ``.<name>.<host>.<pid>.<random>.tmp``: unique per process (and per call), so two writers of the
# same path never share a temporary file; host and pid tell whether its writer is still alive
# (``rlzoo.store.checkpoint.remove_stale_temps`` removes those of dead writers).
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


def refusal(path: Path, mode: int, want: str = "file", reading: bool = False) -> UserError:
    """The one line for ``path``, found to be of ``mode`` (``st_mode``) where rlzoo reads
    (``reading``) or writes its own ``want`` (``"file"`` or ``"folder"``)."""
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            kind = f"a symbolic link to {os.readlink(path)}"
    how = "reads through links or from" if reading else "writes through links or into"
    return UserError(
        f"{path} is {kind}, not a {want} of the run's own; rlzoo never {how} special files "
        f"(a copied or downloaded run dir may hold them): replace it with a real {want} (or "
        f"remove it); nothing was {'read' if reading else 'written'}"
    )


def linked(path: Path, links: int) -> UserError:
    """The one line for the regular file ``path`` found with ``links`` > 1 hard links: the same
    file has another name (``ln``, ``cp -al``), maybe outside the run dir, and writing it would
    change that file too."""
    return UserError(
        f"{path} has {links} hard links: the same file has another name (made by ln or cp -al), "
        "maybe outside the run dir, and rlzoo never writes a file it does not hold alone: "
        "replace it with a copy of its own (cp, then mv over it) or remove it, and copy run "
        "dirs with cp -a, not cp -al; nothing was written"
    )


def check_entry(path: Path, st: os.stat_result, want: str = "file") -> None:
    """The rule for one entry (``st``: its ``lstat``): a ``want`` ``"folder"`` is a real folder,
    a ``"file"`` a regular file with one link. Raises :func:`refusal` or :func:`linked`."""
    if want == "folder":
        if not stat.S_ISDIR(st.st_mode):
            raise refusal(path, st.st_mode, "folder")
    elif not stat.S_ISREG(st.st_mode):
        raise refusal(path, st.st_mode, want)
    elif st.st_nlink != 1:
        raise linked(path, st.st_nlink)


def check_inside(root: Path, path: Path, want: str = "file") -> bool:
    """``lstat`` each component of ``path`` below ``root`` (``root`` itself is not checked):
    the folders must be real folders and ``path`` a real ``want`` (``"file"``: a regular file
    with one link; ``"folder"``) or absent. Returns whether ``path`` exists; raises
    :func:`refusal`'s or :func:`linked`'s ``UserError``."""
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
            st = os.lstat(current)
        except FileNotFoundError:
            return False
        except NotADirectoryError:  # a component above is not a folder (caught below first)
            return False
        check_entry(current, st, want if last else "folder")
    return True


def check_all_below(root: Path, folder: Path) -> None:
    """:func:`check_inside` for ``folder`` (below ``root``) and every entry below it, without
    following a link: every folder a real folder, every file regular with one link (what a run
    writes there may be replaced or appended). Raises the first refusal."""
    if not check_inside(root, folder, "folder"):
        return
    for here, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(here) / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            check_entry(path, st, "folder" if stat.S_ISDIR(st.st_mode) else "file")


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


_WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags | O_NOFOLLOW | O_NONBLOCK)`` and check on the descriptor that it
    opened a regular file (never a link, FIFO, device or folder; the non-blocking open never
    waits on a FIFO); opened for writing, also that it has one link and is the file the name
    holds now (:func:`check_open`). Returns the descriptor; raises :func:`refusal`'s or
    :func:`linked`'s ``UserError``, or the ``OSError`` of any other failure."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            with contextlib.suppress(OSError):
                raise refusal(path, os.lstat(path).st_mode) from None
        raise
    try:
        if flags & _WRITING:
            check_open(path, fd)
        else:
            kind = os.fstat(fd).st_mode
            if not stat.S_ISREG(kind):
                raise refusal(path, kind)
    except BaseException:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return fd


def check_open(path: Path, fd: int) -> None:
    """The rule for a file open for appending as ``fd`` (``train.log``, the lock; also one a
    library opened by name, Hydra's ``train.log``): a regular file with one link, and the
    inode ``path`` names now (not followed), so nothing written through ``fd`` lands outside.
    Raises :func:`refusal`'s or :func:`linked`'s ``UserError``, or ``FileNotFoundError``
    when the file was removed since it was opened (a lock's holder that just finished)."""
    held = os.fstat(fd)
    if held.st_nlink == 0 and stat.S_ISREG(held.st_mode):
        raise FileNotFoundError(errno.ENOENT, "removed while it was opened", str(path))
    check_entry(path, held)
    try:
        named = os.lstat(path)
    except OSError:
        named = None
    if named is None or (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
        raise UserError(f"{path} was replaced while rlzoo opened it (by another process?); "
                        "nothing was written: check who else writes into the run dir")


def private_dir(path: Path, root: Path | None = None) -> Path:
    """A fresh folder for a library to write in, beside ``path`` and named from it
    (:func:`temp_path`'s pattern: ``.<name>.<host>.<pid>.<random>.tmp``), made by ``mkdir``
    with mode 0700: nothing could be in it before, so whatever the library writes there is its
    own. ``path``'s folders below ``root`` (default: its parent) are checked first."""
    check_inside(path.parent if root is None else root, path.parent, "folder")
    folder = temp_path(path)
    folder.mkdir(mode=0o700)  # exclusive: fails if anything has the name
    return folder


def move_in(src: Path, dest: Path, root: Path) -> list[Path]:
    """Put every entry of ``src`` (a :func:`private_dir` a library wrote) into the folder
    ``dest`` below ``root`` (made, checked) by renames, then remove ``src``. The library's
    symbolic links (W&B's ``latest-run``, ``debug.log``) are dropped, and what is left must
    follow the rule (:func:`check_all_below`); an entry whose name is taken in ``dest`` gets
    ``-2``, ``-3``, ... Returns the entries as they are named in ``dest``."""
    for here, dirs, files in os.walk(src, followlinks=False):
        for name in [*dirs, *files]:
            if os.path.islink(os.path.join(here, name)):
                os.unlink(os.path.join(here, name))
    check_all_below(src.parent, src)
    make_dir(dest, root)
    moved = []
    for entry in sorted(src.iterdir()):
        target, k = dest / entry.name, 1
        while os.path.lexists(target):
            k += 1
            target = dest / f"{entry.name}-{k}"
        os.rename(entry, target)
        moved.append(target)
    src.rmdir()
    return moved


@contextlib.contextmanager
def library_file(path: Path, root: Path | None = None) -> Iterator[Path]:
    """For a library that opens the file it writes by name itself (ffmpeg): yields ``path``'s
    name inside a fresh :func:`private_dir` beside it, for the library to write; after the
    block, that file must be a regular file with one link, and it is renamed over ``path``
    (checked first, as :func:`atomic_file` does); the folder goes. On any failure nothing is
    put in place and the folder is removed."""
    root = path.parent if root is None else root
    check_inside(root, path)
    folder = private_dir(path, root)
    inner = folder / path.name
    try:
        yield inner
        check_entry(inner, os.lstat(inner))
        check_inside(root, path)
        os.replace(inner, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
