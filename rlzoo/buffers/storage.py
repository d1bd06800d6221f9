"""What the replay buffer and the rollout store share: allocating storage, moving data in,
saving the rows that hold data and restoring them."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

NUMPY_DTYPES = {torch.float32: np.float32, torch.bool: np.bool_, torch.int64: np.int64}


def to_storage(
    x: Any, device: torch.device, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x`` (numpy array, list, number or tensor) as a tensor on ``device`` (and ``dtype``)."""
    tensor = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    return tensor.to(device, dtype, non_blocking=True)


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor of ``shape``. On the CPU its memory comes from numpy's ``calloc``: the
    operating system hands out zero pages as they are first written, so a buffer's pages become
    resident as it fills, not when it is made (``torch.zeros`` writes every byte at once). On
    other devices, ``torch.zeros``."""
    if device.type == "cpu":
        return torch.from_numpy(np.zeros(shape, dtype=NUMPY_DTYPES[dtype]))
    return torch.zeros(shape, dtype=dtype, device=device)


def leading_rows(tensor: torch.Tensor, n: int) -> torch.Tensor:
    """Rows ``[0, n)`` of ``tensor`` as a tensor whose storage holds only those rows, for a
    checkpoint: ``torch.save`` writes the whole storage behind a view, so ``tensor[:n]`` would
    write every row. On the CPU it shares ``tensor``'s memory (no copy; write it before the
    storage changes); elsewhere it is a host copy of the ``n`` rows (no device memory)."""
    if tensor.device.type == "cpu":
        return torch.from_numpy(tensor.numpy()[:n])
    return tensor[:n].cpu()


def field_for(owner: object, name: str, tensor: torch.Tensor, what: str,
              rows: bool = False) -> torch.Tensor:
    """``owner``'s field ``name`` that the checkpointed ``tensor`` restores: of the same shape,
    or (``rows=True``) the same trailing dimensions and at most as many rows. Anything else is
    a ``ValueError`` naming the field and both shapes."""
    mine = getattr(owner, name, None)
    fits = mine is not None and (
        tensor.shape == mine.shape if not rows else
        tensor.dim() == mine.dim() and tensor.shape[1:] == mine.shape[1:]
        and tensor.shape[0] <= mine.shape[0])
    if not fits:
        raise ValueError(
            f"{what} field {name!r} has shape {None if mine is None else tuple(mine.shape)} "
            f"here but {tuple(tensor.shape)} in the checkpoint"
        )
    return mine  # type: ignore[return-value]


def load_leading_rows(
    owner: object, tensors: dict[str, torch.Tensor], what: str, written: int
) -> None:
    """Copy each checkpointed tensor ``[n, ...]`` into rows ``[0, n)`` of ``owner``'s field of
    that name, in place (views of the storage stay valid), and zero rows ``[n, written)``: the
    rows ``owner`` itself has written beyond the checkpoint's (``written = 0`` for a fresh
    owner, whose untouched rows stay untouched). A missing field, other trailing dimensions or
    more rows than the field holds is a ``ValueError`` naming it."""
    for name, tensor in tensors.items():
        mine = field_for(owner, name, tensor, what, rows=True)
        n = tensor.shape[0]
        mine[:n].copy_(tensor)
        if written > n:
            mine[n:written].zero_()


def load_tensors(owner: object, tensors: dict[str, torch.Tensor], what: str) -> None:
    """Copy each checkpointed tensor into ``owner``'s field of that name, in place (views of
    the storage stay valid). A missing field or another shape is a ``ValueError`` naming it."""
    for name, tensor in tensors.items():
        field_for(owner, name, tensor, what).copy_(tensor)
