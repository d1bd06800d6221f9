"""A loaded state checked against the live object it will go into, before any of it is used.

A checkpoint (or ``policy.pt``) is data from a file: ``torch.load(weights_only=True)`` rebuilds
whatever tensors it names, and the ``load_state_dict`` methods of torch copy them with silent
casts (a half, long or bool weight becomes a float one) or, for optimizer state, keep them as
they are: an Adam moment with fewer elements than its parameter makes the fused Adam kernel write
past its end. So the state is matched, by rule, against what the live object would save itself
(:func:`match_state`): the same keys, lists of the same length, every tensor of exactly the live
one's shape, dtype and device kind and contiguous, every plain value of the live one's type.
An optimizer's state is matched against the state its own first step creates
(:func:`check_optimizer_state`), its step counts held to the algorithm's updates.

A mismatch is a :class:`StateMismatch` (a ``ValueError``) whose one-line message names the entry
by its key path, what the file holds there and what this run holds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

PLAIN = (bool, int, float, str)
SECOND_MOMENTS = ("exp_avg_sq", "max_exp_avg_sq")  # Adam's: sums of squares, never negative
STEP_KEY = "step"  # an optimizer's per-parameter step count


class StateMismatch(ValueError):
    """A loaded state does not fit the live object it would go into (one line naming the
    entry)."""


def _describe(value: Any) -> str:
    if torch.is_tensor(value):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor {list(value.shape)}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return " ".join(f"{type(value).__name__} {value!r}"[:80].split())


def match_tensor(saved: Any, live: torch.Tensor, where: str, rows: bool = False,
                 loaded_on: str | None = None) -> None:
    """Refuse ``saved`` unless it is a tensor like ``live``: its dtype (no cast is ever made),
    its device kind (or ``loaded_on``, the kind the file was mapped to, where ``live`` is on the
    CPU: a generator state or host step count read onto the run's device; ``"*"``: any, for
    an owner that copies across devices), its shape (with
    ``rows``: its trailing dimensions and any number of leading rows, which the owner bounds)
    and its layout: contiguous where ``live`` is, else ``live``'s strides.
    ``StateMismatch`` names ``where``."""
    if not torch.is_tensor(saved):
        raise StateMismatch(f"{where} is {_describe(saved)} where this run holds "
                            f"{_describe(live)}")
    if saved.dtype != live.dtype:
        raise StateMismatch(f"{where} is {_describe(saved)} where this run holds "
                            f"{_describe(live)} (rlzoo never casts what it loads)")
    kinds = {live.device.type} | ({loaded_on} if loaded_on and live.device.type == "cpu"
                                  else set())
    if saved.device.type not in kinds and loaded_on != "*":
        raise StateMismatch(f"{where} is on {saved.device.type} where this run holds it on "
                            f"{live.device.type}")
    fits = (saved.shape == live.shape if not rows else
            saved.dim() == live.dim() and saved.shape[1:] == live.shape[1:])
    if not fits:
        raise StateMismatch(f"{where} has shape {list(saved.shape)} where this run holds "
                            f"{list(live.shape)}" + (" rows" if rows else ""))
    if not (saved.is_contiguous() if live.is_contiguous() else saved.stride() == live.stride()):
        raise StateMismatch(f"{where} has strides {list(saved.stride())} (not the contiguous "
                            f"layout of shape {list(saved.shape)} rlzoo writes)")


def match_state(saved: Any, live: Any, where: str, rows: bool = False,
                loaded_on: str | None = None) -> None:
    """Refuse ``saved`` (read from a file) unless it has the structure of ``live`` (what the
    live object saves now), walking both side by side: a mapping has exactly ``live``'s keys, a
    list or tuple ``live``'s length, a tensor is like ``live``'s (:func:`match_tensor`, with
    ``rows`` and ``loaded_on``), a plain value (bool, int, float, str) has ``live``'s type (a
    bool is no int, an int no float); ``None`` on either side stands for any plain value (a
    field set only once used, e.g. python's cached ``gauss``). ``StateMismatch`` names the
    first entry that differs by its key path under ``where``. A numpy array or scalar (of a
    state never written to a file) stands for the tensor or number a checkpoint stores it as."""
    live, saved = _as_stored(live), _as_stored(saved)
    if torch.is_tensor(live):
        match_tensor(saved, live, where, rows, loaded_on)
    elif isinstance(live, Mapping):
        if not isinstance(saved, Mapping):
            raise StateMismatch(f"{where} is {_describe(saved)} where this run holds a mapping")
        missing = [k for k in live if k not in saved]
        unknown = [k for k in saved if k not in live]
        if missing or unknown:
            raise StateMismatch(
                f"{where} " + "; ".join(
                    part for part in (f"lacks {_keys(missing)}" if missing else "",
                                      f"holds {_keys(unknown)}, which this run has not"
                                      if unknown else "") if part))
        for key, value in live.items():
            match_state(saved[key], value, f"{where}.{key}", rows, loaded_on)
    elif isinstance(live, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(live):
            raise StateMismatch(f"{where} is {_describe(saved)} where this run holds "
                                f"{_describe(live)}")
        for i, (mine, theirs) in enumerate(zip(live, saved)):
            match_state(theirs, mine, f"{where}[{i}]", rows, loaded_on)
    elif live is None or saved is None:
        if not (saved is None or isinstance(saved, PLAIN)):
            raise StateMismatch(f"{where} is {_describe(saved)} where this run holds a value")
    elif type(saved) is not type(live):
        raise StateMismatch(f"{where} is {_describe(saved)} where this run holds a "
                            f"{type(live).__name__}")


def _as_stored(value: Any) -> Any:
    """``value`` as a checkpoint stores it: a numpy array as a tensor (sharing its memory: only
    its shape, dtype and layout are read), a numpy scalar as a Python number."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        with warnings.catch_warnings():  # a read-only array
            warnings.simplefilter("ignore")
            try:
                return torch.from_numpy(value)
            except TypeError:  # strings, datetimes: no tensor, so described as they are
                return value
    return value.item() if isinstance(value, np.generic) else value


def _keys(keys: list[Any]) -> str:
    shown = ", ".join(repr(k) for k in keys[:4])
    return f"{shown}{', ...' if len(keys) > 4 else ''}"


def check_count(value: Any, where: str, high: int) -> int:
    """``value``, an integer (not a bool) in ``[0, high]``; ``StateMismatch`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise StateMismatch(f"{where}={_describe(value)} is not an integer in [0, {high:,}]")
    return value


def check_optimizer_state(saved: Any, template: Mapping[int, Any], groups: list[dict[str, Any]],
                          step_limit: int, where: str) -> None:
    """Refuse an optimizer's saved ``state_dict`` (``{"state": {index: {...}}, "param_groups":
    [...]}``) unless it fits the live optimizer:

    * ``param_groups``: as many as ``groups`` (the live ``state_dict()``'s), each's ``params``
      the live indices. Its other entries (``lr``, ``betas``, ``eps``, ``weight_decay``,
      ``maximize``, ``amsgrad``, ``fused``, ``capturable``, ...) are not read: the run's own, from
      its config, are kept (``rlzoo.optim.adam.with_own_settings``).
    * ``state``: each index one of the live parameters' (a parameter not stepped yet has none),
      its entries exactly ``template[index]``'s (the state the optimizer's first step creates,
      ``rlzoo.optim.adam.initial_state``): tensors of its shape, dtype, device kind, contiguous.
    * every step count (``step``) integer-valued in ``[0, step_limit]`` (the most steps the
      algorithm makes in the checkpoint's updates); Adam's second moments non-negative.
    """
    if not isinstance(saved, Mapping) or set(saved) != {"state", "param_groups"}:
        raise StateMismatch(f"{where} is not an optimizer state (state and param_groups)")
    saved_groups = saved["param_groups"]
    if not isinstance(saved_groups, list) or len(saved_groups) != len(groups):
        raise StateMismatch(f"{where}.param_groups is {_describe(saved_groups)} where this "
                            f"run's optimizer has {len(groups)} group(s)")
    for i, (mine, theirs) in enumerate(zip(groups, saved_groups)):
        params = theirs.get("params") if isinstance(theirs, Mapping) else None
        if not isinstance(params, list) or any(type(p) is not int for p in params) \
                or params != mine["params"]:
            raise StateMismatch(f"{where}.param_groups[{i}].params are not this run's "
                                f"parameters {mine['params']}")
    state = saved["state"]
    if not isinstance(state, Mapping):
        raise StateMismatch(f"{where}.state is {_describe(state)}, not a mapping")
    for index, entries in state.items():
        if index not in template:
            raise StateMismatch(f"{where}.state holds parameter {index!r}, which this run's "
                                "optimizer has not")
        match_state(entries, template[index], f"{where}.state.{index}")
        for key, value in entries.items():
            if key == STEP_KEY:
                _check_steps(value, f"{where}.state.{index}.{key}", step_limit)
            elif key in SECOND_MOMENTS and torch.is_tensor(value) and value.numel() \
                    and bool((value < 0).any()):
                raise StateMismatch(f"{where}.state.{index}.{key} holds negative values (a "
                                    "sum of squares never is)")


def _check_steps(value: Any, where: str, limit: int) -> None:
    """Every entry of ``value`` (a tensor or a number) an integer in ``[0, limit]``."""
    if isinstance(value, bool) or not (torch.is_tensor(value) or isinstance(value, (int, float))):
        raise StateMismatch(f"{where} is {_describe(value)}, not a step count")
    value = torch.as_tensor(value, dtype=torch.float64) if not torch.is_tensor(value) else value
    if not value.numel():
        return
    low, high = float(value.min()), float(value.max())
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0 or high > limit \
            or not bool((value == value.round()).all()):
        raise StateMismatch(f"{where} holds step counts from {low:g} to {high:g}, not integers "
                            f"in [0, {limit:,}] (the optimizer steps of the checkpoint's "
                            "updates)")
