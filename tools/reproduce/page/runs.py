"""What the page reads of the exported run dirs: rows of a task folder, a run's evaluation
curve (read once while a page renders), its value or window mean at a step, its first
evaluation, its updates by a step, a cell's wall time and machine; and how numbers are written."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.analysis import stats
from rlzoo.analysis.curves import CURVE_TAG, load_scalars
from rlzoo.errors import one_line
from rlzoo.store.bounded import load_json, load_yaml
from tools.reproduce.console import UsageError
from tools.reproduce.files import PROVENANCE_FILE, read_json
from tools.reproduce.page.text import phrase

WINDOW = 10_000  # a comparison's window: each seed's mean over its evaluations in [S - W, S]


def fmt(x: float | None) -> str:
    """A return in a table: no decimals from 100 up, 1 below, ``—`` when missing."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def kilo(steps: int) -> str:
    """``50000`` -> ``50k``."""
    return f"{steps // 1000:,}k" if steps % 1000 == 0 else f"{steps:,}"


def run_rows(folder: Path) -> dict[str, list[Path]]:
    """The exported runs of one task folder by row label: ``{label: [run dirs]}``."""
    rows: dict[str, list[Path]] = {}
    for d in sorted(folder.iterdir()) if folder.is_dir() else []:
        if (d / "summary.json").is_file() and "-s" in d.name and not d.name.startswith("."):
            rows.setdefault(d.name.rsplit("-s", 1)[0], []).append(d)
    return rows


def seed_of(run: Path) -> int:
    """A run dir's seed, from its name (``sac-s3`` -> 3)."""
    return int(run.name.rsplit("-s", 1)[1])


def row_names(runs: list[str]) -> list[str]:
    """The suite's rows of a group of run dirs (``.../sac-categorical-s3`` ->
    ``sac-categorical``), sorted: rlzoo.compare labels a group by its overrides (``sac
    critic=categorical total_steps=100000``), the page by its row."""
    return sorted({Path(r).name.rsplit("-s", 1)[0] for r in runs})


def row_of_runs(runs: list[str]) -> str:
    """:func:`row_names` as the page writes them: ``sac-categorical`` (or ``a, b``)."""
    return ", ".join(row_names(runs))


_CURVES: dict[str, list[tuple[int, float]]] | None = None  # while render_page reads: by run dir


@contextmanager
def curves_read_once() -> Iterator[None]:
    """While inside, :func:`eval_points` reads each run dir once (a page reads a curve many
    times)."""
    global _CURVES
    _CURVES = {}
    try:
        yield
    finally:
        _CURVES = None


def eval_points(run_dir: Path) -> list[tuple[int, float]]:
    """A run's ``eval/return`` curve as (env step, return) pairs in step order; [] when none.
    While :func:`render_page` runs, each run dir is read once."""
    if _CURVES is not None and str(run_dir) in _CURVES:
        return _CURVES[str(run_dir)]
    points = load_scalars(run_dir, [CURVE_TAG]).get(CURVE_TAG)
    curve = [] if points is None else [
        (int(step), float(value)) for step, value in zip(points[0].tolist(), points[1].tolist())]
    if _CURVES is not None:
        _CURVES[str(run_dir)] = curve
    return curve


def value_at(run_dir: Path, steps: int, window: int) -> float | None:
    """A run's ``eval/return`` at ``steps``: its first evaluation at a step in
    ``[steps, steps + window)`` (an evaluation lands on the first env step at or after its
    multiple), None when it has none there."""
    return next((v for step, v in eval_points(run_dir) if steps <= step < steps + window), None)


def window_mean(run_dir: Path, steps: int, every: int, width: int = WINDOW) -> float | None:
    """A run's mean ``eval/return`` over its evaluations at ``steps - width, ..., steps`` (every
    ``every`` env steps; each within ``every`` of its multiple); None unless it has them all."""
    values = [value_at(run_dir, s, every) for s in range(steps - width, steps + 1, every)]
    return None if any(v is None for v in values) else float(np.mean(values))  # type: ignore[arg-type]


def first_eval(run_dir: Path) -> tuple[int, float] | None:
    """A run's first ``eval/return`` point: (env step, return); None when it has none."""
    return next(iter(eval_points(run_dir)), None)


def first_columns(runs: list[Path]) -> tuple[str, str]:
    """The final-return table's two cells about where the runs started: the IQM over seeds of
    each run's first evaluation with its env step (a range when the seeds differ), and how many
    seeds ended above it (``final_eval_return`` of summary.json against the first evaluation);
    ``—`` for each when no run has a first evaluation."""
    pairs = [(f, read_json(d / "summary.json") or {}) for d in runs
             if (f := first_eval(d)) is not None]
    if not pairs:
        return "—", "—"
    steps = [f[0] for f, _ in pairs]
    at = f"{min(steps):,}" if min(steps) == max(steps) else f"{min(steps):,}-{max(steps):,}"
    finals = [(f[1], summary.get("final_eval_return")) for f, summary in pairs]
    better = sum(1 for first, final in finals if final is not None and final > first)
    return (phrase("cell.first_eval", value=fmt(stats.iqm([f[1] for f, _ in pairs])), at=at),
            phrase("cell.of", k=better, n=len(pairs)))


