"""Tensors and records (dataclasses of tensors: ``Batch``, ``Rollout``) with a leading seed axis
``[K, ...]``: slicing one seed out, stacking K seeds' into one, giving one seed an axis of 1, and
what ``torch.vmap`` receives of them. The seed axis (``rlzoo.algos.seed_axis``) moves the
arguments and outputs of every seed's call with these."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten


def is_record(value: Any) -> bool:
    """Whether ``value`` is a dataclass instance (a record of tensors), not a class."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def flatten(value: Any) -> tuple[Any, Any]:
    """(what vmap receives, its in_dim): tensors along dim 0; a dataclass of tensors (``Batch``,
    ``Rollout``) as a dict of its tensor fields; anything else is shared by all seeds."""
    if torch.is_tensor(value):
        return value, 0
    if is_record(value):
        tensors = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                   if torch.is_tensor(getattr(value, f.name))}
        return tensors, 0
    return value, None


def unflatten(template: Any, value: Any) -> Any:
    """What :func:`flatten` took apart, put back (a record from the dict of its tensors)."""
    return dataclasses.replace(template, **value) if is_record(template) else value


def seed_slice(value: Any, k: int) -> Any:
    """Slice k of a tensor (or of each tensor field of a record); anything else as it is."""
    if torch.is_tensor(value):
        return value[k]
    if is_record(value):
        return dataclasses.replace(value, **{n: v[k] for n, v in flatten(value)[0].items()})
    return value


def with_axis(value: Any) -> Any:
    """``value`` (a tensor, or tuples, lists and dicts of them) with a leading axis of 1."""
    if torch.is_tensor(value):
        return value.unsqueeze(0)
    if isinstance(value, dict):
        return {k: with_axis(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(with_axis(v) for v in value)
    return value


def stack_records(records: Sequence[Any]) -> Any:
    """Tensors, or dataclasses of tensors (``Batch``, ``Rollout``), one per seed -> one with a
    leading seed axis ``[K, ...]`` on every tensor (one seed: a view with an axis of 1)."""
    def stack(values: list[torch.Tensor]) -> torch.Tensor:
        return values[0].unsqueeze(0) if len(values) == 1 else torch.stack(values)

    first = records[0]
    if torch.is_tensor(first):
        return stack(list(records))
    return dataclasses.replace(first, **{
        f.name: stack([getattr(r, f.name) for r in records])
        for f in dataclasses.fields(first) if torch.is_tensor(getattr(first, f.name))})


def stacked(outputs: Sequence[Any]) -> Any:
    """K outputs of one function -> one, every tensor ``[K, ...]`` (records' tensor fields
    too); a value that is not a tensor must be the same for every seed."""
    leaves, specs = zip(*(tree_flatten(out) for out in outputs))
    together = []
    for per_seed in zip(*leaves):
        if torch.is_tensor(per_seed[0]) or is_record(per_seed[0]):
            together.append(stack_records(per_seed))
        elif all(v == per_seed[0] for v in per_seed[1:]):
            together.append(per_seed[0])
        else:
            raise TypeError(f"compute's function returned {type(per_seed[0]).__name__} values "
                            "that differ between seeds; return tensors")
    return tree_unflatten(together, specs[0])
