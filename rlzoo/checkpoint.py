"""Checkpoints: atomic writes, newest-K retention, and loading that never executes code.

A checkpoint is a dict of tensors and plain Python data written with ``torch.save``; loading uses
``torch.load(weights_only=True)``, whose unpickler only rebuilds tensors and primitive containers,
so a file crafted to run code on unpickling is refused.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

PATTERN = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_path(directory: Path, step: int) -> Path:
    """``<directory>/step_<step, 10 digits>.pt``."""
    return directory / f"step_{step:010d}.pt"


class CheckpointError(Exception):
    """A checkpoint that cannot be used: unreadable, truncated, hostile or from another run."""


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


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: temporary file, flush + fsync, rename, fsync dir.

    A reader never sees a half-written file: until the rename, ``path`` is the previous version
    (or absent); a crash leaves at most a stray ``.<name>.tmp``, which is ignored.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(to_plain(state), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoints in ``directory``, oldest first (by step)."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints."""
    for old in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", mmap: bool = False
) -> dict[str, Any]:
    """Load a checkpoint without executing code from it (``weights_only=True``).

    ``mmap=True`` maps the file instead of reading it (``map_location`` must then be the CPU):
    tensors are read from disk only when touched, so a reader that needs the networks but not
    the replay buffer (``rlzoo.evaluate``) does not load gigabytes of transitions.
    """
    try:
        state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, OSError,
            ValueError, AttributeError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, pickle.UnpicklingError) and "weights_only" in str(err):
            first = "it asks to run code on loading, which rlzoo refuses"
        raise CheckpointError(f"{path} cannot be loaded ({first[:160]})") from None
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(f"{path} is not an rlzoo checkpoint")
    return state


def load_latest_valid(
    directory: Path, map_location: str | torch.device = "cpu"
) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint in ``directory`` that loads; falls back to older ones with a
    warning for each unreadable file. Raises ``CheckpointError`` when none is valid."""
    found = list_checkpoints(directory)
    if not found:
        raise CheckpointError(f"no checkpoint in {directory}")
    for path in reversed(found):
        try:
            return path, load_checkpoint(path, map_location)
        except CheckpointError as err:
            warnings.warn(f"skipping {err}; trying the previous checkpoint", stacklevel=2)
    raise CheckpointError(f"none of the {len(found)} checkpoints in {directory} can be loaded")
