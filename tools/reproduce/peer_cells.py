"""A Stable-Baselines3 cell: K worker processes (``python -m tools.reproduce --sb3-worker``,
:func:`tools.reproduce.peer.sb3_worker`), one per seed, at most one per core at a time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from tools.reproduce.console import progress
from tools.reproduce.files import CHECKOUT, PARTIAL_SUFFIX, summary_steps
from tools.reproduce.plan import Outcome, Plan
from tools.reproduce.processes import STOP, child_env, log_tail
from tools.reproduce.schema import Row, SuiteTask


def sb3_missing() -> str | None:
    """None when ``import stable_baselines3`` works here, else why not (one line)."""
    try:
        import stable_baselines3  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure means: no peer
        return f"{type(err).__name__}: {err}".splitlines()[0]
    return None


def sb3_cell(plan: Plan, task: SuiteTask, row: Row) -> Outcome:
    """Skip the finished seeds of an SB3 cell and train the others, at most one worker process
    per core at a time (the caller holds the cell's lock)."""
    steps = plan.budget(task)
    folder = plan.task_dir(task)
    dirs = [folder / f"{row.label}-s{seed}" for seed in plan.seed_range()]
    if plan.sb3 is not None:
        return Outcome(task.name, row.label, "skipped", f"stable_baselines3 is not importable "
                       f"({plan.sb3})")
    todo = [seed for seed, d in zip(plan.seed_range(), dirs) if summary_steps(d) != steps]
    if any((summary_steps(d) or 0) > steps for d in dirs):
        return Outcome(task.name, row.label, "skipped",
                       f"holds runs of more than {steps} steps; left as they are", mistake=True)
    if not todo:
        return Outcome(task.name, row.label, "finished", "already finished", dirs)
    jobs = max(1, min(len(todo), os.cpu_count() or 1))
    progress(f"{task.name}/{row.label}: seeds {', '.join(map(str, todo))} of Stable-Baselines3 "
        f"{row.peer} to {steps} steps, {jobs} at a time (logs {folder / row.label}-s<seed>.log)")
    failures = run_workers(plan, task, row, todo, jobs)
    if all(summary_steps(d) == steps for d in dirs):
        return Outcome(task.name, row.label, "finished", "trained", dirs)
    if failures:
        return Outcome(task.name, row.label, "failed", "; ".join(failures))
    return Outcome(task.name, row.label, "unfinished", "stopped (finished seeds are kept)")


def start_worker(plan: Plan, task: SuiteTask, row: Row, seed: int) -> tuple[subprocess.Popen[bytes],
                                                                         Any]:
    """Start the worker of one seed (into ``.<row>-s<seed>.partial``, renamed into place when it
    has finished) and forward signals to it; returns the process and its open log."""
    folder = plan.task_dir(task)
    partial = folder / f".{row.label}-s{seed}{PARTIAL_SUFFIX}"
    shutil.rmtree(partial, ignore_errors=True)  # a seed stopped earlier starts again
    spec = {"suite": plan.suite.name, "task": task.name, "row": row.label, "seed": seed,
            "steps": plan.budget(task), "partial": str(partial),
            "final": str(folder / f"{row.label}-s{seed}")}
    out = open(folder / f"{row.label}-s{seed}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.reproduce", "--sb3-worker", json.dumps(spec)],
        cwd=CHECKOUT, env=child_env(threads=1), stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True)
    STOP.children.add(proc)
    return proc, out


def run_workers(plan: Plan, task: SuiteTask, row: Row, todo: list[int], jobs: int) -> list[str]:
    """Train the seeds ``todo``, ``jobs`` workers at a time, until done or stopped by a signal;
    returns one line per seed whose worker failed."""
    folder = plan.task_dir(task)
    running: list[tuple[int, subprocess.Popen[bytes], Any]] = []
    failures: list[str] = []
    queue = list(todo)
    folder.mkdir(parents=True, exist_ok=True)
    while (queue or running) and not STOP.signum:
        while queue and len(running) < jobs and not STOP.signum:
            seed = queue.pop(0)
            running.append((seed, *start_worker(plan, task, row, seed)))
        time.sleep(0.2)
        for item in list(running):
            seed, proc, out = item
            if proc.poll() is None:
                continue
            running.remove(item)
            STOP.children.discard(proc)
            out.close()
            if proc.returncode != 0 and not STOP.signum:
                failures.append(f"seed {seed}: exit status {proc.returncode}: "
                                f"{log_tail(folder / f'{row.label}-s{seed}.log')}")
    for _, proc, out in running:  # stopped: wait for the children the signal reached
        proc.wait()
        STOP.children.discard(proc)
        out.close()
    return failures
