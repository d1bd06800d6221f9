"""The top of the page: the headline table of every cell against the best published
reference, one figure per task, the aggregate across tasks, and the per-seed values."""

from __future__ import annotations

from pathlib import Path

from rlzoo.reproduce.files import REPORT_DIR, profile_figure, summary_steps
from rlzoo.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    aggregate_task_sets,
    best_reference,
    reference_tests,
)
from rlzoo.reproduce.page.figures import published_figure
from rlzoo.reproduce.page.runs import WINDOW, fmt, kilo
from rlzoo.reproduce.page.verdicts import ALPHA, Test, Tests, iqm_ci, iqm_text, untested_text


def headline_lines(data: SuiteData, tests: Tests, rel: Path) -> list[str]:
    """The headline of a suite: what it reads, the verdicts in short, every cell that has run
    at each headline budget against the best published reference (the rows with no result are
    named in one line under it), then one figure per task and the aggregate across tasks."""
    suite = data.suite
    budgets = suite.headline_steps
    head = "| task | row |"
    rule = "|---|---|"
    for s in budgets:
        span = f"{kilo(s - WINDOW)}-{kilo(s)}"
        head += (f" rlzoo, {span}: IQM [95% CI] | best published, {span}: IQM (seeds) | "
                 f"verdict at {kilo(s)} |")
        rule += "---|---|---|"
    first = (f"at {kilo(budgets[0])}: {kilo(budgets[0] - WINDOW)}-{kilo(budgets[0])}"
             if budgets else "the window")
    lines = [f"## Headline: {suite.title} ({suite.seeds} seeds a cell unless it says fewer)", "",
             f"Each cell reads every seed's mean return over its evaluations in the last "
             f"{kilo(WINDOW)} env steps ({first}), rlzoo's and the published alike: rlzoo's IQM "
             "over seeds [95% CI]; of the published curves of the same algorithm, the one with "
             "the highest IQM (the modern rows, `simbav2`, `stac` and `sac-categorical`, are set "
             "against CrossQ's from the SimbaV2 repo too, with SimbaV2's at UTD 2 the strongest "
             "curves published per seed at these budgets; `stac` and `sac-categorical` have no "
             "published curve of their own); and the verdict, P(rlzoo > published) [95% CI] "
             "with a rank test after Holm's correction ([Method](#method)). `N seeds to Xk "
             "only`: a cell that stopped short of that budget; every seed's values are under "
             "[Per-seed returns](#per-seed-returns).", ""]
    table = [head, rule]
    verdicts: dict[int, list[tuple[str, Test]]] = {s: [] for s in budgets}
    untested: dict[int, list[str]] = {s: [] for s in budgets}  # a reference, too few seeds
    others: dict[int, list[str]] = {s: [] for s in budgets}  # differ from a non-best reference
    never: dict[str, list[str]] = {}  # task -> rows with no result at any budget
    for task, row in suite.cells():
        if not data.cell(task.name, row.label):
            never.setdefault(task.name, []).append(f"`{row.label}`")
            continue
        cells = []
        for s in budgets:
            values = data.windows(task.name, row.label, s)  # None unless every seed reached s
            if not values:
                cells += [short_of(data.cell(task.name, row.label)), "—", "—"]
                continue
            ours = iqm_text(values) + (f" ({len(values)} seeds)"
                                       if 1 < len(values) != suite.seeds else "")
            found = reference_tests(data, tests, task.name, row.label, s)
            best = best_reference(found)
            if best is None:
                cells += [ours, "no reference", "—"]
                continue
            ref, theirs, test = best
            published = f"{ref.algo}: {fmt(iqm_ci(theirs)[0])} ({len(theirs)})"
            if test is None:
                untested[s].append(f"{task.name} {row.label}")
                cells += [ours, published, untested_text(
                    data.windows(task.name, row.label, s) or [], theirs)]
                continue
            verdicts[s].append((f"{task.name} {row.label}", test))
            point, lo, hi = test.poi
            others[s] += [f"{task.name} {row.label} {'above' if t.poi[0] > 0.5 else 'below'} "
                          f"{r.algo}" for r, _, t in found
                          if r is not ref and t is not None and t.adjusted < ALPHA]
            cells += [ours, published, f"{test.verdict()} (P = {point:.2f} [{lo:.2f}, "
                                       f"{hi:.2f}])"]
        table.append(f"| {task.name} | {row.label} | " + " | ".join(cells) + " |")
    caveat = (["Other published curves may have made fewer gradient updates by their step than "
               "rlzoo (the sections' `updates` columns).", ""] if any(others.values()) else [])
    lines += ["**In short:**", "",
              *(f"- {verdict_summary(s, verdicts[s], untested[s])}{others_summary(s, others[s])}"
                for s in budgets), "", *caveat, *table]
    if never:
        lines += ["", "Not run yet, so not in the table: " + "; ".join(
            f"{task} {', '.join(rows)}" for task, rows in never.items()) + f" (the end of the "
            f"`{suite.name}` section gives each cell's state and why these did not run)."]
    lines.append("")
    lines += figure_lines(data, rel)
    lines += aggregate_lines(data, rel)
    return lines


