"""What the replay buffer and the rollout store share: moving data in, restoring tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_storage(
    x: Any, device: torch.device, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x`` (numpy array, list, number or tensor) as a tensor on ``device`` (and ``dtype``)."""
    tensor = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    return tensor.to(device, dtype, non_blocking=True)


def load_tensors(owner: object, tensors: dict[str, torch.Tensor], what: str) -> None:
    """Copy each checkpointed tensor into ``owner``'s field of that name, in place (views of
    the storage stay valid). A missing field or another shape is a ``ValueError`` naming it."""
    for name, tensor in tensors.items():
        mine = getattr(owner, name, None)
        if mine is None or mine.shape != tensor.shape:
            raise ValueError(
                f"{what} field {name!r} has shape {None if mine is None else tuple(mine.shape)} "
                f"here but {tuple(tensor.shape)} in the checkpoint"
            )
        mine.copy_(tensor)
