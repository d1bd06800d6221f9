"""What a replay buffer's checkpoint may hold, checked before any of it is used
(:func:`check_replay_state`), and the rows it loads (:func:`saved_rows`), older full-size
checkpoints included (:func:`_written_rows`). ``rlzoo.buffers.replay.ReplayBuffer`` calls these
from ``check_state`` and ``load_state_dict``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlzoo.buffers.storage import field_for
from rlzoo.store.state_match import match_state


def check_replay_state(state: dict[str, Any], rows: int, num_envs: int,
                       generator_bytes: int, fields: dict[str, torch.Tensor] | None = None) -> None:
    """Refuse a ``ReplayBuffer.state_dict`` (read from a file) that a buffer of ``rows`` T by
    ``num_envs`` E (sampling generator state ``generator_bytes`` long) could not have written,
    before anything of it is used: its ``tensors`` exactly the buffer's ``fields`` (its row
    fields and FIFO ``index``), each of the field's dtype and trailing dimensions, contiguous
    (``rlzoo.store.state_match.match_state``: never cast); counters are integers (``started`` a
    bool) with
    ``0 <= ptr < T``, ``tail <= head``, at most ``T * E`` transitions held (``head - tail``),
    ``filled <= T`` and, once started, ``ptr < filled`` (nothing before the first add);
    ``row_count`` one count in ``[0, E]`` per filled row summing to ``head - tail``; the
    FIFO's written slots ``index`` transition starts of filled rows (``[0, filled * E)``);
    the sampling generator's state a uint8 tensor of ``generator_bytes``.
    A ``ValueError`` names the first one broken."""
    if not isinstance(state, dict) or not isinstance(state.get("tensors"), dict):
        raise ValueError("replay buffer state is not a mapping with tensors")
    if fields is not None:  # the rows it holds are counted below; any device: copied in
        match_state(state["tensors"], fields, "replay buffer tensors", rows=True, loaded_on="*")
    T, E = rows, num_envs
    ptr = _count(state, "ptr", T - 1, f" (a row of its {T} rows)")
    head = _count(state, "head", 2**62)
    tail = _count(state, "tail", head)
    if head - tail > T * E:
        raise ValueError(f"replay buffer head={head} and tail={tail} hold more than its "
                         f"{T * E} transitions")
    started = state.get("started")
    if not isinstance(started, bool):
        raise ValueError(f"replay buffer started={started!r} is not a bool")
    index = state["tensors"].get("index")
    if not torch.is_tensor(index) or index.dtype != torch.int64 or index.dim() != 1:
        raise ValueError("replay buffer FIFO index is not a 1-D int64 tensor")
    generator, size = state.get("generator"), generator_bytes
    if not torch.is_tensor(generator) or generator.dtype != torch.uint8 \
            or generator.shape != (size,):
        shape = tuple(generator.shape) if torch.is_tensor(generator) else type(generator)
        raise ValueError(f"replay buffer generator state {shape} is not {size} bytes")
    if "filled" not in state:  # full [T, E, ...] tensors of an older rlzoo: shapes checked
        return
    filled = _count(state, "filled", T, f" (its {T} rows)")
    if started != (filled > 0) or (started and ptr >= filled) or (not started and head):
        raise ValueError(f"replay buffer ptr={ptr}, filled={filled}, head={head} and "
                         f"started={started} do not fit together (ptr must be below filled)")
    counts = state.get("row_count")
    if not torch.is_tensor(counts) or counts.dim() != 1 or counts.shape[0] != filled \
            or counts.is_floating_point() or counts.is_complex():
        raise ValueError(f"replay buffer row_count is not {filled} integer counts")
    if filled and (int(counts.min()) < 0 or int(counts.max()) > E):
        raise ValueError(f"replay buffer row_count holds counts outside [0, {E}]")
    if int(counts.sum()) != head - tail:
        raise ValueError(f"replay buffer row_count sums to {int(counts.sum())}, not the "
                         f"{head - tail} transitions between tail={tail} and head={head}")
    slots = min(head, T * E)
    if index.shape[0] != slots:
        raise ValueError(f"replay buffer FIFO has {index.shape[0]} slots, not {slots}")
    if slots and (int(index.min()) < 0 or int(index.max()) >= filled * E):
        raise ValueError(f"replay buffer FIFO holds entries outside the {filled * E} "
                         "transition starts of its filled rows")


def saved_rows(buffer: Any, state: dict[str, Any]
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor, int, np.ndarray]:
    """The parts of a checked replay ``state`` that ``buffer`` (a ``ReplayBuffer``) loads:
    its row fields ``[filled, E, ...]`` by name, its FIFO's written slots, ``filled`` and the
    per-row counts (numpy int64). A checkpoint written before checkpoints were sized by the
    data (full ``[T, E, ...]`` tensors and no ``filled``) is cut to the rows it had written
    (:func:`_written_rows`). ``ValueError`` when its sizes do not fit ``buffer``'s."""
    tensors = dict(state["tensors"])
    index = tensors.pop("index")
    ptr, head, tail = int(state["ptr"]), int(state["head"]), int(state["tail"])
    started = bool(state["started"])
    row_count = state["row_count"].cpu().numpy().astype(np.int64)
    slots = min(head, buffer.index.numel())
    if not (0 <= ptr < buffer.rows and 0 <= tail <= head and index.dim() == 1
            and index.shape[0] >= slots):
        raise ValueError(f"replay buffer counters ptr={ptr}, head={head}, tail={tail} and "
                         f"{tuple(index.shape)} FIFO slots do not fit {buffer.rows} rows")
    if "filled" in state:
        filled = int(state["filled"])
        rows = {t.shape[0] if t.dim() else -1 for t in tensors.values()}
        if rows != {filled} or not 0 <= filled <= buffer.rows or index.shape[0] != slots:
            raise ValueError(f"replay buffer fields with {sorted(rows)} rows and "
                             f"{index.shape[0]} FIFO slots do not match its {filled} "
                             f"filled rows of {buffer.rows} and {slots} slots")
    else:  # full [T, E, ...] tensors: keep the rows that hold data (the rest are zero)
        for name, tensor in tensors.items():
            field_for(buffer, name, tensor, "replay buffer")
        if row_count.shape != (buffer.rows,):
            raise ValueError(f"replay buffer row counts of shape {row_count.shape} do not "
                             f"fit {buffer.rows} rows")
        filled = _written_rows(row_count, ptr, started)
        tensors = {name: t[:filled] for name, t in tensors.items()}
        index = index[:slots]
    return tensors, index, filled, row_count


def _count(state: dict[str, Any], name: str, high: int, note: str = "") -> int:
    """``state[name]``, an integer (not a bool) in ``[0, high]``; ``ValueError`` otherwise
    (``note`` added to its message)."""
    value = state.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise ValueError(f"replay buffer {name}={value!r} is not an integer in [0, {high:,}]"
                         f"{note}")
    return value


def _written_rows(row_count: np.ndarray, ptr: int, started: bool) -> int:
    """The rows an older checkpoint's buffer had written (it saved all ``T`` rows): row ``ptr``
    (the newest observation) and every row up to the next one after the last row that holds a
    transition start. Every row ``add`` writes is one of those: a row without a start is a
    reset call, which follows a row whose episode ended (a start), or row ``ptr``; a ring
    that has wrapped therefore gives ``T``. The rows after are zero, so cutting there and
    zeroing the rest gives back the same buffer."""
    T = len(row_count)
    last = ptr + 1 if started else 0
    counted = np.flatnonzero(row_count)
    if counted.size:
        last = max(last, min(int(counted[-1]) + 2, T))
    return last