def figure_lines(data: SuiteData, rel: Path) -> list[str]:
    """One figure per task of the suite: its learning curves with the published curves where
    the report drew them, else its curves alone, else a line saying no cell has run."""
    lines: list[str] = []
    for task in data.suite.tasks:
        figure = (data.report or {}).get("figures", {}).get(task.name)
        published = published_figure(figure) if figure else ""
        if figure and (data.root / REPORT_DIR / published).is_file():
            lines += [f"![{task.name}: learning curves and published curves]"
                      f"({rel / REPORT_DIR / published})", ""]
        elif figure:
            lines += [f"![{task.name}: learning curves]({rel / REPORT_DIR / figure})", ""]
        else:
            lines += [f"{task.name}: no figure yet (no cell of this task has run).", ""]
    return lines


def short_of(runs: list[Path]) -> str:
    """The headline's cell for a budget no seed reached: ``not run yet``, or how far the cell's
    seeds got (``1 seed to 30k only``), read from their summaries."""
    reached = [summary_steps(d) for d in runs]
    if not runs or None in reached:
        return "not run yet"
    seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
    return f"{seeds} to {kilo(min(reached))} only"


def others_summary(steps: int, found: list[str]) -> str:
    """The comparisons at ``steps`` with published curves other than the best one that differ
    after Holm (the sections' tables), by name; empty without any."""
    if not found:
        return ""
    n = f"{len(found)} comparison{'s' if len(found) != 1 else ''}"
    return (f" Against the other published curves of these cells at {kilo(steps)}, {n} "
            f"{'differ' if len(found) != 1 else 'differs'} after Holm: {', '.join(found)}.")


def verdict_summary(steps: int, found: list[tuple[str, Test]],
                    untested: list[str] | None = None) -> str:
    """One sentence on the headline's verdicts at ``steps``: how many cells have a reference,
    how many differ after Holm, and which differ only before it; then the cells with a
    reference but too few seeds to test (``untested``), by name."""
    if not untested:
        return _tested_summary(steps, found)
    cells = f"{len(untested)} {'cells' if len(untested) != 1 else 'cell'}"
    few = (f"({', '.join(untested)}) {'have' if len(untested) != 1 else 'has'} a reference but "
           "too few seeds to test.")
    if not found:
        return f"At {kilo(steps)}, {cells} {few}"
    more = cells.replace(" ", " more ", 1)
    return f"{_tested_summary(steps, found)} {more} at {kilo(steps)} {few}"


