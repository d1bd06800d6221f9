"""The page's trust in its files: every exported run dir it reads is checked before a number of
it is used, and the first bad file stops the page with one line naming it (:class:`BadResults`).

What a run dir must hold (the bounds are declared once, in :mod:`rlzoo.analysis.runs` and
:mod:`rlzoo.analysis.curves`, for rlzoo.compare and the page alike):

- ``summary.json``: a JSON object of at most ``SUMMARY_BYTES_LIMIT`` bytes (an empty or
  truncated file is refused) with ``final_eval_return`` a finite number of magnitude at most
  ``RETURN_LIMIT`` and ``total_steps`` an integer from 1 to ``STEP_LIMIT`` (the run's budget);
  ``wall_time_s`` and ``updates``, where present, finite and not negative;
- ``eval.csv``: the ``eval.csv`` format (:func:`rlzoo.analysis.curves.read_scalars_csv`: a
  ``step`` header, plain integer steps rising with no step twice, finite numbers, returns of
  magnitude at most ``RETURN_LIMIT``), at least one ``eval/return``, and no step beyond the
  run's ``total_steps``;
- ``train.csv``, where present: the same format, no step beyond ``total_steps``.

A bad file is never skipped: a cell missing one seed would move its IQM and CI as silently as a
repeated row does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlzoo.analysis.curves import CURVE_TAG, SCALARS_CSV, read_scalars_csv
from rlzoo.analysis.runs import RETURN_LIMIT, STEP_LIMIT, SUMMARY_BYTES_LIMIT
from rlzoo.store.bounded import BoundError, read_text
from tools.reproduce.console import UsageError
from tools.reproduce.files import CHECKOUT, TRAIN_CSV
from tools.reproduce.page.runs import run_rows
from tools.reproduce.schema import Suite


class BadResults(UsageError):
    """A results file the page refuses: the message is ``<file>: <what is wrong>; <what to
    do>``, one line."""


def shown(path: Path) -> str:
    """``path`` as the message names it: relative to the checkout when inside it."""
    try:
        return str(path.resolve().relative_to(CHECKOUT)) if CHECKOUT else str(path)
    except ValueError:
        return str(path)


def _refuse(path: Path, what: str, sep: str = ": ") -> BadResults:
    return BadResults(f"{shown(path)}{sep}{what}; fix or delete this run dir (re-export it from "
                      "its training run), then render the page again")


def check_summary(run_dir: Path) -> dict[str, Any]:
    """``run_dir/summary.json`` as the page reads it, checked (module docstring);
    :class:`BadResults` naming the file when it is unusable."""
    path = run_dir / "summary.json"
    try:  # bounded: a regular file, no link followed, at most the limit read
        text = read_text(path, SUMMARY_BYTES_LIMIT)
    except BoundError as exc:
        raise _refuse(path, str(exc)) from None
    except OSError as exc:
        raise _refuse(path, f"cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise _refuse(path, "not UTF-8 text") from None
    if not text.strip():
        raise _refuse(path, "empty")
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refuse(path, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
                            "truncated?)") from None
    except (ValueError, RecursionError) as exc:  # an integer of too many digits, deep nesting
        raise _refuse(path, f"not JSON the page reads ({type(exc).__name__})") from None
    if not isinstance(summary, dict):
        raise _refuse(path, "not a JSON object")

    def number(key: str) -> float | None:
        value = summary.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _refuse(path, f"{key} is {str(value)[:20]!r}, not a number")
        if not math.isfinite(value):
            raise _refuse(path, f"{key} is {value}")
        return float(value)

    for key in ("final_eval_return", "total_steps"):
        if key not in summary:
            raise _refuse(path, f"no {key}")
    final = number("final_eval_return")
    assert final is not None
    if abs(final) > RETURN_LIMIT:
        raise _refuse(path, f"final_eval_return {final:.3g} is beyond +-{RETURN_LIMIT:,.0f}, "
                            "no episode return")
    steps = summary["total_steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= STEP_LIMIT:
        raise _refuse(path, f"total_steps {str(steps)[:20]} is not an integer from 1 to "
                            f"{STEP_LIMIT:,}")
    for key in ("wall_time_s", "updates"):
        value = number(key)
        if value is not None and value < 0:
            raise _refuse(path, f"{key} is {value:g}, below 0")
    return summary


def check_curve(path: Path, budget: int, needs: str | None) -> None:
    """One curve file (``eval.csv`` or ``train.csv``) of a run with ``budget`` env steps:
    its format (:func:`rlzoo.analysis.curves.read_scalars_csv`), no step beyond ``budget`` and,
    when ``needs`` names a tag, at least one value of it; :class:`BadResults` naming the file
    otherwise."""
    try:
        points = read_scalars_csv(path)
    except ValueError as exc:
        message = str(exc)  # "<path> line N: ..." or "<path>: ..."
        message = message[len(str(path)):] if message.startswith(str(path)) else f": {message}"
        raise _refuse(path, message, sep="") from None
    last = max((max(p) for p in points.values() if p), default=None)
    if last is not None and last > budget:
        raise _refuse(path, f"step {last:,} is beyond the run's total_steps ({budget:,}, "
                            "summary.json)")
    if needs is not None and not points.get(needs):
        raise _refuse(path, f"no {needs} value")


def check_run(run_dir: Path) -> None:
    """Every file of one exported run dir that the page reads (module docstring)."""
    summary = check_summary(run_dir)
    check_curve(run_dir / SCALARS_CSV, summary["total_steps"], CURVE_TAG)
    if (run_dir / TRAIN_CSV).exists():
        check_curve(run_dir / TRAIN_CSV, summary["total_steps"], None)


def check_results(results: Path, suites: Sequence[Suite]) -> None:
    """Check every run dir of ``suites`` under ``results`` that the page reads
    (``RESULTS/<suite>/<task>/<row>-s<seed>/``); :class:`BadResults` at the first bad file."""
    for suite in suites:
        for task in suite.tasks:
            for runs in run_rows(results / suite.name / task.name).values():
                for run_dir in runs:
                    check_run(run_dir)
