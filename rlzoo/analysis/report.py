"""The comparison as data: per env and group the IQM of the final eval return with a bootstrap CI,
IQM learning curves with CI bands, and P(X > Y) between two groups.

:func:`compute_comparison` computes; it writes nothing (one-line notes on stderr aside).
:mod:`rlzoo.analysis.render` turns the result into ``comparison.md``, ``comparison.json`` and PNGs.
Statistics are in :mod:`rlzoo.analysis.stats` (rliable's definitions, numpy implementation).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import rlzoo.analysis.stats as stats
from rlzoo.analysis.aggregate import Aggregate, compute_aggregate, rliable_missing
from rlzoo.analysis.config import IGNORED_KEYS, MEASUREMENT_KEYS, MISSING, is_measurement
from rlzoo.analysis.curves import CURVE_TAG, Curve, group_curve
from rlzoo.analysis.floor_summary import EnvFloors, Floors, GroupFloors, env_floors, group_floors
from rlzoo.analysis.groups import Group
from rlzoo.analysis.messages import CompareError, Progress, note
from rlzoo.analysis.normalization import RangeRule, check_rules, ranges_for
from rlzoo.analysis.pooling import group_runs
from rlzoo.analysis.published import PublishedCurve
from rlzoo.analysis.runs import FinishedRun


@dataclass
class GroupResult:
    """One row of an env's table: a group's final eval returns and their statistics.

    ``differs_by`` are the label's ``key=value`` terms, ``defaults`` the terms left out because
    the group has the default value, ``settings`` the measurement keys (``total_steps``,
    ``eval.*``) every run of the group shares. ``iqm_ci`` is ``[low, high]``; ``std`` is the
    sample std (ddof=1), None with one run. ``seeds``, ``final_eval_returns``, ``total_steps``
    (as summary.json has it, None where absent) and ``runs`` (run dirs) are per run, in the same
    order. Returns are in the env's reward units, steps in env steps. ``floors``: the runs
    against their own paired floors (``--floors``), else None.
    """

    algo: str
    auto_label: str
    differs_by: dict[str, str]
    defaults: dict[str, str]
    settings: dict[str, Any]
    n_runs: int
    seeds: list[int]
    iqm: float
    iqm_ci: list[float]
    mean: float
    std: float | None
    min: float
    max: float
    final_eval_returns: list[float]
    total_steps: list[Any]
    runs: list[str]
    floors: GroupFloors | None = None


@dataclass
class CurveResult:
    """A group's aligned curves and, per step of ``curve.steps``, their IQM and CI ``[points]``."""

    curve: Curve
    iqm: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


@dataclass
class PairResult:
    """P(X > Y) in one env: the point estimate ``p``, ``ci`` ``[low, high]``, the runs per group."""

    p: float
    ci: list[float]
    n_x: int
    n_y: int
    x_group: str
    y_group: str


@dataclass
class AverageResult:
    """P(X > Y) averaged over the ``n_envs`` envs where both groups ran; ``ci`` ``[low, high]``."""

    p: float
    ci: list[float]
    n_envs: int


@dataclass
class Improvement:
    """Probability of improvement of group ``x`` over ``y`` (``--poi X Y``): per env (None where
    the env lacks one of them) and averaged over envs (None when no env has both)."""

    x: str
    y: str
    per_env: dict[str, PairResult | None]
    average_over_envs: AverageResult | None


@dataclass
class Comparison:
    """Everything a report shows: ``results[env][label]`` rows, ``curves[env][label]`` (only the
    envs and groups with a curve), ``probability_of_improvement`` (None without ``--poi``),
    ``method`` (how the numbers were made, as written to comparison.json) and ``n_runs``;
    ``floors[env]`` (with ``--floors``), ``published[env]`` (``--published``), the
    ``aggregate`` across envs (rliable) or why it is missing (``aggregate_missing``)."""

    n_runs: int
    method: dict[str, Any]
    results: dict[str, dict[str, GroupResult]]
    curves: dict[str, dict[str, CurveResult]]
    probability_of_improvement: Improvement | None
    floors: dict[str, EnvFloors] = field(default_factory=dict)
    published: dict[str, list[PublishedCurve]] = field(default_factory=dict)
    aggregate: Aggregate | None = None
    aggregate_missing: str | None = None


