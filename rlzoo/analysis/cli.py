"""The command line of the analysis: ``python -m rlzoo.compare``.

Usage::

    python -m rlzoo.compare runs/ [more dirs ...] --out report/ [--poi sac td3]
        [--group-by KEY ...] [--label RULE ...] [--floors] [--published DIR]
        [--normalize ENV=LOW:HIGH ...] [--formats png pdf svg]

Finds the finished runs below the given directories (:mod:`rlzoo.analysis.runs`), groups and
labels them (:mod:`rlzoo.analysis.pooling`, :mod:`rlzoo.analysis.labels`), computes the
comparison (:mod:`rlzoo.analysis.report`) and writes ``OUT/comparison.md`` (tables),
``OUT/comparison.json`` (the same numbers), one ``OUT/<env>.png`` per env (IQM learning curves
of ``eval/return`` with 95% CI bands), every env in one figure ``OUT/curves.{png,pdf,svg}`` and
the aggregate across envs ``OUT/aggregate.{png,pdf,svg}`` (rliable; :mod:`rlzoo.analysis.render`).
``--floors`` needs rlzoo's envs, which this package does not import: ``python -m rlzoo.compare``
(rlzoo/compare.py) hands :func:`main` the function that computes them. A user mistake is one
``rlzoo: error: <what>; <how to fix>`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import rlzoo.analysis.stats as stats
from rlzoo.analysis.aggregate import MISSING_EXTRA
from rlzoo.analysis.curves import CURVE_TAG
from rlzoo.analysis.figures import FORMATS
from rlzoo.analysis.floor_summary import Floors
from rlzoo.analysis.messages import CompareError
from rlzoo.analysis.normalization import parse_normalize
from rlzoo.analysis.published import read_published
from rlzoo.analysis.render import NO_PLOTS, write_report
from rlzoo.analysis.report import References, compute_comparison
from rlzoo.analysis.runs import SUMMARY_FILE, FinishedRun, find_runs
from rlzoo.errors import UserError

FloorSource = Callable[[Sequence[FinishedRun], Path], Floors]
"""Computes the paired floors of runs (``{run dir: {"zero": [...], "random": [...]}}``),
caching them in the given file (``OUT/floors.json``): rlzoo.policy.floors, handed in by the entry
point."""


def compare(
    runs: Sequence[FinishedRun],
    out: Path,
    poi: tuple[str, str] | None = None,
    reps: int = stats.DEFAULT_REPS,
    seed: int = 0,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    tag: str = CURVE_TAG,
    max_points: int = 500,
    plots: bool = True,
    group_by: Sequence[str] | None = None,
    labels: Sequence[str] = (),
    references: References | None = None,
    formats: Sequence[str] = FORMATS,
    grid: bool = True,
) -> dict[str, Any]:
    """Compute the comparison and write ``comparison.md/json`` and the figures into ``out``.

    :func:`~rlzoo.analysis.report.compute_comparison` (the arguments but ``out``, ``plots``,
    ``formats`` and ``grid``), then :func:`~rlzoo.analysis.render.write_report`. Nothing is
    written when an argument is wrong (CompareError). Returns the dict written to
    ``comparison.json``.
    """
    comparison = compute_comparison(
        runs,
        poi=poi,
        reps=reps,
        seed=seed,
        confidence=confidence,
        tag=tag,
        max_points=max_points,
        group_by=group_by,
        labels=labels,
        references=references,
    )
    return write_report(comparison, out, plots=plots, formats=formats, grid=grid)


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one ``rlzoo: error:`` line (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"rlzoo: error: {message}; see python -m rlzoo.compare --help", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m rlzoo.compare``."""
    parser = _Parser(
        prog="python -m rlzoo.compare",
        description="Compare finished runs: per env and group of runs (same algo and config, "
        "seeds differ) the IQM of the final eval return with a stratified-bootstrap CI, learning "
        "curves, optional probability of improvement.",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="directories searched for runs")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--poi",
        nargs=2,
        metavar=("X", "Y"),
        help="also report the probability of improvement P(X > Y) per env; X and Y are group "
        "labels (an algo name works where it has one group)",
    )
    parser.add_argument(
        "--group-by",
        nargs="*",
        metavar="KEY",
        help="group runs by env, algo and these config keys (e.g. critic algo.utd) instead of "
        "every key that differs; put it after the DIRs. total_steps and eval.* always split",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="RULE",
        help="rename groups: 'KEY=VALUE [KEY=VALUE ...]=NAME' (e.g. 'critic.n=5=REDQ-5') or a "
        "format string ('{algo} N={critic.n}', fields: any config key, label, algo, env); "
        "repeatable, the first rule that applies to a group names it",
    )
    parser.add_argument(
        "--floors", action="store_true",
        help="draw and count the paired floors: the zero action and uniform random actions on "
        "each run's own evaluation episodes (computed with rlzoo's envs, cached in "
        "OUT/floors.json)")
    parser.add_argument(
        "--published", nargs="+", type=Path, default=[], metavar="PATH",
        help="published curves to draw beside the runs: results/published or its JSON files")
    parser.add_argument(
        "--normalize", nargs="+", default=[], metavar="ENV=LOW:HIGH",
        help="per-env range of the aggregate's normalized scores (LOW may be random or zero: "
        "the paired floor, with --floors); Hopper, HalfCheetah, Walker2d and Ant have the TD3 "
        "paper's by default")
    parser.add_argument(
        "--formats", nargs="+", default=list(FORMATS), choices=FORMATS, metavar="FORMAT",
        help="formats of curves.* and aggregate.* (default: png pdf svg)")
    parser.add_argument(
        "--reps", type=int, default=stats.DEFAULT_REPS, help="bootstrap resamples (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap RNG seed (default 0)")
    parser.add_argument(
        "--confidence", type=float, default=stats.DEFAULT_CONFIDENCE, help="CI level (0.95)"
    )
    parser.add_argument("--tag", default=CURVE_TAG, help=f"curve scalar tag ({CURVE_TAG})")
    parser.add_argument(
        "--max-curve-points", type=int, default=500, help="points per curve at most (500)"
    )
    return parser


