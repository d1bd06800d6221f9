"""The command line: ``python -m tools.reproduce SUITE ...``, and its shim ``python
scripts/reproduce.py SUITE ...`` (the same, under the name in its messages). See
:mod:`tools.reproduce` for what a suite, a cell and a rerun do."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from rlzoo.errors import UserError
from rlzoo.store import for_tools
from tools.reproduce.console import Parser, UsageError, fail, progress
from tools.reproduce.files import CHECKOUT
from tools.reproduce.peer import sb3_worker
from tools.reproduce.peer_cells import sb3_missing
from tools.reproduce.plan import Outcome, Plan
from tools.reproduce.processes import STOP
from tools.reproduce.report import report
from tools.reproduce.runner import run_cells
from tools.reproduce.suites import PAGE_SUITES, SUITES

PROG_NAME = "python -m tools.reproduce"  # the command its messages name (the shim passes its own)


def build_parser(prog: str = PROG_NAME) -> argparse.ArgumentParser:
    """The command line's parser; ``prog`` is the command its help and mistakes name."""
    parser = Parser(prog=prog,
                    description="Run a suite of rlzoo (and Stable-Baselines3) cells resumably, "
                    "then compare them and write the results page.")
    parser.add_argument("suite", metavar="SUITE", nargs="?", help=f"one of {', '.join(SUITES)}")
    parser.add_argument("--seeds", type=int, help="K, seeds 0..K-1 (default: the suite's, 5)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S",
                        help="train seeds S..S+K-1 instead, exported beside the others, e.g. "
                        "--first-seed 5 for seeds 5-9 (default 0)")
    parser.add_argument("--steps", type=int, help="env steps per seed (default: the suite's)")
    parser.add_argument("--out", type=Path, default=Path("runs/reproduce"),
                        help="where the run dirs go (default runs/reproduce)")
    parser.add_argument("--only", nargs="+", metavar="TASK/ROW",
                        help="run only these cells (shell patterns, e.g. 'Hopper/sac*')")
    parser.add_argument("--results", type=Path, help="raw results folder (default: the "
                        "repository's results/; smoke: OUT/results)")
    parser.add_argument("--page", type=Path, help="the page to write (default: the repository's "
                        "docs/results.md; smoke: OUT/results.md)")
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 rows")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: export finished cells and rewrite the report")
    parser.add_argument("--sb3-worker", help=argparse.SUPPRESS)
    return parser


