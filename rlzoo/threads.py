"""How many CPU threads torch uses for a run, and how its OpenMP threads wait.

torch's OpenMP threads (libgomp) spin for ~300k iterations before sleeping between ops. Two runs
that together ask for more threads than there are cores then burn each other's cores spinning:
two 2-thread SAC runs on a 2-core machine made 0.41x the steps of one run alone
(docs/performance.md, "Sharing the machine"). Two defaults follow:

- ``GOMP_SPINCOUNT=1000``: set when ``rlzoo`` is imported before torch (always so for
  ``python -m rlzoo.train`` and its multirun jobs), unless the user set ``GOMP_SPINCOUNT`` or
  ``OMP_WAIT_POLICY`` already; one 2-thread run alone loses ~3% to it.
- ``torch_threads=auto``: for a single seed on CPU, the faster of one thread and torch's own count
  (all cores) right now, measured as the run goes (:class:`ThreadTuner`; one thread when the
  environment sets ``OMP_NUM_THREADS``): alone on an idle machine a run takes both cores, and
  two runs side by side each fall back to one thread instead of spinning on each other's cores.
  For a seed group, torch's own count, whose batched update uses them, when the spin-wait is
  limited; otherwise one.

This module must not import torch: ``rlzoo/__init__.py`` runs it before torch loads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

SPIN_COUNT = "1000"  # libgomp spin iterations before a waiting thread sleeps (its default: 300k)
WINDOW = 250  # env steps per timed window of ThreadTuner (~2-3 s of SAC at batch 256 on CPU)
HOLD = 8  # windows a ThreadTuner keeps its choice before trying the other count again
MARGIN = 1.03  # the other count must train this much faster to be taken
DROP = 0.75  # a window this much slower than the choice's own rate tries the other count at once


def limit_spin_wait() -> bool:
    """Shorten libgomp's spin-wait to :data:`SPIN_COUNT` if torch has not loaded yet and the user
    did not choose a wait policy. Returns whether waiting threads sleep soon: set here, or by the
    user's ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY=passive``."""
    if "GOMP_SPINCOUNT" in os.environ:
        return True
    if "OMP_WAIT_POLICY" in os.environ:
        return os.environ["OMP_WAIT_POLICY"].strip().lower() == "passive"
    if "torch" in sys.modules:  # libgomp read its settings when torch loaded
        return False
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True


SPIN_LIMITED = limit_spin_wait()


def run_threads(setting: int | str, seeds: int) -> int | None:
    """The torch thread count for a CPU run with ``torch_threads=setting`` training ``seeds``
    seeds: ``auto`` -> 1 for one seed, None (torch's count) for a group when
    :data:`SPIN_LIMITED`, else 1; ``0`` -> None; ``N`` -> N. None leaves torch's count as is."""
    if setting == "auto":
        return None if seeds > 1 and SPIN_LIMITED else 1
    return int(setting) or None


class ThreadTuner:
    """The torch thread count that trains a single seed fastest right now, chosen from
    ``choices`` (``(1, cores)``) by timing the updates of windows of :data:`WINDOW` env steps.

    It starts on ``choices[0]``; after one window it tries the other count for one window and
    keeps whichever trained more env steps per second (the other only when :data:`MARGIN`
    faster). It keeps that choice for :data:`HOLD` windows, or until a window runs below
    :data:`DROP` times the rate it was chosen at (another job took the cores), and tries the
    other count again. Two runs side by side both settle on one thread: each run's spinning
    second thread would slow both. ``history`` holds ``(step, threads, steps_per_s)`` of every
    window. The thread count changes floating-point rounding only (docs/comparing.md); set
    ``torch_threads=N`` for a fixed count. Only off-policy runs have one: an on-policy run's
    update comes once per rollout, not in every window.
    """

    def __init__(self, choices: tuple[int, int], set_threads: Callable[[int], None],
                 window: int | None = None, hold: int | None = None) -> None:
        self.choices, self.set_threads = choices, set_threads
        self.window, self.hold = window or WINDOW, hold or HOLD  # read when built (tests)
        self.threads = choices[0]
        self.left = 1  # windows before the next try of the other count
        self.trying: float | None = None  # while trying: the rate of the window before
        self.chosen_rate = 0.0  # the rate the current count was chosen at
        self.steps, self.seconds = 0, 0.0  # of the window so far
        self.history: list[tuple[int, int, float]] = []
        set_threads(self.threads)

    def tick(self, step: int, seconds: float) -> None:
        """Call once per env step of training with the run's env step and the wall seconds its
        updates took (only the updates are timed: evaluations, checkpoints and env steps do
        not depend on the thread count much, and would blur the comparison)."""
        self.steps, self.seconds = self.steps + 1, self.seconds + seconds
        if self.steps < self.window:
            return
        rate = self.steps / max(self.seconds, 1e-9)  # env steps of updates per second
        self.steps, self.seconds = 0, 0.0
        self.history.append((step, self.threads, rate))
        if self.trying is not None:  # this window ran on the other count
            before, self.trying = self.trying, None
            if rate <= before * MARGIN:
                self.switch()
            self.chosen_rate, self.left = max(rate, before), self.hold
        else:
            self.left -= 1
            if self.left <= 0 or rate < DROP * self.chosen_rate:
                self.trying = rate
                self.switch()

    def switch(self) -> None:
        """Change to the other count."""
        a, b = self.choices
        self.threads = b if self.threads == a else a
        self.set_threads(self.threads)


def thread_tuner(setting: int | str, seeds: int, on_cpu: bool, cores: int,
                 set_threads: Callable[[int], None]) -> ThreadTuner | None:
    """A :class:`ThreadTuner` between 1 and ``cores`` (torch's own count) for a run with
    ``torch_threads=setting`` training ``seeds`` seeds, or None (a fixed count): only for
    ``auto``, one seed, an off-policy run on CPU (``on_cpu``), more than one core, and no
    ``OMP_NUM_THREADS`` in the environment (a user's, or the test suite's, fixed choice)."""
    if setting != "auto" or seeds != 1 or not on_cpu or cores < 2:
        return None
    if "OMP_NUM_THREADS" in os.environ:
        return None
    return ThreadTuner((1, cores), set_threads)