def run_config(run_dir: Path) -> Any:
    """A run's ``.hydra/config.yaml`` (an OmegaConf node, read with ``.get``); ``{}`` without
    one."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return {}
    try:
        return load_yaml(path)  # bounded (rlzoo.store.bounded): a hostile file costs nothing
    except Exception as err:  # noqa: BLE001 - BoundError, OSError, YAML and OmegaConf errors
        raise UsageError(f"{path}: cannot read it ({one_line(err, 150)}); fix or delete this "
                         "run dir (re-export it from its training run), then render the page "
                         "again") from None


def updates_by(run_dir: Path, steps: int) -> int | None:
    """Gradient updates a run had made by env step ``steps``, from its config: (steps - warm-up)
    x updates per env step (rlzoo's ``algo.learning_starts`` and ``algo.utd``; an SB3 peer's
    ``learning_starts`` and ``gradient_steps / train_freq``); None when the config lacks them."""
    algo = run_config(run_dir).get("algo", {})
    start = algo.get("learning_starts")
    utd = algo.get("utd")
    if utd is None and algo.get("gradient_steps") and algo.get("train_freq"):
        utd = algo["gradient_steps"] / algo["train_freq"]
    if start is None or utd is None:
        return None
    return int(max(0, steps - int(start)) * float(utd))


def mean_over_evaluations(run_dir: Path, last: int | None = None
                          ) -> tuple[tuple[int, ...], float] | None:
    """A run's evaluation steps (up to ``last``, default all) and the mean of its
    ``eval/return`` over them (the area under its curve divided by its length: it weighs how
    early a run learns as well as where it ends); None when it has no evaluation."""
    points = [(s, v) for s, v in eval_points(run_dir) if last is None or s <= last]
    if not points:
        return None
    return tuple(step for step, _ in points), sum(v for _, v in points) / len(points)


def cell_wall_time(runs: list[Path]) -> tuple[float, str] | None:
    """A finished cell's wall time in hours and how it was measured: an rlzoo cell is one
    process per seed group (summary.json's ``wall_time_s``, summed over resumes, the same for
    every seed of the group ``group_seeds`` names; seeds 0-4 and a later 5-9 are two processes,
    their sum); an SB3 cell is one process per seed (the sum of theirs). None without the
    numbers."""
    summaries = [read_json(d / "summary.json") or {} for d in runs]
    walls = [s.get("wall_time_s") for s in summaries]
    if not walls or any(not isinstance(w, (int, float)) for w in walls):
        return None
    if any("library" in s for s in summaries):
        return sum(walls) / 3600, phrase("wall.seeds", n=len(walls))
    groups: dict[str, float] = {}
    for summary, wall in zip(summaries, walls):
        key = json.dumps(summary.get("group_seeds"))
        groups[key] = max(groups.get(key, 0.0), wall)
    if len(groups) == 1:
        return max(walls) / 3600, phrase("wall.one")
    return sum(groups.values()) / 3600, phrase("wall.groups", n=len(groups))


def last_launch(run: Path) -> dict[str, Any]:
    """The record of a run's last training launch (provenance.json); {} without one."""
    path = run / PROVENANCE_FILE
    try:
        records = load_json(path) if path.is_file() else []  # bounded (rlzoo.store.bounded)
    except (ValueError, OSError):
        records = []
    return records[-1] if isinstance(records, list) and records and \
        isinstance(records[-1], dict) else {}


def machine(runs: list[Path]) -> str | None:
    """The machine the runs' last training launch ran on (provenance.json): CPU (with the SIMD
    level of torch's CPU kernels, where recorded: ``AMD EPYC (AVX512)``) and cores."""
    names = set()
    for d in runs:
        if last := last_launch(d):
            simd = last.get("torch_cpu_capability")
            names.add(phrase("machine.simd" if simd else "machine.cpu", cpu=last.get("cpu"),
                             simd=simd, cores=last.get("cores")))
    return " and ".join(sorted(names)) or None


def cpu_model(name: str) -> str:
    """A CPU's name as the page's box writes it: ``Intel(R) Xeon(R) Processor`` -> ``Intel
    Xeon``."""
    return " ".join(w for w in name.replace("(R)", "").replace("(TM)", "").split()
                    if w.lower() not in ("processor", "cpu"))


def devices(runs: list[Path]) -> str | None:
    """The machines the runs' last launches ran on, in a few words: ``2-core CPUs (AMD EPYC,
    Intel Xeon)``; None without provenance."""
    found = {(cpu_model(str(last.get("cpu"))), last.get("cores")) for d in runs
             if (last := last_launch(d)) and last.get("cpu")}
    if not found:
        return None
    cores = sorted({c for _, c in found if isinstance(c, int)})
    name = {(True, False): "device.cpu", (True, True): "device.cpus",
            (False, False): "device.cpu_cores", (False, True): "device.cpus_cores"}
    return phrase(name[not cores, len(found) > 1], cores="-".join(f"{c}" for c in cores),
                  names=", ".join(sorted({n for n, _ in found})))
