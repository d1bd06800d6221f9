"""What the page found where a row stands apart from the rows it builds on, written from the
results each time the page renders: every number in these sentences is computed from the runs'
evaluation curves and the page's own rank tests (a row's temperature: page/temperature.py), so a
cell trained again (or to a larger budget) cannot leave a stale number behind. A finding whose
cells are missing is left out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlzoo.analysis import stats
from tools.reproduce.page.data import SuiteData, cell_budget, pair_tests
from tools.reproduce.page.runs import eval_points, fmt, kilo, mean_over_evaluations, seed_of
from tools.reproduce.page.temperature import TEMPERATURE_FINDINGS
from tools.reproduce.page.text import phrase
from tools.reproduce.page.verdicts import ALPHA, Test, Tests, pval

CHUNKED = "sac-action_sequence"  # the chunked critic's row
BASE = "sac"                     # the row it builds on
CONTROL = "sac-n_step4"          # its control: the same 4-step backup without the chunks


def common_budget(data: SuiteData, task: str, *rows: str) -> int:
    """The step at which :func:`pair_tests` compares ``rows``: the smallest of their budgets."""
    return min(cell_budget(data.cell(task, row)) for row in rows)


PairTests = list[tuple[str, str, str, Test | None, Test | None]]  # what pair_tests returns


def pair(found: PairTests, a: str, b: str) -> tuple[Test, Test] | None:
    """Of the page's pair tests ``found`` (:func:`pair_tests`), row ``a`` against row ``b``
    (final return, mean over evaluations), as its tables show them; None when not tested."""
    for _, first, label, final, curve in found:
        if first == a and label.split(" (")[0] == b and final is not None and curve is not None:
            return final, curve
    return None


def seed_pairs(won: float, n_a: int, n_b: int) -> str:
    """How many of the ``n_a x n_b`` seed pairs a side wins, from the fraction it wins (P(A > B)
    for A, 1 - P for B; ties count half): ``every``, ``no`` or ``k of n``."""
    total = n_a * n_b
    pairs = round(won * total * 2) / 2  # a whole or half number of pairs
    name = "seed_pairs.every" if pairs >= total else "seed_pairs.none" if pairs <= 0 \
        else "seed_pairs.some"
    return phrase(name, pairs=pairs, total=total)


def reading(test: Test) -> str:
    """A test in a sentence: ``above at p < 0.05, not after Holm (P(A > B) = 0.92, p = 0.032)``."""
    return phrase("finding.reading", verdict=test.verdict(), poi=test.poi[0], p=pval(test.p))


def differs(test: Test, side: str) -> bool:
    """Whether ``test`` is on ``side`` (``above`` or ``below``) at p < ALPHA before Holm."""
    return test.p < ALPHA and (test.poi[0] > 0.5) == (side == "above")


def curve_until(run: Path, last: int) -> list[tuple[int, float]]:
    """A run's evaluations up to env step ``last``."""
    return [(s, v) for s, v in eval_points(run) if s <= last]


def span(values: list[float]) -> str:
    """``low to high`` of ``values`` as the page writes returns (``—`` when there are none)."""
    return phrase("span", low=fmt(min(values)), high=fmt(max(values))) if values else "—"


def largest_drop(runs: list[Path], last: int) -> tuple[int, int, float, int, float] | None:
    """The largest drop between two consecutive evaluations of any seed up to ``last``: (seed,
    step before, its return, step after, its return); None when no curve ever drops."""
    best, drop = None, 0.0
    for run in runs:
        points = curve_until(run, last)
        for (s1, v1), (s2, v2) in zip(points, points[1:]):
            if v1 - v2 > drop:
                drop, best = v1 - v2, (seed_of(run), s1, v1, s2, v2)
    return best


def drop_text(runs: list[Path], last: int) -> str:
    """``seed 1, 2,499 at 85k to 123 at 90k`` (:func:`largest_drop`), or ``none``."""
    found = largest_drop(runs, last)
    if found is None:
        return phrase("finding.no_drop")
    seed, s1, v1, s2, v2 = found
    return phrase("finding.drop", seed=seed, before=fmt(v1), at=kilo(s1), after=fmt(v2),
                  then=kilo(s2))


def iqm_above(data: SuiteData, task: str, a: str, b: str, last: int
              ) -> tuple[int, list[int], int]:
    """At how many of the evaluation steps both rows share up to ``last``, the first (the
    untrained policy: every row's warm-up lasts until it) left out, row ``a``'s IQM over seeds is
    above row ``b``'s: (above, the steps compared, the first step from which it stays above, or
    0 when it is not above at the last)."""
    every = data.suite.eval_every

    def by_step(row: str) -> dict[int, list[float]]:  # an evaluation lands at or after its step
        out: dict[int, list[float]] = {}
        for run in data.cell(task, row):
            for s, v in curve_until(run, last):
                out.setdefault(s - s % every, []).append(v)
        return out

    ours, theirs = by_step(a), by_step(b)
    n_a, n_b = len(data.cell(task, a)), len(data.cell(task, b))
    steps = sorted(s for s in ours if s in theirs and len(ours[s]) == n_a
                   and len(theirs[s]) == n_b)[1:]  # the first measures the untrained policy
    above = [stats.iqm(ours[s]) > stats.iqm(theirs[s]) for s in steps]
    since = 0
    for s, up in zip(reversed(steps), reversed(above)):
        if not up:
            break
        since = s
    return sum(above), steps, since


def seed_means(runs: list[Path], last: int) -> list[float]:
    """Each seed's mean over its evaluations up to ``last``."""
    return [m[1] for d in runs if (m := mean_over_evaluations(d, last)) is not None]


