"""One suite's results as the page reads them (:class:`SuiteData`), and the comparisons made
on them: against the published seeds, between rows, and the normalized scores across tasks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rlzoo.analysis import stats
from tools.reproduce.files import REPORT_DIR, STATUS_FILE, read_json, summary_steps
from tools.reproduce.page.runs import (
    WINDOW,
    kilo,
    mean_over_evaluations,
    run_rows,
    seed_of,
    value_at,
    window_mean,
)
from tools.reproduce.page.text import phrase, seeds_text
from tools.reproduce.page.verdicts import Test, Tests, testable
from tools.reproduce.references import REFERENCES, Reference, normalizer
from tools.reproduce.schema import Suite

Found = TypeVar("Found", bound=tuple[Any, ...])  # (Reference, its seeds' windows, ...)


@dataclass
class SuiteData:
    """What the page reads of one suite's results: runs by task and row, rlzoo.compare's
    report, the status file."""

    suite: Suite
    root: Path
    runs: dict[str, dict[str, list[Path]]]
    report: dict[str, Any] | None
    status: dict[str, Any]

    @classmethod
    def read(cls, suite: Suite, results: Path) -> SuiteData:
        root = results / suite.name
        return cls(suite, root, {t.name: run_rows(root / t.name) for t in suite.tasks},
                   read_json(root / REPORT_DIR / "comparison.json"),
                   read_json(root / STATUS_FILE) or {})

    def cell(self, task: str, row: str) -> list[Path]:
        return self.runs.get(task, {}).get(row, [])

    def values_at(self, task: str, row: str, steps: int) -> list[float] | None:
        """Each seed's evaluation at ``steps``; None unless every seed has one."""
        runs = self.cell(task, row)
        values = [value_at(d, steps, self.suite.eval_every) for d in runs]
        return None if not runs or None in values else values  # type: ignore[return-value]

    def windows(self, task: str, row: str, steps: int) -> list[float] | None:
        """Each seed's mean over its evaluations in the window ending at ``steps``; None
        unless every seed has them."""
        runs = self.cell(task, row)
        values = [window_mean(d, steps, self.suite.eval_every) for d in runs]
        return None if not runs or None in values else values  # type: ignore[return-value]


def cell_budget(runs: list[Path]) -> int:
    """The env steps a cell's runs reached (the largest of their ``total_steps``; 0 for none)."""
    return max((summary_steps(d) or 0 for d in runs), default=0)


def references_of(task: str, row: str) -> list[Reference]:
    """The published curves with per-seed data set beside ``row`` on ``task``."""
    return [r for r in REFERENCES if r.task == task and row in r.rows and r.data_algo]


def reference_tests(data: SuiteData, tests: Tests, task: str, row: str,
                    steps: int) -> list[tuple[Reference, np.ndarray, Test | None]]:
    """``row``'s seeds against each published curve's seeds at ``steps`` (windows on both
    sides): (reference, its seeds' windows, the test, None when the two sides are too few to
    test, :func:`testable`); [] when either side lacks the window. The test against the best
    curve (:func:`best_reference`) answers the headline's question (kind ``head``, or
    ``yardstick`` when that curve is another algorithm's), the others ``ref``
    (:data:`QUESTIONS`)."""
    ours = data.windows(task, row, steps)
    found = [(ref, theirs) for ref in (references_of(task, row) if ours else [])
             if (theirs := ref.window(steps, WINDOW)) is not None]
    best = best_reference(found)
    out = []
    for ref, theirs in found:
        kind = "ref" if best is None or ref is not best[0] else (
            "yardstick" if ref.yardstick else "head")
        test = None if not testable(len(ours), len(theirs)) else tests.run(
            (kind, data.suite.name, task, row, ref.algo, str(steps)), ours, theirs.tolist())
        out.append((ref, theirs, test))
    return out


def best_reference(found: Sequence[Found]) -> Found | None:
    """Of a cell's published curves (each a reference, then its seeds' windows, then
    anything), the one whose seeds' windows have the highest IQM (the hardest to match, the
    headline's) among the curves of the row's own algorithm; only a row with none of its own is
    set against a yardstick (another algorithm's curve, ``Reference.yardstick``); None without
    any curve."""
    own = [item for item in found if not item[0].yardstick]
    pool = own or list(found)
    return max(pool, key=lambda item: stats.iqm(item[1])) if pool else None


