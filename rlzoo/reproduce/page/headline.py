"""The top of the page: the headline table of every cell against the best published
reference, one figure per task, the aggregate across tasks, and the per-seed values."""

from __future__ import annotations

from pathlib import Path

from rlzoo.analysis import stats
from rlzoo.reproduce.files import REPORT_DIR, profile_figure, summary_steps
from rlzoo.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    aggregate_task_sets,
    best_reference,
    has_aggregate,
    reference_tests,
)
from rlzoo.reproduce.page.figures import published_figure
from rlzoo.reproduce.page.runs import WINDOW, fmt, kilo, updates_by
from rlzoo.reproduce.page.verdicts import (
    ALPHA,
    Test,
    Tests,
    iqm_ci,
    iqm_text,
    rank_test_power,
    untested_text,
)
from rlzoo.reproduce.references import REFERENCES
from rlzoo.reproduce.schema import Suite


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
    lines = [f"## Headline: {suite.title} ({suite.seeds} seeds a cell unless it says "
             "otherwise)", "", headline_intro(suite), ""]
    table = [head, rule]
    verdicts: dict[int, list[tuple[str, Test]]] = {s: [] for s in budgets}
    yardsticks: dict[int, list[tuple[str, Test]]] = {s: [] for s in budgets}  # other algos
    compared: list[tuple[str, int, int | None, str]] = []  # (source, steps, ours, theirs)
    counts: list[tuple[int, int]] = []  # each tested verdict's seeds: (rlzoo's, published)
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
            published = (f"{ref.algo}{', another algorithm' if ref.yardstick else ''}: "
                         f"{fmt(iqm_ci(theirs)[0])} ({len(theirs)})")
            if test is None:
                untested[s].append(f"{task.name} {row.label}")
                cells += [ours, published, untested_text(
                    data.windows(task.name, row.label, s) or [], theirs)]
                continue
            (yardsticks if ref.yardstick else verdicts)[s].append((f"{task.name} {row.label}",
                                                                   test))
            counts.append((len(values), len(theirs)))
            point, lo, hi = test.poi
            differ = [(r, t) for r, _, t in found
                      if r is not ref and t is not None and t.adjusted < ALPHA]
            others[s] += [f"{task.name} {row.label} {'above' if t.poi[0] > 0.5 else 'below'} "
                          f"{r.algo}" for r, t in differ]
            mine = updates_by(data.cell(task.name, row.label)[0], s)
            compared += [(r.algo, s, mine, r.updates(s)) for r in (ref, *(r for r, _ in differ))
                         if not r.yardstick]
            cells += [ours, published, f"{test.verdict()} (P = {point:.2f} [{lo:.2f}, "
                                       f"{hi:.2f}])"]
        table.append(f"| {task.name} | {row.label} | " + " | ".join(cells) + " |")
    lines += ["**Verdicts** (rows against the best published curve of their own algorithm; "
              "rows set against another algorithm's curve are counted apart):", "",
              *(f"- {verdict_summary(s, verdicts[s], untested[s])}{others_summary(s, others[s])}"
                f"{yardstick_summary(s, yardsticks[s])}" for s in budgets), "",
              *(power_lines(*max(set(counts), key=counts.count)) if counts else []),
              *updates_caveat(compared), *table]
    if never:
        lines += ["", "Not run yet, so not in the table: " + "; ".join(
            f"{task} {', '.join(rows)}" for task, rows in never.items()) + f" (the end of the "
            f"`{suite.name}` section gives each cell's state and why these did not run)."]
    lines.append("")
    lines += figure_lines(data, rel)
    lines += aggregate_lines(data, rel)
    return lines


