"""Compare finished runs: IQM with bootstrap confidence intervals, learning curves, P(X > Y).

Usage::

    python -m rlzoo.compare runs/ [more dirs ...] --out report/ [--poi sac td3]

A run is any directory holding ``summary.json`` (written by the trainer when a run finishes), at any
depth below the given directories (``runs/<env>/<algo>/<timestamp>-s<seed>/``, Hydra multirun
``multirun/<date>/<time>/<job>/``, ...). Runs are grouped by ``(env, algo)`` from summary.json.

Writes ``OUT/comparison.md`` (tables), ``OUT/comparison.json`` (the same numbers) and one
``OUT/<env>.png`` per env (IQM learning curves of ``eval/return`` with 95% CI bands).
Statistics are in :mod:`rlzoo.stats` (rliable's definitions, numpy implementation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlzoo import stats

SUMMARY_FILE = "summary.json"
EVENT_PREFIX = "events.out.tfevents."
CURVE_TAG = "eval/return"
# Subfolders of a run dir that never hold runs; not descended into.
_SKIP_DIRS = {"checkpoints", ".hydra", "videos", "__pycache__"}


class CompareError(Exception):
    """A user-facing error: the message is ``<what>; <how to fix>``."""


@dataclass
class Run:
    """One finished run: where it is and what its summary.json says."""

    path: Path
    env: str
    algo: str
    seed: int
    final_eval_return: float
    summary: dict[str, Any] = field(repr=False)


@dataclass
class Curve:
    """Aligned curves of one (env, algo) group: ``values[run, point]`` at ``steps[point]``."""

    steps: np.ndarray
    values: np.ndarray
    run_paths: list[str]


def note(message: str) -> None:
    """Print a one-line note on stderr."""
    print(f"rlzoo: note: {message}", file=sys.stderr)


# --------------------------------------------------------------------------- finding runs


def _read_summary(run_dir: Path) -> Run:
    """Parse ``run_dir/summary.json``; raise ValueError with a short reason if it is unusable."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable {SUMMARY_FILE} ({exc})") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{SUMMARY_FILE} is not a JSON object")
    missing = [k for k in ("algo", "env", "seed", "final_eval_return") if k not in summary]
    if missing:
        raise ValueError(f"{SUMMARY_FILE} lacks {', '.join(missing)}")
    try:
        final = float(summary["final_eval_return"])
        seed = int(summary["seed"])
    except (TypeError, ValueError):
        raise ValueError(f"{SUMMARY_FILE} has a non-numeric seed or final_eval_return") from None
    if not math.isfinite(final):
        raise ValueError(f"final_eval_return is {final}")
    return Run(run_dir, str(summary["env"]), str(summary["algo"]), seed, final, summary)


def find_runs(roots: Sequence[str | os.PathLike[str]]) -> list[Run]:
    """All runs (dirs with summary.json) at any depth below ``roots``, sorted by path.

    A directory that looks like a run (event files or a ``.hydra`` folder) but has no
    summary.json is still running or crashed: it is skipped with a note on stderr, as is an
    unusable summary.json. A run dir is not searched for further runs below it.
    """
    runs: list[Run] = []
    seen: set[Path] = set()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            if SUMMARY_FILE in filenames:
                dirnames[:] = []
                real = here.resolve()
                if real in seen:
                    continue
                seen.add(real)
                try:
                    runs.append(_read_summary(here))
                except ValueError as exc:
                    note(f"skipping {here}: {exc}")
                continue
            has_events = any(f.startswith(EVENT_PREFIX) for f in filenames)
            if has_events or ".hydra" in dirnames:
                note(f"skipping {here}: no {SUMMARY_FILE} (still running or crashed)")
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    runs.sort(key=lambda r: (r.env, r.algo, r.seed, str(r.path)))
    return runs


# --------------------------------------------------------------------------- reading TensorBoard


