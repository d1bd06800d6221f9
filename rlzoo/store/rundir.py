"""Run directories: one per launch, held by one live process, files replaced atomically.

* :func:`claim_new_dir` makes a run dir that no other launch has: ``mkdir`` is atomic, so two
  processes that resolve the same default name in the same second get ``<name>`` and
  ``<stamp>-2-s<seed>`` (the ``-<k>`` goes before a trailing ``-s<seed>``, so the seed stays last).
* :class:`RunLock` is an advisory lock (``flock``) on ``<run dir>/.rlzoo.lock``, which also holds
  the owner's pid for the message. The kernel drops it when the process dies, so a crashed run
  never leaves a stale lock; a live one makes every other launch into that dir (``resume=``
  included) stop with one line.
  The lock file is removed when the run ends (finished, stopped or failed), by the process
  that holds it and only while it still names the file it locked.
* :func:`check_run_files` refuses, in one line, a symbolic link, a special file (FIFO, device)
  or a hard-linked file where a run keeps its own files and folders, before a launch writes
  anything; every writer goes through ``rlzoo.store.writer`` (``O_NOFOLLOW``, ``lstat``, ``fstat``),
  which refuses them again.
* :func:`write_atomic` (``rlzoo.store.writer``) replaces a small text file (config, summary)
through a
  temporary file unique to this process, so a reader sees the old or the new file, never a mix.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from pathlib import Path

from rlzoo.errors import UserError
from rlzoo.store.writer import check_all_below, check_inside, open_regular
from rlzoo.store.writer import write_atomic as write_atomic  # the small files' writer, re-exported

LOCK_NAME = ".rlzoo.lock"
_SEED_SUFFIX = re.compile(r"^(.*?)(-s\d+)$")
_held: dict[Path, RunLock] = {}  # locks this process holds, by resolved run dir
# run dirs this process made -> the outermost folder it made for them (removed with the run dir
# when the run never starts)
_created: dict[Path, Path] = {}
# What rlzoo keeps in a run dir (``group.json``: ``rlzoo.store.group.GROUP_FILE``): each is its
# own file or folder or absent, never a link, a special file or a file with another name (a
# hard link) (:func:`check_run_files`); the folders' contents too, and the files below.
RUN_FOLDERS = (".hydra", "checkpoints", "videos", "wandb")
RUN_FILES = (LOCK_NAME, "train.log", "summary.json", "policy.pt", "group.json",
             ".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml")
RUN_FILE_PREFIXES = ("events.out.tfevents.", "eval_")  # TensorBoard's event files, evaluations


def check_run_files(run_dir: Path, deep: bool = True) -> None:
    """Raise one ``UserError`` line if any of :data:`RUN_FOLDERS` / :data:`RUN_FILES` in
    ``run_dir`` is a symbolic link, not of its kind (a FIFO, a device, a folder named like a
    file) or a file with more than one link (``rlzoo.store.writer``' rule); ``deep`` (a launch's
    check): also every entry below those folders and the event files and evaluation records
    beside them (the copy of a run dir made with ``cp -al`` is refused here). Writes nothing.
    ``run_dir`` itself may be a link the user made."""
    for name in RUN_FOLDERS:
        if deep:
            check_all_below(run_dir, run_dir / name)
        else:
            check_inside(run_dir, run_dir / name, "folder")
    for name in RUN_FILES:
        check_inside(run_dir, run_dir / name, "file")
    if deep:
        for entry in os.scandir(run_dir):
            if entry.name.startswith(RUN_FILE_PREFIXES):
                check_inside(run_dir, run_dir / entry.name, "file")


def _numbered(path: Path, k: int) -> Path:
    match = _SEED_SUFFIX.match(path.name)
    name = f"{match.group(1)}-{k}{match.group(2)}" if match else f"{path.name}-{k}"
    return path.with_name(name)


def claim_new_dir(path: Path) -> Path:
    """Create and return ``path``, or the first free ``path`` numbered ``-2``, ``-3``, ... when
    another launch made it first. Raises ``UserError`` if the parent cannot be created."""
    outermost = path.parent
    while not outermost.parent.exists() and outermost.parent != outermost:
        outermost = outermost.parent
    made_parent = not outermost.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {path.parent} ({err.strerror or err})") from None
    for k in range(1, 10_000):
        candidate = path if k == 1 else _numbered(path, k)
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as err:
            raise UserError(f"cannot create {candidate} ({err.strerror or err})") from None
        _created[candidate.resolve()] = outermost.resolve() if made_parent else candidate.resolve()
        return candidate
    raise UserError(f"{path} and 9,999 numbered variants exist; choose another hydra.run.dir")


def remove_if_created(path: Path) -> None:
    """Remove ``path`` and the empty folders made for it, if :func:`claim_new_dir` made it in
    this process (for a launch that failed before its run started)."""
    outermost = _created.pop(path.resolve(), None)
    if outermost is None:
        return
    shutil.rmtree(path, ignore_errors=True)
    folder = path.resolve().parent
    while folder != outermost.parent and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


class RunDirGone(UserError):
    """The run dir was deleted or moved while the run trained into it (one line)."""


def check_run_dir(run_dir: Path, step: int) -> None:
    """Raise :class:`RunDirGone` if ``run_dir`` no longer exists, before anything would write
    into it again (a checkpoint would silently recreate a dir without its config), and
    :func:`check_run_files`' line if a link or special file took the place of one of its own."""
    if run_dir.is_dir():
        check_run_files(run_dir, deep=False)
    else:
        raise RunDirGone(
            f"the run dir {run_dir} was deleted or moved while training (at step {step}); "
            "training stopped and nothing more was written; start a new run, or, if you moved "
            "the dir, continue it where it is now with resume=NEW_DIR"
        )


