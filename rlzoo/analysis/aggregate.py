"""The aggregate across envs, computed with rliable (Agarwal et al., NeurIPS 2021, *Deep RL at
the Edge of the Statistical Precipice*; github.com/google-research/rliable): IQM, median, mean and
optimality gap of normalized final returns with stratified-bootstrap CIs, performance profiles
with CI bands, and the probability of improvement between every two rows.

rliable is an optional extra (``pip install 'rlzoo[compare]'``: rliable and ``pandas<3``, since
its dependency ``arch`` breaks on pandas 3). Without it, :func:`rliable_missing` says why and the
report has no aggregate. rliable draws its resamples from numpy's global generator; it is seeded
with ``seed`` for the computation and put back as it was afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlzoo.analysis.normalization import Range

METRICS = ("IQM", "Median", "Mean", "Optimality gap")
MISSING_EXTRA = ("the aggregate across envs (IQM, median, mean, optimality gap, performance "
                 "profiles, probability of improvement) needs rliable, which does not import "
                 "({reason}); pip install 'rlzoo[compare]' (rliable and pandas<3)")


def rliable_missing() -> str | None:
    """Why rliable cannot be used (its import error, one line), or None."""
    try:
        import rliable.library  # noqa: F401
        import rliable.metrics  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure (arch on pandas 3 raises others)
        return " ".join(f"{type(err).__name__}: {err}".split())[:160]
    return None


@dataclass
class PairImprovement:
    """P(x > y) averaged over ``n_envs`` envs, its CI ``[low, high]``, the runs of each side."""

    p: float
    ci: list[float]
    n_envs: int
    n_x: int
    n_y: int


@dataclass
class Aggregate:
    """The aggregate over ``envs`` of the ``rows`` present in every one of them.

    ``scores[row]`` are normalized final returns ``[runs, envs]`` (``n_runs[row]`` runs per env:
    each env's first runs by seed when envs have different counts), ``points[row][metric]`` and
    ``intervals[row][metric]`` (``[low, high]``) for :data:`METRICS`; ``taus``, ``profiles[row]``
    (fraction of runs above tau) and ``profile_bands[row]`` (``[2, taus]``); ``poi[(x, y)]`` is
    P(x > y) over the envs where both ran (raw returns: the statistic is scale-free).
    ``ranges[env]`` are the normalizations used; ``left_out`` says which rows or envs are not
    in it and why."""

    envs: list[str]
    rows: list[str]
    ranges: dict[str, Range]
    scores: dict[str, np.ndarray]
    n_runs: dict[str, int]
    points: dict[str, dict[str, float]] = field(default_factory=dict)
    intervals: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    taus: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profiles: dict[str, np.ndarray] = field(default_factory=dict)
    profile_bands: dict[str, np.ndarray] = field(default_factory=dict)
    poi: dict[tuple[str, str], PairImprovement] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)


@contextlib.contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """numpy's global generator seeded with ``seed`` inside, restored afterwards."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _matrix(finals: dict[str, list[float]], envs: Sequence[str], n: int) -> np.ndarray:
    """``[n, envs]``: each env's first ``n`` final returns."""
    return np.stack([np.asarray(finals[env][:n], float) for env in envs], axis=1)


def score_table(finals: dict[str, dict[str, list[float]]], ranges: dict[str, Range]
                ) -> Aggregate | None:
    """The rows and normalized scores of the aggregate: ``finals[env][row]`` are the final
    returns of a row's runs (seed order). The normalized metrics cover the envs with a range
    and the rows present in all of them; without any range, only the probability of improvement
    is computed, for every row. None when there is nothing to aggregate (one env without a
    range, or a single row)."""
    envs = [env for env in finals if env in ranges]
    left_out = [f"{env} (no normalization range: give one with --normalize {env}=LOW:HIGH)"
                for env in finals if env not in ranges]
    labels = list(dict.fromkeys(label for by_row in finals.values() for label in by_row))
    rows = [label for label in labels if all(label in finals[env] for env in envs)]
    left_out += [f"{label} (not run on every normalized env)" for label in labels
                 if label not in rows]
    if not rows or (not envs and len(rows) < 2):
        return None
    agg = Aggregate(envs, rows, {env: ranges[env] for env in envs}, {}, {}, left_out=left_out)
    for row in rows if envs else ():
        n = min(len(finals[env][row]) for env in envs)
        agg.n_runs[row] = n
        raw = _matrix({env: finals[env][row] for env in envs}, envs, n)
        agg.scores[row] = np.stack([ranges[env].apply(raw[:, j]) for j, env in
                                    enumerate(envs)], axis=1)
    return agg


def _metrics(x: np.ndarray) -> np.ndarray:
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x),
                     metrics.aggregate_mean(x), metrics.aggregate_optimality_gap(x)])


