"""Paired floors as the report shows them: each run's final return against the zero action's and
uniform random actions' returns on that run's own evaluation episodes (computed by
:mod:`rlzoo.policy.floors` and handed in as
``{run dir: {"zero": [returns], "random": [returns]}}``).

Nothing here runs an env: ``rlzoo.analysis`` reads run dirs only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOOR_NAMES = {"zero": "zero action", "random": "uniform random actions"}

Floors = dict[str, dict[str, list[float]]]  # run dir -> policy -> one return per episode


@dataclass
class GroupFloors:
    """A group's runs against their own floors, in the group's run order: each run's floor
    means ``zero [runs]`` and ``random [runs]`` (10-episode means, as its final return),
    ``above_zero``/``above_random``: how many final returns beat their own floor; ``n`` runs
    had floors (a run whose floors could not be computed is left out)."""

    zero: list[float]
    random: list[float]
    above_zero: int
    above_random: int
    n: int


@dataclass
class EnvFloors:
    """An env's floor lines: per policy the mean over its runs' seeds of their floor means
    (each seed counted once), and the lowest and highest seed's."""

    mean: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    seeds: int


def group_floors(runs: list[str], finals: list[float], floors: Floors) -> GroupFloors | None:
    """:class:`GroupFloors` of the runs ``runs`` (dirs) with final returns ``finals``; None
    when no run has floors."""
    kept = [(run, final) for run, final in zip(runs, finals) if run in floors]
    if not kept:
        return None
    zero = [float(np.mean(floors[run]["zero"])) for run, _ in kept]
    random = [float(np.mean(floors[run]["random"])) for run, _ in kept]
    return GroupFloors(zero, random,
                       sum(final > z for (_, final), z in zip(kept, zero)),
                       sum(final > r for (_, final), r in zip(kept, random)), len(kept))


def env_floors(runs: list[tuple[str, int]], floors: Floors) -> EnvFloors | None:
    """:class:`EnvFloors` of an env's runs ``(run dir, seed)``; None without floors."""
    by_seed: dict[int, dict[str, float]] = {}
    for run, seed in runs:
        if run in floors:
            by_seed.setdefault(seed, {k: float(np.mean(v)) for k, v in floors[run].items()})
    if not by_seed:
        return None
    values = {k: [s[k] for s in by_seed.values()] for k in FLOOR_NAMES}
    return EnvFloors({k: float(np.mean(v)) for k, v in values.items()},
                     {k: min(v) for k, v in values.items()},
                     {k: max(v) for k, v in values.items()}, len(by_seed))
