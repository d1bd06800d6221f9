"""An rlzoo cell: one seed group (``seeds=K``) trained by ``python -m rlzoo.train`` in a
child process, skipped when finished, resumed from its newest checkpoint otherwise."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rlzoo.errors import UserError
from rlzoo.store import for_tools
from tools.reproduce.console import progress
from tools.reproduce.files import PROVENANCE_FILE, repo_relative, summary_steps
from tools.reproduce.plan import Outcome, Plan
from tools.reproduce.processes import STOP, child_env, log_tail, run_child
from tools.reproduce.provenance import append_record, launch_record
from tools.reproduce.schema import Row, SuiteTask


def group_steps(members: list[Path]) -> int | None:
    """The env steps a finished group made: the least ``total_steps`` of its members'
    summaries (an on-policy group's faster seeds may pass it by a few steps); None while a
    member has no summary."""
    steps = [summary_steps(d) for d in members]
    return None if any(s is None for s in steps) else min(steps)  # type: ignore[type-var]


def group_members(home: Path, seeds: int) -> list[Path] | str:
    """The run dirs of the rlzoo seed group whose home is ``home`` (``[home]`` for K = 1), or
    why they cannot be used (a one-line reason)."""
    try:
        dirs = for_tools.recorded_group_dirs(home)
    except UserError as err:
        return str(err)
    if dirs is None:
        if seeds == 1:
            return [home]
        return f"{home} holds a 1-seed run, not a {seeds}-seed group"
    if len(dirs) != seeds:
        return f"{home} holds a {len(dirs)}-seed group, not {seeds} (pass --seeds " \
               f"{len(dirs)} or another --out)"
    return dirs


def rlzoo_overrides(plan: Plan, task: SuiteTask, row: Row) -> list[str]:
    """The command line of a new rlzoo cell (without its run dir)."""
    s = plan.suite
    return [f"env={task.env}", *row.overrides, *s.overrides, f"total_steps={plan.budget(task)}",
            f"seed={plan.first_seed}", f"seeds={plan.seeds}", f"eval.every={s.eval_every}",
            f"eval.episodes={s.eval_episodes}", f"checkpoint.every={s.checkpoint_every}",
            f"checkpoint.keep={s.checkpoint_keep}", "log.progress=false"]


def remove_unstarted_dirs(dirs: list[Path]) -> None:
    """Remove the dirs of a group that never wrote a checkpoint or a summary (a crash before
    its first checkpoint), so the cell starts again; a dir a live rlzoo process holds is kept."""
    for d in dirs:
        if d.is_dir() and not for_tools.holds_a_run(d):
            for_tools.check_free(d)
            shutil.rmtree(d)


def unstarted_group(home: Path, seeds: int, first_seed: int = 0) -> list[Path]:
    """The dirs a group of ``seeds`` seeds from ``first_seed`` that never started may have
    left: ``home``, the members its group.json names and the default member names
    (``<row>-s<seed>``)."""
    dirs = [home, *(for_tools.member_dir(home, first_seed, seed)
                    for seed in range(first_seed + 1, first_seed + seeds))]
    try:
        named = for_tools.recorded_group_dirs(home) or []
    except UserError:
        named = []
    return list(dict.fromkeys([*dirs, *named]))


def live_trainer(home: Path, seeds: int, first_seed: int = 0) -> str:
    """Why the cell whose home is ``home`` cannot be run now: a live ``rlzoo.train`` holds one
    of its run dirs (a trainer an earlier reproduce.py left running when it was killed); ``""``
    when none does."""
    for d in unstarted_group(home, seeds, first_seed) if home.exists() else []:
        owner = for_tools.trainer_pid(d)
        if owner is not None:
            return (f"locked by a live trainer: rlzoo.train (pid {owner}) still runs in "
                    f"{repo_relative(str(d))}; wait for it to finish or stop it (kill {owner}), "
                    "then run the command again")
    return ""


def seed_suffix(plan: Plan) -> str:
    """What a cell's log and launch record add to the row's name when its seeds do not start
    at 0 (``-s5`` for ``--first-seed 5``), so another set of seeds never writes into them."""
    return f"-s{plan.first_seed}" if plan.first_seed else ""


def cell_provenance(plan: Plan, task: SuiteTask, row: Row) -> Path:
    """Where an rlzoo cell's launches are recorded (beside its log; exported with each seed)."""
    return plan.task_dir(task) / f"{row.label}{seed_suffix(plan)}.{PROVENANCE_FILE}"


def rlzoo_cell(plan: Plan, task: SuiteTask, row: Row) -> Outcome:
    """Skip, resume or start one rlzoo cell (the caller holds the cell's lock)."""
    steps = plan.budget(task)
    home = plan.home(task, row)
    log = plan.task_dir(task) / f"{row.label}{seed_suffix(plan)}.log"
    cmd = [sys.executable, "-m", "rlzoo.train"]
    what = "started"
    trainer = live_trainer(home, plan.seeds, plan.first_seed)
    if trainer:
        return Outcome(task.name, row.label, "locked", trainer)
    if home.exists():
        members = group_members(home, plan.seeds) if for_tools.holds_a_run(home) else [home]
        if isinstance(members, str):
            return Outcome(task.name, row.label, "skipped", members, mistake=True)
        reached = group_steps(members)
        if reached == steps:
            return Outcome(task.name, row.label, "finished", "already finished", members)
        if reached is not None and reached > steps:
            return Outcome(task.name, row.label, "skipped", f"holds a run of {reached} steps, "
                           f"more than {steps}; left as it is", mistake=True)
        if for_tools.holds_a_run(home):
            cmd += [f"resume={home}", f"total_steps={steps}", "log.progress=false"]
            what = "resumed"
        else:
            try:
                remove_unstarted_dirs(unstarted_group(home, plan.seeds, plan.first_seed))
            except UserError as err:
                return Outcome(task.name, row.label, "locked", str(err))
    if what == "started":
        cmd += [*rlzoo_overrides(plan, task, row), f"hydra.run.dir={home}"]
    seeds = f"{plan.seeds} seed" + ("s" if plan.seeds != 1 else "")
    progress(f"{task.name}/{row.label}: {what} ({seeds} to {steps} steps; log {log})")
    env = child_env()
    append_record(cell_provenance(plan, task, row), {"launch": what, **launch_record(env, cmd)})
    status = run_child(cmd, log, env)
    members = group_members(home, plan.seeds) if home.exists() else "no run dir"
    if isinstance(members, list) and group_steps(members) == steps:
        return Outcome(task.name, row.label, "finished", what, members)
    last = repo_relative(log_tail(log))
    if status == 2 and "in use by a running rlzoo process" in last:
        return Outcome(task.name, row.label, "locked", last)
    if STOP.signum or status == 0:
        # rlzoo.train exits 0 short of its budget only when a signal (to this script, or to the
        # trainer alone) stopped it after a checkpoint: resumable either way
        return Outcome(task.name, row.label, "unfinished", f"stopped ({last})")
    return Outcome(task.name, row.label, "failed", f"exit status {status}: {last}")