def pair_tests(data: SuiteData, tests: Tests, task: str
               ) -> list[tuple[str, str, str, Test | None, Test | None]]:
    """The rows of one task set against each other: (kind, A, B, test on the final returns,
    test on the means over evaluations or None when the rows were evaluated at other steps);
    each rlzoo row against its peer, and each row against the rows of ``Row.against``. Rows
    trained to different budgets are compared at the smaller one (B's label then says at which
    step): each seed's evaluation there, and its mean over the evaluations up to it. A pair
    too small to test (:func:`testable`) has both tests None, and B's label says why."""
    rows = data.runs.get(task, {})
    peers = [("peer", str(r.peer), r.label) for r in data.suite.rows if r.peer]
    against = [("against", r.label, other) for r in data.suite.rows for other in r.against]
    out: list[tuple[str, str, str, Test | None, Test | None]] = []
    for kind, a, b in peers + against:
        if not (rows.get(a) and rows.get(b)):
            continue
        if not testable(len(rows[a]), len(rows[b])):
            counts = "; ".join(phrase("pair.seeds", row=name, seeds=seeds_text(len(rows[name])))
                               for name in (a, b))
            out.append((kind, a, phrase("pair.untested", row=b, counts=counts), None, None))
            continue
        budgets = {name: cell_budget(rows[name]) for name in (a, b)}
        common = min(budgets.values())
        label = b if budgets[a] == budgets[b] else phrase("pair.both_at", row=b, steps=kilo(common))
        if budgets[a] == budgets[b]:
            finals = [[float((read_json(d / "summary.json") or {})["final_eval_return"])
                       for d in rows[name]] for name in (a, b)]
        else:
            finals = [[value_at(d, common, data.suite.eval_every) for d in rows[name]]
                      for name in (a, b)]
            if any(v is None for side in finals for v in side):
                continue
        base = ("peer" if kind == "peer" else "variant", data.suite.name, task, a, b)
        final = tests.run((*base, "final"), *finals)  # type: ignore[arg-type]
        last = None if budgets[a] == budgets[b] else common
        means = [[mean_over_evaluations(d, last) for d in rows[name]] for name in (a, b)]
        flat = [m for side in means for m in side]
        curve = None
        if all(m is not None for m in flat) and len({m[0] for m in flat if m}) == 1:
            curve = tests.run((*base, "curve"), *([m[1] for m in side if m] for side in means))
        out.append((kind, a, label, final, curve))
    return out


def has_aggregate(suite: Suite) -> bool:
    """Whether the page aggregates ``suite`` across tasks: only with two tasks or more (one
    task's aggregate would be its headline table in other units)."""
    return len(suite.tasks) > 1


def aggregate_task_sets(data: SuiteData, steps: int) -> list[list[str]]:
    """The task sets the aggregate at ``steps`` is taken over, largest first: every task where
    an rlzoo row of the suite has its window at ``steps`` (and the normalizer has the task), then
    each smaller set of two tasks or more that is exactly the tasks of some row missing from a
    larger one (a row run on Hopper and HalfCheetah only is aggregated there, beside every row
    that has those two; a row on one task only is in that task's headline, not here)."""
    def has(task: str, label: str) -> bool:
        windows = data.windows(task, label, steps)
        return windows is not None and len(windows) >= 2

    tasks = [t.name for t in data.suite.tasks if normalizer(t.name) is not None and any(
        data.windows(t.name, r.label, steps) for r in data.suite.rows)]
    sets = [tasks] if len(tasks) >= 2 else []  # one task's aggregate: its headline, rescaled
    for row in data.suite.rows:
        own = [t for t in tasks if has(t, row.label)]
        if len(own) >= 2 and own not in sets:
            sets.append(own)
    return sorted(sets, key=lambda s: (-len(s), [tasks.index(t) for t in s]))


def common_seeds(data: SuiteData, tasks: Sequence[str], row: str, steps: int
                 ) -> list[list[float]] | None:
    """``row``'s windows at ``steps`` on each of ``tasks``, of the seeds every task has, in seed
    order (a task run with seeds 0-9 beside tasks run with 0-4 gives 0-4): ``[tasks][seeds]``;
    None when a task lacks the window or fewer than 2 seeds are common."""
    by_task = []
    for task in tasks:
        windows = data.windows(task, row, steps)
        if windows is None:
            return None
        by_task.append(dict(zip((seed_of(d) for d in data.cell(task, row)), windows)))
    seeds = sorted(set.intersection(*(set(w) for w in by_task))) if by_task else []
    return [[w[s] for s in seeds] for w in by_task] if len(seeds) >= 2 else None


def aggregate_scores(data: SuiteData, steps: int, tasks: Sequence[str] | None = None
                     ) -> tuple[list[str], dict[str, np.ndarray]]:
    """The cross-task scores at ``steps`` over ``tasks`` (default the first, largest set of
    :func:`aggregate_task_sets`): the tasks and, for each rlzoo row and each published curve with
    seeds on every one of them, the seeds' windows normalized
    (:func:`published_references.normalizer`), ``[seeds, tasks]``."""
    if tasks is None:
        sets = aggregate_task_sets(data, steps)
        tasks = sets[0] if sets else []
    tasks = list(tasks)
    scores: dict[str, np.ndarray] = {}
    if not tasks:
        return tasks, scores

    def norm(task: str, values: Sequence[float]) -> np.ndarray:
        low, high = normalizer(task)  # type: ignore[misc]
        return (np.asarray(values, float) - low) / (high - low)

    for row in data.suite.rows:
        columns = common_seeds(data, tasks, row.label, steps)
        if columns is not None:
            scores[row.label] = np.stack([norm(t, c) for t, c in zip(tasks, columns)], axis=1)
    for algo in dict.fromkeys(r.algo for r in REFERENCES if r.data_algo):
        refs = {r.task: r for r in REFERENCES if r.algo == algo and r.data_algo}
        columns = [refs[t].window(steps, WINDOW) if t in refs else None for t in tasks]
        if all(c is not None for c in columns) and len({len(c) for c in columns}) == 1:
            scores[algo] = np.stack([norm(t, c) for t, c in zip(tasks, columns)], axis=1)
    return tasks, scores
