"""The page's method section: how every number of the page is made, and every caveat, said once.
The wording is in page/templates.txt (``method.*``); the numbers (families, power, updates,
versions) are computed when the page renders."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tools.reproduce.page.runs import WINDOW, kilo
from tools.reproduce.page.text import phrase
from tools.reproduce.page.verdicts import ALPHA, QUESTIONS, Tests, rank_test_power
from tools.reproduce.references import REFERENCES, SOURCES


def method_lines(tests: Tests,
                 compared: Sequence[tuple[str, int, int | None, str]] = ()) -> list[str]:
    """The method: how every number is made and every caveat, once; ``compared`` are the
    headline verdicts' published curves with their updates (:func:`updates_line`)."""
    least = 2 / math.comb(15, 5)  # 5 seeds against 10, every seed on one side
    pair = 2 / math.comb(10, 5)
    lines = [phrase("method.heading"), "", phrase("method.returns"), "",
             phrase("method.published", window=kilo(WINDOW)), "",
             phrase("method.versions", versions=versions()), ""]
    updates = updates_line(compared)
    if updates:
        lines += [phrase("method.updates", updates=updates), ""]
    lines += [phrase("method.pairs"), "",
              phrase("method.holm", alpha=ALPHA, n=len(tests.families()),
                                        total=len(tests.items), least=least,
                                        most=math.floor(ALPHA / least)), "",
              *family_table(tests), "",
              phrase("method.power", one=power(1.0), more=power(1.75), alpha=ALPHA,
                                         pair=pair, pair_most=math.floor(ALPHA / pair)), "",
              phrase("method.hyper"), ""]
    return lines


def power(shift: float) -> str:
    """How often 5 seeds against 10 find a true gap of ``shift`` standard deviations."""
    return f"{rank_test_power(5, 10, shift, ALPHA):.0%}"


def family_table(tests: Tests) -> list[str]:
    """Each Holm family: its suite, question, size, Holm's first step, and whether 5 seeds
    against 10 (every seed of one side above the other's) can pass it."""
    least = 2 / math.comb(15, 5)
    lines = [phrase("method.families_columns"), "|---|---|---:|---:|---|"]
    families = tests.families()
    suites = list(dict.fromkeys(suite for suite, _ in families))  # in the page's order
    for (suite, kind), members in sorted(families.items(), key=lambda kv: (
            suites.index(kv[0][0]), list(QUESTIONS).index(kv[0][1]))):
        m = len(members)
        lines.append(f"| `{suite}` | {phrase(QUESTIONS[kind])} | {m} | {ALPHA / m:.5f} | "
                     f"{phrase('method.can' if least <= ALPHA / m else 'method.cannot')} |")
    return lines


def versions() -> str:
    """The env versions of the published curves the page uses, by source, with their tasks:
    ``the TD3 paper gym v1 (Hopper, HalfCheetah, Walker2d, Ant); ...``."""
    parts = []
    for source in SOURCES.values():
        tasks = list(dict.fromkeys(r.task for r in REFERENCES
                                   if r.source == source.key and r.curve() is not None))
        if tasks and source.version:
            parts.append(phrase("method.version", source=source.name, version=source.version,
                                tasks=", ".join(tasks)))
    return "; ".join(parts)


def updates_line(compared: Sequence[tuple[str, int, int | None, str]]) -> str:
    """Whether each published curve in the verdicts had made fewer or more gradient updates
    than rlzoo's row by the compared step (its first appearance), or that its source does not
    say: ``SAC (Tianshou) fewer (40,000 against 45,000 at 50k); ...``; '' without any."""
    seen: dict[str, str] = {}
    for algo, steps, ours, theirs in compared:
        if algo in seen:
            continue
        count = theirs.lstrip("~").replace(",", "")
        name = ("method.updates_unstated" if not count.isdigit()
                else "method.updates_unknown" if ours is None  # a run dir without its config
                else "method.updates_more" if int(count) > ours
                else "method.updates_fewer" if int(count) < ours else "method.updates_same")
        seen[algo] = phrase(name, algo=algo, theirs=theirs, ours=ours, steps=kilo(steps))
    return "; ".join(seen.values())
