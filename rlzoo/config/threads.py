"""How many CPU threads torch uses for a run (``torch_threads``), and why the count never
changes a run's numbers.

torch's OpenMP threads (libgomp) spin for ~300k iterations between ops before they sleep. Alone,
that spin is what makes a second thread pay: on a 2-core Intel Xeon, SAC on Hopper trains 168 env
steps/s on 2 spinning threads, 126 on one, and 93 on 2 threads whose spin is cut to 1,000
iterations (``GOMP_SPINCOUNT=1000``). Side by side it is ruinous: two such runs of 2 spinning
threads made 91 steps/s together, two 2-seed groups 23 (docs/performance.md, "The spin limit
goes; the tuner shares"). So ``torch_threads=auto`` (the default) adapts the count to the load,
and makes sure the count cannot change the numbers:

- ``import rlzoo`` sets ``MKL_CBWR=AUTO,STRICT`` (unless the environment sets ``MKL_CBWR``):
  oneMKL's strict conditional numerical reproducibility, under which its GEMMs give the same
  bits on any thread count (oneMKL developer guide, "Reproducibility Conditions", Strict CNR
  Mode). Without it, on a 2-core AMD EPYC, a ``[11, K] @ [K, 256]`` product (the gradient of
  a Hopper net's first layer) differed between 1 and 2 threads. MKL reads it at its first call,
  so a process that multiplied matrices before importing rlzoo runs without it.
- before a run's first update (in every process: start and resume), :func:`same_on_counts`
  runs a few updates of scratch copies of the algorithm on the first real batch on 1 thread
  and on all cores and compares every weight and optimizer state bit for bit. Equal: the
  updates run under a :class:`ThreadTuner` (below), whose choices cannot show in the numbers;
  not equal (another BLAS, ``MKL_CBWR`` set otherwise, ``compile=true``): every update runs on
  1 thread, with a one-line note. Either way a run gives the numbers of ``torch_threads=1``
  (in a process with the same ``MKL_CBWR``), whatever else runs, and resumes bit for bit.
- outside its updates (acting, env steps, evaluation) a run always uses 1 thread.
- the tuner times the updates on 1 thread and on torch's own count (all cores), keeps the
  faster, and tries all cores only when about as many cores as it would add sat idle. Alone it
  settles on all cores; beside jobs already running it stays on one thread, where nothing spins.
- every other CPU run (on-policy, or ``OMP_NUM_THREADS`` set by the user or the test suite):
  one thread, or the environment's ``OMP_NUM_THREADS``, fixed.

``torch_threads=N`` fixes the count at N (0: torch's own); more than :data:`OVERSUBSCRIBE`
times the CPUs this process may use is refused in one line (1000 threads on 2 cores trained
78x slower). Several fixed runs of N > 1 threads sharing cores spin on each other; set
``GOMP_SPINCOUNT=1000`` (or ``OMP_WAIT_POLICY=passive``) in their environment then. The tuner
was measured on 2 cores only. The counts a run's updates used are in its ``summary.json`` and
checkpoints (``torch_threads``).

The tuner is plain Python, tested without torch; only :func:`same_on_counts` imports it.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from rlzoo.errors import UserError

WINDOW = 250  # loop steps per timed window of ThreadTuner (~2-3 s of one SAC seed on 2 cores)
HOLD = 8  # windows a ThreadTuner keeps its choice before it may try the other count again
MAX_HOLD = 64  # HOLD doubles after every try that lost, up to this (~2-3 min of one SAC seed)
MARGIN = 1.03  # the other count must train this much faster to be taken
DROP = 0.75  # on the larger count, a window this much slower than its chosen rate tries 1 at once
SLACK = 0.5  # the larger count is tried after a window with (its extra threads - SLACK) idle cores
PROBE_UPDATES = 3  # updates of scratch copies per count that same_on_counts compares
OVERSUBSCRIBE = 2  # torch_threads above this many times the usable CPUs is refused
MKL_STRICT = "AUTO,STRICT"  # MKL_CBWR set by ``import rlzoo``: GEMMs equal on any thread count

Probe = Callable[[], "tuple[float, float, int] | None"]


def run_threads(setting: int | str) -> int | None:
    """The torch thread count a CPU run starts with under ``torch_threads=setting``: ``auto`` ->
    the environment's ``OMP_NUM_THREADS`` when set (None: torch already uses it), else 1 (a
    :class:`ThreadTuner` may raise it); ``0`` -> None; ``N`` -> N. None leaves torch's count
    as is. ``N`` above :data:`OVERSUBSCRIBE` times the CPUs this process may use: ``UserError``."""
    if setting == "auto":
        return None if "OMP_NUM_THREADS" in os.environ else 1
    cpus = usable_cpus()
    if int(setting) > OVERSUBSCRIBE * cpus:
        raise UserError(f"torch_threads={setting} is far above the {cpus} CPUs this process may "
                        f"use (at most {OVERSUBSCRIBE * cpus}); use torch_threads=auto, or a "
                        f"count up to {cpus}")
    return int(setting) or None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity; ``os.cpu_count()`` where unknown)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def strict_blas() -> None:
    """Ask oneMKL for results that do not depend on its thread count (``MKL_CBWR``, unless the
    environment chose; read at MKL's first call). Called by ``import rlzoo``."""
    os.environ.setdefault("MKL_CBWR", MKL_STRICT)


def same_on_counts(update: Callable[[Any], Any], algo: Any, batch: Any,
                   counts: tuple[int, ...], updates: int = PROBE_UPDATES,
                   forked: Callable[[], AbstractContextManager[Any]] | None = None) -> bool:
    """Whether ``updates`` calls of ``update(batch)`` (updates of ``algo``, an
    ``rlzoo.algos.Algorithm``, whose ``state_dict()`` holds every weight, optimizer state and
    the update counter: what a checkpoint restores) leave ``algo``'s state bit-identical on each
    of ``counts`` torch threads. Each count starts from ``algo``'s state and the global RNG
    state as they were; both are put back after, as is torch's thread count. ``forked``: a
    context each count's updates run in that puts back the algorithm's own generators (a CPU
    seed group's per-seed ones: ``SeedAxis.forked``, ``rlzoo.algos.seed_axis``). Used before a run's
    first update (:class:`ThreadTuner`'s ``same``)."""
    import torch  # noqa: PLC0415 - the tuner above is tested without torch

    def leaves(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if isinstance(tree, dict):
            return [leaf for k in sorted(tree, key=str) for leaf in leaves(tree[k], (*path, k))]
        if isinstance(tree, (list, tuple)):
            return [leaf for i, item in enumerate(tree) for leaf in leaves(item, (*path, i))]
        return [(path, tree)]

    def same(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
        if a[0] != b[0]:
            return False
        if isinstance(a[1], torch.Tensor) and isinstance(b[1], torch.Tensor):
            return a[1].shape == b[1].shape and torch.equal(a[1], b[1])
        return bool(a[1] == b[1])

    before = torch.get_num_threads()
    saved = copy.deepcopy(algo.state_dict())
    outcomes = []
    try:
        with torch.random.fork_rng(devices=[]):
            rng = torch.get_rng_state()
            for n in counts:
                torch.set_rng_state(rng)
                torch.set_num_threads(n)
                algo.load_state_dict(copy.deepcopy(saved))  # loads may keep the tensors given
                with forked() if forked is not None else contextlib.nullcontext():
                    for _ in range(updates):
                        update(batch)
                outcomes.append(leaves(copy.deepcopy(algo.state_dict())))
    finally:
        algo.load_state_dict(copy.deepcopy(saved))
        torch.set_num_threads(before)
    first = outcomes[0]
    return all(len(o) == len(first) and all(map(same, first, o)) for o in outcomes[1:])


def idle_probe() -> tuple[float, float, int] | None:
    """``(idle, total, cpus)``: jiffies since boot summed over the CPUs this process may run on,
    from Linux's /proc/stat (idle counts iowait; guest time is inside user), and how many such
    CPUs it found; None where it cannot be read or lists none of them (a container whose
    /proc/stat numbers its CPUs otherwise). Under a CFS quota (``docker --cpus``) rather than a
    cpuset, /proc/stat shows the host's idle cores: the gate then sees them."""
    try:
        allowed = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
        idle = total = 0.0
        cpus = 0
        for line in lines:
            name, *fields = line.split()
            if name in allowed:
                # user nice system idle iowait irq softirq steal
                ticks = [float(f) for f in fields[:8]]
                idle, total, cpus = idle + ticks[3] + ticks[4], total + sum(ticks), cpus + 1
    except (OSError, AttributeError, ValueError, IndexError):
        return None
    return (idle, total, cpus) if total > 0 else None


class ThreadTuner:
    """The torch thread count that trains a run fastest right now, chosen from ``choices``
    (``(1, cores)``) by timing the updates of windows of :data:`WINDOW` env steps.

    It starts on ``choices[0]``. After :data:`HOLD` windows (one, the first time) it tries the
    other count for one window, and keeps whichever trained more env steps per second (the other
    only when :data:`MARGIN` faster). A try that lost doubles the hold, up to :data:`MAX_HOLD`;
    a switch resets it. The larger count is tried only after a window in which ``probe`` saw as
    many idle cores as it adds threads, less :data:`SLACK` (on 2 cores: half a core): beside jobs
    already running (two runs side by side, say) a run stays on one thread and does not spin on
    their cores. On the larger count, a window below :data:`DROP` times its chosen rate (a job
    arrived, and cost this run a quarter) tries one thread at once; a lighter newcomer goes
    unnoticed until the next try of one thread. The first window's idle reading starts at its
    first step (not during the warm-up). Without a ``probe`` (or where it reads None) the larger
    count is tried on the timing alone. ``history`` holds
    ``(step, threads, steps_per_s)`` of every window.

    The chosen count applies inside the updates only (:meth:`enter` before each update,
    :meth:`leave` after them); everywhere else the run uses ``choices[0]``. Before the first
    update the loop sets ``same`` (:meth:`decide`, from :func:`same_on_counts`): False pins the
    updates to ``choices[0]`` too and stops the timing, so that the count never changes the
    numbers. ``used`` holds the counts updates ran on.
    """

    def __init__(self, choices: tuple[int, int], set_threads: Callable[[int], None],
                 window: int | None = None, hold: int | None = None,
                 probe: Probe | None = None) -> None:
        self.choices, self.set_threads, self.probe = choices, set_threads, probe
        self.window, self.base_hold = window or WINDOW, hold or HOLD  # read when built (tests)
        self.hold = self.base_hold
        self.threads = choices[0]
        self.left = 1  # windows before the next try of the other count
        self.trying: float | None = None  # while trying: the rate of the window before
        self.chosen_rate = 0.0  # the rate the current count was chosen at
        self.steps, self.seconds = 0, 0.0  # of the window so far
        self.last: tuple[float, float, int] | None = None  # the probe's reading at window start
        self.history: list[tuple[int, int, float]] = []
        self.same: bool | None = None  # the update's numbers equal on every count (unchecked)
        self.used: set[int] = set()
        set_threads(self.threads)

    def decide(self, same: bool) -> None:
        """Whether the updates are bit-identical on every count (:func:`same_on_counts`)."""
        self.same = same
        if not same:
            self.threads = self.choices[0]

    def enter(self) -> None:
        """Before an update: its count (``choices[0]`` unless ``same``)."""
        threads = self.threads if self.same else self.choices[0]
        self.used.add(threads)
        self.set_threads(threads)

    def leave(self) -> None:
        """After the updates: ``choices[0]`` for acting, env steps and evaluation."""
        self.set_threads(self.choices[0])

    def record(self) -> dict[str, Any]:
        """What ``summary.json`` and checkpoints say: the counts the updates of this process
        used, and whether the updates were found bit-identical on every count."""
        return {"setting": "auto", "updates_on": sorted(self.used),
                "same_on_counts": self.same, "counts": list(self.choices)}

    def tick(self, step: int, seconds: float) -> None:
        """Call once per env step of training with the run's env step and the wall seconds its
        updates took (only the updates are timed: evaluations, checkpoints and env steps do
        not depend on the thread count much, and would blur the comparison). Nothing once
        ``same`` is False."""
        if self.same is False:
            return
        if self.steps == 0 and not self.history and self.probe:
            self.last = self.probe()  # the first window's idle time starts with its first step
        self.steps, self.seconds = self.steps + 1, self.seconds + seconds
        if self.steps < self.window:
            return
        rate = self.steps / max(self.seconds, 1e-9)  # env steps of updates per second
        self.steps, self.seconds = 0, 0.0
        spare = self.spare_cores()
        self.history.append((step, self.threads, rate))
        if self.trying is not None:  # this window ran on the other count
            before, self.trying = self.trying, None
            won = rate > before * MARGIN
            if not won:
                self.switch()
            self.hold = self.base_hold if won else min(2 * self.hold, MAX_HOLD)
            self.chosen_rate, self.left = max(rate, before), self.hold
            return
        self.left -= 1
        larger = self.threads != self.choices[0]
        if larger and rate < DROP * self.chosen_rate:
            self.left = 0
        extra = self.choices[1] - self.choices[0]  # the threads the larger count adds
        if self.left <= 0 and (larger or spare is None or spare >= extra - SLACK):
            self.trying = rate
            self.switch()

    def spare_cores(self) -> float | None:
        """Idle cores on average since the last reading, by ``probe`` (None: unknown)."""
        now = self.probe() if self.probe else None
        last, self.last = self.last, now
        if now is None or last is None or now[1] <= last[1] or now[2] != last[2]:
            return None
        return now[2] * (now[0] - last[0]) / (now[1] - last[1])

    def switch(self) -> None:
        """Change to the other count."""
        a, b = self.choices
        self.threads = b if self.threads == a else a
        self.set_threads(self.threads)


def thread_tuner(setting: int | str, on_cpu: bool, cores: int,
                 set_threads: Callable[[int], None]) -> ThreadTuner | None:
    """A :class:`ThreadTuner` between 1 and ``cores`` (torch's own count) for a run with
    ``torch_threads=setting``, or None (a fixed count): only for ``auto``, an off-policy run on
    CPU (``on_cpu``), more than one core, and no ``OMP_NUM_THREADS`` in the environment (a
    user's, or the test suite's, fixed choice). One seed or a seed group alike."""
    if setting != "auto" or not on_cpu or cores < 2 or "OMP_NUM_THREADS" in os.environ:
        return None
    return ThreadTuner((1, cores), set_threads, probe=idle_probe)