def _tested_summary(steps: int, found: list[tuple[str, Test]]) -> str:
    if not found:
        return f"At {kilo(steps)}, no cell with a published reference has run yet."
    after = [(name, t) for name, t in found if t.adjusted < ALPHA]
    before = [(name, t) for name, t in found if t.p < ALPHA <= t.adjusted]
    def names(items: list[tuple[str, Test]]) -> str:
        return ", ".join(f"{name} {'above' if t.poi[0] > 0.5 else 'below'}" for name, t in items)
    cells = f"{len(found)} cells have" if len(found) != 1 else "1 cell has"
    rest = len(found) - len(after) - len(before)
    if rest == len(found):
        none = "it shows no difference" if rest == 1 else "none shows a difference"
        return (f"At {kilo(steps)}, {cells} a published reference; {none} from the best one, "
                "before or after Holm.")
    differ = "differs" if len(after) == 1 else "differ"
    text = (f"At {kilo(steps)}, {cells} a published reference; "
            f"{len(after)} {differ} from the best one after Holm"
            + (f" ({names(after)})" if after else ""))
    if before:
        text += f", {len(before)} more only before it ({names(before)})"
    if not rest:
        return text + "."
    return text + f"; the other {rest} {'shows' if rest == 1 else 'show'} no difference."


def aggregate_lines(data: SuiteData, rel: Path) -> list[str]:
    """The aggregate across tasks at each headline budget: IQM of normalized scores with a
    task-stratified bootstrap CI, and the performance profile's figure."""
    from rlzoo.analysis import stats

    low, high = ("their mean evaluation at step 0 (the untrained policy)",
                 "their mean at 1M env steps")
    lines = []
    for s in data.suite.headline_steps:
        for i, tasks in enumerate(aggregate_task_sets(data, s)):
            tasks, scores = aggregate_scores(data, s, tasks)
            if not scores:
                continue
            if not lines:
                lines += [f"**Across tasks** (as rliable does): each seed's mean over its "
                          f"{kilo(WINDOW)} window, normalized per task by the TD3 paper's 10 "
                          f"seeds: 0 = {low}, 1 = {high}; IQM over every task's seeds pooled, "
                          "95% CI by a task-stratified bootstrap (each task's seeds resampled on "
                          "their own, 2,000 resamples); published rows are capitalized. Each "
                          "table pools the tasks that all its rows have run: the first, every "
                          "task, with the rows run on all of them; a row run on fewer tasks gets "
                          "a further table over those, beside every row that has them. A score "
                          "depends on the tasks pooled (they differ in how far 50k or 100k steps "
                          "get), so compare rows within one table only.", ""]
            lines += [f"At {kilo(s)} ({', '.join(tasks)}):", "",
                      "| row | seeds x tasks | IQM normalized score [95% CI] |", "|---|---|---|"]
            for label, x in sorted(scores.items(), key=lambda kv: -stats.iqm(kv[1])):
                point, lo, hi = stats.stratified_bootstrap_ci(x)
                lines.append(f"| {label} | {x.shape[0]} x {x.shape[1]} | {point:.2f} "
                             f"[{lo:.2f}, {hi:.2f}] |")
            lines.append("")
            profile = profile_figure(s, tasks if i else None)
            if (data.root / REPORT_DIR / profile).is_file():
                lines += [f"![Performance profile at {kilo(s)} ({', '.join(tasks)})]"
                          f"({rel / REPORT_DIR / profile})", ""]
    return lines


def seed_lines(data: SuiteData) -> list[str]:
    """One line per cell with results: each seed's evaluation at each headline budget (or the
    final return where the suite has none) and its mean over the window the headline reads,
    seeds in order."""
    suite = data.suite
    lines = []
    for task, row in suite.cells():
        runs = data.cell(task.name, row.label)
        if not runs:
            continue
        parts = []
        reached = min(summary_steps(d) or 0 for d in runs)
        for s in suite.headline_steps or (suite.steps,):
            values = data.values_at(task.name, row.label, s)
            if not values:
                parts.append(f"{kilo(s)}: " + (f"not reached ({kilo(reached)} only)"
                                               if reached > 0 else "not run yet"))
                continue
            text = f"{kilo(s)}: " + ", ".join(fmt(v) for v in values)
            windows = data.windows(task.name, row.label, s) if suite.headline_steps else None
            if windows:
                text += (f" (means over {kilo(s - WINDOW)}-{kilo(s)}: "
                         + ", ".join(fmt(v) for v in windows) + ")")
            parts.append(text)
        seeds = [int(d.name.rsplit("-s", 1)[1]) for d in runs]
        which = (f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {min(seeds)}-{max(seeds)}")
        lines.append(f"- {task.name} `{row.label}` ({which}): " + "; ".join(parts))
    return lines
