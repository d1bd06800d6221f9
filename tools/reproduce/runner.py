"""The runner: each cell of a plan under its lock, in order, until done or stopped; which cells
are finished; and, at report time, what a cell reported locked has become."""

from __future__ import annotations

from pathlib import Path

from tools.reproduce.console import progress
from tools.reproduce.files import CELL_LOCK_SUFFIX, summary_steps
from tools.reproduce.peer_cells import sb3_cell
from tools.reproduce.plan import Outcome, Plan
from tools.reproduce.processes import STOP, FileLock
from tools.reproduce.rlzoo_cells import group_members, group_steps, live_trainer, rlzoo_cell
from tools.reproduce.schema import Row, SuiteTask


def run_cells(plan: Plan, cells: list[tuple[SuiteTask, Row]]) -> list[Outcome]:
    """Run ``cells`` one after the other (SB3 rows not under ``--no-sb3``), each under its lock,
    until done or a signal (:data:`STOP`, installed here) stops them; each cell's outcome, one
    line each as it ends."""
    STOP.install()
    outcomes = []
    for i, (task, row) in enumerate(cells, start=1):
        if row.peer and plan.sb3 == "--no-sb3":
            continue
        if STOP.signum:
            break
        outcome = run_cell(plan, task, row)
        outcomes.append(outcome)
        progress(f"[{i}/{len(cells)}] {task.name}/{row.label}: {outcome.state}"
            + (f" ({outcome.note})" if outcome.note else ""))
    return outcomes


def run_cell(plan: Plan, task: SuiteTask, row: Row) -> Outcome:
    """One cell under its lock; a cell another process holds is reported and skipped."""
    lock = cell_lock(plan, task, row)
    if not lock.acquire():
        return Outcome(task.name, row.label, "locked",
                       f"another reproduce.py (pid {lock.owner}) is running this cell")
    try:
        return sb3_cell(plan, task, row) if row.peer else rlzoo_cell(plan, task, row)
    finally:
        lock.release()


def cell_lock(plan: Plan, task: SuiteTask, row: Row) -> FileLock:
    """The lock of one cell, ``OUT/<suite>/<task>/.<row>.lock`` (held while a cell runs)."""
    return FileLock(plan.task_dir(task) / f".{row.label}{CELL_LOCK_SUFFIX}")


def finished_dirs(plan: Plan, task: SuiteTask, row: Row) -> list[Path] | None:
    """The seeds' run dirs of a cell that is finished at its budget, else None."""
    steps = plan.budget(task)
    folder = plan.task_dir(task)
    if row.peer:
        dirs = [folder / f"{row.label}-s{seed}" for seed in plan.seed_range()]
    else:
        home = plan.home(task, row)
        if not (home / "summary.json").is_file():
            return None
        members = group_members(home, plan.seeds)
        if isinstance(members, str):
            return None
        return members if group_steps(members) == steps else None
    return dirs if all(summary_steps(d) == steps for d in dirs) else None


def still_locked(plan: Plan, outcome: Outcome) -> str | None:
    """At report time, the state a cell reported ``locked`` earlier has now: ``None`` once it
    is finished; its note while another reproduce.py or a trainer still holds it; else
    ``unfinished``, as the holder has exited since (status.json never names a dead pid)."""
    cell = next(((t, r) for t, r in plan.suite.cells()
                 if t.name == outcome.task and r.label == outcome.row), None)
    if cell is None:
        return f"locked: {outcome.note}"
    task, row = cell
    if finished_dirs(plan, task, row) is not None:
        return None
    lock = cell_lock(plan, task, row)
    if not lock.acquire():
        return f"locked: another reproduce.py (pid {lock.owner}) is running this cell"
    lock.release()
    trainer = "" if row.peer else live_trainer(plan.home(task, row), plan.seeds,
                                                plan.first_seed)
    if trainer:
        return f"locked: {trainer}"
    return ("unfinished: it was locked by another process, which has exited since; run the "
            "command again to continue it")
