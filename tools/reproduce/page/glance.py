"""The page read at a glance: a box of what is shown and what is not, then one compact table of
every headline cell (a row per algorithm, a column per task and budget), each cell rlzoo's IQM
with one symbol for its verdict against the best published curve, and footnotes for the rest.
Every word is computed from the same cells and tests as the rest of the page; the wording is in
page/templates.txt (``box.*``, ``table.*``, ``cell.*``, ``footnote.*``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tools.reproduce.files import summary_steps
from tools.reproduce.page import text
from tools.reproduce.page.data import SuiteData, best_reference, reference_tests
from tools.reproduce.page.runs import WINDOW, devices, fmt, kilo
from tools.reproduce.page.text import joined, phrase, seeds_text
from tools.reproduce.page.verdicts import ALPHA, Test, Tests, iqm_ci
from tools.reproduce.references import Reference
from tools.reproduce.schema import Suite

Found = tuple[Reference, np.ndarray, Test | None]  # a published curve, its windows, the test
MARKED_BY_SYMBOL = {"another": "another"}  # footnotes a cell's symbol points to, not a letter


@dataclass
class Cell:
    """One headline cell at one budget: a row of a suite on a task, read at ``steps``.

    Attributes:
        suite, task, row, steps: where it is.
        runs: the cell's run dirs ([] when it has not run).
        values: each seed's mean over the window ending at ``steps`` (None unless every seed
            has it: a cell that stopped short).
        found: every published curve set beside it, with its windows and its test.
        best: the one the headline reads (:func:`best_reference`); None without any.
    """

    suite: Suite
    task: str
    row: str
    steps: int
    runs: list[Path]
    values: list[float] | None = None
    found: list[Found] = field(default_factory=list)
    best: Found | None = None

    @property
    def test(self) -> Test | None:
        """The test against the best curve (None: no curve, or too few seeds to test)."""
        return self.best[2] if self.best else None

    @property
    def own(self) -> bool:
        """Whether the best curve is of the row's own algorithm (not another's)."""
        return self.best is not None and not self.best[0].yardstick

    def symbol(self) -> str:
        """The verdict's symbol (:data:`text.SYMBOLS`); '' when untested."""
        if self.best is None:
            return text.SYMBOLS["no reference"]
        if self.test is None:
            return ""
        if not self.own:
            return text.SYMBOLS["another"]
        if self.test.adjusted < ALPHA:
            return text.SYMBOLS[side(self.test)]
        return text.SYMBOLS["none"]

    def seeds(self) -> str:
        """`` (10)`` for more seeds than the suite's, `` (3 of 5)`` for fewer, else ''."""
        n, k = len(self.values or self.runs), self.suite.seeds
        return "" if n == k else " " + phrase("cell.seeds_more" if n > k else "cell.seeds_fewer",
                                              n=n, k=k)


def side(test: Test) -> str:
    return "above" if test.poi[0] > 0.5 else "below"


def glance_cells(data: Sequence[SuiteData], tests: Tests) -> list[Cell]:
    """Every headline cell of every suite with headline budgets, at each of its task's budgets
    (:meth:`Suite.budgets`), run or not, with its tests (run into ``tests``)."""
    cells = []
    for d in data:
        for task, row in d.suite.cells():
            for s in d.suite.budgets(task):
                cell = Cell(d.suite, task.name, row.label, s, d.cell(task.name, row.label))
                cell.values = d.windows(task.name, row.label, s) if cell.runs else None
                if cell.values:
                    cell.found = reference_tests(d, tests, task.name, row.label, s)
                    cell.best = best_reference(cell.found)
                cells.append(cell)
    return cells


def where(places: Sequence[tuple[str, int]]) -> str:
    """Tasks grouped by their budgets: ``on Hopper and HalfCheetah at 50k and 100k, on
    Walker2d at 50k``."""
    budgets: dict[str, list[int]] = {}
    for task, steps in places:
        budgets.setdefault(task, []).append(steps)
    groups: dict[tuple[int, ...], list[str]] = {}
    for task, steps in budgets.items():
        groups.setdefault(tuple(sorted(set(steps))), []).append(task)
    return ", ".join(phrase("list.where", tasks=joined(tasks),
                            budgets=joined([kilo(s) for s in steps]))
                     for steps, tasks in groups.items())


def by_row(items: Sequence[tuple[str, str, str, int]]) -> str:
    """``(row, what, task, steps)`` items as ``row what on ... at ...`` (the row in backticks),
    a row's places grouped by what is said of them, and rows said the same of named together:
    ``td3 and sb3_td3 above TD3 (Tianshou) on Hopper at 50k; sac-categorical below on ...,
    no difference found on ...``."""
    places: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for row, what, task, steps in items:
        places.setdefault(row, {}).setdefault(what, []).append((task, steps))
    grouped: dict[str, list[str]] = {}
    for row, found in places.items():
        said = ", ".join(phrase("list.said", what=what, where=where(at)) if what else where(at)
                         for what, at in found.items())
        grouped.setdefault(said, []).append(phrase("list.row", row=row))
    return "; ".join(phrase("list.rows_said", rows=joined(rows), said=said)
                     for said, rows in grouped.items())