def ready(data: SuiteData, task: str, *rows: str) -> bool:
    """Whether every one of ``rows`` has at least two seeds on ``task``."""
    return all(len(data.cell(task, row)) >= 2 for row in rows)


def holm_caveat(*tests: Test) -> str:
    """``; none of these p survives Holm's correction (see the method)`` when none does, else
    ''."""
    return phrase("chunks.holm_none") if all(t.adjusted >= ALPHA for t in tests) else ""


def chunk_tests(data: SuiteData, tests: Tests, task: str
                ) -> tuple[tuple[Test, Test], tuple[Test, Test], tuple[Test, Test]] | None:
    """The page's tests (final return, mean over evaluations) of the chunked row against SAC,
    the control against SAC and the chunked row against the control; None unless all three
    rows have two seeds or more and every pair was tested."""
    if not ready(data, task, CHUNKED, BASE, CONTROL):
        return None
    found = pair_tests(data, tests, task)
    main, control, between = (pair(found, *p) for p in (
        (CHUNKED, BASE), (CONTROL, BASE), (CHUNKED, CONTROL)))
    if main is None or control is None or between is None:
        return None
    return main, control, between


def chunks_lead(data: SuiteData, tests: Tests, task: str) -> str | None:
    """The chunked critic ahead of SAC on the mean over evaluations, and whether its 4-step
    control explains the lead (written for Hopper): two paragraphs."""
    found = chunk_tests(data, tests, task)
    if found is None:
        return None
    main, control, between = found
    runs, base, ctrl = data.cell(task, CHUNKED), data.cell(task, BASE), data.cell(task, CONTROL)
    at = common_budget(data, task, CHUNKED, BASE)
    above, steps, since = iqm_above(data, task, CHUNKED, BASE, at)
    iqm = phrase("chunks.iqm_none")
    if steps:
        second = data.values_at(task, CHUNKED, steps[0]), data.values_at(task, BASE, steps[0])
        when = phrase("chunks.iqm_when_seeds" if second[0] and second[1] else "chunks.iqm_when",
                      first=kilo(steps[0]), last=kilo(steps[-1]), ours=span(second[0] or []),
                      theirs=span(second[1] or []))
        iqm = phrase("chunks.iqm_every" if above == len(steps) else
                     "chunks.iqm_some_since" if since else "chunks.iqm_some",
                     above=above, n=len(steps), since=kilo(since), when=when)
    lead = differs(main[1], "above") and not differs(control[1], "above") \
        and differs(between[1], "above")
    return phrase(
        "chunks.lead", task=task, at=kilo(at), row=CHUNKED, mean=reading(main[1]),
        pairs=seed_pairs(main[1].poi[0], len(runs), len(base)), iqm=iqm,
        final=reading(main[0]), drop=drop_text(runs, at), base_drop=drop_text(base, at)
    ) + "\n\n" + phrase(
        "chunks.control_lead", control=CONTROL,
        c_at=kilo(common_budget(data, task, CONTROL, BASE)), c_mean=reading(control[1]),
        b_at=kilo(common_budget(data, task, CHUNKED, CONTROL)), b_mean=reading(between[1]),
        b_pairs=seed_pairs(between[1].poi[0], len(runs), len(ctrl)),
        conclusion=phrase("chunks.lead_chunks" if lead else "chunks.lead_unclear"),
        holm=holm_caveat(*main, *control, *between))


def chunks_gap(data: SuiteData, tests: Tests, task: str) -> str | None:
    """The chunked critic behind SAC on the mean over evaluations, and whether its 4-step
    control shows the same gap (written for HalfCheetah): two paragraphs."""
    found = chunk_tests(data, tests, task)
    if found is None:
        return None
    main, control, between = found
    runs, base, ctrl = data.cell(task, CHUNKED), data.cell(task, BASE), data.cell(task, CONTROL)
    at = common_budget(data, task, CHUNKED, BASE)
    c_at = common_budget(data, task, CONTROL, BASE)
    nstep = differs(main[1], "below") and differs(control[1], "below") \
        and between[0].p >= ALPHA and between[1].p >= ALPHA
    return phrase(
        "chunks.gap", task=task, at=kilo(at), row=CHUNKED, mean=reading(main[1]),
        pairs=seed_pairs(1.0 - main[1].poi[0], len(runs), len(base)),
        means=span(seed_means(runs, at)), base_means=span(seed_means(base, at)),
        final=reading(main[0]), drop=drop_text(runs, at), base_drop=drop_text(base, at)
    ) + "\n\n" + phrase(
        "chunks.control_gap", control=CONTROL, c_at=kilo(c_at), c_mean=reading(control[1]),
        c_pairs=seed_pairs(1.0 - control[1].poi[0], len(ctrl), len(base)),
        c_means=span(seed_means(ctrl, c_at)), base_means=span(seed_means(base, c_at)),
        b_at=kilo(common_budget(data, task, CHUNKED, CONTROL)), b_mean=reading(between[1]),
        conclusion=phrase("chunks.gap_nstep" if nstep else "chunks.gap_unclear"),
        holm=holm_caveat(*main, *control, *between))


# TASK/row -> its finding, shown after that task's tables (where the page has its rows).
FINDINGS: dict[str, Callable[[SuiteData, Tests, str], str | None]] = {
    f"Hopper/{CHUNKED}": chunks_lead,
    f"HalfCheetah/{CHUNKED}": chunks_gap,
    **TEMPERATURE_FINDINGS,
}


def finding_lines(data: SuiteData, tests: Tests, task: str, rows: list[str]) -> list[str]:
    """The findings of ``task``'s ``rows`` that the results allow, each a sentence or more."""
    found = [FINDINGS[key](data, tests, task) for row in rows
             if (key := f"{task}/{row}") in FINDINGS]
    return [text for text in found if text]
