"""Tests of rlzoo.analysis.stats: hand-checkable cases and scipy's (rliable's) definitions."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from rlzoo.analysis import stats


def test_iqm_of_one_to_eight_is_mean_of_middle_four() -> None:
    assert stats.iqm(np.arange(1, 9)) == pytest.approx(np.mean([3, 4, 5, 6])) == 4.5


def test_iqm_of_equal_values_is_that_value() -> None:
    assert stats.iqm([2.5, 2.5, 2.5, 2.5]) == 2.5


@pytest.mark.parametrize("n", range(1, 14))
def test_iqm_matches_scipy_trim_mean_for_any_n(n: int) -> None:
    x = np.random.default_rng(n).normal(size=n) * 100
    assert stats.iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25))


def test_iqm_trims_int_quarter_from_each_end() -> None:
    # n = 5: int(1.25) = 1 cut from each end -> mean of the middle 3; n = 3: nothing is cut.
    assert stats.iqm([0.0, 1.0, 2.0, 3.0, 100.0]) == pytest.approx(2.0)
    assert stats.iqm([0.0, 1.0, 100.0]) == pytest.approx(101.0 / 3.0)


def test_iqm_pools_runs_and_tasks_like_rliable() -> None:
    x = np.random.default_rng(0).normal(size=(7, 3))
    assert stats.iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25, axis=None))


def test_bad_scores_raise() -> None:
    with pytest.raises(ValueError):
        stats.iqm([1.0, np.nan])
    with pytest.raises(ValueError):
        stats.iqm(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError):
        stats.iqm([])


def test_bootstrap_ci_of_constant_scores_is_degenerate() -> None:
    assert stats.stratified_bootstrap_ci([3.0] * 6) == (3.0, 3.0, 3.0)
    assert stats.stratified_bootstrap_ci(np.full((4, 3), -1.5)) == (-1.5, -1.5, -1.5)


@pytest.mark.parametrize("seed", range(5))
def test_bootstrap_ci_contains_point_estimate(seed: int) -> None:
    x = np.random.default_rng(seed).normal(10.0, 3.0, size=(10, 2))
    point, low, high = stats.stratified_bootstrap_ci(x, stats.iqm, seed=seed)
    assert point == pytest.approx(stats.iqm(x))
    assert low < point < high


def test_bootstrap_ci_narrows_with_more_runs() -> None:
    rng = np.random.default_rng(1)
    widths = []
    for runs in (5, 20, 80):
        _, low, high = stats.stratified_bootstrap_ci(rng.normal(size=runs), stats.iqm)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]


def test_bootstrap_resamples_within_each_task_only() -> None:
    # Task 0 always scores 0, task 1 always 10: a stratified resample always holds three of each,
    # so the pooled IQM and the mean are the same in every resample. Pooled resampling would vary.
    x = np.array([[0.0, 10.0]] * 3)
    assert stats.stratified_bootstrap_ci(x, stats.iqm) == (5.0, 5.0, 5.0)
    assert stats.stratified_bootstrap_ci(x, "mean") == (5.0, 5.0, 5.0)


def test_bootstrap_is_reproducible_and_seeded() -> None:
    x = np.random.default_rng(2).normal(size=(6, 2))
    assert stats.stratified_bootstrap_ci(x, seed=3) == stats.stratified_bootstrap_ci(x, seed=3)
    assert stats.stratified_bootstrap_ci(x, seed=3) != stats.stratified_bootstrap_ci(x, seed=4)


def test_vectorized_and_generic_statistic_agree() -> None:
    x = np.random.default_rng(3).normal(size=(9, 2))

    def trim(a: np.ndarray) -> float:
        return float(scipy.stats.trim_mean(a, 0.25, axis=None))

    fast = stats.stratified_bootstrap_ci(x, stats.iqm, reps=300)
    slow = stats.stratified_bootstrap_ci(x, trim, reps=300)
    assert fast == pytest.approx(slow)
    assert stats.stratified_bootstrap_ci(x, "median", reps=300) == pytest.approx(
        stats.stratified_bootstrap_ci(x, stats.aggregate_median, reps=300)
    )


def test_unknown_statistic_name_raises() -> None:
    with pytest.raises(ValueError, match="unknown statistic"):
        stats.stratified_bootstrap_ci([1.0, 2.0], "mode")


def test_probability_of_improvement_hand_cases() -> None:
    assert stats.probability_of_improvement([5.0, 6.0, 7.0], [1.0, 2.0]) == 1.0
    assert stats.probability_of_improvement([1.0, 2.0], [5.0, 6.0, 7.0]) == 0.0
    assert stats.probability_of_improvement([1.0, 2.0, 2.0], [1.0, 2.0, 2.0]) == 0.5
    # pairs (1, 2): loss, (2, 2): tie counts 1/2 -> 0.25
    assert stats.probability_of_improvement([1.0, 2.0], [2.0]) == 0.25


def test_probability_of_improvement_matches_mann_whitney_per_task() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(0, 5, size=(6, 3)).astype(float)  # integers: plenty of ties
    y = rng.integers(0, 5, size=(4, 3)).astype(float)
    expected = np.mean(
        [
            scipy.stats.mannwhitneyu(x[:, t], y[:, t], alternative="greater")[0] / 24
            for t in range(3)
        ]
    )
    assert stats.probability_of_improvement(x, y) == pytest.approx(expected)


def test_probability_of_improvement_ci() -> None:
    assert stats.probability_of_improvement_ci([5.0, 6.0], [1.0, 2.0, 3.0]) == (1.0, 1.0, 1.0)
    rng = np.random.default_rng(5)
    x, y = rng.normal(0.5, 1, size=8), rng.normal(0, 1, size=8)
    point, low, high = stats.probability_of_improvement_ci(x, y)
    assert point == stats.probability_of_improvement(x, y)
    assert 0.0 <= low < point < high <= 1.0


def test_average_probability_of_improvement_over_ragged_tasks() -> None:
    pairs = [(np.array([5.0, 6.0]), np.array([1.0, 2.0, 3.0])), (np.array([0.0]), np.array([1.0]))]
    assert stats.average_probability_of_improvement_ci(pairs) == (0.5, 0.5, 0.5)


def test_iqm_curve_ci_per_point() -> None:
    rng = np.random.default_rng(6)
    curves = rng.normal(size=(7, 50)) + np.linspace(0, 10, 50)
    curves[:, 0] = 4.0  # a constant point has a degenerate band
    point, low, high = stats.iqm_curve_ci(curves, reps=500, max_elements=7 * 500 * 8)  # chunks
    assert point == pytest.approx(scipy.stats.trim_mean(curves, 0.25, axis=0))
    assert (low[0], point[0], high[0]) == (4.0, 4.0, 4.0)
    assert np.all(low <= point + 1e-12) and np.all(point <= high + 1e-12)
    assert np.all(high[1:] > low[1:])