def headline_intro(suite: Suite) -> str:
    """What the headline's cells read, and which rows are set against another algorithm's
    curve (those with no published curve of their own, :data:`REFERENCES`)."""
    budgets = suite.headline_steps
    first = (f"at {kilo(budgets[0])}: {kilo(budgets[0] - WINDOW)}-{kilo(budgets[0])}"
             if budgets else "the window")
    labels = [r.label for r in suite.rows]
    yard = [label for label in labels
            if any(ref.yardstick and label in ref.rows for ref in REFERENCES)
            and not any(not ref.yardstick and ref.data_algo and label in ref.rows
                        for ref in REFERENCES)]
    algos = sorted({ref.algo for ref in REFERENCES if ref.yardstick
                    and any(label in ref.rows for label in yard)})
    other = (f"; a row with no published curve of its own ({', '.join(f'`{r}`' for r in yard)}) "
             f"is set against {' and '.join(algos)}, another algorithm, marked `another "
             "algorithm`: a comparison, not a test of reproducing it" if yard else "")
    return (f"Each cell reads every seed's mean return over its evaluations in the last "
            f"{kilo(WINDOW)} env steps ({first}), rlzoo's and the published alike: rlzoo's IQM "
            "over seeds [95% CI]; of the published curves of the same algorithm, the one with "
            f"the highest IQM{other}; and the verdict, P(rlzoo > published) [95% CI] with a "
            "rank test after Holm's correction ([Method](#method)). `N seeds to Xk only`: a "
            "cell that stopped short of that budget; every seed's values are under "
            "[Per-seed returns](#per-seed-returns).")


def power_lines(ours: int, theirs: int) -> list[str]:
    """The power caveat beside the verdicts: what `no difference found` can mean with ``ours``
    seeds against a published curve's ``theirs`` (the most common counts among the verdicts;
    the method's simulation)."""
    one, more = (rank_test_power(ours, theirs, shift, ALPHA) for shift in (1.0, 1.75))
    return [f"With {ours} seeds against {theirs}, the rank test finds a true gap of one "
            f"standard deviation {one:.0%} of the time at p < {ALPHA:g} (1.75 standard "
            f"deviations: {more:.0%}): `no difference found` is not evidence of a match "
            "([Method](#method)).", ""]


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


def yardstick_summary(steps: int, found: list[tuple[str, Test]]) -> str:
    """The cells at ``steps`` set against another algorithm's curve (a comparison, not a
    reproduction), counted apart from the verdicts; empty without any."""
    if not found:
        return ""
    after = [f"{name} {'above' if t.poi[0] > 0.5 else 'below'}" for name, t in found
             if t.adjusted < ALPHA]
    cells = f"{len(found)} cell{'s' if len(found) != 1 else ''}"
    return (f" Against another algorithm's curve (no curve of their own), {cells} at "
            f"{kilo(steps)}: {len(after)} {'differs' if len(after) == 1 else 'differ'} after Holm"
            + (f" ({', '.join(after)})" if after else "") + ".")


def updates_caveat(compared: list[tuple[str, int, int | None, str]]) -> list[str]:
    """Whether each published curve in the verdicts had made fewer or more gradient updates
    than rlzoo's row by the compared step (its first appearance; the sections' `updates`
    columns give every one), or that its source does not say."""
    seen: dict[str, str] = {}
    for algo, steps, ours, theirs in compared:
        if algo in seen:
            continue
        count = theirs.lstrip("~").replace(",", "")
        if not count.isdigit():
            seen[algo] = f"{algo}: not stated by its source"
            continue
        if ours is None:  # a run dir without its config
            seen[algo] = f"{algo}: {theirs} at {kilo(steps)} (rlzoo's row: not known)"
            continue
        side = "more" if int(count) > ours else "fewer" if int(count) < ours else "as many"
        seen[algo] = f"{algo} {side} ({theirs} against {ours:,} at {kilo(steps)})"
    if not seen:
        return []
    return ["Gradient updates by the compared step, each published curve against rlzoo's row: "
            + "; ".join(seen.values()) + " (the sections' `updates` columns give every cell).",
            ""]


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
    task-stratified bootstrap CI, and the performance profile's figure; none for a suite of one
    task (its headline table, in other units)."""
    if not has_aggregate(data.suite):
        return []
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
                          "a further table over those, beside every row that has them; a row with "
                          "more seeds on one task than on another is scored over the seeds "
                          "every task has (seeds x tasks). A score "
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


def seed_lines(data: SuiteData, named: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """One line per cell with results: each seed's evaluation at each headline budget (or the
    final return where the suite has none) and its mean over the window the headline reads,
    seeds in order; a cell whose (task, row) is in ``named`` (another suite has it too) says its
    suite."""
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
        of = f"`{suite.name}`, " if (task.name, row.label) in named else ""
        lines.append(f"- {task.name} `{row.label}` ({of}{which}): " + "; ".join(parts))
    return lines
