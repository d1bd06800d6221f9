"""Seeds as a batch axis: K independent runs of one algorithm trained as one module.

``stack_seeds([algo_0, ..., algo_{K-1}])`` takes K copies of an algorithm, each built (and so
initialised) under its own seed, and turns the first into the group: every parameter, buffer and
(lazily created) optimizer moment gets a leading seed axis ``[K, ...]``. The algorithm's own code
stays single-seed and never sees K: ``Algorithm.compute(fn, *args)`` runs ``fn`` for every seed
(:func:`run_with_weights`) and each seed sees exactly the shapes it would see alone. What crosses
seeds is only what is elementwise: the optimizer step (Adam is elementwise, so seed k's step
reads only seed k's gradient and moments; ``MemberAdam`` steps the member of each seed that its
``member`` index says), the polyak average of the targets, and the sum of the K per-seed losses,
whose gradient on seed k's slice is seed k's own loss gradient. Gradient clipping is per seed
(:func:`clip_grad_norm`, from ``Algorithm.step``); a draw made outside ``compute`` is made once
per seed (:func:`draw_each`, from ``Algorithm.draw``); the metrics ``update`` returns are
averaged per seed (:func:`reported_means`). The group's size lives here (:func:`group_size`), not
on the algorithm or its optimizers.

Two ways to run ``fn`` for every seed:

* **In turn** (a group given its seeds' generators by :func:`draw_from`: the loop's CPU groups,
  ``seed_kernels=exact``). ``fn`` runs once per seed on its slices of the weights (views swapped
  into the modules), torch's CPU generator carrying on the seed's stream, and the optimizers
  step each slice as a tensor of its own (``Adam.split``): each seed runs its single run's
  kernels, shapes and numbers, so it is its single run bit for bit (docs/seeds.md; speed:
  ``scripts/seed_group_speed.py``).
* **Vmapped** (built directly, ``seed_kernels=batched``, or CUDA, where one batched kernel beats
  K launches): one ``torch.vmap`` over ``torch.func.functional_call``, ``randomness="different"``:
  each seed its own draws from the process's generator, but not its single run's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

# The group's {name: stacked tensor} handed to functional_call, built once per group.
_STATE: weakref.WeakKeyDictionary[nn.Module, dict[str, torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)
# K of every group made by stack_seeds (a module not in it is one seed).
_SIZES: weakref.WeakKeyDictionary[nn.Module, int] = weakref.WeakKeyDictionary()
# The group's per-seed generators (draw_from), seed k's at k.
_GENERATORS: weakref.WeakKeyDictionary[nn.Module, list[torch.Generator]] = (
    weakref.WeakKeyDictionary()
)
# The group whose seeds _in_turn is running now (a nested call is refused).
_RUNNING: list[nn.Module] = []
# Every parameter and buffer slot of a group run in turn (_slots), built once per group.
_SLOTS: weakref.WeakKeyDictionary[nn.Module, list[tuple[dict[str, Any], str, torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)


def _set_buffer(module: nn.Module, name: str, value: torch.Tensor) -> None:
    owner, _, leaf = name.rpartition(".")
    target = module.get_submodule(owner) if owner else module
    target._buffers[leaf] = value


def stack_seeds(members: Sequence[Any]) -> Any:
    """Turn K algorithms (``rlzoo.algos.base.Algorithm``s of the same class and config, built
    under K seeds) into one group of K seeds.

    Returns ``members[0]``, changed in place: each parameter keeps its identity (so the
    optimizers built in ``__init__`` still hold it) and now holds ``[K, *shape]``, slice k being
    member k's tensor; each buffer likewise. Call before the first update (optimizer state is
    created at the first step, already stacked). One member is returned unchanged.
    """
    group = members[0]
    if len(members) == 1:
        return group
    if group.updates or any(opt.state for opt in group.optimizers.values()):
        raise ValueError("stack_seeds needs algorithms that have not been updated yet")
    with torch.no_grad():
        for name, param in group.named_parameters():
            param.data = torch.stack([m.get_parameter(name).detach() for m in members])
        for name, _ in list(group.named_buffers()):
            _set_buffer(group, name, torch.stack([m.get_buffer(name) for m in members]))
    _SIZES[group] = len(members)
    _STATE.pop(group, None)
    return group


def group_size(group: nn.Module) -> int:
    """K, the number of seeds ``group`` holds (1: a module that :func:`stack_seeds` did not
    stack)."""
    return _SIZES.get(group, 1)


def group_state(group: nn.Module) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` of every parameter and buffer of ``group`` (cached: parameters change in
    place, and a module whose buffers are reassigned must not be a group)."""
    state = _STATE.get(group)
    if state is None:
        state = {**dict(group.named_parameters()), **dict(group.named_buffers())}
        _STATE[group] = state
    return state


