"""One suite in detail: its command and budget, its rows, per task the final-return table, the
published comparisons, the rows against each other and the notes, then the cells' status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.reproduce.files import REPORT_DIR, repo_relative, summary_steps
from tools.reproduce.page.data import SuiteData, pair_tests, reference_tests
from tools.reproduce.page.findings import finding_lines
from tools.reproduce.page.floors import MULTI_AGENT_PREFIXES, scale_lines
from tools.reproduce.page.headline import published_cell
from tools.reproduce.page.runs import (
    WINDOW,
    cell_wall_time,
    first_columns,
    fmt,
    kilo,
    machine,
    row_names,
    run_rows,
    updates_by,
)
from tools.reproduce.page.text import phrase, seeds_text
from tools.reproduce.page.verdicts import Tests, iqm_text, untested_text
from tools.reproduce.references import UNPUBLISHED
from tools.reproduce.schema import Suite


def status_lines(data: SuiteData) -> list[str]:
    """Every cell's state and, for a finished one, its wall time on the machine it ran on; the
    reason a cell has not run is said once, below the table."""
    suite = data.suite
    # (the row up to its wall time, (hours, how measured) or None, the cell's machine or None)
    rows: list[tuple[str, tuple[float, str] | None, str | None]] = []
    reasons = []
    for task, row in suite.cells():
        runs = data.cell(task.name, row.label)
        budget = task.steps or suite.steps
        if runs:
            steps = sorted({summary_steps(d) or 0 for d in runs})
            seeds = seeds_text(len(runs)) if len(runs) >= suite.seeds else phrase(
                "status.seeds_of", seeds=seeds_text(len(runs)), k=suite.seeds)
            state = phrase("status.ran_short" if max(steps) < budget else "status.ran", seeds=seeds,
                           steps=", ".join(f"{s:,}" for s in steps), budget=budget)
            wall = cell_wall_time(runs)
            where = machine(runs) or "?"
        else:
            note = data.status.get(f"{task.name}/{row.label}") or task.not_run or suite.not_run
            if note not in reasons:
                reasons.append(note)
            state = phrase("status.not_run", mark=chr(ord("a") + reasons.index(note)))
            wall, where = None, None
        rows.append((f"| {task.name} | {row.label} | {state} |", wall, where))
    machines = sorted({where for _, _, where in rows if where})
    each = len(machines) > 1  # then each cell says which machine its last launch ran on
    head = phrase("status.intro_each") if each else phrase(
        "status.intro", machine=machines[0] if machines else "—")
    table = [f"{row} " + phrase("status.wall_where" if each else "status.wall", hours=wall[0],
                                how=wall[1], where=where) + " |" if wall
             else f"{row} — |" for row, wall, where in rows]
    lines = [head, "", phrase("status.columns"), "|---|---|---|---|", *table, ""]
    lines += [phrase("status.reason", mark=chr(ord("a") + i), reason=reason)
              for i, reason in enumerate(reasons)]
    return lines + ([""] if reasons else [])


def row_notes(suite: Suite, shown: set[str]) -> list[str]:
    """The suite's row notes, one bullet each, but those an earlier section of the page gave
    (``shown``, which gets these)."""
    notes = [phrase("rows.note", row=r.label, note=r.note) for r in suite.rows if r.note]
    peers = [r for r in suite.rows if r.peer]
    if peers:
        labels = ", ".join(phrase("list.row", row=r.label) for r in peers)
        notes.append(phrase("rows.peer", rows=labels,
                            algos=" and ".join(str(r.peer).upper() for r in peers)))
    fresh = [n for n in notes if n not in shown]
    shown.update(notes)
    if not notes:
        return []
    if not fresh:
        return [phrase("rows.seen"), ""]
    return [phrase("rows.some_seen" if len(fresh) < len(notes) else "rows.intro"), "",
            *(f"- {n}" for n in fresh), ""]


def final_table(data: SuiteData, env: str, groups: dict[str, Any], brief: bool = False
                ) -> list[str]:
    """One task's final-return table (rlzoo.compare's report); ``brief``: its columns were
    explained for an earlier task of the suite, so the table's intro says only what it is. A
    suite with headline budgets gives each cell one IQM with its CI, the headline's (over the
    last window), so this table gives the final returns' mean ± std only; a suite without them
    gives the final returns' IQM [95% CI] here."""
    rows = data.runs.get(env, {})
    headline = bool(data.suite.headline_steps)
    intro = phrase("final.again") if brief else phrase(
        "final.intro", what=phrase("final.what_headline" if headline else "final.what_iqm",
                                   window=kilo(WINDOW)),
        first_eval=data.suite.first_eval)
    lines = [intro, "", phrase("final.columns" if headline else "final.columns_iqm"),
             f"|---|---:|---:|{'' if headline else '---|'}---|---|---:|"]
    for label, g in groups.items():
        steps = ", ".join(f"{s:,}" for s in sorted({int(s) for s in g["total_steps"] if s}))
        lo, hi = g["iqm_ci"]
        names = row_names(g["runs"])
        row = ", ".join(names) + ("" if names == [label] else f" (`{label}`)")
        first, better = first_columns([d for name in names for d in rows.get(name, [])])
        iqm = (f"{fmt(g['iqm'])} [{fmt(lo)}, {fmt(hi)}]" if g["n_runs"] > 1
               else phrase("cell.one_seed", value=fmt(g["iqm"])))
        lines.append(f"| {row} | {g['n_runs']} | {steps} |{'' if headline else f' {iqm} |'} "
                     f"{fmt(g['mean'])} ± {fmt(g['std'])} | {first} | {better} |")
    return lines + [""]