def compute_aggregate(finals: dict[str, dict[str, list[float]]], ranges: dict[str, Range],
                      reps: int, confidence: float, seed: int) -> Aggregate | None:
    """:func:`score_table`, then rliable's interval estimates, performance profiles and the
    probability of improvement of every two rows (rliable must import: :func:`rliable_missing`).
    """
    from rliable import library as rly
    from rliable import metrics

    agg = score_table(finals, ranges)
    if agg is None:
        return None
    pairs = _poi_pairs(finals, agg.rows)
    with seeded_global_rng(seed):
        if agg.envs:
            points, intervals = rly.get_interval_estimates(
                agg.scores, _metrics, reps=reps, confidence_interval_size=confidence)
            pooled = np.concatenate([s.ravel() for s in agg.scores.values()])
            agg.taus = np.linspace(min(0.0, float(pooled.min())),
                                   max(1.0, float(pooled.max())) * 1.05, 101)
            profiles, bands = rly.create_performance_profile(
                agg.scores, agg.taus, reps=reps, confidence_interval_size=confidence)
        poi_points, poi_intervals = rly.get_interval_estimates(
            {f"{x}\0{y}": xy for (x, y), xy in pairs.items()},
            metrics.probability_of_improvement, reps=reps,
            confidence_interval_size=confidence) if pairs else ({}, {})
    for row in agg.rows if agg.envs else ():
        agg.points[row] = {m: float(v) for m, v in zip(METRICS, points[row])}
        agg.intervals[row] = {m: [float(intervals[row][0][i]), float(intervals[row][1][i])]
                              for i, m in enumerate(METRICS)}
        agg.profiles[row] = np.asarray(profiles[row], float)
        agg.profile_bands[row] = np.asarray(bands[row], float)
    for (x, y), (sx, sy) in pairs.items():
        key = f"{x}\0{y}"
        agg.poi[(x, y)] = PairImprovement(float(np.asarray(poi_points[key]).ravel()[0]),
                                          np.asarray(poi_intervals[key], float).ravel().tolist(),
                                      sx.shape[1], sx.shape[0], sy.shape[0])
    return agg


def _poi_pairs(finals: dict[str, dict[str, list[float]]], rows: Sequence[str]
               ) -> dict[tuple[str, str], list[np.ndarray]]:
    """For every two rows (in order), their raw final returns ``[runs, envs]`` on the envs where
    both ran (each side's first runs by seed when an env has more)."""
    pairs: dict[tuple[str, str], list[np.ndarray]] = {}
    for i, x in enumerate(rows):
        for y in rows[i + 1:]:
            envs = [env for env, by_row in finals.items() if x in by_row and y in by_row]
            if not envs:
                continue
            nx = min(len(finals[env][x]) for env in envs)
            ny = min(len(finals[env][y]) for env in envs)
            pairs[(x, y)] = [_matrix({e: finals[e][x] for e in envs}, envs, nx),
                             _matrix({e: finals[e][y] for e in envs}, envs, ny)]
    return pairs


def aggregate_json(agg: Aggregate) -> dict[str, Any]:
    """The aggregate as comparison.json holds it."""
    return {
        "envs": agg.envs,
        "rows": agg.rows,
        "normalization": {env: {"low": r.low, "high": r.high, "source": r.source}
                          for env, r in agg.ranges.items()},
        "runs_per_env": agg.n_runs,
        "scores": {row: s.tolist() for row, s in agg.scores.items()},
        "points": agg.points,
        "intervals": agg.intervals,
        "profile_taus": agg.taus.tolist(),
        "profiles": {row: p.tolist() for row, p in agg.profiles.items()},
        "profile_bands": {row: b.tolist() for row, b in agg.profile_bands.items()},
        "probability_of_improvement": [
            {"x": x, "y": y, **dataclasses.asdict(poi)} for (x, y), poi in agg.poi.items()],
        "left_out": agg.left_out,
    }
