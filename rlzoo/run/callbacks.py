"""What the Python API's callbacks receive: an :class:`Evaluation` after each evaluation, a
:class:`Checkpoint` after each checkpoint (``rlzoo.train(on_eval=..., on_checkpoint=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Evaluation:
    """What an ``on_eval`` callback receives after each evaluation (once per seed).

    Attributes:
        step: env steps collected so far.
        mean, std: mean and standard deviation of the episodes' (team) returns.
        returns: ``[eval.episodes]`` the returns.
        run_dir: the run directory (of the seed evaluated).
    """

    step: int
    mean: float
    std: float
    returns: np.ndarray
    run_dir: Path


@dataclass(frozen=True)
class Checkpoint:
    """What an ``on_checkpoint`` callback receives after each checkpoint.

    Attributes:
        step: env steps collected so far.
        path: the checkpoint file (``policy.pt`` beside ``checkpoints/`` was rewritten too).
        run_dir: the run directory.
    """

    step: int
    path: Path
    run_dir: Path


# A callback returns True to stop the run early (it then checkpoints and finishes).
EvalCallback = Callable[[Evaluation], Any]
CheckpointCallback = Callable[[Checkpoint], Any]
