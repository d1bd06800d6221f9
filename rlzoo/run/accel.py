"""Acceleration of the update: ``compile`` and ``cudagraphs`` (each auto, true or false).

* ``cudagraphs`` captures whole updates (forward, backward, optimizer steps, target updates) as
  CUDA graphs and replays them: one launch per update instead of hundreds, no host work per
  kernel. Needs CUDA, capturable optimizers (set here) and an algorithm whose update reads
  nothing from the host but its update counter (``Algorithm.graph_safe``: learning-rate
  schedules as device tensors, randomness drawn on the device). One graph is captured per phase
  of the update (``Algorithm.update_phase()``, e.g. TD3's critic-only and critic+actor steps),
  after a few eager warm-up updates of that phase on the stream the capture then uses.
  ``auto`` (the default) captures on CUDA whenever the algorithm is ``graph_safe`` and says in
  one line at start why not otherwise; on the CPU it is off (there are no CUDA graphs), so a
  CPU run is exactly what it was before ``auto`` existed. ``true`` refuses, in one line, a run
  that cannot be captured.
* ``compile`` wraps the forward of every network the algorithm owns in ``torch.compile``
  (inductor). ``auto`` leaves it off: on the CPU it was measured slower (docs/performance.md),
  and on CUDA it has not been measured on top of the graphs yet.

Both change nothing about what an update computes.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch

from rlzoo.algos.base import Algorithm
from rlzoo.errors import UserError

UpdateFn = Callable[[Any], dict[str, torch.Tensor]]
Switch = bool | str  # True, False or "auto"
AUTO = "auto"
WARMUP_UPDATES = 3  # eager updates per phase on the capture stream before its capture


@dataclass(frozen=True)
class Acceleration:
    """What a run does about ``compile`` and ``cudagraphs`` once ``auto`` is resolved.

    Attributes:
        compile: ``torch.compile`` the networks.
        cudagraphs: replay the updates from CUDA graphs.
        fallback: a failed capture under ``cudagraphs=auto`` continues eager (with a note)
            instead of stopping the run.
        notes: one line per choice ``auto`` made that the user should hear of (none on CPU).
    """

    compile: bool
    cudagraphs: bool
    fallback: bool = False
    notes: tuple[str, ...] = ()


def check_accel(compile: Switch, cudagraphs: Switch, device: torch.device,
                algo_cls: type[Algorithm], algo_name: str) -> None:
    """Refuse an explicit ``true`` that cannot work, in one line, before anything is built
    (``auto`` is never refused: :func:`resolve_accel` turns it off instead)."""
    if cudagraphs is True:
        if device.type != "cuda":
            raise UserError(
                f"cudagraphs=true needs a CUDA device, but this run uses {device.type} (CUDA "
                "graphs do not exist on CPU); use cudagraphs=auto (the default) or false"
            )
        if not algo_cls.graph_safe:
            raise UserError(
                f"cudagraphs=true is not supported for algo={algo_name}: "
                f"{algo_cls.graph_unsafe_reason}; use cudagraphs=auto (runs it eager) or false"
            )
    if compile is True and device.type == "cpu" and not any(
        shutil.which(c) for c in ("c++", "g++", "clang++")
    ):
        raise UserError(
            "compile=true on CPU needs a C++ compiler (torch.compile generates C++ kernels) and "
            "none was found on PATH; install g++ or drop compile=true"
        )


def resolve_accel(compile: Switch, cudagraphs: Switch, device: torch.device,
                  algo_cls: type[Algorithm], algo_name: str) -> Acceleration:
    """``auto`` made concrete for this device and algorithm (``check_accel`` has accepted the
    explicit switches): ``cudagraphs=auto`` is on for a ``graph_safe`` algorithm on CUDA, off
    otherwise, with a one-line note when CUDA is there but the algorithm cannot be captured;
    ``compile=auto`` is off."""
    notes: list[str] = []
    graphs = cudagraphs is True
    if cudagraphs == AUTO and device.type == "cuda":
        graphs = algo_cls.graph_safe
        if not graphs:
            notes.append(f"cudagraphs=auto: algo={algo_name} runs its updates eager, not as "
                         f"CUDA graphs: {algo_cls.graph_unsafe_reason}")
    return Acceleration(compile=compile is True, cudagraphs=graphs,
                        fallback=graphs and cudagraphs == AUTO, notes=tuple(notes))


def compile_networks(algo: Algorithm) -> None:
    """``torch.compile`` the forward of every network in place: each submodule with parameters
    that defines ``forward``; a container without one (e.g. ``AgentActors``) is searched."""

    def visit(module: torch.nn.Module) -> None:
        if not any(True for _ in module.parameters()):
            return
        if type(module).forward is not torch.nn.Module.forward:
            module.compile()
        else:
            for child in module.children():
                visit(child)

    for module in algo.children():
        visit(module)


def make_capturable(algo: Algorithm) -> None:
    """Keep every optimizer's step counter (and learning rate) on the device so that its step
    can be captured; ``rlzoo.optim.adam`` optimizers keep the flag across ``load_state_dict``."""
    for optimizer in algo.optimizers.values():
        set_capturable = getattr(optimizer, "set_capturable", None)
        if callable(set_capturable):
            set_capturable(True)
        else:
            for group in optimizer.param_groups:
                group["capturable"] = True


def tensor_fields(item: Any) -> dict[str, torch.Tensor]:
    """The tensor fields of an update's input (a ``Batch`` or a ``Rollout``), by name."""
    return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)
            if isinstance(getattr(item, f.name), torch.Tensor)}


