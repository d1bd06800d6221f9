"""The page's statistics: IQM with its bootstrap CI, the rank tests (P(A > B) and
Mann-Whitney's U), Holm's correction within each family of tests (one per suite and question),
the verdicts they give, and the power statement of what `no difference found` can mean."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlzoo.analysis import stats
from tools.reproduce.page.runs import fmt
from tools.reproduce.page.text import phrase, seeds_text

ALPHA = 0.05     # the tests' level, after Holm's correction within each family of tests
# A test's kind (its key's first item) -> the question it answers. Holm's correction runs within
# one family per suite and question (:meth:`Tests.family`, the key's second item is the suite):
# a family is fixed by what its suite runs, so a row added to one suite leaves every other
# suite's verdicts as they were, and one question's tests never weigh on another's. One family
# over the whole page would grow with every cell until no 5-seed row could differ from 10
# published seeds at all (their least p, 2 / C(15, 5), clears Holm's first step only up to 75
# tests).
QUESTIONS = {  # kind -> the template (templates.txt) that says its question, in the page's order
    "head": "question.head",
    "yardstick": "question.yardstick",
    "ref": "question.ref",
    "peer": "question.peer",
    "variant": "question.variant",
}

def testable(n_a: int, n_b: int) -> bool:
    """Whether a two-sided rank test of ``n_a`` against ``n_b`` seeds can reach p < ALPHA at
    all: its smallest exact p is 2 / C(n_a + n_b, n_a) (one seed against 10: 0.18; 2 against 5:
    0.095; 3 against 5: 0.036). A row that cannot is shown but never tested, nor counted in
    Holm's family."""
    return 2.0 / math.comb(n_a + n_b, n_a) < ALPHA


def iqm_ci(values: list[float] | np.ndarray) -> tuple[float, float, float]:
    """IQM and its 95% stratified-bootstrap CI (rlzoo.compare's method and defaults)."""
    return stats.stratified_bootstrap_ci(np.asarray(values, dtype=float))


def iqm_text(values: list[float] | np.ndarray) -> str:
    """``IQM [low, high]`` of ``values``; a single value is ``value (1 seed)``, with no CI."""
    if len(values) == 1:
        return phrase("cell.one_seed", value=fmt(float(values[0])))
    point, lo, hi = iqm_ci(values)
    return f"{fmt(point)} [{fmt(lo)}, {fmt(hi)}]"


def untested_text(ours: list[float] | np.ndarray, theirs: list[float] | np.ndarray) -> str:
    """The verdict of a row too small to test (:func:`testable`): not tested, and where a single
    seed falls among the published ones, e.g. ``not tested: 1 seed, above 3 of 5``."""
    if len(ours) != 1:
        return phrase("verdict.untested", seeds=seeds_text(len(ours)))
    above = sum(1 for x in theirs if float(ours[0]) > float(x))
    return phrase("verdict.untested_one", seeds=seeds_text(1), above=above, n=len(theirs))


@dataclass
class Test:
    """One rank test of the page: P(A > B) over seed pairs with its 95% bootstrap CI, and the
    two-sided Mann-Whitney U test's p; ``adjusted`` is its Holm-adjusted p within its family
    (:meth:`Tests.family`)."""

    poi: tuple[float, float, float]
    p: float
    adjusted: float = math.nan

    def verdict(self) -> str:
        """``above``/``below`` when the Holm-adjusted p is under :data:`ALPHA`; the uncorrected
        reading when only it is; else ``no difference found``."""
        side = "above" if self.poi[0] > 0.5 else "below"
        if self.adjusted < ALPHA:
            return side
        if self.p < ALPHA:
            return phrase("verdict.before_holm", side=side, alpha=ALPHA)
        return phrase("verdict.none")

    def cells(self) -> str:
        """Two table cells: ``P [lo, hi]`` and ``verdict (p = .., Holm ..)``."""
        point, lo, hi = self.poi
        return f"{point:.2f} [{lo:.2f}, {hi:.2f}] | " + phrase(
            "cell.test", verdict=self.verdict(), p=pval(self.p), holm=pval(self.adjusted))


