"""After the compact table: one figure per task, the detail of every headline cell against its
best published curve, the aggregate across tasks, and the per-seed values."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlzoo.analysis import stats
from tools.reproduce.files import REPORT_DIR, profile_figure, summary_steps
from tools.reproduce.page import text
from tools.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    aggregate_task_sets,
    has_aggregate,
)
from tools.reproduce.page.figures import published_figure
from tools.reproduce.page.glance import Cell, cell_text
from tools.reproduce.page.runs import WINDOW, fmt, kilo, updates_by
from tools.reproduce.page.text import phrase
from tools.reproduce.page.verdicts import ALPHA, iqm_text, pval, untested_text
from tools.reproduce.references import Reference


def detail_lines(cells: Sequence[Cell]) -> list[str]:
    """Every headline cell that has run, against the best published curve of its algorithm:
    rlzoo's IQM [CI], the curve's, P(rlzoo > published) [CI] and the test's p before and after
    Holm (the compact table's symbol first); the sections' tables give every other curve."""
    shown = [c for c in cells if c.runs]
    if not shown:
        return []
    marks = {key: "" for key in text.FOOTNOTES}
    lines = [phrase("detail.heading"), "", phrase("detail.intro", window=kilo(WINDOW)), "",
             phrase("detail.columns"), "|---|---|---:|---|---|---|---|"]
    for c in shown:
        ours = (f"{iqm_text(c.values)} ({len(c.values)})" if c.values
                else cell_text(c, marks))
        published = P = p = "—"
        if c.best is not None:
            ref, theirs, test = c.best
            published = published_cell(ref, theirs)
            if test is not None:
                point, lo, hi = test.poi
                P = f"{c.symbol()} {point:.2f} [{lo:.2f}, {hi:.2f}]"
                p = f"{pval(test.p)} ({pval(test.adjusted)})".replace("= ", "")
            else:
                P = untested_text(c.values or [], theirs)
        elif c.values:
            published = phrase("cell.no_reference")
        lines.append(f"| {c.task} | {c.row} | {kilo(c.steps)} | {ours} | {published} | {P} | "
                     f"{p} |")
    return lines + [""]


def published_cell(ref: Reference, theirs: Sequence[float]) -> str:
    """A published curve in a table cell: ``SAC (Tianshou): 1,030 [705, 1,200] (10)``, saying
    when it is another algorithm's."""
    return phrase("cell.published_yardstick" if ref.yardstick else "cell.published", algo=ref.algo,
                  iqm=iqm_text(theirs), n=len(theirs))


def compared_updates(cells: Sequence[Cell]) -> list[tuple[str, int, int | None, str]]:
    """The gradient updates of each published curve a verdict reads (the best, and any other
    that differs after Holm) against rlzoo's row, at the compared step: (curve, steps, rlzoo's,
    the curve's as the page writes it), for :func:`tools.reproduce.page.method.updates_line`."""
    out = []
    for c in cells:
        if c.test is None or not c.own:
            continue
        mine = updates_by(c.runs[0], c.steps)
        best = c.best[0]  # type: ignore[index]
        differ = [r for r, _, t in c.found if r is not best and not r.yardstick
                  and t is not None and t.adjusted < ALPHA]
        out += [(r.algo, c.steps, mine, r.updates(c.steps)) for r in (best, *differ)]
    return out


def figure_lines(data: SuiteData, rel: Path) -> list[str]:
    """One figure per task of the suite: its learning curves with the published curves where
    the report drew them, else its curves alone, else a line saying no cell has run."""
    lines: list[str] = []
    for task in data.suite.tasks:
        figure = (data.report or {}).get("figures", {}).get(task.name)
        published = published_figure(figure) if figure else ""
        budget = kilo(task.steps or data.suite.steps)
        if figure and (data.root / REPORT_DIR / published).is_file():
            lines += [phrase("figure.published", task=task.name, budget=budget,
                             path=rel / REPORT_DIR / published), ""]
        elif figure:
            lines += [phrase("figure.curves", task=task.name, budget=budget,
                             path=rel / REPORT_DIR / figure), ""]
        else:
            lines += [phrase("figure.none", task=task.name), ""]
    return lines


def aggregate_lines(data: SuiteData, rel: Path) -> list[str]:
    """The aggregate across tasks at each headline budget: IQM of normalized scores with a
    task-stratified bootstrap CI, and the performance profile's figure; none for a suite of one
    task (its headline table, in other units)."""
    if not has_aggregate(data.suite):
        return []
    lines = []
    for s in data.suite.all_budgets():
        for i, tasks in enumerate(aggregate_task_sets(data, s)):
            tasks, scores = aggregate_scores(data, s, tasks)
            if not scores:
                continue
            if not lines:
                lines += [phrase("aggregate.intro", window=kilo(WINDOW)), ""]
            lines += [phrase("aggregate.at", steps=kilo(s), tasks=", ".join(tasks)), "",
                      phrase("aggregate.columns"), "|---|---|---|"]
            for label, x in sorted(scores.items(), key=lambda kv: -stats.iqm(kv[1])):
                point, lo, hi = stats.stratified_bootstrap_ci(x)
                lines.append(f"| {label} | {x.shape[0]} x {x.shape[1]} | {point:.2f} "
                             f"[{lo:.2f}, {hi:.2f}] |")
            lines.append("")
            profile = profile_figure(s, tasks if i else None)
            if (data.root / REPORT_DIR / profile).is_file():
                lines += [phrase("figure.profile", steps=kilo(s), tasks=", ".join(tasks),
                                 path=rel / REPORT_DIR / profile), ""]
    return lines


def seed_head() -> list[str]:
    """The per-seed table's head (:func:`seed_lines` gives its rows)."""
    return [phrase("per_seed.columns"), "|---|---|---|---:|---|---|"]


def seed_lines(data: SuiteData) -> list[str]:
    """The per-seed table's rows of one suite: each cell's seeds at each of its task's headline
    budgets (or its final return where the suite has none): their evaluation there and their
    mean over the window the headline reads, seeds in order (:func:`seed_head`)."""
    suite = data.suite
    lines = []
    for task, row in suite.cells():
        runs = data.cell(task.name, row.label)
        if not runs:
            continue
        reached = min(summary_steps(d) or 0 for d in runs)
        seeds = [int(d.name.rsplit("-s", 1)[1]) for d in runs]
        which = phrase("per_seed.seed" if len(seeds) == 1 else "per_seed.seeds", seed=seeds[0],
                       first=min(seeds), last=max(seeds))
        for s in suite.budgets(task) or (suite.steps,):
            values = data.values_at(task.name, row.label, s)
            each = (", ".join(fmt(v) for v in values) if values
                    else phrase("cell.not_reached", steps=kilo(reached)))
            windows = data.windows(task.name, row.label, s) if suite.headline_steps else None
            means = ", ".join(fmt(v) for v in windows) if windows else "—"
            lines.append(f"| {task.name} | {row.label} ({which}) | `{suite.name}` | {kilo(s)} | "
                         f"{each} | {means} |")
    return lines
