"""The report step: export every finished cell to ``RESULTS/<suite>/``, record the cells' status,
run rlzoo.compare, draw the page's figures and rewrite the page."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlzoo.analysis import compare, find_runs
from rlzoo.analysis.curves import SCALARS_CSV, load_scalars, write_scalars_csv
from rlzoo.analysis.messages import CompareError
from rlzoo.analysis.report import References
from rlzoo.store.bounded import read_bytes, read_text
from tools.reproduce.console import fail, progress
from tools.reproduce.files import (
    CHECKOUT,
    PROFILE_GLOB,
    PROVENANCE_FILE,
    PUBLISHED_SUFFIX,
    RECORDS_LIMIT,
    REPORT_DIR,
    STATUS_FILE,
    TRAIN_CSV,
    is_diagnostic,
    profile_figure,
    read_json,
    replace_dir,
    repo_relative,
    write_text_atomic,
)
from tools.reproduce.page.checks import BadResults, check_results
from tools.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    aggregate_task_sets,
    has_aggregate,
)
from tools.reproduce.page.figures import plot_profile, plot_published, published_figure
from tools.reproduce.page.readme import replace_block
from tools.reproduce.page.render import render
from tools.reproduce.plan import Outcome, Plan
from tools.reproduce.processes import FileLock
from tools.reproduce.rlzoo_cells import cell_provenance
from tools.reproduce.runner import finished_dirs, still_locked
from tools.reproduce.suites import LEADS, PAGE_SUITES, SUITES

if TYPE_CHECKING:
    from rlzoo.analysis.runs import FinishedRun


def export_run(run_dir: Path, dest: Path, provenance: Path | None = None) -> bool:
    """Copy one finished run into ``dest``: summary.json, ``.hydra/*.yaml``, its ``eval/*``
    curve as ``eval.csv`` (from TensorBoard events, or its own eval.csv), its temperature and
    policy entropy as ``train.csv`` (:func:`is_diagnostic`; when it logged them) and
    ``provenance.json`` (the run's own, else ``provenance``: its cell's launches). Nothing else:
    no losses, no checkpoints, no events, no weights. Returns False (nothing written) when
    ``dest`` already holds this summary.json and provenance, and train.csv if the run has one."""
    summary = read_bytes(run_dir / "summary.json")  # bounded: a regular file, no link followed
    source = run_dir / PROVENANCE_FILE
    source = source if source.is_file() else provenance
    record = read_bytes(source, RECORDS_LIMIT) if source is not None and source.is_file() \
        else None
    old_record = dest / PROVENANCE_FILE
    same = ((dest / "summary.json").is_file() and read_bytes(dest / "summary.json") == summary
            and (read_bytes(old_record, RECORDS_LIMIT) if old_record.is_file() else None)
            == record)
    if same and (dest / TRAIN_CSV).is_file():
        return False  # without reading the run's events again
    scalars = load_scalars(run_dir)
    diagnostics = {tag: points for tag, points in scalars.items() if is_diagnostic(tag)}
    if same and not diagnostics:  # else: exported before train.csv was kept
        return False
    tmp = dest.with_name(f".{dest.name}.export-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / ".hydra").mkdir(parents=True)
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        if (run_dir / ".hydra" / name).is_file():
            text = read_text(run_dir / ".hydra" / name)  # bounded: 1 MiB, no link followed
            (tmp / ".hydra" / name).write_text(repo_relative(text))
    write_scalars_csv(tmp / SCALARS_CSV, {tag: points for tag, points in scalars.items()
                                          if tag.startswith("eval/")})
    if diagnostics:  # a peer's run (Stable-Baselines3) logs none
        write_scalars_csv(tmp / TRAIN_CSV, diagnostics)
    if record is not None:
        (tmp / PROVENANCE_FILE).write_bytes(record)
    (tmp / "summary.json").write_bytes(summary)  # last: a run is a dir with summary.json
    replace_dir(tmp, dest)
    return True


def export_suite(plan: Plan) -> tuple[int, int]:
    """Export every finished cell of the suite (at this invocation's budgets and K) to
    ``RESULTS/<suite>/<task>/<row>-s<seed>`` (seeds from ``--first-seed``, beside any others
    already there); returns (cells exported, run dirs written)."""
    cells = written = 0
    for task, row in plan.suite.cells():
        dirs = finished_dirs(plan, task, row)
        if dirs is None:
            continue
        cells += 1
        for seed, d in zip(plan.seed_range(), dirs):
            dest = plan.results / plan.suite.name / task.name / f"{row.label}-s{seed}"
            written += export_run(d, dest, None if row.peer else cell_provenance(plan, task, row))
    return cells, written


def write_page(results: Path, page: Path, suites: Sequence[str]) -> None:
    """Rewrite ``page`` from ``RESULTS/<suite>/`` of each of ``suites`` (:func:`render`); when
    it is the checkout's own page (docs/results.md), also the README's results paragraph
    (:func:`replace_block`, between its markers)."""
    readme = CHECKOUT / "README.md" if CHECKOUT is not None else None
    own = readme is not None and page.resolve() == (CHECKOUT / "docs" / "results.md").resolve()
    text, block = render(results, page.parent, [SUITES[s] for s in suites], LEADS,
                         readme.parent if readme is not None else None)
    write_text_atomic(page, text)
    if own and readme is not None and readme.is_file():
        old = readme.read_text()
        new = replace_block(old, block)
        if new != old:
            write_text_atomic(readme, new)


def report(plan: Plan, outcomes: list[Outcome]) -> None:
    """Export, record the status, compare and rewrite the page (under a lock, so two
    invocations never write the same report at once)."""
    key = hashlib.sha1(str(plan.results.resolve()).encode()).hexdigest()[:16]
    lock = FileLock(Path(tempfile.gettempdir()) / f"rlzoo-reproduce-{key}.lock")
    lock.acquire(block=True)  # outside the results, which are committed
    try:
        cells, written = export_suite(plan)
        root = plan.results / plan.suite.name
        record_status(plan, outcomes, root / STATUS_FILE)
        progress(f"exported {cells} finished cells ({written} run dirs written) to {root}")
        on_page = plan.suite.name in PAGE_SUITES
        suites = PAGE_SUITES if on_page else [plan.suite.name]
        try:  # before rlzoo.compare and the figures read them: a bad file stops the report
            check_results(plan.results, [SUITES[s] for s in suites])
            runs = find_runs([root]) if root.is_dir() else []
            if runs:
                compare_and_draw(plan, runs, root / REPORT_DIR)
                progress(f"compared {len(runs)} runs into {root / REPORT_DIR}")
            write_page(plan.results, plan.page, suites)
        except BadResults as err:  # the page and report stay as they were
            fail(f"{err}")
        progress(f"wrote {plan.page}")
    finally:
        lock.release()


def record_status(plan: Plan, outcomes: list[Outcome], path: Path) -> None:
    """Update ``status.json`` (cell -> state) with this run's outcomes: a finished cell leaves
    it, a cell reported locked is read again (its holder may have finished it meanwhile), a
    mistake of this invocation says nothing about its cell."""
    status = read_json(path) or {}
    for o in outcomes:
        if o.mistake:  # says nothing about the cell, only about this invocation
            continue
        cell = f"{o.task}/{o.row}"
        state = (f"{o.state}: {o.note}" if o.note else o.state) if o.state != "locked" \
            else still_locked(plan, o)  # the holder may have finished it meanwhile
        if o.state == "finished" or state is None:
            status.pop(cell, None)
        else:
            status[cell] = state
    if status or path.exists():
        write_text_atomic(path, json.dumps(status, indent=2, sort_keys=True) + "\n")


def compare_and_draw(plan: Plan, runs: list[FinishedRun], report_dir: Path) -> None:
    """rlzoo.compare over the suite's exported ``runs`` into ``report_dir`` (its JSON with no
    path of this machine), then the page's figures: each task's with the published curves, and
    the performance profile at each headline budget. A failed comparison is one line."""
    try:
        # the page draws its own aggregate and figures (below): no grid, no rliable needed
        kept = compare(runs, report_dir, references=References(aggregate=False), grid=False)
        for path in report_dir.glob("*.json"):  # no path of this machine
            write_text_atomic(path, repo_relative(read_text(path, RECORDS_LIMIT)))
        for path in report_dir.glob(f"*{PUBLISHED_SUFFIX}"):
            path.unlink()
        for env, by_label in kept.get("curves", {}).items():
            plot_published(env, by_label, report_dir / published_figure(kept["figures"][env]),
                           [r.label for r in plan.suite.rows])
        for path in report_dir.glob(PROFILE_GLOB):
            path.unlink()
        data = SuiteData.read(plan.suite, plan.results)
        for steps in plan.suite.all_budgets() if has_aggregate(plan.suite) else ():
            for i, tasks in enumerate(aggregate_task_sets(data, steps)):
                plot_profile(*aggregate_scores(data, steps, tasks), steps,
                             report_dir / profile_figure(steps, tasks if i else None))
    except CompareError as err:
        progress(f"rlzoo.compare failed: {err}")
