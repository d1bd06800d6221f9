"""Checkpoints: atomic writes, newest-K retention, and loading that never executes code.

A checkpoint is a dict of tensors and plain Python data written with ``torch.save``; loading uses
``torch.load(weights_only=True)``, whose unpickler only rebuilds tensors and primitive containers,
so a file crafted to run code on unpickling is refused. Before unpickling, the zip archive's
directory is checked (:func:`check_archive`): ``torch.save`` stores every record uncompressed, so a
compressed record, or records that declare more bytes than the file holds, are refused before any
byte of them is read (a zip bomb never gets inflated). Those checks, and the loaded tensors'
(:func:`check_tensors`), are ``rlzoo.store.checkpoint_checks``'s; their names are importable from
here too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import shutil
import stat
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlzoo.errors import UserError
from rlzoo.store.bounded import BoundError, check_tree
from rlzoo.store.checkpoint_checks import (  # re-exported: rlzoo.store.checkpoint's names
    CheckpointError,
    check_archive,
    check_tensors,
)
from rlzoo.store.nonfinite import describe_nonfinite, nonfinite_entries
from rlzoo.store.writer import TEMP_PATTERN, atomic_file, host_name, temp_path

PATTERN = re.compile(r"^step_(\d+)\.pt$")
# Every file rlzoo replaces atomically (checkpoints, policy.pt, summary.json, configs,
# group.json) goes through ``rlzoo.store.writer`` and its temporary names (``TEMP_PATTERN``).
LEGACY_TEMP_PATTERN = re.compile(r"^\.step_\d+\.pt\.tmp$")  # written by rlzoo before this scheme
# ``.<name>.<pid>.<8 hex digits>.tmp``: small files written by rlzoo before this scheme
LEGACY_ATOMIC_PATTERN = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")


def checkpoint_path(directory: Path, step: int) -> Path:
    """``<directory>/step_<step, 10 digits>.pt``."""
    return directory / f"step_{step:010d}.pt"


class CheckpointWriteError(CheckpointError, UserError):
    """A checkpoint could not be written (disk full, quota, permissions, I/O error).

    The message is one line, ``<what>; <how to fix>``, naming the directory, the bytes the
    checkpoint needs and the bytes free. The temporary file is gone and older checkpoints are
    untouched. It is a ``UserError``, so the CLI prints it as one ``rlzoo: error:`` line (exit 2).
    """


def to_plain(value: Any) -> Any:
    """Make ``value`` loadable with ``weights_only=True``: numpy arrays become tensors, numpy
    scalars Python numbers; dicts, lists and tuples are converted recursively."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_plain(v) for v in value)
    return value


# --------------------------------------------------------------------------- writing


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(directory: Path, folders: bool = False) -> list[Path]:
    """Delete the temporary files in ``directory`` left by writers that died (SIGKILL, power
    loss), and return them: those of checkpoints, ``policy.pt`` and the small files (summary,
    configs, ``group.json``) alike. Only files whose writer is known to be gone are touched:
    one named with this host and a pid that no longer exists, or the pid-less name older rlzoo
    versions used. A live writer's file, this process's own, or another host's (a shared file
    system) is left alone. ``folders``: also the private folders
    (``rlzoo.store.writer.private_dir``)
    a dead writer's library wrote in (ffmpeg's partial MP4 in ``videos/``), removed whole
    without following a link inside."""
    removed: list[Path] = []
    if not directory.is_dir() or (folders and directory.is_symlink()):
        return removed
    host, me = host_name(), os.getpid()
    for p in directory.iterdir():
        m = TEMP_PATTERN.match(p.name) or LEGACY_ATOMIC_PATTERN.match(p.name)
        if m:
            pid = int(m.group("pid"))
            if m.groupdict().get("host", host) != host or pid == me or _alive(pid):
                continue
        elif not LEGACY_TEMP_PATTERN.match(p.name):
            continue
        if p.is_symlink() or not (p.is_file() or (folders and m and p.is_dir())):
            continue
        try:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


class _CountingSink:
    """A write-only file object that counts the bytes written to it."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes | memoryview) -> int:
        n = memoryview(data).nbytes
        self.bytes += n
        return n

    def flush(self) -> None:
        pass


def serialized_size(plain: dict[str, Any]) -> int:
    """The bytes ``torch.save(plain, f)`` writes, measured by serializing into a counter."""
    sink = _CountingSink()
    torch.save(plain, sink)
    return sink.bytes


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: temporary file, flush + fsync, rename, fsync dir.

    A reader never sees a half-written file: until the rename, ``path`` is the previous version
    (or absent). Each call writes its own temporary file (:func:`temp_path`), so two processes
    saving the same path never interleave; a crash leaves at most a stray temporary file, which
    :func:`list_checkpoints` ignores and the next save removes (:func:`remove_stale_temps`).

    Raises:
        CheckpointWriteError: the write failed (disk full, quota, permissions, I/O error). The
            temporary file is removed and the checkpoints already in the directory are intact;
            the one-line message names the directory, the checkpoint's size in bytes and the
            bytes free.
    """
    directory = path.parent
    tmp = temp_path(path)
    plain = to_plain(state)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(directory)
        with atomic_file(path, tmp=tmp) as f:  # never through a link (rlzoo.store.writer)
            torch.save(plain, f)
        _fsync_dir(directory)
    except BaseException as err:  # a second SIGTERM (SystemExit) must not leave the temp either
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        cause = _os_error(err)
        if cause is not None:
            raise CheckpointWriteError(_write_failure(path, plain, cause)) from None
        raise


