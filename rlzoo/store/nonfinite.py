"""NaN and inf in a state (a checkpoint, before or after saving; a ``policy.pt``'s weights):
which float tensors or arrays hold them, found without allocating a copy of a replay buffer.
A leaf of the store: it imports nothing of rlzoo, so the checkpoint writer, the resume's checks
and ``rlzoo.load_policy`` all read it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

# The parts of a checkpoint whose float tensors must be finite for it to count as good: the
# algorithm (networks, optimizers, tuner), each seed's replay buffer or rollout and the loop's open
# episodes (``members``; ``buffer`` and ``loop`` in checkpoints before the one layout).
FINITE_SECTIONS = ("algo", "buffer", "loop", "members")


def _walk(value: Any, name: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{name}.{key}" if name else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{name}[{i}]")
    else:
        yield name, value


def _section(state: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    """The parts of section ``key`` to check: ``members`` (one per seed) gives each member's
    ``buffer`` and ``loop`` (``members.<k>.buffer``), any other key itself."""
    if key != "members" or not isinstance(state[key], list):
        return [(key, state[key])]
    return [(f"members.{k}.{name}", part[name]) for k, part in enumerate(state[key])
            if isinstance(part, dict) for name in ("buffer", "loop") if name in part]


def nonfinite_entries(
    state: dict[str, Any], sections: Iterable[str] | None = FINITE_SECTIONS
) -> list[str]:
    """The dotted names of the float tensors (or numpy float arrays) in ``state`` holding NaN or
    inf, in the order they appear; ``[]`` for a clean state.

    Args:
        state: a checkpoint (``rlzoo.run.saved_state.run_state``, before or after saving) or
            any nested dict/list of tensors.
        sections: the top-level keys to check (default ``algo``, ``buffer``, ``loop`` and
            ``members``: the networks, optimizers and tuner, and each seed's replay buffer or
            rollout and the loop's open episodes; ``buffer`` and ``loop`` are where checkpoints
            before the one layout kept a single run's); missing keys are skipped. ``None``
            checks everything. Python floats (learning rates, config values) are never
            checked, only arrays.

    Example: ``['algo.modules.critic.net.0.weight', 'members.0.buffer.tensors.reward']``.
    """
    parts = state.items() if sections is None else [
        part for key in sections if key in state for part in _section(state, key)
    ]
    bad = []
    for key, part in parts:
        for name, value in _walk(part, str(key)):
            if isinstance(value, torch.Tensor):
                if (value.is_floating_point() or value.is_complex()) and value.numel() \
                        and not all_finite(value):
                    bad.append(name)
            elif isinstance(value, np.ndarray) and value.dtype.kind in "fc" and value.size \
                    and not bool(np.isfinite(value).all()):
                bad.append(name)
    return bad


def all_finite(value: torch.Tensor, chunk: int = 1 << 20) -> bool:
    """Whether every element of ``value`` is finite, checked ``chunk`` elements at a time:
    ``torch.isfinite`` of a whole replay buffer would allocate temporaries of several times its
    size (about 2.4 GB for a 1M-step Humanoid buffer)."""
    flat = value.reshape(-1)
    return all(bool(torch.isfinite(flat[i:i + chunk]).all())
               for i in range(0, flat.numel(), chunk))


def describe_nonfinite(entries: list[str], limit: int = 3) -> str:
    """``a, b, c and 4 more`` for a list from :func:`nonfinite_entries`."""
    shown = ", ".join(entries[:limit])
    return shown + (f" and {len(entries) - limit} more" if len(entries) > limit else "")
