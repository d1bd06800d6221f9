"""``log.wandb=true``: the run mirrored to Weights & Biases (the optional extra ``wandb``:
``pip install "rlzoo[wandb]"``), as CleanRL's ``--track`` does.

wandb's TensorBoard sync (``wandb.init(sync_tensorboard=True)``) sends every scalar the run
writes to TensorBoard, at the same env steps, with the resolved config; the wandb run's files go
under ``<run dir>/wandb``. ``WANDB_MODE=offline`` works without a network (``wandb sync`` uploads
later); ``WANDB_PROJECT`` names the project (default ``rlzoo``). A resumed run continues the same
wandb run (its id is the run dir's name). Off by default; ``log.wandb=true`` without the package
is refused in one line before anything is written. Only the first seed of a seed group is
mirrored (TensorBoard has them all).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import UserError

EXTRA = 'pip install "rlzoo[wandb]"'


def wanted(cfg: DictConfig) -> bool:
    """``log.wandb`` (absent in older run configs: false); UserError when it is not a switch or
    when it is on and the ``wandb`` package cannot be imported."""
    value = OmegaConf.select(cfg, "log.wandb", default=False)
    if not isinstance(value, bool):
        raise UserError(f"log.wandb is a switch, true or false, got {value!r}")
    if value and importlib.util.find_spec("wandb") is None:
        raise UserError(f"log.wandb=true needs the optional extra wandb: {EXTRA} "
                        "(or log.wandb=false)")
    return value


def start(cfg: DictConfig, run_dir: Path) -> Any:
    """Start the wandb run of ``run_dir`` (before its TensorBoard writer exists, so that wandb's
    sync sees it); returns it, for :func:`finish`."""
    wandb = importlib.import_module("wandb")
    run_id = re.sub(r"[^A-Za-z0-9_-]", "-", run_dir.resolve().name)[:64]
    return wandb.init(project=os.environ.get("WANDB_PROJECT", "rlzoo"), id=run_id,
                      name=run_dir.name, resume="allow", dir=str(run_dir),
                      config=OmegaConf.to_container(cfg, resolve=True),
                      sync_tensorboard=True)


def finish(run: Any) -> None:
    """Close the wandb run of :func:`start` (its last TensorBoard events are sent first); anything
    else (no run: ``None``, ``False``) is left alone."""
    if hasattr(run, "finish"):
        run.finish()