def _os_error(err: BaseException) -> OSError | None:
    """The ``OSError`` behind ``err``: itself, or one in its chain. ``torch.save``'s zip writer
    answers a failed ``write`` by failing again as it closes the archive (a ``RuntimeError``
    whose context is the ``OSError``)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _write_failure(path: Path, plain: dict[str, Any], err: OSError) -> str:
    """The one-line message for a failed checkpoint write (see ``CheckpointWriteError``)."""
    directory = path.parent
    try:
        needed = f"{serialized_size(plain):,} bytes"
    except Exception:  # noqa: BLE001 - the size is a courtesy; never mask the real error
        needed = "an unknown number of bytes"
    try:
        free = f"{shutil.disk_usage(directory).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    code = errno.errorcode.get(err.errno or 0, "")
    reason = " ".join((err.strerror or str(err) or type(err).__name__).split())
    reason = f"{reason} ({code})" if code else reason
    full = err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    fix = (
        "free disk space there (or raise the quota / file size limit), then continue with "
        "resume=RUN_DIR" if full else
        "make the directory writable and healthy, then continue with resume=RUN_DIR"
    )
    return (
        f"cannot write checkpoint {path.name} in {directory}: {reason}; the checkpoint needs "
        f"{needed} and the file system has {free}; the temporary file was removed and older "
        f"checkpoints in {directory} are intact; {fix}"
    )


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoints in ``directory``, oldest first (by step). Temporary files are not listed, nor
    is anything under a checkpoint's name that is not a regular file (a directory, a FIFO, a
    link to ``/dev/zero``: reading such a thing could hang or fill memory; a symbolic link even
    to a regular file: a run dir's checkpoints are its own files, never another run's)."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir()
             if (m := PATTERN.match(p.name)) and _regular(p)]
    return [p for _, p in sorted(found)]


def _regular(path: Path) -> bool:
    """``path`` is a regular file (not a link); False when it vanished since it was listed (a
    run pruning its checkpoints while another process lists them)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def prune_checkpoints(directory: Path, keep: int, newest: Path | None = None) -> None:
    """Delete all but the newest ``keep`` checkpoints, counting only those up to ``newest``
    (the one just written): a newer file a resume skipped as unusable is neither counted nor
    deleted, so it never pushes a good older checkpoint out."""
    found = list_checkpoints(directory)
    if newest is not None and newest in found:
        found = found[:found.index(newest) + 1]
    for old in found[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)


# --------------------------------------------------------------------------- reading


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", mmap: bool = False
) -> dict[str, Any]:
    """Load a checkpoint without executing code from it (``weights_only=True``), after
    :func:`check_archive` (``rlzoo.store.checkpoint_checks``) has refused compressed or oversized
    records unread; the loaded structure is then checked to expand to a bounded tree
    (``rlzoo.store.bounded.check_tree``: no cycles, shared references counted where they appear, a
    depth cap) and its tensors to be backed by their bytes (:func:`check_tensors`) before
    anything walks it.
    Any failure is a one-line ``CheckpointError``.

    ``mmap=True`` maps the file instead of reading it (``map_location`` must then be the CPU):
    tensors are read from disk only when touched, so a reader that needs the networks but not
    the replay buffer (``rlzoo.evaluate``) does not load gigabytes of transitions.
    """
    if not Path(path).is_file():  # a FIFO or /dev/zero would hang or fill memory when read
        raise CheckpointError(f"{path} is not a regular file, so it is not read")
    check_archive(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except (Exception, MemoryError) as err:  # noqa: BLE001 - any failure: the file is unusable
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, pickle.UnpicklingError) and "weights_only" in str(err):
            first = "it asks to run code on loading, which rlzoo refuses"
        raise CheckpointError(f"{path} cannot be loaded ({first[:160]})") from None
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(f"{path} is not an rlzoo checkpoint")
    try:  # before any walk: a few KB of shared references can stand for 2**45 entries
        check_tree(state)
    except BoundError as err:
        raise CheckpointError(f"{path} is refused: {err}") from None
    check_tensors(state, path)
    return state


def load_latest_valid(
    directory: Path, map_location: str | torch.device = "cpu"
) -> tuple[Path, dict[str, Any]]:
    """The newest good checkpoint in ``directory``: one that loads and whose algorithm, replay
    buffer and loop state hold no NaN or inf (:func:`nonfinite_entries`). Older ones are tried,
    with a warning for each unreadable or poisoned file. Raises ``CheckpointError`` when none
    is good."""
    found = list_checkpoints(directory)
    if not found:
        raise CheckpointError(f"no checkpoint in {directory}")
    unreadable = poisoned = 0
    for path in reversed(found):
        try:
            state = load_checkpoint(path, map_location)
        except CheckpointError as err:
            unreadable += 1
            warnings.warn(f"skipping a checkpoint: {err}; trying the previous checkpoint",
                          stacklevel=2)
            continue
        bad = nonfinite_entries(state)
        if not bad:
            return path, state
        poisoned += 1
        del state
        warnings.warn(
            f"skipping {path}: NaN or inf in {describe_nonfinite(bad)}; trying the previous "
            "checkpoint", stacklevel=2,
        )
    raise CheckpointError(
        f"none of the {len(found)} checkpoints in {directory} can be used ({unreadable} "
        f"unreadable, {poisoned} holding NaN or inf)"
    )
