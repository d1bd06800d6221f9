"""A seed group's algorithm state as checkpoints hold it: every module tensor and every
optimizer tensor a group stacks carries the seed axis first (``[K, ...]``), for a single run too
(``[1, ...]``: checkpoint format 3), so one layout serves any number of seeds. In memory a
single run keeps its plain tensors; these functions add or drop the axis (views, no copies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlzoo.algos.saved import check_algorithm_state
from rlzoo.store.state_match import StateMismatch


def saved_state(group: Any) -> dict[str, Any]:
    """``group.state_dict()`` (an ``Algorithm``'s: ``modules``, ``optimizers``, ``updates``) as a
    checkpoint keeps it: :func:`with_seed_axis` for one seed (views of the live tensors), so a
    single run's checkpoint has a group of one's layout; a group's as it is."""
    state = group.state_dict()
    return state if group.seed_axis.size > 1 else with_seed_axis(state)


def load_saved_state(group: Any, state: dict[str, Any], seed_axis: bool = True) -> None:
    """Put :func:`saved_state` back into ``group`` (``seed_axis=False``: a single run's state
    written without the axis, by rlzoo before checkpoint format 3), checked first
    (``Algorithm.load_state_dict``). ``ValueError`` when it does not fit ``group``: another
    number of seeds, another shape, dtype or layout of any tensor."""
    group.load_state_dict(_in_group_layout(group, state, seed_axis))


def check_saved_state(group: Any, state: Any, seed_axis: bool = True) -> None:
    """Refuse :func:`saved_state` read from a file unless it fits ``group`` exactly
    (``rlzoo.algos.saved.check_algorithm_state``), loading nothing; ``ValueError`` naming the
    first entry that does not fit."""
    check_algorithm_state(group, _in_group_layout(group, state, seed_axis))


def _in_group_layout(group: Any, state: Any, seed_axis: bool) -> Any:
    """``state`` as ``group.state_dict()`` lays it out: a single run's without the seed axis."""
    if not isinstance(state, dict) or not isinstance(state.get("optimizers"), dict) \
            or not isinstance(state.get("modules"), dict) or not all(
                isinstance(saved, dict) and isinstance(saved.get("state"), dict) and all(
                    isinstance(entries, dict) for entries in saved["state"].values())
                for saved in state["optimizers"].values()):
        raise StateMismatch("algo is not an algorithm's state (modules, optimizers with "
                            "their state, updates)")
    if group.seed_axis.size == 1 and seed_axis:
        return without_seed_axis(state)
    return state


def with_seed_axis(state: dict[str, Any]) -> dict[str, Any]:
    """A single run's algorithm state in a group of one's layout: every module tensor and every
    optimizer tensor that a group stacks (Adam's moments, ``MemberAdam``'s step counts per
    member) gets a leading axis of 1 (views); Adam's one step count (``[]``) stays, as in a
    group."""
    return _per_seed_tensors(state, lambda x: x.unsqueeze(0), lambda key, x: (
        key != "step" or x.dim() >= 1))


def without_seed_axis(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`with_seed_axis` (slice 0, views); ``ValueError`` when a tensor's
    seed axis is not 1 long (a group's state)."""
    return _per_seed_tensors(state, _the_one_seed, lambda key, x: key != "step" or x.dim() >= 2)


def _the_one_seed(x: torch.Tensor) -> torch.Tensor:
    if not torch.is_tensor(x) or x.dim() == 0 or x.shape[0] != 1:
        what = list(x.shape) if torch.is_tensor(x) else type(x).__name__
        raise StateMismatch(f"{what} holds no single seed's weights (this run has one seed: "
                            "[1, ...])")
    return x[0]


def _per_seed_tensors(state: dict[str, Any], change: Callable[[torch.Tensor], torch.Tensor],
                      stacked: Callable[[str, torch.Tensor], bool]) -> dict[str, Any]:
    """``state`` with ``change`` applied to every module tensor and to every optimizer tensor
    (under ``optimizers.<name>.state.<index>.<key>``) that a group ``stacked``."""
    optimizers = {}
    for name, saved in state["optimizers"].items():
        per_param = {index: {key: change(v) if torch.is_tensor(v) and stacked(key, v) else v
                             for key, v in entries.items()}
                     for index, entries in saved["state"].items()}
        optimizers[name] = {**saved, "state": per_param}
    modules = {name: change(v) for name, v in state["modules"].items()}
    return {**state, "modules": modules, "optimizers": optimizers}