def reference_table(data: SuiteData, tests: Tests, env: str, brief: bool = False
                    ) -> list[str]:
    """One task's cells against every published curve of their algorithm, at each of the
    task's headline budgets; ``brief``: the columns were explained for an earlier task."""
    shown = []
    task = next((t for t in data.suite.tasks if t.name == env), None)
    for s in data.suite.budgets(task) if task is not None else ():
        for row in data.suite.rows:
            for ref, theirs, test in reference_tests(data, tests, env, row.label, s):
                ours = data.windows(env, row.label, s) or []
                runs = data.cell(env, row.label)
                mine = updates_by(runs[0], s)
                verdict = test.cells() if test else f"— | {untested_text(ours, theirs)}"
                count = "" if len(ours) == 1 else f" ({len(ours)})"  # "(1 seed)" says it
                shown.append(f"| {kilo(s)} | {row.label} | {iqm_text(ours)}{count} | "
                             f"{published_cell(ref, theirs)} | `{ref.source}` "
                             f"| {'?' if mine is None else f'{mine:,}'} / {ref.updates(s)} | "
                             f"{verdict} |")
    if not shown:
        return []
    return [phrase("reference.again") if brief else phrase("reference.intro", window=kilo(WINDOW)),
            "", phrase("reference.columns"), "|---:|---|---|---|---|---:|---|---|", *shown, ""]


def pair_lines(data: SuiteData, tests: Tests, env: str) -> list[str]:
    """The tables setting one task's rows against each other (:func:`pair_tests`)."""
    found = pair_tests(data, tests, env)
    lines = []
    for kind, intro, names in (("peer", "pairs.peer", "pairs.peer_columns"),
                               ("against", "pairs.against", "pairs.against_columns")):
        shown = [f"| {a} | {b} | {final.cells() if final else '— | —'} | "
                 f"{curve.cells() if curve else '— | —'} |"
                 for k, a, b, final, curve in found if k == kind]
        if shown:
            lines += [phrase(intro), "", phrase(names), "|---|---|---|---|---|---|", *shown, ""]
    return lines


def suite_section(data: SuiteData, tests: Tests, rel: Path, lead: str = "",
                  shown: set[str] | None = None) -> list[str]:
    """The detail of one suite: its command and budget, its rows, per task the final-return
    table, the published comparisons, the rows against each other and the notes, then the
    cells' status."""
    suite = data.suite
    here = repo_relative(str(data.root.resolve()))
    raw = phrase("suite.raw" if data.root.is_dir() else "suite.raw_none", folder=here, link=rel)
    lines = [phrase("suite.heading", name=suite.name, title=suite.title), ""]
    if lead:
        lines += [lead, ""]
    lines += [phrase("suite.command", name=suite.name, seeds=suite.seeds, why=suite.why,
                     episodes=suite.eval_episodes, every=suite.eval_every, raw=raw), ""]
    if suite.overrides:
        lines += [phrase("suite.overrides", overrides=" ".join(suite.overrides)), ""]
    lines += row_notes(suite, set() if shown is None else shown)
    if data.report is None:
        lines += [phrase("suite.not_run", why=suite.not_run) if data.status
                  else phrase("suite.not_run_why", why=suite.not_run), ""]
        return lines + (status_lines(data) if data.status else [])
    order = [t.name for t in suite.tasks]
    tasks = sorted(data.report["results"].items(),
                   key=lambda item: (order.index(item[0]) if item[0] in order else len(order),
                                     item[0]))
    first = tasks[0][0] if tasks else None  # the first task's section explains the columns
    scale_line_shown = False  # the scale sentence's method is said at its first task only
    references_shown = False  # the published curves' table is explained at its first task
    for env, groups in tasks:
        brief = env != first
        lines += [phrase("suite.task_heading", task=env), ""]
        lines += final_table(data, env, groups, brief)
        figure = data.report.get("figures", {}).get(env)
        if figure and not suite.headline_steps:
            lines += [phrase("figure.suite", task=env, path=rel / REPORT_DIR / figure), ""]
        published = reference_table(data, tests, env, references_shown)
        references_shown = references_shown or bool(published)
        lines += published
        lines += pair_lines(data, tests, env)
        scale = scale_lines(suite, env, data.root, data.runs.get(env), brief=scale_line_shown)
        scale_line_shown = scale_line_shown or bool(scale)
        for paragraph in scale:
            lines += [paragraph, ""]
        rows = data.runs.get(env) or run_rows(data.root / env)
        notes = [UNPUBLISHED[key] for label in rows for key in (label, f"{env}/{label}")
                 if key in UNPUBLISHED]
        notes += [UNPUBLISHED[prefix] for prefix in MULTI_AGENT_PREFIXES
                  if prefix in UNPUBLISHED and env.startswith(prefix)]
        if notes:
            lines += [" ".join(notes), ""]
        for finding in finding_lines(data, tests, env, list(rows)):  # a paragraph each
            lines += [finding, ""]
    return lines + status_lines(data)
