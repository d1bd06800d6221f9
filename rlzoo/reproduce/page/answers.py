"""The page's first screen: one sentence for each question a researcher brings to it (does
rlzoo reproduce SAC and TD3; how do the modern rows compare; how do the multi-agent rows do;
what is not run yet), each computed from the results when the page renders, from the same
tests and tables as the rest of the page, so no number in it can go stale."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlzoo.analysis import stats
from rlzoo.reproduce.files import read_json, summary_steps
from rlzoo.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    best_reference,
    pair_tests,
    reference_tests,
)
from rlzoo.reproduce.page.runs import fmt, kilo, row_of_runs
from rlzoo.reproduce.page.scale import MULTI_AGENT_PREFIXES, SCALE_FILE
from rlzoo.reproduce.page.verdicts import ALPHA, Test, Tests, rank_test_power
from rlzoo.reproduce.references import MODERN_ROWS, Reference

REPRODUCED = ("sac", "td3")  # the rows whose published curves the page is first about


@dataclass
class Verdict:
    """One headline verdict: a cell at a budget against the best published curve it has."""

    task: str
    row: str
    steps: int
    ref: Reference
    test: Test
    n_ours: int
    n_theirs: int


def headline_verdicts(data: SuiteData, tests: Tests, rows: Sequence[str]) -> list[Verdict]:
    """The headline's tested verdicts of ``rows`` (every task and headline budget)."""
    out = []
    for task in data.suite.tasks:
        for row in rows:
            for s in data.suite.headline_steps:
                best = best_reference(reference_tests(data, tests, task.name, row, s))
                if best is not None and best[2] is not None:
                    ours = data.windows(task.name, row, s) or []
                    out.append(Verdict(task.name, row, s, best[0], best[2], len(ours),
                                       len(best[1])))
    return out