def _name_order(path: Path) -> tuple[int, int, str]:
    """Sort key from ``events.out.tfevents.<unix time>.<host>.<pid>.<counter>[suffix]``."""
    parts = path.name[len(EVENT_PREFIX) :].split(".")
    created = int(parts[0]) if parts and parts[0].isdigit() else 0
    counter = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 0
    return created, counter, path.name


def event_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Event files directly in ``run_dir``, ordered by the creation time in their names."""
    directory = Path(run_dir)
    files = [p for p in directory.iterdir() if p.name.startswith(EVENT_PREFIX) and p.is_file()]
    return sorted(files, key=_name_order)


def _read_event_file(
    path: Path, tags: set[str] | None
) -> tuple[float, dict[str, dict[int, float]]]:
    """One event file: ``(wall time of its first event, {tag: {step: value}})``.

    Within a file, the last value logged at a step wins.
    """
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.util import tensor_util

    first_wall_time = math.inf
    out: dict[str, dict[int, float]] = {}
    for event in LegacyEventFileLoader(str(path)).Load():
        if first_wall_time == math.inf:
            first_wall_time = float(event.wall_time)
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if tags is not None and value.tag not in tags:
                continue
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalar = float(value.simple_value)
            elif kind == "tensor":  # scalars written in the newer tensor format
                array = tensor_util.make_ndarray(value.tensor)
                if array.size != 1:
                    continue
                scalar = float(array.reshape(()))
            else:
                continue
            out.setdefault(value.tag, {})[int(event.step)] = scalar
    return first_wall_time, out


def load_scalars(
    run_dir: str | os.PathLike[str], tags: Iterable[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """All points of the scalar ``tags`` (default: every scalar tag) logged in a run dir.

    Every point is kept (no reservoir sampling, unlike TensorBoard's default of 10,000 per tag).
    The event files directly in ``run_dir`` are merged oldest first (by the wall time of a file's
    first event, then by the creation time in its name), so a later file wins on a step present
    in both (a resumed run). Files are read with tensorboard's event-file loader, keeping only
    the wanted tags in memory.

    Returns:
        ``{tag: (steps [n] int64, values [n] float64)}``, steps sorted ascending.
    """
    wanted = None if tags is None else set(tags)
    loaded = []
    for path in event_files(run_dir):
        first_wall_time, points = _read_event_file(path, wanted)
        loaded.append(((first_wall_time, *_name_order(path)), points))
    loaded.sort(key=lambda item: item[0])
    merged: dict[str, dict[int, float]] = {}
    for _, per_tag in loaded:
        for tag, points in per_tag.items():
            merged.setdefault(tag, {}).update(points)
    result: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for tag, points in merged.items():
        steps = np.array(sorted(points), dtype=np.int64)
        values = np.array([points[s] for s in steps.tolist()], dtype=np.float64)
        result[tag] = (steps, values)
    return result


# --------------------------------------------------------------------------- curves


def align_curves(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], max_points: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """Put curves evaluated at different steps on one grid of steps.

    The grid is the union of all runs' steps, restricted to where every run has started and not
    yet ended (``max`` of first steps to ``min`` of last steps), thinned evenly to at most
    ``max_points`` points. A run's value at a grid step is its last value at or before that step.

    Args:
        curves: per run ``(steps [n_r], values [n_r])``, steps ascending.

    Returns:
        ``(grid [points], values [runs, points])``; ``points`` may be 0 if the runs do not overlap.
    """
    start = max(int(s[0]) for s, _ in curves)
    end = min(int(s[-1]) for s, _ in curves)
    grid = np.unique(np.concatenate([s for s, _ in curves]))
    grid = grid[(grid >= start) & (grid <= end)]
    if len(grid) > max_points:
        keep = np.unique(np.round(np.linspace(0, len(grid) - 1, max_points)).astype(np.int64))
        grid = grid[keep]
    values = np.empty((len(curves), len(grid)))
    for i, (steps, vals) in enumerate(curves):
        values[i] = vals[np.searchsorted(steps, grid, side="right") - 1]
    return grid, values


def _group_curve(runs: Sequence[Run], tag: str, max_points: int) -> Curve | None:
    """Aligned ``tag`` curves of a group's runs; runs without the tag are noted and left out."""
    curves, paths = [], []
    for run in runs:
        try:
            scalars = load_scalars(run.path, [tag])
        except Exception as exc:  # a corrupt event file must not sink the whole report
            note(f"{run.path}: cannot read event files ({type(exc).__name__}: {exc}); no curve")
            continue
        points = scalars.get(tag)
        if points is None or len(points[0]) == 0:
            note(f"{run.path}: no '{tag}' scalars in its event files; left out of the curve")
            continue
        curves.append(points)
        paths.append(str(run.path))
    if not curves:
        return None
    steps, values = align_curves(curves, max_points)
    if len(steps) == 0:
        note(f"{runs[0].env}/{runs[0].algo}: runs' '{tag}' step ranges do not overlap; no curve")
        return None
    return Curve(steps, values, paths)


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "env"


def plot_env(
    env: str,
    curves: dict[str, tuple[Curve, np.ndarray, np.ndarray, np.ndarray]],
    path: Path,
    tag: str,
    confidence: float,
) -> None:
    """Write the learning-curve figure of one env: IQM line and CI band per algo."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for algo, (curve, point, low, high) in curves.items():
        n = curve.values.shape[0]
        (line,) = ax.plot(curve.steps, point, label=f"{algo} (n={n})")
        ax.fill_between(curve.steps, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"{tag} (IQM over seeds)")
    ax.set_title(f"{env}: IQM and {confidence:.0%} bootstrap CI")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------- the report


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.4g}"


def compare(
    runs: Sequence[Run],
    out: Path,
    poi: tuple[str, str] | None = None,
    reps: int = stats.DEFAULT_REPS,
    seed: int = 0,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    tag: str = CURVE_TAG,
    max_points: int = 500,
    plots: bool = True,
) -> dict[str, Any]:
    """Compute the comparison, write ``comparison.md/json`` and the PNGs into ``out``.

    Returns the dict written to ``comparison.json``.
    """
    groups: dict[str, dict[str, list[Run]]] = {}
    for run in runs:
        groups.setdefault(run.env, {}).setdefault(run.algo, []).append(run)
    all_algos = {algo for per_env in groups.values() for algo in per_env}
    if poi is not None:
        unknown = [a for a in poi if a not in all_algos]
        if unknown:
            raise CompareError(
                f"--poi algo {', '.join(map(repr, unknown))} not among the runs found; "
                f"choose from {', '.join(sorted(all_algos))}"
            )

    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    curves_json: dict[str, Any] = {}
    figures: dict[str, str] = {}
    used_names: set[str] = set()
    for env in sorted(groups):
        results[env] = {}
        env_curves: dict[str, tuple[Curve, np.ndarray, np.ndarray, np.ndarray]] = {}
        for algo in sorted(groups[env]):
            group = groups[env][algo]
            scores = np.array([r.final_eval_return for r in group])
            point, low, high = stats.stratified_bootstrap_ci(
                scores, stats.iqm, reps=reps, confidence=confidence, seed=seed
            )
            seeds = [r.seed for r in group]
            dupes = sorted({s for s in seeds if seeds.count(s) > 1})
            if dupes:
                note(f"{env}/{algo}: seed(s) {dupes} appear in more than one run; all are counted")
            steps_done = [r.summary.get("total_steps") for r in group]
            results[env][algo] = {
                "n_runs": len(group),
                "seeds": seeds,
                "iqm": point,
                "iqm_ci": [low, high],
                "mean": float(scores.mean()),
                "std": float(scores.std(ddof=1)) if len(group) > 1 else None,
                "min": float(scores.min()),
                "max": float(scores.max()),
                "final_eval_returns": scores.tolist(),
                "total_steps": steps_done,
                "runs": [str(r.path) for r in group],
            }
            curve = _group_curve(group, tag, max_points)
            if curve is not None:
                c_point, c_low, c_high = stats.iqm_curve_ci(
                    curve.values, reps=reps, confidence=confidence, seed=seed
                )
                env_curves[algo] = (curve, c_point, c_low, c_high)
                curves_json.setdefault(env, {})[algo] = {
                    "n_runs": curve.values.shape[0],
                    "runs": curve.run_paths,
                    "steps": curve.steps.tolist(),
                    "iqm": c_point.tolist(),
                    "ci_low": c_low.tolist(),
                    "ci_high": c_high.tolist(),
                }
        if env_curves and plots:
            name = _safe_filename(env)
            while name in used_names:
                name += "_"
            used_names.add(name)
            figures[env] = f"{name}.png"
            plot_env(env, env_curves, out / figures[env], tag, confidence)

    poi_json: dict[str, Any] | None = None
    if poi is not None:
        x_algo, y_algo = poi
        per_env: dict[str, Any] = {}
        pairs = []
        for env in sorted(groups):
            if x_algo in groups[env] and y_algo in groups[env]:
                x = np.array([r.final_eval_return for r in groups[env][x_algo]])
                y = np.array([r.final_eval_return for r in groups[env][y_algo]])
                pairs.append((x, y))
                p, lo, hi = stats.probability_of_improvement_ci(
                    x, y, reps=reps, confidence=confidence, seed=seed
                )
                per_env[env] = {"p": p, "ci": [lo, hi], "n_x": len(x), "n_y": len(y)}
            else:
                per_env[env] = None
        average = None
        if pairs:
            p, lo, hi = stats.average_probability_of_improvement_ci(
                pairs, reps=reps, confidence=confidence, seed=seed
            )
            average = {"p": p, "ci": [lo, hi], "n_envs": len(pairs)}
        poi_json = {"x": x_algo, "y": y_algo, "per_env": per_env, "average_over_envs": average}

    method = {
        "score": "final_eval_return from each run's summary.json",
        "aggregate": "IQM = 25% trimmed mean over runs (scipy.stats.trim_mean(x, 0.25))",
        "interval": "percentile CI from a stratified bootstrap over runs (rliable definitions)",
        "confidence": confidence,
        "bootstrap_reps": reps,
        "bootstrap_rng": f"numpy.random.default_rng({seed})",
        "std": "sample standard deviation (ddof=1)",
        "curve_tag": tag,
        "curve_max_points": max_points,
        "curve_alignment": (
            "union of the runs' eval steps within the range every run covers "
            f"(thinned to at most {max_points} points); each run's value at a step is its last "
            "value at or before that step; IQM and bootstrap CI computed at each step"
        ),
        "probability_of_improvement": (
            "P(X > Y) = Mann-Whitney U / (n_x * n_y), ties count 1/2; X and Y resampled "
            "independently; average over envs where both ran"
        ),
    }
    report = {
        "method": method,
        "results": results,
        "probability_of_improvement": poi_json,
        "curves": curves_json,
        "figures": figures,
    }
    (out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "comparison.md").write_text(_markdown(report, runs))
    return report


def _markdown(report: dict[str, Any], runs: Sequence[Run]) -> str:
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    lines = [
        "# Run comparison",
        "",
        f"{len(runs)} finished runs. Score of a run: `final_eval_return` from its `summary.json`.",
        "",
        f"**Method.** Per (env, algo): IQM (interquartile mean: the mean of the middle 50% of "
        f"seeds, `scipy.stats.trim_mean(x, 0.25)`) with a {conf} percentile confidence interval "
        f"from a stratified bootstrap over seeds (rliable's definitions, Agarwal et al. 2021), "
        f"{m['bootstrap_reps']} bootstrap resamples, RNG `{m['bootstrap_rng']}`. "
        "Mean ± std (sample std, ddof=1) for reference. "
        "With fewer than 4 seeds the IQM trims nothing and equals the mean; with few seeds the "
        "bootstrap interval is too narrow (it cannot see values the seeds did not reach) — "
        "read it as a lower bound on the uncertainty. Raw returns of different envs are on "
        "different scales, so no aggregate over envs is given.",
        "",
    ]
    for env, per_algo in report["results"].items():
        lines += [
            f"## {env}",
            "",
            f"| algo | seeds | IQM [{conf} CI] | mean ± std | min | max |",
            "|---|---:|---|---|---:|---:|",
        ]
        for algo, r in per_algo.items():
            seeds = ", ".join(str(s) for s in r["seeds"])
            lo, hi = r["iqm_ci"]
            lines.append(
                f"| {algo} | {r['n_runs']} ({seeds}) | {_num(r['iqm'])} [{_num(lo)}, {_num(hi)}] "
                f"| {_num(r['mean'])} ± {_num(r['std'])} | {_num(r['min'])} | {_num(r['max'])} |"
            )
        lines.append("")
        if env in report["figures"]:
            fig = report["figures"][env]
            lines += [f"![{env} learning curves]({fig})", ""]
        else:
            lines += [f"No learning curve for {env}: no run has `{m['curve_tag']}` scalars.", ""]
    poi = report["probability_of_improvement"]
    if poi is not None:
        x, y = poi["x"], poi["y"]
        lines += [
            f"## Probability of improvement P({x} > {y})",
            "",
            "Probability that a run of "
            f"{x} ends with a higher final eval return than a run of {y} (Mann-Whitney U / "
            f"(n_x · n_y), ties count 1/2), with a {conf} CI from resampling both algorithms' "
            "seeds independently. 0.5 = no difference.",
            "",
            f"| env | P({x} > {y}) [{conf} CI] | n {x} | n {y} |",
            "|---|---|---:|---:|",
        ]
        for env, r in poi["per_env"].items():
            if r is None:
                lines.append(f"| {env} | n/a (not both algos ran) | | |")
            else:
                lo, hi = r["ci"]
                lines.append(
                    f"| {env} | {r['p']:.3f} [{lo:.3f}, {hi:.3f}] | {r['n_x']} | {r['n_y']} |"
                )
        avg = poi["average_over_envs"]
        if avg is not None and avg["n_envs"] > 1:
            lo, hi = avg["ci"]
            lines.append(
                f"| average over {avg['n_envs']} envs | {avg['p']:.3f} [{lo:.3f}, {hi:.3f}] | | |"
            )
        lines.append("")
    lines += [
        "## Learning curves",
        "",
        f"`{m['curve_tag']}` against env steps; line = IQM over seeds, band = {conf} bootstrap CI "
        "at each step (each step resampled independently, as rliable does for sample-efficiency "
        "curves). Runs evaluated at different steps are aligned on the union of their eval "
        "steps within the range every run of the group covers (a curve ends at its shortest "
        "run's last evaluation), each run contributing its last value at or before that step"
        f"; at most {m['curve_max_points']} points per curve.",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"rlzoo: error: {message}; see python -m rlzoo.compare --help", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m rlzoo.compare",
        description="Compare finished runs: per (env, algo) IQM of the final eval return with a "
        "stratified-bootstrap CI, learning curves, optional probability of improvement.",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="directories searched for runs")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--poi",
        nargs=2,
        metavar=("ALGO_X", "ALGO_Y"),
        help="also report the probability of improvement P(ALGO_X > ALGO_Y) per env",
    )
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


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (2 on a user error)."""
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
        compare(
            runs,
            args.out,
            poi=poi,
            reps=args.reps,
            seed=args.seed,
            confidence=args.confidence,
            tag=args.tag,
            max_points=args.max_curve_points,
        )
    except CompareError as exc:
        print(f"rlzoo: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rlzoo: error: {exc}; check the paths and permissions", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'comparison.md'} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
