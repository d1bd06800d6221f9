"""Checkpoints: atomic writes, newest-K retention, and loading that never executes code.

A checkpoint is a dict of tensors and plain Python data written with ``torch.save``; loading uses
``torch.load(weights_only=True)``, whose unpickler only rebuilds tensors and primitive containers,
so a file crafted to run code on unpickling is refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

PATTERN = re.compile(r"^step_(\d+)\.pt$")


def checkpoint_path(directory: Path, step: int) -> Path:
    """``<directory>/step_<step, 10 digits>.pt``."""
    return directory / f"step_{step:010d}.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: temporary file, flush + fsync, rename, fsync dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
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
    return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