def pval(p: float) -> str:
    """A p-value with its relation: ``= 0.37``, ``= 0.049`` (three decimals below 0.1, so a p
    under :data:`ALPHA` never prints as ``0.05``), ``< 0.001``; ``—`` when not finite."""
    if not math.isfinite(p):
        return "—"
    if p < 0.001:
        return "< 0.001"
    return f"= {p:.3f}" if p < 0.1 else f"= {p:.2f}"


@dataclass
class Tests:
    """The page's rank tests, by key: ``(kind, suite, ...)``, the kind one of
    :data:`QUESTIONS`; :meth:`holm` adjusts each family (:meth:`family`) on its own."""

    items: dict[tuple[str, ...], Test] = field(default_factory=dict)

    def run(self, key: tuple[str, ...], x: Sequence[float], y: Sequence[float]) -> Test:
        """The test of ``x`` against ``y`` (computed once per key)."""
        if key[0] not in QUESTIONS:
            raise ValueError(f"a test's kind is one of {', '.join(QUESTIONS)}, not {key[0]!r}")
        if key not in self.items:
            from scipy.stats import mannwhitneyu

            poi = stats.probability_of_improvement_ci(list(x), list(y))
            p = float(mannwhitneyu(list(x), list(y), alternative="two-sided").pvalue)
            self.items[key] = Test(poi, p)
        return self.items[key]

    @staticmethod
    def family(key: tuple[str, ...]) -> tuple[str, str]:
        """The Holm family of the test ``key``: (its suite, its question's kind)."""
        return key[1] if len(key) > 1 else "", key[0]

    def families(self) -> dict[tuple[str, str], list[Test]]:
        """Every family's tests, in the order first met."""
        out: dict[tuple[str, str], list[Test]] = {}
        for key, test in self.items.items():
            out.setdefault(self.family(key), []).append(test)
        return out

    def holm(self) -> None:
        """Holm's step-down adjustment within each family: the i-th smallest p (from 0) of a
        family of m tests times (m - i), made monotone and capped at 1."""
        for members in self.families().values():
            order = sorted(members, key=lambda t: t.p)
            running = 0.0
            for i, test in enumerate(order):
                running = max(running, min(1.0, (len(order) - i) * test.p))
                test.adjusted = running

    def count(self, kind: str) -> int:
        """How many tests of ``kind`` (one of :data:`QUESTIONS`), over every suite."""
        return sum(1 for key in self.items if key[0] == kind)

    def family_size(self, suite: str, kind: str) -> int:
        """How many tests Holm's correction weighs together in ``suite``'s family ``kind``."""
        return len(self.families().get((suite, kind), []))

def rank_test_power(n_a: int, n_b: int, shift: float, alpha: float, draws: int = 4000,
                    seed: int = 0) -> float:
    """How often the two-sided exact Mann-Whitney test of ``n_a`` against ``n_b`` seeds finds a
    true gap of ``shift`` standard deviations at level ``alpha`` (normal returns, ``draws``
    simulated pairs of samples, a fixed seed): the page's statement of what `no difference
    found` can mean."""
    from itertools import combinations

    n = n_a + n_b
    ranks_a = np.array([sum(c) for c in combinations(range(1, n + 1), n_a)])
    null = np.sort(ranks_a - n_a * (n_a + 1) // 2)  # U of A under no difference, all orders
    rng = np.random.default_rng(seed)
    samples = np.concatenate([rng.normal(shift, 1.0, (draws, n_a)),
                              rng.normal(0.0, 1.0, (draws, n_b))], axis=1)
    ranks = samples.argsort(axis=1).argsort(axis=1) + 1
    u = ranks[:, :n_a].sum(axis=1) - n_a * (n_a + 1) // 2
    low = np.searchsorted(null, u, side="right") / len(null)   # P(U <= u)
    high = 1.0 - np.searchsorted(null, u, side="left") / len(null)  # P(U >= u)
    p = np.minimum(1.0, 2.0 * np.minimum(low, high))
    return float((p < alpha).mean())
