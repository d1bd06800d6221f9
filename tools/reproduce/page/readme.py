"""The README's results paragraph, generated with the page from the same cells: what is validated
(the box's first line, summed up), the README's own first command's cell (:data:`README_CELL`:
SAC on Humanoid) with its learning-curve figure once it has run, and what is not there yet. The
report step writes it between :data:`START` and :data:`END` in the checkout's README.md
(:func:`replace_block`); tests/test_page_limits.py checks it is fresh, at most
:data:`README_WORDS` words, and that every file it links exists."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tools.reproduce.files import REPORT_DIR
from tools.reproduce.page.data import SuiteData
from tools.reproduce.page.figures import published_figure
from tools.reproduce.page.glance import Cell, by_row, side
from tools.reproduce.page.runs import fmt, kilo
from tools.reproduce.page.text import joined, phrase
from tools.reproduce.page.verdicts import ALPHA, iqm_ci, rank_test_power

START = ("<!-- results: written by `python -m tools.reproduce SUITE --report-only` from results/; "
         "do not edit -->")
END = "<!-- end of results -->"
README_WORDS = 150
README_CELL = ("long", "Humanoid", "sac")  # the README's first command's cell: suite, task, row
PAGE = "docs/results.md"

FEW = 3  # the cells that differ, named in the paragraph up to this many (the page names all)


def readme_lines(data: Sequence[SuiteData], cells: Sequence[Cell], root: Path) -> list[str]:
    """The README's results paragraph (links relative to the checkout ``root``): what is
    validated, the README's cell (its figure when drawn), and what is not run yet."""
    tested = [c for c in cells if c.test is not None and c.own]
    lines = []
    if tested:
        differ = [c for c in tested if c.test is not None and c.test.adjusted < ALPHA]
        which = by_row([(c.row, side(c.test), c.task, c.steps) for c in differ if c.test]) \
            if len(differ) <= FEW else phrase("readme.named_on_page")
        verdicts = phrase("readme.one_differs" if len(differ) == 1 else "readme.differ",
                          k=len(differ), which=which) if differ \
            else phrase("readme.level")
        seeds = sorted({len(c.values or []) for c in tested})
        lines.append(phrase("readme.validated",
            page=PAGE, n=len(tested),
            rows=joined([phrase("list.row", row=r) for r in dict.fromkeys(c.row for c in tested)]),
            tasks=joined(list(dict.fromkeys(c.task for c in tested))),
            budgets=joined([kilo(s) for s in sorted({c.steps for c in tested})]),
            seeds=f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}",
            verdicts=verdicts, power=f"{rank_test_power(5, 10, 1.0, ALPHA):.0%}"))
    lines += cell_lines(data, cells, root)
    return [*lines, phrase("readme.not_yet")]


def cell_lines(data: Sequence[SuiteData], cells: Sequence[Cell], root: Path) -> list[str]:
    """The README's cell (:data:`README_CELL`): not run yet and why, or its IQM at each budget
    against the best published curve, then its figure where the report drew it."""
    suite_name, task, row = README_CELL
    mine = [c for c in cells if (c.suite.name, c.task, c.row) == README_CELL]
    d = next((d for d in data if d.suite.name == suite_name), None)
    if not mine or d is None:
        return []
    done = [c for c in mine if c.values]
    if not done:
        spec = next(t for t in d.suite.tasks if t.name == task)
        why = d.status.get(f"{task}/{row}") or spec.not_run or d.suite.not_run
        return [phrase("readme.pending", row=row, task=task, seeds=d.suite.seeds,
                       steps=kilo(max(c.steps for c in mine)), why=why)]
    last = done[-1]
    values = joined([phrase("readme.at", value=fmt(iqm_ci(c.values)[0]), steps=kilo(c.steps))
                     for c in done if c.values])
    algo = theirs = verdict = "—"
    if last.best is not None:
        ref, published, test = last.best
        algo = ref.algo
        theirs = phrase("readme.at", value=fmt(iqm_ci(published)[0]), steps=kilo(last.steps))
        verdict = test.verdict() if test is not None else phrase("readme.untested")
    lines = [phrase("readme.ran", row=row, task=task, n=len(last.values or []),
                    seeds=d.suite.seeds, values=values, algo=algo, theirs=theirs, verdict=verdict)]
    figure = (d.report or {}).get("figures", {}).get(task)
    if figure and (d.root / REPORT_DIR / published_figure(figure)).is_file():
        path = os.path.relpath(d.root / REPORT_DIR / published_figure(figure), root.resolve())
        lines.append(phrase("readme.figure", task=task, row=row, path=path))
    return lines


def replace_block(readme: str, block: Sequence[str]) -> str:
    """``readme`` with the text between :data:`START` and :data:`END` replaced by ``block``
    (one paragraph, a figure on its own line after it); unchanged without the markers."""
    if START not in readme or END not in readme:
        return readme
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    prose = [line for line in block if not line.startswith("![")]
    figures = [line for line in block if line.startswith("![")]
    body = " ".join(prose) + ("\n\n" + "\n\n".join(figures) if figures else "")
    return f"{head}{START}\n{body}\n{END}{tail}"