def discard_created() -> list[Path]:
    """Remove every run dir this process made that holds no run (a launch stopped before
    training); returns them."""
    removed = []
    for path in list(_created):
        if path.is_dir() and not holds_a_run(path):
            remove_if_created(path)
            removed.append(path)
        else:
            _created.pop(path, None)
    return removed


def holds_a_run(path: Path) -> bool:
    """Whether ``path`` already holds a run's results (a checkpoint or a summary)."""
    return (path / "summary.json").exists() or any((path / "checkpoints").glob("step_*.pt"))


def in_use(run_dir: Path, owner: str, option: str = "hydra.run.dir") -> UserError:
    """The one line for a run dir whose lock the live process ``owner`` (a pid) holds;
    ``option`` names the caller's run dir setting (``run_dir`` for ``rlzoo.train``)."""
    other = "" if option == "resume" else f", or choose another {option}"
    return UserError(
        f"{run_dir} is in use by a running rlzoo process (pid {owner}); wait for it to finish or "
        f"stop it{other}"
    )


class RunLock:
    """An exclusive advisory lock on ``<run_dir>/.rlzoo.lock`` for the life of this process.

    ``RunLock.acquire(run_dir)`` returns the lock (the same object when this process already
    holds it) or raises ``UserError`` naming the pid of the live process that holds it.
    """

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir, self.fd = run_dir, fd

    @classmethod
    def acquire(cls, run_dir: Path, option: str = "hydra.run.dir") -> RunLock:
        key = run_dir.resolve()
        if key in _held:
            return _held[key]
        path = run_dir / LOCK_NAME
        for _ in range(100):  # a holder that finished removed the file we opened: open anew
            try:
                run_dir.mkdir(parents=True, exist_ok=True)
                # never a link, a special file or a file with another name: refused
                fd = open_regular(path, os.O_RDWR | os.O_CREAT)
            except FileNotFoundError:  # its holder removed it as we opened it: open anew
                continue
            except OSError as err:
                raise UserError(f"cannot lock {run_dir} ({err.strerror or err})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                finally:
                    os.close(fd)
                raise in_use(run_dir, owner, option) from None
            if _names(path, fd):
                break
            os.close(fd)  # closing drops the lock on the removed file
        else:
            raise UserError(f"cannot lock {run_dir} (its lock file keeps being replaced)")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # a full disk fails here
        except OSError as err:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise UserError(f"cannot lock {run_dir} ({err.strerror or err}); free space there "
                            "or choose another hydra.run.dir") from None
        lock = cls(run_dir, fd)
        _held[key] = lock
        return lock

    @staticmethod
    def owner(run_dir: Path) -> str | None:
        """The pid (as text) of the live process, other than this one, that holds
        ``run_dir``'s lock, or None when nobody does; writes nothing. A link or special file
        in the lock's place is one ``UserError`` line."""
        if run_dir.resolve() in _held:
            return None
        try:
            fd = open_regular(run_dir / LOCK_NAME, os.O_RDONLY)
        except OSError:
            return None  # no lock file: nobody holds it
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)  # closing drops the shared lock taken to test
        return None

    @staticmethod
    def check_free(run_dir: Path, option: str = "hydra.run.dir") -> None:
        """Raise the "in use" ``UserError`` if a live process holds ``run_dir``'s lock; writes
        nothing (a launch refused afterwards leaves the dir as it was). ``option`` names the
        caller's run-dir setting in the message."""
        owner = RunLock.owner(run_dir)
        if owner is not None:
            raise in_use(run_dir, owner, option)

    @staticmethod
    def release_held(run_dir: Path) -> None:
        """Drop this process's lock on ``run_dir``, if it holds one."""
        lock = _held.get(run_dir.resolve())
        if lock is not None:
            lock.release()

    def release(self) -> None:
        """Remove the lock file, if it is still the one this lock holds (only its holder can
        hold it, so it is no other live process's), then drop the lock."""
        _held.pop(self.run_dir.resolve(), None)
        path = self.run_dir / LOCK_NAME
        try:
            if _names(path, self.fd):
                path.unlink()
        except OSError:
            pass
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
        except OSError:
            pass


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` (not followed) is the file open as ``fd``."""
    try:
        held, named = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


RUNS_LISTED = 5  # run dirs a "not a run dir" error names (the last by name: rlzoo's are timed)


def runs_inside(directory: Path, depth: int = 4, budget: int = 10_000) -> list[Path]:
    """The run dirs (a dir holding ``.hydra/config.yaml``) below ``directory``, down to ``depth``
    levels (``runs/<env>/<algo>/<run>`` is 3), not through links and looking at no more than
    ``budget`` entries; sorted by name, then path (rlzoo's names start with their timestamp)."""
    found: list[Path] = []
    stack, seen = [(directory, 0)], 0
    while stack and seen < budget:
        folder, level = stack.pop()
        try:
            with os.scandir(folder) as entries:
                dirs = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        seen += len(dirs)
        for d in dirs:
            if (d / ".hydra" / "config.yaml").is_file():
                found.append(d)
            elif level + 1 < depth:
                stack.append((d, level + 1))
    return sorted(found, key=lambda p: (p.name, str(p)))


def which_run(directory: Path) -> str:
    """How to fix a dir that is not a run dir: the run dirs inside it when it holds some (a
    parent such as ``runs/``), else what a run dir holds."""
    runs = runs_inside(directory)
    if not runs:
        return ("pass the directory rlzoo.train wrote (it holds .hydra/, checkpoints/ and "
                "summary.json)")
    last = f"the last {RUNS_LISTED} by name: " if len(runs) > RUNS_LISTED else ""
    shown = ", ".join(str(r) for r in runs[-RUNS_LISTED:])
    held = "1 run dir" if len(runs) == 1 else f"{len(runs)} run dirs"
    return f"it holds {held} ({last}{shown}); pass one of them"