def notes_of(cell: Cell) -> dict[str, tuple[str, str, str, int]]:
    """The compact table's footnotes that ``cell`` takes (:data:`text.FOOTNOTES`'s keys), each
    with its ``(row, what, task, steps)`` item."""
    out = {}
    test = cell.test
    if test is not None and not cell.own:
        verdict = phrase("footnote.before_holm_only", side=side(test)) \
            if test.p < ALPHA <= test.adjusted else test.verdict()
        out["another"] = (cell.row, verdict, cell.task, cell.steps)
    elif test is not None and test.p < ALPHA <= test.adjusted:
        out["before"] = (cell.row, side(test), cell.task, cell.steps)
    others = [phrase("footnote.other_item", side=side(t), algo=ref.algo) for ref, _, t in cell.found
              if cell.best is not None and ref is not cell.best[0] and not ref.yardstick
              and t is not None and t.adjusted < ALPHA]
    if others:
        out["other"] = (cell.row, joined(others), cell.task, cell.steps)
    return out


def cell_text(cell: Cell, marks: dict[str, str]) -> str:
    """One cell of the compact table: ``696 ○ (10)``, ``383 ◇ᵃ``, ``not run yet``, ``1 seed to
    30k only``."""
    if not cell.runs:
        return phrase("cell.not_run")
    if not cell.values:
        return short_of(cell)
    point = fmt(iqm_ci(cell.values)[0]) if len(cell.values) > 1 else fmt(cell.values[0])
    untested = " " + phrase("cell.untested") if cell.best is not None and cell.test is None else ""
    notes = "".join(marks[key] for key in notes_of(cell) if key not in MARKED_BY_SYMBOL)
    return f"{point} {cell.symbol()}{notes}{cell.seeds()}{untested}".replace("  ", " ")


def short_of(cell: Cell) -> str:
    """How far a cell that stopped short of its budget got: ``1 seed to 30k only``."""
    reached = [summary_steps(d) or 0 for d in cell.runs]
    return phrase("cell.short", seeds=seeds_text(len(cell.runs)), steps=kilo(min(reached)))


def columns(cells: Sequence[Cell]) -> list[tuple[str, int, str]]:
    """The compact table's columns: (task, steps, suite) in the order tasks first appear, each
    task's budgets ascending; the suite is named only where two suites read one task at one
    budget."""
    order = list(dict.fromkeys(c.task for c in cells))
    return sorted({(c.task, c.steps, c.suite.name) for c in cells},
                  key=lambda k: (order.index(k[0]), k[1], k[2]))


def compact_table(cells: Sequence[Cell]) -> list[str]:
    """The compact table, its legend and footnotes; [] without cells."""
    if not cells:
        return []
    cols = columns(cells)
    twice = {(t, s) for t, s, _ in cols if sum(1 for c in cols if c[:2] == (t, s)) > 1}
    names = [phrase("table.column_suite" if (t, s) in twice else "table.column", task=t,
                    steps=kilo(s), suite=suite) for t, s, suite in cols]
    ran = {c.row for c in cells if c.runs}
    rows = [r for r in dict.fromkeys(c.row for c in cells) if r in ran]
    used = [key for key in text.FOOTNOTES if any(key in notes_of(c) for c in cells)]
    lettered = [key for key in used if key not in MARKED_BY_SYMBOL]
    marks = {key: text.NOTE_MARKS[lettered.index(key)] if key in lettered
             else text.SYMBOLS[MARKED_BY_SYMBOL[key]] for key in used}
    at = {(c.row, c.task, c.steps, c.suite.name): c for c in cells}
    lines = [f"| {phrase('table.row')} | " + " | ".join(names) + " |", "|---|" + "---|" * len(cols)]
    for row in rows:
        lines.append(f"| `{row}` | " + " | ".join(
            cell_text(at[(row, *col)], marks) if (row, *col) in at else ""
            for col in cols) + " |")
    seeds = cells[0].suite.seeds
    lines += ["", phrase("table.legend", window=kilo(WINDOW), seeds=seeds, noref=text.SYMBOLS[
        "no reference"], **{k: v for k, v in text.SYMBOLS.items() if k != "no reference"}), ""]
    for key in used:
        items = [notes_of(c)[key] for c in cells if key in notes_of(c)]
        algo = joined(sorted({c.best[0].algo for c in cells if c.best and not c.own})) \
            if key == "another" else ""
        lines += [phrase(text.FOOTNOTES[key], mark=marks[key], algo=algo, alpha=ALPHA,
                         cells=by_row(items)), ""]
    return lines