def resolve_poi(name: str, env: str, groups: list[Group]) -> Group | None:
    """The group ``name`` means in one env: a label, an automatic label, or an algo name that has
    exactly one group there; None when the env has none. CompareError when ambiguous."""
    for attr in ("label", "auto_label"):
        found = [g for g in groups if getattr(g, attr) == name]
        if found:
            return found[0]
    found = [g for g in groups if g.algo == name]
    if len(found) > 1:
        labels = "; ".join(g.label for g in found)
        raise CompareError(
            f"--poi {name!r} is ambiguous in {env}, which has {len(found)} {name} groups "
            f"({labels}); pass a group's label, e.g. --poi '{found[-1].label}' "
            f"'{found[0].label}'"
        )
    return found[0] if found else None


def _group_result(g: Group, env: str, reps: int, confidence: float, seed: int) -> GroupResult:
    """The statistics of one group's final eval returns; a note when seeds repeat."""
    group = g.runs
    scores = np.array([r.final_eval_return for r in group])
    point, low, high = stats.stratified_bootstrap_ci(
        scores, stats.iqm, reps=reps, confidence=confidence, seed=seed
    )
    seeds = [r.seed for r in group]
    dupes = sorted(s for s, n in Counter(seeds).items() if n > 1)
    if dupes:
        note(f"{env}/{g.label}: seed(s) {dupes} appear in more than one run; all are counted")
    settings = {}
    for key in sorted({k for r in group for k in (r.config or {}) if is_measurement(k)}):
        same, value = g.shared(key)
        if same and value is not MISSING:
            settings[key] = value
    return GroupResult(
        algo=g.algo,
        auto_label=g.auto_label,
        differs_by=g.terms,
        defaults=g.defaults,
        settings=settings,
        n_runs=len(group),
        seeds=seeds,
        iqm=point,
        iqm_ci=[low, high],
        mean=float(scores.mean()),
        std=float(scores.std(ddof=1)) if len(group) > 1 else None,
        min=float(scores.min()),
        max=float(scores.max()),
        final_eval_returns=scores.tolist(),
        total_steps=[r.summary.get("total_steps") for r in group],
        runs=[str(r.path) for r in group],
    )


def _improvement(
    poi: tuple[str, str],
    poi_groups: dict[str, tuple[Group | None, Group | None]],
    reps: int,
    confidence: float,
    seed: int,
) -> Improvement:
    """P(X > Y) of the final eval returns per env where both groups ran, and averaged."""
    per_env: dict[str, PairResult | None] = {}
    pairs = []
    for env, (gx, gy) in poi_groups.items():
        if gx is not None and gy is not None and gx is not gy:
            x = np.array([r.final_eval_return for r in gx.runs])
            y = np.array([r.final_eval_return for r in gy.runs])
            pairs.append((x, y))
            p, lo, hi = stats.probability_of_improvement_ci(
                x, y, reps=reps, confidence=confidence, seed=seed
            )
            per_env[env] = PairResult(p, [lo, hi], len(x), len(y), gx.label, gy.label)
        else:
            per_env[env] = None
    average = None
    if pairs:
        p, lo, hi = stats.average_probability_of_improvement_ci(
            pairs, reps=reps, confidence=confidence, seed=seed
        )
        average = AverageResult(p, [lo, hi], len(pairs))
    return Improvement(poi[0], poi[1], per_env, average)


def _method(
    reps: int,
    seed: int,
    confidence: float,
    tag: str,
    max_points: int,
    group_by: Sequence[str] | None,
    labels: Sequence[str],
) -> dict[str, Any]:
    """How the numbers were made, in words and settings (comparison.json's ``method``)."""
    return {
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
        "grouping": {
            "rule": "automatic" if group_by is None else "group-by",
            "group_by": None if group_by is None else list(group_by),
            "always_split_on": list(MEASUREMENT_KEYS),
            "ignored_keys": dict(IGNORED_KEYS) if group_by is None else {},
            "labels": list(labels),
        },
    }


