"""The shapes of the reproduce tool's suites: a suite is tasks x rows plus the settings every run
of it shares (the suites themselves, ``SUITES``, are declared in :mod:`tools.reproduce.suites`),
and the composed rlzoo config of one cell."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SuiteTask:
    """One environment of a suite.

    Attributes:
        name: the env config's ``env.name`` (what summary.json and the report call it); also the
            task's folder under ``OUT/<suite>/`` and ``RESULTS/<suite>/``.
        env: the env config group option (``env=<env>`` on the command line).
        rows: the labels of the suite's rows run on this task (default: every row).
        steps: this task's default budget in env steps per seed (default: the suite's).
        headline_steps: the env steps at which the page's headline reads this task (default:
            the suite's, :meth:`Suite.budgets`): a task that a suite runs for one question
            (HalfCheetah to 300k) beside one read along its curve (Humanoid at 100k-300k).
        not_run: why this task's cells have no result yet (default: the suite's ``not_run``).
    """

    name: str
    env: str
    rows: tuple[str, ...] | None = None
    steps: int | None = None
    headline_steps: tuple[int, ...] | None = None
    not_run: str | None = None


@dataclass(frozen=True)
class Row:
    """One algorithm and config of a suite.

    Attributes:
        label: names the row's run dirs (``<label>-s<seed>``) and its cell (``TASK/label``).
        overrides: the rlzoo command-line overrides of the row, besides the suite's. For an SB3
            peer: the rlzoo config whose hyperparameters the peer takes
            (:func:`tools.reproduce.peer.peer_settings`).
        peer: ``"sac"`` or ``"td3"`` for a Stable-Baselines3 row; None for an rlzoo row.
        note: what the page says about the row (how it differs from a paper's setting).
        against: the labels of the rows the page sets this row against, seed by seed
            (:func:`tools.reproduce.page.section.pair_lines`): a variant against its base, a
            control against the rows it separates.
    """

    label: str
    overrides: tuple[str, ...]
    peer: str | None = None
    note: str = ""
    against: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    """A named set of cells (tasks x rows) and the settings every run of it shares.

    Attributes:
        name: the suite's name on the command line.
        title: one line for the page.
        tasks: the environments.
        rows: the algorithms and configs.
        steps: default budget per seed, env steps (``--steps`` replaces it for every task).
        seeds: default K, seeds ``0 .. K-1`` (``--seeds``).
        eval_every: env steps between deterministic evaluations (every row, SB3 included).
        eval_episodes: episodes per evaluation (seeds ``seed + 10000 + i``, as rlzoo's).
        checkpoint_every: env steps between checkpoints of an rlzoo cell: a few minutes of
            training, so a stopped cell loses little.
        checkpoint_keep: checkpoints kept per cell. One is enough (a checkpoint is written to
            a temporary file and renamed, so a crash while writing keeps the previous one) and
            each is large: it holds K seeds' whole replay buffers, at their full capacity.
        overrides: rlzoo overrides every row of the suite gets (SB3 peers read them too).
        why: why the budgets are what they are (shown on the page).
        first_eval: what a row's first evaluation measures (shown on the page).
        not_run: why a cell with no result and no recorded outcome has none (on the page).
        headline_steps: the env steps of the page's headline table (every cell at each, against
            the best published reference), for a task that names none of its own
            (``SuiteTask.headline_steps``); () keeps the suite off the headline.
    """

    name: str
    title: str
    tasks: tuple[SuiteTask, ...]
    rows: tuple[Row, ...]
    steps: int
    seeds: int
    eval_every: int
    eval_episodes: int
    checkpoint_every: int
    checkpoint_keep: int
    overrides: tuple[str, ...] = ()
    why: str = ""
    first_eval: str = "the earliest point of each curve"
    not_run: str = "not scheduled yet: the 2-core machine's hours went to the other cells"
    headline_steps: tuple[int, ...] = ()

    def budgets(self, task: SuiteTask) -> tuple[int, ...]:
        """The env steps at which the headline reads ``task``: its own, else the suite's."""
        return self.headline_steps if task.headline_steps is None else task.headline_steps

    def all_budgets(self) -> tuple[int, ...]:
        """Every headline budget of any task of the suite, ascending (() without a headline)."""
        return tuple(sorted({s for task in self.tasks for s in self.budgets(task)}))

    def cells(self) -> list[tuple[SuiteTask, Row]]:
        """Every (task, row) of the suite, in the order they run (task by task)."""
        return [(task, row) for task in self.tasks for row in self.rows
                if task.rows is None or row.label in task.rows]


def compose_cell_config(overrides: Sequence[str]) -> Any:
    """rlzoo's composed config for these overrides (read, never instantiated)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))
