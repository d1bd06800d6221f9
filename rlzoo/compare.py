"""``python -m rlzoo.compare RUN_DIRS... --out REPORT/``: compare finished runs.

The code lives in :mod:`rlzoo.analysis` (finding runs, curves, grouping, statistics, reports,
figures), which reads run dirs only; this module is the command's entry point
(:func:`rlzoo.analysis.cli.main`). It hands the analysis one function from outside it: the
paired floors of ``--floors`` (:mod:`rlzoo.policy.floors`), which play the runs' envs, imported only
when asked for (so ``--help`` and every other report load no torch).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from rlzoo.analysis.cli import main as analysis_main
from rlzoo.analysis.floor_summary import Floors
from rlzoo.analysis.runs import FinishedRun

__all__ = ["main"]


def floors_of_runs(runs: Sequence[FinishedRun], cache: Path) -> Floors:
    """:func:`rlzoo.policy.floors.run_floors` of ``runs``, cached in ``cache``, one line per run
    whose
    floors are computed (on stderr)."""
    from rlzoo.policy.floors import run_floors

    def said(run_dir: Path) -> None:
        print(f"rlzoo: floors of {run_dir}: the zero action and uniform random actions on its "
              "evaluation episodes", file=sys.stderr, flush=True)

    return run_floors([(r.path, r.seed) for r in runs], cache, on_run=said)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlzoo.compare``; returns the exit status (2 on a user error)."""
    return analysis_main(argv, floors=floors_of_runs)


if __name__ == "__main__":
    sys.exit(main())