def validated_line(cells: Sequence[Cell]) -> str:
    """The box's first line: the rows tested against their own algorithm's curve, where, and
    what Holm's correction leaves of their verdicts (the compact table below gives each)."""
    tested = [c for c in cells if c.test is not None and c.own]
    if not tested:
        return phrase("box.validated_none")
    differ = [c for c in tested if c.test is not None and c.test.adjusted < ALPHA]
    verdicts = (phrase("box.all_level") if not differ else phrase(
        "box.one_differs" if len(differ) == 1 else "box.some_differ", k=len(differ), cells=by_row(
            [(c.row, side(c.test), c.task, c.steps) for c in differ if c.test])))
    return phrase("box.validated",
        rows=joined([phrase("list.row", row=r) for r in dict.fromkeys(c.row for c in tested)]),
        n=len(tested),
        tasks=joined(list(dict.fromkeys(c.task for c in tested))),
        budgets=joined([kilo(s) for s in sorted({c.steps for c in tested})]),
        verdicts=verdicts)


def others_line(cells: Sequence[Cell], data: Sequence[SuiteData]) -> str | None:
    """The box's second line: rows that ran with no published curve of their own (set against
    another algorithm's, or none), and the suites without headline budgets that have results."""
    validated = {c.row for c in cells if c.test is not None and c.own}
    groups: dict[str, list[str]] = {}
    for c in cells:
        if c.row not in validated and c.values:
            against = c.best[0].algo if c.best and not c.own else ""
            if c.row not in groups.setdefault(against, []):
                groups[against].append(c.row)
    parts = [phrase("box.others_against" if algo else "box.others_rows", algo=algo,
                    rows=joined([phrase("list.row", row=r) for r in rows]))
             for algo, rows in groups.items()]
    for d in data:
        if not d.suite.headline_steps and d.report is not None:
            rows = [r.label for r in d.suite.rows if any(d.cell(t.name, r.label)
                                                        for t in d.suite.tasks)]
            parts.append(phrase("box.others_suite", suite=d.suite.name, n=len(rows),
                                steps=kilo(d.suite.steps)))
    return phrase("box.others", rows="; ".join(parts)) if parts else None


def not_yet_line(data: Sequence[SuiteData]) -> str:
    """The box's last line: no GPU run and how far the page's runs go; per headline suite the
    rows not run, or short of the suite's seeds or budget, by task; the other suites' cells not
    run, counted."""
    runs = [r for d in data for rows in d.runs.values() for cell in rows.values() for r in cell]
    furthest = max((summary_steps(r) or 0 for r in runs), default=0)
    missing: dict[str, list[str]] = {}  # row -> its tasks not run or short
    parts = []
    for d in data:
        if "device=cuda" in d.suite.overrides:
            continue  # the GPU clause says it
        if not d.suite.headline_steps:
            left = sum(1 for t, r in d.suite.cells() if not d.cell(t.name, r.label))
            parts += [phrase("box.cells_left", n=left, suite=d.suite.name)] if left else []
            continue
        ran = {r.label for t, r in d.suite.cells() if d.cell(t.name, r.label)}
        for task, row in d.suite.cells():
            runs = d.cell(task.name, row.label)
            reached = min((summary_steps(r) or 0 for r in runs), default=0)
            short = ([phrase("box.short_seeds", n=len(runs), k=d.suite.seeds)]
                     if len(runs) < d.suite.seeds else []) + (
                [phrase("box.short_steps", steps=kilo(reached))]
                if reached < (task.steps or d.suite.steps) else [])
            if not runs or short:  # a row that ran nowhere in the suite is named bare
                tasks = missing.setdefault(row.label, [])
                if row.label in ran:
                    tasks.append(task.name if not runs else phrase(
                        "box.task_short", task=task.name, short=", ".join(short)))
    named = [phrase("box.row_tasks", row=row, tasks="; ".join(tasks)) if tasks
             else phrase("list.row", row=row) for row, tasks in missing.items()]
    parts = [", ".join(named)] * bool(named) + parts
    return phrase("box.not_yet", gpu=phrase("box.no_gpu", steps=kilo(furthest)),
                  cells="; ".join(parts) or phrase("box.all_ran"))


def box_lines(data: Sequence[SuiteData], cells: Sequence[Cell]) -> list[str]:
    """The box at the top of the page (at most :data:`text.BOX_LINES` lines)."""
    runs = [r for c in cells for r in c.runs]
    device = devices(runs) or phrase("box.device_unknown")
    lines = [validated_line(cells), others_line(cells, data),
             phrase("box.device", device=device) if runs else None, not_yet_line(data)]
    return [line for line in lines if line] + [""]