def static_copy(item: Any) -> Any:
    """``item`` with fresh storage for every tensor field (a graph's static inputs)."""
    return dataclasses.replace(item, **{n: t.clone() for n, t in tensor_fields(item).items()})


class CaptureFailed(RuntimeError):
    """Capturing an update failed; the message says what to change."""


class GraphedUpdate:
    """``algo.update`` replayed from CUDA graphs, one per phase of the update cycle.

    Args:
        algo: a ``graph_safe`` algorithm on a CUDA device, with capturable optimizers.
        fallback: when a capture fails, continue with eager updates (``cudagraphs=auto``) and
            record why in :attr:`failure`, instead of raising :class:`CaptureFailed`.

    Streams. Warm-up updates and captures run on one side stream of this object's own
    (``self.stream``; a capture cannot run on the legacy default stream), which first waits for
    the caller's stream and which the caller's stream waits for after. Autograd runs each
    backward node on the stream its node was made on, and a graph accumulates gradients into a
    leaf through that leaf's ``AccumulateGrad`` node, which lives as long as anything holds an
    autograd graph through the leaf. A node made on the legacy default stream and still alive
    at capture (e.g. ``p.clone()`` of a weight without ``torch.no_grad()``, kept by the caller)
    makes backward wait on the legacy stream from inside the capture: CUDA refuses that with
    ``cudaErrorStreamCaptureImplicit`` ("operation would make the legacy stream depend on a
    capturing blocking stream"). Warming up on the capture stream means every node the update
    itself makes, and every lazily made optimizer state and gradient, belongs to that stream
    before the capture starts; a stale node held from outside is reported in one line.

    The input is copied into static tensors before each replay; the returned metrics are the
    graph's static outputs (overwritten by the next replay, read by the trainer at log time).
    The only host-side effect of ``update``, ``algo.updates += 1``, is replayed in Python.
    """

    def __init__(self, algo: Algorithm, fallback: bool = False) -> None:
        self.algo, self.fallback = algo, fallback
        self.graphs: dict[Hashable, tuple[torch.cuda.CUDAGraph, Any, dict[str, Any]]] = {}
        self.eager: Counter[Hashable] = Counter()  # eager warm-up updates run, per phase
        self.stream = torch.cuda.Stream()
        self.failure: str | None = None  # why captures stopped (fallback only)

    def __call__(self, batch: Any) -> dict[str, torch.Tensor]:
        if self.failure is not None:
            return self.algo.update(batch)
        phase = self.algo.update_phase()
        if phase not in self.graphs and self.eager[phase] < WARMUP_UPDATES:
            self.eager[phase] += 1
            return self.on_side_stream(self.algo.update, batch)
        if phase not in self.graphs:
            try:
                self.graphs[phase] = self.capture(batch)
            except CaptureFailed as err:
                if not self.fallback:
                    raise
                self.failure = str(err)
                print(f"warning: {self.failure}; this run's updates continue eager",
                      file=sys.stderr, flush=True)
                return self.algo.update(batch)
        graph, static_batch, metrics = self.graphs[phase]
        for name, static in tensor_fields(static_batch).items():
            static.copy_(getattr(batch, name), non_blocking=True)
        graph.replay()
        self.algo.updates += 1
        return metrics

    def on_side_stream(self, fn: Callable[[Any], Any], batch: Any) -> Any:
        """``fn(batch)`` on ``self.stream``, ordered after and before the caller's work."""
        caller = torch.cuda.current_stream()
        self.stream.wait_stream(caller)
        with torch.cuda.stream(self.stream):
            out = fn(batch)
        caller.wait_stream(self.stream)
        return out

    def capture(self, batch: Any) -> tuple[torch.cuda.CUDAGraph, Any, dict[str, Any]]:
        static_batch = static_copy(batch)
        graph = torch.cuda.CUDAGraph()
        updates = self.algo.updates
        torch.cuda.synchronize()
        try:
            # each phase in its own memory pool, captured on the warm-up stream
            with torch.cuda.graph(graph, stream=self.stream):
                metrics = self.algo.update(static_batch)
        except RuntimeError as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CaptureFailed(
                f"capturing {self.algo.name}'s update as a CUDA graph failed ({first}); if a "
                "tensor computed from the weights with gradient tracking is held outside the "
                "update (e.g. p.clone() without torch.no_grad()), detach it"
            ) from err
        finally:
            self.algo.updates = updates  # capture recorded the update without running it
        torch.cuda.synchronize()
        return graph, static_batch, metrics