def joined(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def where(verdicts: Sequence[Verdict]) -> str:
    """The cells of ``verdicts`` in words, tasks grouped by their budgets: ``on Hopper and
    HalfCheetah at 50k and 100k, on Walker2d at 50k``."""
    budgets: dict[str, list[int]] = {}
    for v in verdicts:
        budgets.setdefault(v.task, []).append(v.steps)
    groups: dict[tuple[int, ...], list[str]] = {}
    for task, steps in budgets.items():
        groups.setdefault(tuple(sorted(set(steps))), []).append(task)
    return ", ".join(f"on {joined(tasks)} at {joined([kilo(s) for s in steps])}"
                     for steps, tasks in groups.items())


def power_clause(counts: Sequence[tuple[int, int]]) -> str:
    """What `no difference found` can mean at these seed counts (the method's simulation):
    ``counts`` are the verdicts' (rlzoo's seeds, the published curve's seeds); differing counts
    give ranges (``with 5 to 10 seeds against 10 ... 34% to 50% of the time``)."""
    def span(values: Sequence[Any], form: Callable[[Any], str]) -> str:
        low, high = min(values), max(values)
        return form(low) if low == high else f"{form(low)} to {form(high)}"

    powers = [rank_test_power(ours, theirs, 1.0, ALPHA) for ours, theirs in counts]
    return (f"with {span([c[0] for c in counts], str)} seeds against "
            f"{span([c[1] for c in counts], str)} the rank test finds a true gap of one "
            f"standard deviation only {span(powers, lambda p: f'{p:.0%}')} of the time "
            f"(p < {ALPHA:g}), so this is a gap not found, not a match shown")


def reproduce_answer(data: SuiteData, tests: Tests,
                     question: str = "Does rlzoo reproduce SAC and TD3?") -> str | None:
    """Does rlzoo reproduce SAC and TD3 (``question``: its words for a later suite): the
    headline verdicts of :data:`REPRODUCED` against the best published curve of their own
    algorithm, the power caveat beside them, and the rows against their Stable-Baselines3
    peer."""
    found = [v for v in headline_verdicts(data, tests, REPRODUCED) if not v.ref.yardstick]
    if not found:
        return None
    after = [v for v in found if v.test.adjusted < ALPHA]
    before = [v for v in found if v.test.p < ALPHA <= v.test.adjusted]
    rows = joined([f"`{r}`" for r in REPRODUCED if any(v.row == r for v in found)])
    points = sorted(v.test.poi[0] for v in found)
    text = (f"**{question}** "
            f"{'As far as these seeds can tell, yes: a' if not after else 'A'}gainst the best "
            f"published curve of their own algorithm ({where(found)}), ")
    if len(found) == 1:
        side = "above" if found[0].test.poi[0] > 0.5 else "below"
        text += (f"rlzoo's one {rows} verdict " + (f"finds it {side} after Holm" if after else
                 f"finds it {side} only before Holm" if before else
                 "finds no difference, before or after Holm"))
    elif not after and not before:
        text += (f"none of rlzoo's {len(found)} {rows} verdicts finds a difference, before or "
                 "after Holm")
    else:
        text += (f"{len(after)} of rlzoo's {len(found)} {rows} verdicts differ after Holm"
                 + (f" ({', '.join(f'{v.task} {v.row} at {kilo(v.steps)}' for v in after)})"
                    if after else "")
                 + (f", {len(before)} more only before it" if before else ""))
    span = (f"= {points[0]:.2f}" if len(points) == 1 else
            f"from {points[0]:.2f} to {points[-1]:.2f}")
    text += f" (P(rlzoo > published) {span})"
    if len(after) < len(found):  # the power of the verdicts that found no difference
        text += f"; but {power_clause([(v.n_ours, v.n_theirs) for v in found])}"
    peers = [(task.name, a, final) for task in data.suite.tasks
             for kind, a, _, final, _ in pair_tests(data, tests, task.name)
             if kind == "peer" and a in REPRODUCED and final is not None]
    if peers:
        differ = [f"{a} on {task}" for task, a, final in peers if final.p < ALPHA]
        text += (f". Against Stable-Baselines3's SAC and TD3 with the same settings, "
                 f"{len(peers)} final-return tests" + (f" find a difference at p < {ALPHA:g} "
                 f"for {', '.join(differ)}" if differ else " find no difference"))
    return text + "."


def yardstick_clause(data: SuiteData, yard: list[Verdict]) -> str:
    """The modern rows against another algorithm's curve: each row's verdicts by task and
    budget, and where that curve stands in the aggregate across tasks."""
    algo = yard[0].ref.algo
    rows = list(dict.fromkeys(v.row for v in yard))
    text = (f"{joined([f'`{r}`' for r in rows])} have no published curve of their own, so the "
            f"headline sets them against {algo}, another algorithm (a comparison, not a "
            "reproduction): ")
    per_row = []
    for row in rows:
        by: dict[str, list[Verdict]] = {}
        for v in yard:
            if v.row == row:
                by.setdefault(v.test.verdict(), []).append(v)
        first, *rest = (f"{verdict} {where(vs)}" for verdict, vs in by.items())
        per_row.append(f"`{row}` {first}" + (f" ({', '.join(rest)})" if rest else ""))
    text += "; ".join(per_row)
    tops = []
    for s in data.suite.headline_steps:
        tasks, scores = aggregate_scores(data, s)
        if algo in scores:
            iqm = {k: stats.iqm(v) for k, v in scores.items()}
            tops.append((s, sorted(iqm, key=lambda k: -iqm[k]), iqm, tasks))
    if tops and all(ranked[0] == algo for _, ranked, _, _ in tops):
        runner = {ranked[1] for _, ranked, _, _ in tops}
        text += (f". {algo} has the highest normalized IQM of all rows, published or rlzoo's, "
                 f"across {joined(tops[0][3])}: "
                 + joined([f"{iqm[algo]:.2f} at {kilo(s)}" for s, _, iqm, _ in tops]))
        if len(runner) == 1:
            (second,) = runner
            text += (f"; next comes {second} with "
                     + joined([f"{iqm[second]:.2f}" for _, _, iqm, _ in tops]))
    return text


def modern_answer(data: SuiteData, tests: Tests) -> str | None:
    """How do the modern rows compare: against another algorithm's curve (CrossQ), against
    the rlzoo row each builds on, and a cell that stopped short of the headline."""
    modern = [r for r in data.suite.rows if r.label in MODERN_ROWS]
    if not modern:
        return None
    parts, shorts = [], []
    yard = [v for v in headline_verdicts(data, tests, [r.label for r in modern])
            if v.ref.yardstick]
    if yard:
        parts.append(yardstick_clause(data, yard))
    by_base: dict[str, list[str]] = {}  # an rlzoo base row -> each modern row's verdicts
    for row in modern:
        found = [(task.name, curve) for task in data.suite.tasks
                 for kind, a, b, _, curve in pair_tests(data, tests, task.name)
                 if kind == "against" and a == row.label and curve is not None
                 and b.split(" (")[0] == (row.against or ("",))[0]]
        if found:
            by: dict[str, list[str]] = {}
            for task, curve in found:
                by.setdefault(curve.verdict(), []).append(task)
            first, *rest = (f"{verdict} on {joined(tasks)}" for verdict, tasks in by.items())
            by_base.setdefault(row.against[0], []).append(
                f"`{row.label}` {first}" + (f" ({'; '.join(rest)})" if rest else ""))
        shorts += short_cells(data, row.label, row.against[0] if row.against else None)
    parts += [f"Against rlzoo's `{base}`, on each seed's mean over evaluations: "
              + "; ".join(rows) for base, rows in by_base.items()]
    if not parts + shorts:
        return None
    return "**How do the modern rows compare?** " + ". ".join(parts + shorts) + "."


def short_cells(data: SuiteData, row: str, base: str | None) -> list[str]:
    """A cell of ``row`` that stopped short of the first headline budget, where it got to,
    against ``base``'s seeds at the same step (not tested: too few seeds)."""
    out = []
    first = data.suite.headline_steps[0] if data.suite.headline_steps else data.suite.steps
    for task in data.suite.tasks:
        runs = data.cell(task.name, row)
        reached = [summary_steps(d) or 0 for d in runs]
        if not runs or min(reached) >= first:
            continue
        at = min(reached)
        ours = data.values_at(task.name, row, at)
        theirs = data.values_at(task.name, base, at) if base else None
        seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
        text = f"`{row}` has run {seeds} on {task.name}, to {kilo(at)} only"
        if ours and theirs:
            above = sum(1 for t in theirs if min(ours) > t)
            share = f"all {above}" if above == len(theirs) else f"{above} of the {len(theirs)}"
            text += (f": {', '.join(fmt(v) for v in ours)} at {kilo(at)}, above {share} "
                     f"`{base}` seeds there ({fmt(min(theirs))} to {fmt(max(theirs))}), too "
                     "few seeds to test")
        out.append(text)
    return out


def floor_answer(data: Sequence[SuiteData]) -> str | None:
    """How do the multi-agent rows do: the rows whose IQM of final returns is below the env's
    zero action (not acting; standing still on MaMuJoCo), with how many seeds beat it."""
    found, few = [], []
    for d in data:
        scale = read_json(d.root / SCALE_FILE) or {}
        results = (d.report or {}).get("results") or {}
        for env in [t.name for t in d.suite.tasks if t.name in results]:
            groups = results[env]
            if not env.startswith(MULTI_AGENT_PREFIXES) or env not in scale:
                continue
            zero = float(scale[env]["zero"][0])
            rows = [(row_of_runs(g["runs"]), g["iqm"],  # label, IQM, seeds beating it, seeds
                     sum(f > zero for f in g["final_eval_returns"]), len(g["final_eval_returns"]))
                    for g in groups.values()]
            below = [row for row in rows if row[1] < zero]
            if below:
                still = "standing still" if env.startswith("mamujoco-") else "not acting"
                found.append(f"on {env} " + joined([
                    f"`{label}` ({fmt(iqm)}; {beat} of {n} seeds beat it)"
                    for label, iqm, beat, n in below])
                    + f" against the zero action's {fmt(zero)} ({still})")
            few += [f"`{label}` on {env}, {beat} of {n} seeds"  # above it by IQM, not by most
                    for label, iqm, beat, n in rows if iqm >= zero and 2 * beat < n]
    if not found:
        return None
    return ("**How do the multi-agent rows do?** No reference is published at these budgets, "
            "and some rows end below the env's zero action (IQM of the final returns): "
            + "; ".join(found) + "; every other row's IQM is above it"
            + (f", though fewer than half the seeds beat it for {joined(few)}" if few else "")
            + ".")


def not_run_answer(data: Sequence[SuiteData]) -> str | None:
    """What is not run yet: per suite, each row with the tasks it has no result on or that
    stopped short (fewer seeds or steps than the suite's), and each suite with no result."""
    parts = []
    for d in data:
        suite = d.suite
        if d.report is None:
            parts.append(f"`{suite.name}`: no cell yet, {suite.not_run}")
            continue
        rows: dict[str, list[str]] = {}
        for task, row in suite.cells():
            runs = d.cell(task.name, row.label)
            budget = task.steps or suite.steps
            if not runs:
                rows.setdefault(row.label, []).append(task.name)
                continue
            reached = min(summary_steps(r) or 0 for r in runs)
            short = ([f"{len(runs)} of {suite.seeds} seeds"] if len(runs) < suite.seeds
                     else []) + ([f"to {kilo(reached)} of {kilo(budget)}"] if reached < budget
                                 else [])
            if short:
                rows.setdefault(row.label, []).append(f"{task.name}: {', '.join(short)}")
        if rows:
            parts.append(f"`{suite.name}`: " + ", ".join(
                f"`{label}` ({'; '.join(tasks)})" for label, tasks in rows.items()))
    if not parts:
        return None
    return ("**What is not run yet?** " + "; ".join(parts) + ". Each suite's cells table, at "
            "the end of its section, says why.")


def answer_lines(data: Sequence[SuiteData], tests: Tests) -> list[str]:
    """The first screen: one bullet per question, from the suites with results."""
    reproduce: list[str | None] = []  # a later suite's verdicts ask it again, further on
    modern: list[str | None] = []
    for d in data:
        if d.report is not None and d.suite.headline_steps:
            reproduce.append(reproduce_answer(d, tests, f"Does it hold further on "
                                              f"({d.suite.title})?") if any(reproduce)
                             else reproduce_answer(d, tests))
            modern.append(modern_answer(d, tests))
    answers = [*reproduce, *modern, floor_answer(data), not_run_answer(data)]
    kept = [a for a in answers if a]
    if not kept:
        return []
    return ["**In one minute** (every number computed from the results when the page renders; "
            "the headline and the sections below give each one's table):", "",
            *(f"- {a}" for a in kept), ""]
