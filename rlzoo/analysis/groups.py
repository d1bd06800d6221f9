"""A group: the runs pooled into one row of the comparison (same env, algo and grouping values).

:mod:`rlzoo.analysis.pooling` decides which runs pool, :mod:`rlzoo.analysis.labels` names groups.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlzoo.analysis.config import MISSING, canon, under
from rlzoo.analysis.messages import CompareError
from rlzoo.analysis.runs import FinishedRun


@dataclass
class Group:
    """Runs pooled into one row: same env, algo name and grouping values; seeds differ.

    ``values`` are the grouping keys' values (equal in every run of the group). ``terms`` are the
    ``key=value`` pairs of its label that tell it apart from the other groups of its algo (a
    config group such as ``critic`` by its choice, ``ensemble``), ``defaults`` those left out of
    the label because the group has the default value there, ``auto_label`` the label they
    make (``sac critic=ensemble``), ``label`` the one shown (``auto_label`` unless ``--label``
    renamed it).
    """

    env: str
    algo: str
    has_config: bool
    values: dict[str, Any]
    runs: list[FinishedRun] = field(default_factory=list)
    terms: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    auto_label: str = ""
    label: str = ""

    @property
    def choices(self) -> dict[str, str]:
        """Config-group choices shared by all runs (``a|b`` where runs recorded different ones)."""
        names = set.intersection(*(set(r.choices) for r in self.runs))
        return {
            n: "|".join(sorted({r.choices[n] for r in self.runs})) for n in sorted(names)
        }

    def shared(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if every run has the same value of ``key`` (``MISSING`` when none
        has it), else ``(False, None)``."""
        values = [run_value(r, key) for r in self.runs]
        if len({canon(v) for v in values}) == 1:
            return True, values[0]
        return False, None

    def untouched(self, key: str, choice: bool) -> bool:
        """No run of the group set ``key`` on its command line (so its value is the default).

        A choice (``critic``) is set only by ``critic=...``; a config value (``critic.n``) by an
        override of it or of a node above it, but not by choosing its config group's file. False
        when a run's overrides are unknown.
        """
        seen = set()  # the runs' (overrides, choices): most runs of a group share them
        for run in self.runs:
            if run.overridden is None:
                return False
            kind = (tuple(run.overridden), tuple(run.choices))
            if kind in seen:
                continue
            seen.add(kind)
            for key_set in run.overridden:
                if key_set == key if choice else (
                    under(key, key_set) and key_set not in run.choices
                ):
                    return False
        return True


def run_value(run: FinishedRun, key: str) -> Any:
    """A run's value of a config key (``MISSING`` when it has none)."""
    if run.config is None:
        if key == "total_steps" and run.total_steps is not None:
            return run.total_steps
        return MISSING
    return run.config.get(key, MISSING)


def known_keys(runs: Sequence[FinishedRun]) -> set[str]:
    """Every key a label rule or ``--group-by`` may name: leaves, the nodes above them, choices."""
    known = {"algo", "env", "total_steps"}
    leaves: set[str] = set()
    for run in runs:
        leaves.update(run.config or {})
        known.update(run.choices)
    for key in leaves:
        parts = key.split(".")
        known.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return known


def unknown_key_error(what: str, key: str, runs: Sequence[FinishedRun]) -> CompareError:
    """The error for ``what`` (``--group-by``, ``--label '...'``) naming a key no run has, with
    the closest known keys as a hint."""
    close = difflib.get_close_matches(key, sorted(known_keys(runs)), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "keys are dotted config paths"
    return CompareError(
        f"{what} names {key!r}, which is in no run's .hydra/config.yaml; {hint} "
        "(e.g. critic, algo.utd, total_steps)"
    )