def compute_comparison(
    runs: Sequence[FinishedRun],
    poi: tuple[str, str] | None = None,
    reps: int = stats.DEFAULT_REPS,
    seed: int = 0,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    tag: str = CURVE_TAG,
    max_points: int = 500,
    group_by: Sequence[str] | None = None,
    labels: Sequence[str] = (),
    references: References | None = None,
) -> Comparison:
    """Group the runs and compute every number of the report; write nothing.

    Args:
        runs: finished runs (:func:`~rlzoo.analysis.runs.find_runs`).
        poi: two group names X, Y for P(X > Y): a label, or an algo name with one group per env.
        reps: bootstrap resamples (default 2000); seed: the bootstrap RNG's seed (default 0).
        confidence: CI level in (0, 1) (default 0.95).
        tag: the scalar of the learning curves (default ``eval/return``), read from the runs'
            event files; max_points: at most this many steps per curve (default 500).
        group_by, labels: as :func:`~rlzoo.analysis.pooling.group_runs`.
        references: floors, published curves, normalization ranges and whether to aggregate
            across envs (:class:`References`; default: aggregate where rliable imports).

    Raises:
        CompareError: a wrong ``group_by`` key, ``labels`` rule, ``poi`` name or normalization
            rule; raised before any statistic or curve is computed.
    """
    refs = references or References()
    per_env = group_runs(runs, group_by, labels)
    check_rules(refs.normalize, list(per_env))
    poi_groups: dict[str, tuple[Group | None, Group | None]] = {}
    if poi is not None:
        for env, groups in per_env.items():
            poi_groups[env] = (resolve_poi(poi[0], env, groups), resolve_poi(poi[1], env, groups))
        for i, name in enumerate(poi):
            if all(pair[i] is None for pair in poi_groups.values()):
                choices = sorted({g.label for gs in per_env.values() for g in gs})
                raise CompareError(
                    f"--poi group {name!r} not among the runs found; choose from "
                    f"{'; '.join(choices)}"
                )

    floors = refs.floors(runs) if callable(refs.floors) else refs.floors
    ranges = ranges_for(list(per_env), refs.normalize, _floor_means(per_env, floors))
    results: dict[str, dict[str, GroupResult]] = {}
    curves: dict[str, dict[str, CurveResult]] = {}
    progress = Progress("reading curves, runs", len(runs))
    for env, groups in per_env.items():
        results[env] = {}
        for g in groups:
            results[env][g.label] = row = _group_result(g, env, reps, confidence, seed)
            if floors is not None:
                row.floors = group_floors(row.runs, row.final_eval_returns, floors)
            curve = group_curve(g.runs, tag, max_points, f"{env}/{g.label}", progress.advance)
            if curve is not None:
                point, low, high = stats.iqm_curve_ci(
                    curve.values, reps=reps, confidence=confidence, seed=seed
                )
                curves.setdefault(env, {})[g.label] = CurveResult(curve, point, low, high)
    progress.close()
    improvement = None
    if poi is not None:
        improvement = _improvement(poi, poi_groups, reps, confidence, seed)
    method = _method(reps, seed, confidence, tag, max_points, group_by, labels)
    comparison = Comparison(len(runs), method, results, curves, improvement)
    comparison.published = {env: [c for c in refs.published if c.task == env] for env in results}
    if floors is not None:
        comparison.floors = {env: f for env, groups in per_env.items()
                             if (f := env_floors([(str(r.path), r.seed) for g in groups
                                                  for r in g.runs], floors))}
    if refs.aggregate and len(results) > 1:
        comparison.aggregate_missing = rliable_missing()
        if comparison.aggregate_missing is None:
            finals = {env: {label: row.final_eval_returns for label, row in rows.items()}
                      for env, rows in results.items()}
            comparison.aggregate = compute_aggregate(finals, ranges, reps, confidence, seed)
    return comparison


@dataclass(frozen=True)
class References:
    """What a report sets beside the runs: ``floors`` (each run dir's paired floors,
    :mod:`rlzoo.policy.floors`, or a function of the runs that computes them, called once the groups
    are known to be valid; None: none drawn), ``published`` curves (``--published``), per-env
    normalization rules (``--normalize``; known ranges are used for the other envs) and
    whether to compute the ``aggregate`` across envs (rliable; with two envs or more)."""

    floors: Floors | Callable[[Sequence[FinishedRun]], Floors] | None = None
    published: Sequence[PublishedCurve] = ()
    normalize: Sequence[RangeRule] = ()
    aggregate: bool = True


def _floor_means(per_env: dict[str, list[Group]], floors: Floors | None
                 ) -> dict[str, dict[str, float]]:
    """``{env: {"zero": mean, "random": mean}}`` of the env's paired floors (``{}`` without)."""
    if floors is None:
        return {}
    means = {}
    for env, groups in per_env.items():
        found = env_floors([(str(r.path), r.seed) for g in groups for r in g.runs], floors)
        if found is not None:
            means[env] = found.mean
    return means
