"""Optional acceleration of the update: ``compile=true`` and ``cudagraphs=true``.

* ``compile=true`` wraps the forward of every network the algorithm owns in ``torch.compile``
  (inductor): the elementwise ops around each matmul are fused and the backward is generated
  ahead of time. Works on CPU (needs a C++ compiler) and CUDA. The first updates are slow
  while the graphs compile.
* ``cudagraphs=true`` captures whole updates (forward, backward, optimizer steps, target
  updates) as CUDA graphs and replays them: one launch per update instead of hundreds, no host
  work per kernel. Needs CUDA, capturable optimizers (set here) and an algorithm whose update
  only branches on its update counter (``Algorithm.graph_safe``). One graph is captured per
  phase of the update (``Algorithm.update_phase()``, e.g. TD3's critic-only and critic+actor
  steps), each after a few eager warm-up updates of that phase on a side stream.

Both change nothing about what an update computes.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import torch

from rlzoo.algos.base import Algorithm
from rlzoo.buffers.batch import Batch
from rlzoo.errors import UserError

UpdateFn = Callable[[Batch], dict[str, torch.Tensor]]
WARMUP_UPDATES = 3  # eager updates on a side stream before the first capture (PyTorch's advice)


def check_accel(compile: bool, cudagraphs: bool, device: torch.device,
                algo_cls: type[Algorithm], algo_name: str) -> None:
    """Refuse a combination that cannot work, in one line, before anything is built."""
    if cudagraphs:
        if device.type != "cuda":
            raise UserError(
                f"cudagraphs=true needs a CUDA device, but this run uses {device.type} (CUDA "
                "graphs do not exist on CPU); drop cudagraphs=true, or use compile=true on CPU"
            )
        if not algo_cls.graph_safe:
            raise UserError(
                f"cudagraphs=true is not supported for algo={algo_name}: its update depends on "
                "host-side state that a captured graph would freeze; drop cudagraphs=true"
            )
    if compile and device.type == "cpu" and not any(
        shutil.which(c) for c in ("c++", "g++", "clang++")
    ):
        raise UserError(
            "compile=true on CPU needs a C++ compiler (torch.compile generates C++ kernels) and "
            "none was found on PATH; install g++ or drop compile=true"
        )


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
    """Keep every optimizer's step counter on the device so that its step can be captured."""
    for optimizer in algo.optimizers.values():
        for group in optimizer.param_groups:
            group["capturable"] = True


class GraphedUpdate:
    """``algo.update`` replayed from CUDA graphs, one per phase of the update cycle.

    Args:
        algo: a ``graph_safe`` algorithm on a CUDA device, with capturable optimizers.

    The batch is copied into static tensors before each replay; the returned metrics are the
    graph's static outputs (overwritten by the next replay, read by the trainer at log time).
    The only host-side effect of ``update``, ``algo.updates += 1``, is replayed in Python.
    """

    def __init__(self, algo: Algorithm) -> None:
        self.algo = algo
        self.graphs: dict[Hashable, tuple[torch.cuda.CUDAGraph, Batch, dict[str, Any]]] = {}
        self.eager: Counter[Hashable] = Counter()  # eager warm-up updates run, per phase
        self.stream = torch.cuda.Stream()

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        phase = self.algo.update_phase()
        if phase not in self.graphs and self.eager[phase] < WARMUP_UPDATES:
            # warm-up: lazy optimizer state of this phase's branches, cuBLAS workspaces
            self.eager[phase] += 1
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                metrics = self.algo.update(batch)
            torch.cuda.current_stream().wait_stream(self.stream)
            return metrics
        if phase not in self.graphs:
            self.graphs[phase] = self.capture(batch)
        graph, static_batch, metrics = self.graphs[phase]
        for name, static in static_batch.tensors().items():
            static.copy_(getattr(batch, name), non_blocking=True)
        graph.replay()
        self.algo.updates += 1
        return metrics

    def capture(self, batch: Batch) -> tuple[torch.cuda.CUDAGraph, Batch, dict[str, Any]]:
        static_batch = batch.clone()
        graph = torch.cuda.CUDAGraph()
        updates = self.algo.updates
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):  # each phase in its own memory pool
            metrics = self.algo.update(static_batch)
        self.algo.updates = updates  # capture recorded the update without running it
        return graph, static_batch, metrics


def update_fn(algo: Algorithm, compile: bool, cudagraphs: bool) -> UpdateFn:
    """The function the trainer calls for one update, with the requested acceleration."""
    if compile:
        compile_networks(algo)
    if cudagraphs:
        make_capturable(algo)
        return GraphedUpdate(algo)
    return algo.update

