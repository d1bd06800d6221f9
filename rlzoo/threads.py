"""How many CPU threads torch uses for a run, and how its OpenMP threads wait.

torch's OpenMP threads (libgomp) spin for ~300k iterations before sleeping between ops. Two runs
that together ask for more threads than there are cores then burn each other's cores spinning:
two 2-thread SAC runs on a 2-core machine made 0.41x the steps of one run alone
(docs/performance.md, "Sharing the machine"). Two defaults follow:

- ``GOMP_SPINCOUNT=1000``: set when ``rlzoo`` is imported before torch (always so for
  ``python -m rlzoo.train`` and its multirun jobs), unless the user set ``GOMP_SPINCOUNT`` or
  ``OMP_WAIT_POLICY`` already; one 2-thread run alone loses ~3% to it.
- ``torch_threads=auto``: one thread for a single seed (two such runs share 2 cores at 1.9x one
  alone), torch's own count (all cores) for a seed group, whose batched update uses them, when the
  spin-wait is limited; otherwise one.

This module must not import torch: ``rlzoo/__init__.py`` runs it before torch loads.
"""

from __future__ import annotations

import os
import sys

SPIN_COUNT = "1000"  # libgomp spin iterations before a waiting thread sleeps (its default: 300k)


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
