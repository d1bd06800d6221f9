"""The whole page: a title, the box of what is shown and what is not, the compact table of
every headline cell, the figures, the detail, the aggregate and the per-seed values, the method,
each suite in detail, and the sources."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tools.reproduce.page.checks import check_results
from tools.reproduce.page.data import SuiteData
from tools.reproduce.page.glance import box_lines, compact_table, glance_cells
from tools.reproduce.page.headline import (
    aggregate_lines,
    compared_updates,
    detail_lines,
    figure_lines,
    seed_head,
    seed_lines,
)
from tools.reproduce.page.method import method_lines
from tools.reproduce.page.readme import readme_lines
from tools.reproduce.page.runs import curves_read_once
from tools.reproduce.page.section import suite_section
from tools.reproduce.page.text import phrase
from tools.reproduce.page.verdicts import Tests
from tools.reproduce.references import PUBLISHED_DIR, SOURCES, published_data
from tools.reproduce.schema import Suite


def sources_lines(page_dir: Path) -> list[str]:
    """The sources, each with its notes and a link to its per-seed values where the page uses
    them."""
    lines = [phrase("sources.heading"), ""]
    for s in SOURCES.values():
        line = phrase("sources.item", key=s.key, text=s.text)
        try:
            record = published_data(s.key)
        except OSError:
            record = None
        if record:
            line += " " + phrase("sources.data", key=s.key, link=os.path.relpath(
                PUBLISHED_DIR / f"{s.key}.json", page_dir.resolve()))
        lines += [line, *("  " + phrase("sources.note", note=note) for note in s.notes)]
    return lines + [""]


def render_page(results: Path, page_dir: Path, suites: Sequence[Suite],
                leads: dict[str, str] | None = None) -> str:
    """The page's text from ``results`` for a page in ``page_dir`` (its links are relative to
    it): :func:`render`'s page."""
    return render(results, page_dir, suites, leads)[0]


def render(results: Path, page_dir: Path, suites: Sequence[Suite],
           leads: dict[str, str] | None = None, root: Path | None = None
           ) -> tuple[str, list[str]]:
    """The page's text from ``results`` for a page in ``page_dir`` (its links are relative to
    it): the box and compact table, the figures and detail, the per-seed values, the method,
    each suite in detail (``leads``: a suite's first sentence), the sources; and the README's
    results paragraph for a README in ``root`` (default: the page's parent folder's parent).
    Every run dir read is checked first (:func:`check_results`): a bad file raises
    :class:`BadResults` naming it, and nothing is written."""
    check_results(results, suites)
    with curves_read_once():
        tests = Tests()
        data = [SuiteData.read(s, results) for s in suites]
        lines: list[str] = []
        for _ in range(2):  # the first pass runs every test, Holm adjusts them, the second writes
            lines = page_lines(results, page_dir, data, tests, leads or {})
            tests.holm()
        readme = readme_lines(data, glance_cells(data, tests), root or page_dir.parent)
        return "\n".join(lines), readme


def page_lines(results: Path, page_dir: Path, data: list[SuiteData], tests: Tests,
               leads: dict[str, str]) -> list[str]:
    """One pass over the page: its lines, with the verdicts ``tests`` holds now (each test is run
    the first time it is met). The box and the compact table first, then the figures, the
    detail, the aggregate and the per-seed values, the method, each suite, the sources."""
    rels = {d.suite.name: Path(os.path.relpath(d.root, page_dir.resolve())) for d in data}
    rel_results = os.path.relpath(results, page_dir.resolve())
    cells = glance_cells(data, tests)
    lines = [phrase("title"), "", *box_lines(data, cells), *compact_table(cells),
             phrase("generated", results=rel_results), ""]
    figures = [line for d in data if d.suite.headline_steps and d.report is not None
               for line in figure_lines(d, rels[d.suite.name])]
    if figures:
        lines += [phrase("figure.heading"), "", *figures]
    lines += detail_lines(cells)
    aggregate = [line for d in data if d.report is not None
                 for line in aggregate_lines(d, rels[d.suite.name])]
    if aggregate:
        lines += [phrase("aggregate.heading"), "", *aggregate]
    seeds = [line for d in data if d.report is not None for line in seed_lines(d)]
    if seeds:
        lines += [phrase("per_seed.heading"), "", phrase("per_seed.intro"), "", *seed_head(),
                  *seeds, ""]
    lines += method_lines(tests, compared_updates(cells))
    shown: set[str] = set()
    for d in data:
        lines += suite_section(d, tests, rels[d.suite.name], leads.get(d.suite.name, ""), shown)
    return lines + sources_lines(page_dir)
