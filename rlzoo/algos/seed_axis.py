"""The seed axis: K independent runs of one algorithm trained as one module (docs/seeds.md).

An algorithm holds its seed axis as ``algo.seed_axis``, a :class:`SeedAxis`: the group's size
K, its seeds' generators and the tables of its tensors; a single run's is ``SeedAxis()`` (K = 1),
whose every call is the plain call. ``stack_seeds([algo_0, ..., algo_{K-1}])`` takes K copies of
an algorithm, each built (and so initialised) under its own seed, and turns the first into the
group: every parameter, buffer and (lazily created) optimizer moment gets a leading seed axis
``[K, ...]``. The algorithm's own code stays single-seed and never sees K: ``Algorithm.compute``
runs a method for every seed (:meth:`SeedAxis.compute`) and each seed sees exactly the shapes it
would see alone. What crosses seeds is only what is elementwise: the optimizer step (Adam is
elementwise, so seed k's step reads only seed k's gradient and moments; ``MemberAdam`` steps the
member of each seed that its ``member`` index says), the polyak average of the targets, and the
sum of the K per-seed losses, whose gradient on seed k's slice is seed k's own loss gradient.

Two ways to run a method for every seed:

* **In turn** (a group given its seeds' generators: the loop's CPU groups,
  ``seed_kernels=exact``). It runs once per seed on its slices of the weights (views swapped
  into the modules), torch's CPU generator carrying on the seed's stream, and the optimizers
  step each slice as a tensor of its own (``Adam.split``): each seed runs its single run's
  kernels, shapes and numbers, so it is its single run bit for bit (speed:
  ``scripts/seed_group_speed.py``).
* **Vmapped** (no generators: ``seed_kernels=batched``, or CUDA, where one batched kernel beats
  K launches): one ``torch.vmap`` over ``torch.func.functional_call``, ``randomness="different"``:
  each seed its own draws from the process's generator, but not its single run's.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from rlzoo.algos.seed_records import flatten, seed_slice, stacked, unflatten, with_axis

Slot = tuple[dict[str, Any], str, torch.Tensor]  # (module._parameters or _buffers, name, tensor)


@dataclasses.dataclass(eq=False)
class SeedAxis:
    """The seed axis of one algorithm (``Algorithm.seed_axis``): what its K seeds share.

    Its methods take the module (the algorithm) they run; the axis holds no reference to it.
    Inside the algorithm: :meth:`compute`, :meth:`draw`, :meth:`clip_grad_norm`, :meth:`means`.
    The loop's side, every tensor with the seed axis first (``[K, ...]``, for K = 1 too):
    :meth:`call`, :meth:`call_rows`, :meth:`update`, :meth:`each`, :meth:`weights`,
    :meth:`forked`.

    Attributes:
        size: K, the number of seeds (1: a single run, whose tensors have no seed axis).
        generators: seed k's generator at k for a group run in turn (CPU, ``seed_kernels=exact``;
            torch's CPU generator carries on seed k's stream while seed k computes); empty for
            a vmapped group and a single run (the process's generator).
    """

    size: int = 1
    generators: list[torch.Generator] = dataclasses.field(default_factory=list)
    # the group's {name: tensor} for functional_call, and every parameter and buffer slot of
    # its modules (for a group run in turn), each built once
    _tensors: dict[str, torch.Tensor] | None = dataclasses.field(default=None, repr=False)
    _slots: list[Slot] | None = dataclasses.field(default=None, repr=False)
    _running: bool = dataclasses.field(default=False, repr=False)  # a seed's call is running

    # ------------------------------------------------------------------ inside the algorithm
    def compute(self, module: nn.Module, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """``fn(*args)`` for every seed of ``module``, in turn or vmapped (module docstring);
        for one seed the plain call. Tensor arguments (and the tensor fields of dataclass
        arguments) carry the seed axis first; other arguments are shared. Returns ``fn``'s
        outputs (tensors, or dicts/tuples of them) with the seed axis first."""
        if self.size == 1:
            return fn(*args)
        if self.generators:
            return stacked(self._in_turn(module, lambda k: fn(*(seed_slice(a, k) for a in args))))
        flat, dims = zip(*(flatten(a) for a in args)) if args else ((), ())

        def one(tensors: dict[str, torch.Tensor], *values: Any) -> Any:
            rebuilt = [unflatten(t, v) for t, v in zip(args, values)]
            return torch.func.functional_call(module, tensors, (fn, *rebuilt))

        return torch.vmap(one, in_dims=(0, *dims), randomness="different")(
            self._tensors_of(module), *flat)

    def draw(self, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``fn()``, a draw made outside :meth:`compute`, once per seed (``[K, ...]``; one
        seed's is the draw itself); seed k of a group run in turn draws from its own generator
        (its single run's draw)."""
        if self.size == 1:
            return fn()
        if not self.generators:
            return torch.stack([fn() for _ in range(self.size)])
        drawn = []
        for generator in self.generators:
            with _drawing_from(generator):
                drawn.append(fn())
        return torch.stack(drawn)

    def clip_grad_norm(self, params: Sequence[torch.Tensor], max_norm: float) -> None:
        """Clip the gradients' global 2-norm to ``max_norm``, per seed:
        ``torch.nn.utils.clip_grad_norm_`` for one seed, :func:`clip_grad_norm_per_seed`."""
        if self.size == 1:
            torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            clip_grad_norm_per_seed(params, max_norm)

    def means(self, metrics: Any) -> Any:
        """``metrics`` (``update``'s ``{name: tensor}``) with every tensor that holds more than
        one value per seed replaced by its mean per seed, so each is a scalar (``[K]`` for a
        group); the rest as they are. Anything but a dict is returned as it is."""
        if not isinstance(metrics, dict):
            return metrics
        lead = 0 if self.size == 1 else 1
        return {name: self._mean(value) if torch.is_tensor(value) and value.dim() > lead
                else value for name, value in metrics.items()}

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean() if self.size == 1 else x.reshape(self.size, -1).mean(1)

    # ------------------------------------------------------------------ the loop's side
    def call(self, module: nn.Module, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` once per seed: tensor arguments (and tensor fields of records)
        ``[K, ...]``, for one seed too (it runs on slice 0, a view, and its outputs get an axis
        of 1: the plain call's arithmetic); other arguments are shared. Returns ``fn``'s
        outputs ``[K, ...]``."""
        if self.size == 1:
            return with_axis(fn(*(seed_slice(a, 0) for a in args)))
        return self.compute(module, fn, args)

    def call_rows(self, module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor],
                  x: torch.Tensor, live: np.ndarray,
                  whole: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """``fn(x)`` for every seed on the rows it runs, as its single run calls it: ``x [K, B,
        ...]``, ``live [K, B]`` (bool). A seed without a live row does not act: its state
        (whatever ``fn`` changes in its slice of ``module``'s buffers, e.g. FlashSAC's repeated
        noise, and its generator) is as before the call. A group run in turn calls ``fn`` on
        each seed's live rows only (a sampling policy draws per row) and returns zeros at the
        others; any other group computes every row with ``whole`` (default: :meth:`call`; the
        loop's may replay a CUDA graph) and puts the idle seeds' buffers back; one seed
        (whose rows all run) is ``whole(x)``."""
        everyone = whole or (lambda v: self.call(module, fn, v))
        if self.size == 1:
            return everyone(x)
        if not self.generators:
            return self._idle_kept(module, ~live.any(axis=1), lambda: everyone(x))
        rows = [np.flatnonzero(r) for r in live]

        def mine(k: int) -> torch.Tensor:  # seed k's live rows (its slice when all are)
            if len(rows[k]) == x.shape[1]:
                return fn(x[k])
            return fn(x[k].index_select(0, torch.as_tensor(rows[k], device=x.device)))

        acting = [k for k in range(self.size) if len(rows[k])]
        outputs = self._in_turn(module, mine, acting)
        out = outputs[0].new_zeros((self.size, x.shape[1], *outputs[0].shape[1:]))
        for k, values in zip(acting, outputs):
            out[k].index_copy_(0, torch.as_tensor(rows[k], device=out.device), values)
        return out

    def update(self, update: Callable[[Any], dict[str, torch.Tensor]],
               batch: Any) -> dict[str, torch.Tensor]:
        """One update of every seed from ``batch`` (``[K, ...]``) by ``update`` (the
        algorithm's, maybe accelerated, which takes the group's batch); metrics ``[K]``."""
        if self.size == 1:
            return with_axis(update(seed_slice(batch, 0)))
        return update(batch)

    def each(self, module: nn.Module, work: Callable[[int], Any], seeds: Iterable[int]) -> None:
        """``work(k)`` for each seed k of ``seeds``, with seed k's slices of ``module``'s
        weights in place (views: what ``work`` changes in place is seed k's), as
        :meth:`compute` runs a seed in turn (one seed: the plain call). For the loop's updates
        of buffers from collected data (the input normalizers' statistics)."""
        if self.size == 1:
            for k in seeds:
                work(k)
        else:
            self._in_turn(module, work, list(seeds), draw=False)

    def weights(self, weights: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
        """Seed k's share of a module state of the algorithm: a single run's state dict."""
        return weights if self.size == 1 else {name: value[k] for name, value in weights.items()}

    @contextlib.contextmanager
    def forked(self) -> Iterator[None]:
        """Within the block the seeds' generators draw from copies: their states are put back
        after (what ``torch.random.fork_rng`` does for the process's generator)."""
        states = [g.get_state() for g in self.generators]
        try:
            yield
        finally:
            for generator, state in zip(self.generators, states):
                generator.set_state(state)

    # ------------------------------------------------------------------ the machinery
    def _tensors_of(self, module: nn.Module) -> dict[str, torch.Tensor]:
        """``{name: tensor}`` of every parameter and buffer of ``module`` (cached: parameters
        change in place, and a group's buffers are never reassigned)."""
        if self._tensors is None:
            self._tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
        return self._tensors

    def _slots_of(self, module: nn.Module) -> list[Slot]:
        """Every ``(module._parameters or module._buffers, name, group tensor)`` of ``module``
        (cached like :meth:`_tensors_of`)."""
        if self._slots is None:
            self._slots = [(table, name, tensor) for sub in module.modules()
                           for table in (sub._parameters, sub._buffers)
                           for name, tensor in table.items() if tensor is not None]
        return self._slots

    def _in_turn(self, module: nn.Module, work: Callable[[int], Any],
                 seeds: Sequence[int] | None = None, draw: bool = True) -> list[Any]:
        """``work(k)`` once per seed of ``seeds`` (default: all), seed k with its slices of the
        weights and (``draw``, when the group has them) its generator's stream; the outputs.
        Gradients reach the group's tensors through the slices (one ``unbind`` per tensor and
        call). A call inside a call is refused (it would slice the seed's slices again)."""
        if self._running:
            raise RuntimeError("a seed group's compute was called inside another compute call; "
                               "call the inner method directly (its weights are already the "
                               "seed's)")
        slots = self._slots_of(module)
        slices = {id(t): t.unbind(0) for _, _, t in slots}
        generators = self.generators if draw else []
        outputs = []
        self._running = True
        try:
            for k in range(self.size) if seeds is None else seeds:
                for table, name, tensor in slots:
                    table[name] = slices[id(tensor)][k]
                with _drawing_from(generators[k]) if generators else contextlib.nullcontext():
                    outputs.append(work(k))
        finally:
            self._running = False
            for table, name, tensor in slots:
                table[name] = tensor
        return outputs

    def _idle_kept(self, module: nn.Module, idle: np.ndarray, call: Callable[[], Any]) -> Any:
        """``call()``, with the slices of ``module``'s buffers of the seeds where ``idle [K]``
        put back after it (a vmapped group's seeds that did not act)."""
        if not idle.any():
            return call()
        at = torch.as_tensor(np.flatnonzero(idle))
        kept = [(b, i, b[i].clone()) for b in module.buffers() if b.dim() and
                b.shape[0] == self.size for i in [at.to(b.device)]]
        out = call()
        with torch.no_grad():
            for buffer, i, before in kept:
                buffer[i] = before
        return out


def stack_seeds(members: Sequence[nn.Module],
                generators: Sequence[torch.Generator] | None = None) -> Any:
    """Turn K algorithms (``rlzoo.algos.base.Algorithm``s of the same class and config, built
    under K seeds) into one group of K seeds.

    Returns ``members[0]``, changed in place: each parameter keeps its identity (so the
    optimizers built in ``__init__`` still hold it) and now holds ``[K, *shape]``, slice k being
    member k's tensor; each buffer likewise; its ``seed_axis`` says K. ``generators`` (one per
    seed, the caller's: it saves and restores their states) make the group run in turn, seed k
    drawing from ``generators[k]``, and its optimizers step each seed's slice as a tensor of
    its own; without them it is vmapped. Call before the first update (optimizer state is
    created at the first step, already stacked). One member is returned unchanged.
    """
    group = members[0]
    if len(members) == 1:
        return group
    if getattr(group, "updates", 0) or any(
            opt.state for opt in getattr(group, "optimizers", {}).values()):
        raise ValueError("stack_seeds needs algorithms that have not been updated yet")
    if generators is not None and len(generators) != len(members):
        raise ValueError(f"{len(generators)} generators for {len(members)} seeds")
    with torch.no_grad():
        for name, param in group.named_parameters():
            param.data = torch.stack([m.get_parameter(name).detach() for m in members])
        for name, _ in list(group.named_buffers()):
            owner, _, leaf = name.rpartition(".")
            target = group.get_submodule(owner) if owner else group
            target._buffers[leaf] = torch.stack([m.get_buffer(name) for m in members])
    group.seed_axis = SeedAxis(len(members), list(generators or []))
    if generators:  # each seed's slice stepped as its single run's tensor
        for optimizer in getattr(group, "optimizers", {}).values():
            if hasattr(optimizer, "split"):
                optimizer.split(len(members))
    return group


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
