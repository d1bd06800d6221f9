"""What one invocation runs (:class:`Plan`) and what happened to each cell (:class:`Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tools.reproduce.schema import Row, Suite, SuiteTask


@dataclass
class Plan:
    """What this invocation runs: the suite, K seeds from ``first_seed``, the budget and the
    folders."""

    suite: Suite
    seeds: int
    steps: int | None  # --steps (None: each task's default)
    out: Path
    results: Path
    page: Path
    sb3: str | None  # None when SB3 can run, else why not
    first_seed: int = 0  # --first-seed: the cells train seeds first_seed .. first_seed + K - 1

    def seed_range(self) -> range:
        """The seeds every cell of this invocation trains (and exports)."""
        return range(self.first_seed, self.first_seed + self.seeds)

    def budget(self, task: SuiteTask) -> int:
        return self.steps or task.steps or self.suite.steps

    def task_dir(self, task: SuiteTask) -> Path:
        return self.out / self.suite.name / task.name

    def home(self, task: SuiteTask, row: Row) -> Path:
        """The run dir of a cell's first seed (an rlzoo cell's group home)."""
        return self.task_dir(task) / f"{row.label}-s{self.first_seed}"


@dataclass
class Outcome:
    """What happened to one cell: ``state`` is ``finished`` (was or is now), ``unfinished``,
    ``locked``, ``skipped`` or ``failed``; ``note`` says more in one line."""

    task: str
    row: str
    state: str
    note: str = ""
    dirs: list[Path] = field(default_factory=list)
    mistake: bool = False  # skipped because its runs do not match this invocation's K or budget