ActFn = Callable[[torch.Tensor], torch.Tensor]


class GraphedAct:
    """The acting step, ``act(obs [K, E, *obs_shape]) -> [K, E, H * A]`` for every seed at
    once, replayed from one CUDA graph (``cudagraphs``): one launch per env step instead of one
    per kernel of the policy (its normalizer, trunk, sampling and exploration noise).

    Args:
        act: the eager acting step (no gradient; reads nothing from the host: the same rule as
            a capturable update, e.g. FlashSAC's repeated noise keeps its counters on the
            device).
        fallback: when the capture fails, act eagerly from then on (``cudagraphs=auto``) with a
            note, instead of raising :class:`CaptureFailed`.

    As :class:`GraphedUpdate`: :data:`WARMUP_UPDATES` eager calls on this object's side stream,
    then one capture on it; each later call copies ``obs`` into the graph's static input and
    replays. Random draws come from the device generator's state at replay time, so a replay
    draws what the eager call would. An ``obs`` of another shape, dtype or device than the
    captured one (which a run never makes) runs eagerly. The output is the graph's static
    tensor, overwritten by the next call: read it (``.cpu()``) before acting again.
    """

    def __init__(self, act: ActFn, fallback: bool = False) -> None:
        self.act, self.fallback = act, fallback
        self.stream = torch.cuda.Stream()
        self.eager = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_obs: torch.Tensor | None = None
        self.static_out: torch.Tensor | None = None
        self.failure: str | None = None

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        if self.failure is not None:
            return self.act(obs)
        if self.graph is None:
            if self.eager < WARMUP_UPDATES:
                self.eager += 1
                return self.on_side_stream(obs)
            try:
                self.capture(obs)
            except CaptureFailed as err:
                if not self.fallback:
                    raise
                self.failure = str(err)
                print(f"warning: {self.failure}; this run acts eagerly", file=sys.stderr,
                      flush=True)
                return self.act(obs)
        static = self.static_obs
        assert static is not None and self.graph is not None and self.static_out is not None
        if (obs.shape, obs.dtype, obs.device) != (static.shape, static.dtype, static.device):
            return self.act(obs)
        static.copy_(obs, non_blocking=True)
        self.graph.replay()
        return self.static_out

    def on_side_stream(self, obs: torch.Tensor) -> torch.Tensor:
        """``act(obs)`` on ``self.stream``, ordered after and before the caller's work."""
        caller = torch.cuda.current_stream()
        self.stream.wait_stream(caller)
        with torch.cuda.stream(self.stream):
            out = self.act(obs)
        caller.wait_stream(self.stream)
        return out

    def capture(self, obs: torch.Tensor) -> None:
        """Capture ``act`` on a static copy of ``obs`` (the capture runs nothing)."""
        static = obs.clone()
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        try:
            with torch.cuda.graph(graph, stream=self.stream):
                out = self.act(static)
        except RuntimeError as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CaptureFailed(f"capturing the acting step as a CUDA graph failed ({first})"
                                ) from err
        torch.cuda.synchronize()
        self.graph, self.static_obs, self.static_out = graph, static, out


def update_fn(algo: Algorithm, compile: bool, cudagraphs: bool, fallback: bool = False
              ) -> UpdateFn:
    """The function the trainer calls for one update, with the requested acceleration
    (``fallback``: see :class:`GraphedUpdate`)."""
    if compile:
        compile_networks(algo)
    if cudagraphs:
        make_capturable(algo)
        return GraphedUpdate(algo, fallback)
    return SaysCompiling(algo.update) if compile else algo.update


class SaysCompiling:
    """``update`` of a ``compile=true`` run: torch.compile compiles the networks at their first
    call, which takes seconds to minutes (a C++ build on a CPU); one ``rlzoo:`` line says so
    as it starts, one how long it took."""

    def __init__(self, update: UpdateFn) -> None:
        self.update, self.first = update, True

    def __call__(self, batch: Any) -> dict[str, torch.Tensor]:
        if not self.first:
            return self.update(batch)
        self.first = False
        log = logging.getLogger("rlzoo")
        log.info("compiling the networks (compile=true: torch.compile at their first use; "
                 "seconds on a GPU, minutes on a CPU) ...")
        start = time.perf_counter()
        metrics = self.update(batch)
        log.info(f"compiled in {time.perf_counter() - start:.0f} s")
        return metrics