def check_folder(path: Path, what: str) -> None:
    """``UsageError`` unless ``path`` is a folder this process can write, or can be created as
    one (its nearest existing ancestor is a writable folder)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{what} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot write in {existing}")


def make_plan(args: argparse.Namespace, prog: str = PROG_NAME) -> Plan:
    """Check the arguments (``UsageError`` for a mistake) and fix the folders."""
    if args.suite is None:
        raise UsageError("the following arguments are required: SUITE (one of "
                         f"{', '.join(SUITES)}); see {prog} --help")
    if args.suite not in SUITES:
        raise UsageError(f"unknown suite {args.suite!r}; choose one of {', '.join(SUITES)}")
    suite = SUITES[args.suite]
    if args.seeds is not None and args.seeds < 1:
        raise UsageError(f"--seeds must be a positive number of seeds, got {args.seeds}")
    if args.first_seed < 0:
        raise UsageError(f"--first-seed must be 0 or more, got {args.first_seed}")
    if args.first_seed + (args.seeds or suite.seeds) - 1 > for_tools.MAX_SEED:
        raise UsageError(f"--first-seed {args.first_seed}: its last seed passes rlzoo's largest "
                         f"seed, {for_tools.MAX_SEED}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be a positive number of env steps, got {args.steps}")
    out = args.out.expanduser().absolute()
    check_folder(out, "--out")
    on_page = suite.name in PAGE_SUITES
    if on_page and CHECKOUT is None:
        raise UsageError(f"the {suite.name} suite writes the repository's results page and sets "
                         "the published seeds (results/published/) beside it: run it from a "
                         "clone of rlzoo (python -m tools.reproduce at its root); outside one, "
                         "the smoke suite runs anywhere")
    home = CHECKOUT if on_page and CHECKOUT is not None else None
    results = (args.results or (home / "results" if home else out / "results")).absolute()
    check_folder(results, "--results")
    page = (args.page or (home / "docs" / "results.md" if home else out / "results.md"))
    page = page.expanduser().absolute()
    if page.is_dir():
        raise UsageError(f"--page {page} is a directory; name the page's file, e.g. "
                         f"{page / 'results.md'}")
    check_folder(page.parent, "--page's folder")
    if args.only:
        names = [f"{t.name}/{r.label}" for t, r in suite.cells()]
        for pattern in args.only:
            if not fnmatch.filter(names, pattern):
                raise UsageError(f"--only {pattern!r} matches no cell of {suite.name}; its cells: "
                                 f"{', '.join(names)}")
    sb3 = None
    if any(r.peer for r in suite.rows) and not args.no_sb3 and not args.report_only:
        sb3 = sb3_missing()
    elif args.no_sb3:
        sb3 = "--no-sb3"
    return Plan(suite, args.seeds or suite.seeds, args.steps, out, results, page, sb3,
                args.first_seed)


def main(argv: Sequence[str] | None = None, prog: str = PROG_NAME) -> int:
    """Run the suite's cells (unless ``--report-only``), then report; the exit status (see
    :mod:`tools.reproduce`)."""
    args = build_parser(prog).parse_args(argv)
    if args.sb3_worker:
        sb3_worker(json.loads(args.sb3_worker))
        return 0
    try:
        plan = make_plan(args, prog)
    except UsageError as err:
        fail(str(err))
    suite = plan.suite
    cells = [(t, r) for t, r in suite.cells()
             if not args.only or any(fnmatch.fnmatch(f"{t.name}/{r.label}", p) for p in args.only)]
    if plan.sb3 is not None and plan.sb3 != "--no-sb3" and any(r.peer for _, r in cells):
        progress(f"Stable-Baselines3 is not available ({plan.sb3}): its rows are not run; the "
                 "page says so")
    outcomes: list[Outcome] = []
    if not args.report_only:
        if "device=cuda" in suite.overrides:
            import torch

            if not torch.cuda.is_available():
                fail(f"the {suite.name} suite needs a CUDA GPU and torch sees none here")
        outcomes = run_cells(plan, cells)
        if STOP.signum:
            progress(f"stopped by {signal.Signals(STOP.signum).name}; run the same command again "
                     "to continue (finished cells are skipped, unfinished ones resume)")
            return 128 + STOP.signum
    try:
        report(plan, outcomes)
    except UserError as err:  # a file it cannot write (rlzoo.store.writer: one line,
        # nothing half-written)
        fail(str(err))
    return closing(outcomes)


def closing(outcomes: list[Outcome]) -> int:
    """Name the cells this run did not finish, those not run for a mistake and those that
    failed; the exit status: 1 when a cell failed or was a mistake, else 0."""
    failed = [o for o in outcomes if o.state == "failed"]
    mistakes = [o for o in outcomes if o.mistake]
    open_cells = [o for o in outcomes if o.state in ("locked", "unfinished", "skipped")
                  and not o.mistake]
    if open_cells:
        progress(f"{len(open_cells)} cell(s) not finished by this run: "
                 + "; ".join(f"{o.task}/{o.row} {o.state}" for o in open_cells))
    if mistakes:
        progress(f"{len(mistakes)} cell(s) not run: their runs do not match --seeds/--steps: "
                 + "; ".join(f"{o.task}/{o.row}: {o.note}" for o in mistakes))
    if failed:
        progress(f"{len(failed)} cell(s) failed: " + "; ".join(f"{o.task}/{o.row}" for o in failed))
    return 1 if failed or mistakes else 0