def _is_record(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _flatten(value: Any) -> tuple[Any, Any]:
    """(what vmap receives, its in_dim): tensors along dim 0; a dataclass of tensors (``Batch``,
    ``Rollout``) as a dict of its tensor fields; anything else is shared by all seeds."""
    if torch.is_tensor(value):
        return value, 0
    if _is_record(value):
        tensors = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                   if torch.is_tensor(getattr(value, f.name))}
        return tensors, 0
    return value, None


def _unflatten(template: Any, value: Any) -> Any:
    return dataclasses.replace(template, **value) if _is_record(template) else value


def run_with_weights(group: nn.Module, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    """``fn(*args)`` for every seed of ``group``, in turn or vmapped (see the module docstring);
    for one seed (a single run) the plain call ``fn(*args)``.

    Tensor arguments (and the tensor fields of dataclass arguments) carry the seed axis first;
    other arguments are shared. Returns ``fn``'s outputs (tensors, or dicts/tuples of tensors)
    with the seed axis first."""
    if group_size(group) == 1:  # one seed: the plain call
        return fn(*args)
    generators = _GENERATORS.get(group)
    if generators:
        return _stacked(_in_turn(group, fn, lambda k: [_seed_slice(a, k) for a in args],
                                 generators))
    flat, dims = zip(*(_flatten(a) for a in args)) if args else ((), ())

    def one(state: dict[str, torch.Tensor], *values: Any) -> Any:
        rebuilt = [_unflatten(t, v) for t, v in zip(args, values)]
        return torch.func.functional_call(group, state, (fn, *rebuilt))

    return torch.vmap(one, in_dims=(0, *dims), randomness="different")(group_state(group), *flat)


def _slots(group: nn.Module) -> list[tuple[dict[str, Any], str, torch.Tensor]]:
    """Every ``(module._parameters or module._buffers, name, group tensor)`` of ``group`` (cached
    like :func:`group_state`)."""
    slots = _SLOTS.get(group)
    if slots is None:
        slots = [(table, name, tensor) for module in group.modules()
                 for table in (module._parameters, module._buffers)
                 for name, tensor in table.items() if tensor is not None]
        _SLOTS[group] = slots
    return slots


@contextlib.contextmanager
def _drawing_from(generator: torch.Generator) -> Iterator[None]:
    """Within the block torch's default CPU generator carries on ``generator``'s stream; after
    it, ``generator`` holds where the stream got to and the process's generator is put back."""
    process = torch.default_generator
    saved = process.get_state()
    process.set_state(generator.get_state())
    try:
        yield
    finally:
        generator.set_state(process.get_state())
        process.set_state(saved)


def _in_turn(group: nn.Module, fn: Callable[..., Any], args_of: Callable[[int], Sequence[Any]],
             generators: Sequence[torch.Generator]) -> list[Any]:
    """``fn(*args_of(k))`` once per seed, seed k with its slices of the weights and
    ``generators[k]``'s stream; the K outputs. Gradients reach the group's tensors through the
    slices (one ``unbind`` per tensor and call). A call inside a call is refused (it would slice
    the seed's slices again)."""
    if _RUNNING:
        raise RuntimeError("a seed group's compute was called inside another compute call; call "
                           "the inner method directly (its weights are already the seed's)")
    slots = _slots(group)
    slices = {id(t): t.unbind(0) for _, _, t in slots}
    outputs = []
    _RUNNING.append(group)
    try:
        for k, generator in enumerate(generators):
            for table, name, tensor in slots:
                table[name] = slices[id(tensor)][k]
            with _drawing_from(generator):
                outputs.append(fn(*args_of(k)))
    finally:
        _RUNNING.pop()
        for table, name, tensor in slots:
            table[name] = tensor
    return outputs


def _stacked(outputs: Sequence[Any]) -> Any:
    """K outputs of one function -> one, every tensor ``[K, ...]`` (records' tensor fields
    too); a value that is not a tensor must be the same for every seed."""
    leaves, specs = zip(*(tree_flatten(out) for out in outputs))
    stacked = []
    for per_seed in zip(*leaves):
        if torch.is_tensor(per_seed[0]) or _is_record(per_seed[0]):
            stacked.append(stack_records(per_seed))
        elif all(v == per_seed[0] for v in per_seed[1:]):
            stacked.append(per_seed[0])
        else:
            raise TypeError(f"compute's function returned {type(per_seed[0]).__name__} values "
                            "that differ between seeds; return tensors")
    return tree_unflatten(stacked, specs[0])


def draw_from(group: nn.Module, generators: Sequence[torch.Generator]) -> None:
    """Make seed k of ``group`` draw from ``generators[k]`` inside ``compute`` (module
    docstring); the generators are the caller's (it saves and restores their states)."""
    if len(generators) != group_size(group):
        raise ValueError(f"{len(generators)} generators for {group_size(group)} seeds")
    _GENERATORS[group] = list(generators)
    for optimizer in getattr(group, "optimizers", {}).values():
        if hasattr(optimizer, "split"):  # each seed's slice stepped as its single run's tensor
            optimizer.split(len(generators))


@contextlib.contextmanager
def generators_forked(group: nn.Module) -> Iterator[None]:
    """Within the block the group's per-seed generators draw from copies: their states are
    put back after (what ``torch.random.fork_rng`` does for the process's generator)."""
    generators = _GENERATORS.get(group, [])
    states = [g.get_state() for g in generators]
    try:
        yield
    finally:
        for g, state in zip(generators, states):
            g.set_state(state)


def seed_shape(seeds: int) -> tuple[int, ...]:
    """The leading shape of what a group holds per seed outside ``compute`` (metrics,
    per-seed draws): ``()`` for one seed (no axis), ``(K,)`` for a group of K."""
    return () if seeds == 1 else (seeds,)


def draw_per_seed(draw: Callable[[], torch.Tensor], seeds: int) -> torch.Tensor:
    """``draw()`` once per seed (each seed its own draw), shaped ``seed_shape(seeds) + shape``:
    one seed's is the draw itself."""
    draws = [draw() for _ in range(seeds)]
    return draws[0] if seeds == 1 else torch.stack(draws)


def draw_each(group: nn.Module, draw: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``draw()`` once per seed of ``group`` (``Algorithm.draw``): :func:`draw_per_seed`; seed k
    of a group run in turn from its own generator (its single run's draw)."""
    generators = _GENERATORS.get(group)
    if not generators or group_size(group) == 1:
        return draw_per_seed(draw, group_size(group))
    drawn = []
    for generator in generators:
        with _drawing_from(generator):
            drawn.append(draw())
    return torch.stack(drawn)


def seed_mean(x: torch.Tensor, seeds: int) -> torch.Tensor:
    """The mean of ``x`` per seed (``x`` has the seed axis first in a group): a scalar for one
    seed, ``[K]`` for a group. For statistics computed outside ``compute``."""
    return x.mean() if seeds == 1 else x.reshape(seeds, -1).mean(1)


def reported_means(group: nn.Module, metrics: Any) -> Any:
    """``metrics`` (``update``'s ``{name: tensor}``) with every tensor that holds more than one
    value per seed replaced by its mean per seed (:func:`seed_mean`), so each is a scalar (``[K]``
    for a group); the rest as they are. Anything but a dict is returned as it is."""
    if not isinstance(metrics, dict):
        return metrics
    seeds = group_size(group)
    lead = len(seed_shape(seeds))
    return {name: seed_mean(value, seeds) if torch.is_tensor(value) and value.dim() > lead
            else value for name, value in metrics.items()}


def clip_grad_norm(group: nn.Module, params: Sequence[torch.Tensor], max_norm: float) -> None:
    """Clip the gradients' global 2-norm to ``max_norm``, per seed of ``group``: for one seed
    ``torch.nn.utils.clip_grad_norm_``, for a group :func:`clip_grad_norm_per_seed`."""
    if group_size(group) == 1:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    else:
        clip_grad_norm_per_seed(params, max_norm)


def clip_grad_norm_per_seed(params: Sequence[torch.Tensor], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_`` applied to each seed's slice on its own, with its
    arithmetic (so a seed's clip is its single run's bit for bit): seed k's gradients are scaled
    by ``min(1, max_norm / (||g_k|| + 1e-6))``, ``||g_k||`` the 2-norm of all of seed k's
    gradients (parameters ``[K, ...]``)."""
    grads = [p.grad for p in params if p.grad is not None]
    for k in range(grads[0].shape[0] if grads else 0):
        mine = [g[k] for g in grads]
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(mine, 2.0)), 2.0)
        torch._foreach_mul_(mine, (max_norm / (total + 1e-6)).clamp(max=1.0))


def seed_weights(weights: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Seed k's slice of a group's module state: a single run's state dict."""
    return {name: value[k] for name, value in weights.items()}


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


def _seed_slice(value: Any, k: int) -> Any:
    """Slice k of a tensor (or of each tensor field of a record); anything else as it is."""
    if torch.is_tensor(value):
        return value[k]
    if _is_record(value):
        return dataclasses.replace(value, **{n: v[k] for n, v in _flatten(value)[0].items()})
    return value


def _with_seed_axis(value: Any) -> Any:
    """``value`` (a tensor, or tuples, lists and dicts of them) with a leading seed axis of 1."""
    if torch.is_tensor(value):
        return value.unsqueeze(0)
    if isinstance(value, dict):
        return {k: _with_seed_axis(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_with_seed_axis(v) for v in value)
    return value


class SeedAxis:
    """The loop's side of an algorithm trained as ``seeds`` seeds: every tensor the loop hands
    over, and every tensor it gets back, carries the seed axis first (``[K, ...]``), for K = 1 as
    for K > 1, so the loop has one code path.

    K = 1 is the plain algorithm: ``fn`` runs on slice 0 (a view) and its outputs get an axis of
    1 (views), the same arithmetic as a single run without the axis. K > 1 runs ``fn`` through
    :func:`run_with_weights` (each seed in turn on the CPU, one vmapped call on CUDA).

    Args:
        algo: the algorithm (after :func:`stack_seeds` for K > 1).
        seeds: K.
    """

    def __init__(self, algo: Any, seeds: int) -> None:
        self.algo, self.seeds = algo, seeds

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` once per seed: tensor arguments (and tensor fields of records) ``[K, ...]``
        (other arguments are shared); returns ``fn``'s outputs with ``[K, ...]``."""
        if self.seeds == 1:
            return _with_seed_axis(fn(*(_seed_slice(a, 0) for a in args)))
        return run_with_weights(self.algo, fn, args)

    def call_rows(self, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                  live: Any) -> torch.Tensor:
        """``fn(x)`` for every seed on the rows it still runs: ``x [K, B, ...]``, ``live [K, B]``
        (bool). A group run in turn calls ``fn`` on seed k's live rows only, as its single run
        calls it (a sampling policy's noise is drawn per row), and returns zeros at the other
        rows; any other group (and one seed, whose rows all run) computes every row."""
        generators = _GENERATORS.get(self.algo)
        if self.seeds == 1 or not generators:
            return self.call(fn, x)
        rows = [torch.as_tensor(np.flatnonzero(r), device=x.device) for r in live]
        outputs = _in_turn(self.algo, fn, lambda k: [x[k].index_select(0, rows[k])],
                           generators)
        out = outputs[0].new_zeros((self.seeds, x.shape[1], *outputs[0].shape[1:]))
        for k, (rows_k, values) in enumerate(zip(rows, outputs)):
            out[k].index_copy_(0, rows_k, values)
        return out

    def update(self, update: Callable[[Any], dict[str, torch.Tensor]],
               batch: Any) -> dict[str, torch.Tensor]:
        """One update of every seed from ``batch`` (``[K, ...]``) by ``update`` (the
        algorithm's, maybe accelerated, which takes the group's batch); metrics ``[K]``."""
        if self.seeds == 1:
            return _with_seed_axis(update(_seed_slice(batch, 0)))
        return update(batch)

    def weights(self, weights: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
        """Seed k's share of the algorithm's module state: a single run's state dict."""
        return weights if self.seeds == 1 else seed_weights(weights, k)

    def slot(self, k: int) -> int | None:
        """Seed k's slot in the normalizers' statistics (``None``: they have no seed axis)."""
        return None if self.seeds == 1 else k