def _references(args: argparse.Namespace, floors: FloorSource | None) -> References:
    """The floors (computed once the runs' groups are known to be valid), published curves and
    normalization rules the command line asks for."""
    source = None
    if args.floors:
        if floors is None:
            raise CompareError("--floors plays the runs' envs, which rlzoo.analysis does not "
                               "import; run python -m rlzoo.compare ... --floors")
        out = args.out

        def source(runs: Sequence[FinishedRun]) -> Floors:
            return floors(runs, out / "floors.json")

    return References(source, read_published(args.published),
                      parse_normalize(args.normalize))


def main(argv: Sequence[str] | None = None, floors: FloorSource | None = None) -> int:
    """CLI entry point; returns the exit status (2 on a user error). ``floors`` computes the
    paired floors for ``--floors`` (``python -m rlzoo.compare`` passes rlzoo.policy.floors')."""
    args = build_parser().parse_args(argv)
    try:
        if args.reps < 1:
            raise CompareError(f"--reps must be >= 1, got {args.reps}; pass e.g. --reps 2000")
        if not 0.0 < args.confidence < 1.0:
            raise CompareError(f"--confidence must be in (0, 1), got {args.confidence}; e.g. 0.95")
        if args.max_curve_points < 2:
            raise CompareError("--max-curve-points must be >= 2; pass e.g. 500")
        for d in args.dirs:
            if not Path(d).is_dir():
                raise CompareError(f"{d} is not a directory; pass a directory that holds runs")
        runs = find_runs(args.dirs)
        if not runs:
            raise CompareError(
                f"no runs found under {', '.join(args.dirs)} (a run is a directory with "
                f"{SUMMARY_FILE}); point at the runs/ or multirun/ directory of finished runs"
            )
        poi = tuple(args.poi) if args.poi else None
        report = compare(
            runs,
            args.out,
            poi=poi,
            reps=args.reps,
            seed=args.seed,
            confidence=args.confidence,
            tag=args.tag,
            max_points=args.max_curve_points,
            group_by=args.group_by,
            labels=args.label,
            references=_references(args, floors),
            formats=args.formats,
        )
    except (CompareError, UserError) as exc:  # UserError: a refused write (rlzoo.store.writer)
        print(f"rlzoo: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rlzoo: error: {exc}; check the paths and permissions", file=sys.stderr)
        return 2
    if report.get("figures_missing"):
        line = NO_PLOTS.format(reason=report["figures_missing"], out=args.out / "comparison.md")
        print(f"rlzoo: warning: {line}", file=sys.stderr)
    if report.get("aggregate_missing"):
        line = MISSING_EXTRA.format(reason=report["aggregate_missing"])
        print(f"rlzoo: warning: {line}; the per-env tables and figures are written",
              file=sys.stderr)
    print(f"wrote {args.out / 'comparison.md'} ({len(runs)} runs)")
    return 0
