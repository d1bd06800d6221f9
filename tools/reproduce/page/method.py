"""The page's method section: how every number of the page is made, and every caveat, said once.
The fixed wording is in :data:`PARAGRAPHS`; the numbers (families, power, updates, versions) are
computed when the page renders."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tools.reproduce.page.runs import WINDOW, kilo
from tools.reproduce.page.verdicts import ALPHA, QUESTIONS, Tests, rank_test_power
from tools.reproduce.references import REFERENCES, SOURCES

PARAGRAPHS = {
    "returns": "**Returns.** Each evaluation is the mean return of 10 deterministic episodes (the "
               "policy's mode) on env seeds `seed + 10000 + i`. A row is one algorithm and "
               "config, its seeds 0..K-1. IQM: the interquartile mean over seeds (with 5 seeds, "
               "the mean of the middle three); its 95% CI is a bootstrap over seeds (2,000 "
               "resamples), best read as a lower bound on the uncertainty at 5 seeds.",
    "published": "**Against published seeds.** The TD3 paper, Tianshou and SimbaV2's repository "
                 "publish every seed's curve, so seeds are compared with seeds, each reduced to "
                 "its mean over its evaluations from S - {window} to S (three every 5k, six of "
                 "CrossQ's every 2k, one of SimbaV2's SAC baseline every 16,666 and of its "
                 "SimbaV2 curves every 50k): one evaluation can spike (Tianshou's 10 Hopper SAC "
                 "seeds average 535, 1,030 and 705 at 45k, 50k and 55k). A cell's best published "
                 "curve is its algorithm's with the highest IQM. P(rlzoo > published): the "
                 "fraction of seed pairs where rlzoo's is higher (ties half), with a 95% "
                 "bootstrap CI; the test: Mann-Whitney's U, two-sided.",
    "versions": "**Versions and settings.** rlzoo runs gymnasium's v5 envs; the published runs "
                "used older ones ({versions}) and other settings and warm-ups (Sources), so a "
                "difference is a prompt to look, not a verdict on the algorithm.",
    "updates": "**Gradient updates** by the compared step, each published curve a verdict reads "
               "against rlzoo's row (every cell's: the sections' `updates` columns): {updates}.",
    "pairs": "**Between rlzoo rows** (a row against its Stable-Baselines3 peer, a variant or "
             "control against the rows it builds on): P(A > B) and the same test on the final "
             "returns, then on each seed's mean over all its evaluations, which also weighs how "
             "early a row learns (a measure added after the Hopper action-sequence cell had "
             "been seen; cells run later are fresh tests of it).",
    "holm": "**Holm's families.** Holm's step-down correction runs at {alpha:g} within one family "
            "per suite and question ({n} families, {total} tests; `above`/`below` only after "
            "it, `before Holm only` where only the uncorrected p is under {alpha:g}). So a row "
            "added to one suite leaves every other suite's verdicts as they were, and a "
            "question's family grows only with its own suite's cells: one family over the page "
            "would grow until no 5-seed row could differ from 10 published seeds, whose least p "
            "({least:.5f}, every seed of one side above every seed of the other) passes Holm's "
            "first step only in a family of at most {most} tests. The table says where that "
            "still holds; tests/test_page_limits.py fails when a headline family outgrows it.",
    "power": "**Power.** `no difference found` is not evidence of a match: with 5 seeds against "
             "10 the rank test finds a true gap of one standard deviation {one} of the time and "
             "of 1.75 standard deviations {more} at p < {alpha:g} (simulated: normal returns, "
             "4,000 draws); two 5-seed rlzoo rows can differ only by their least p, {pair:.3f}, "
             "which no family of more than {pair_most} tests lets through.",
    "hyper": "**Hyperparameters.** Every row but the controls runs rlzoo's defaults unchanged (a "
             "control changes the settings its note names); each file under `rlzoo/conf/algo/` "
             "says which paper or code each default comes from, and no run on these tasks chose "
             "them. One choice was made by looking at returns, on another task: TD3's defaults "
             "went from CleanRL's (lr 3e-4, 256x256, batch 256, 1,000 random steps) to the TD3 "
             "paper's (lr 1e-3, 400x300, batch 100) with 10,000 random steps after CleanRL's "
             "did not solve InvertedPendulum-v5 within 15k steps on seeds 0 and 1 and the "
             "paper's did by 25k on seeds 0-2 (`rlzoo/conf/algo/td3.yaml`).",
}


def method_lines(tests: Tests,
                 compared: Sequence[tuple[str, int, int | None, str]] = ()) -> list[str]:
    """The method: how every number is made and every caveat, once; ``compared`` are the
    headline verdicts' published curves with their updates (:func:`updates_line`)."""
    least = 2 / math.comb(15, 5)  # 5 seeds against 10, every seed on one side
    pair = 2 / math.comb(10, 5)
    lines = ["## Method", "", PARAGRAPHS["returns"], "",
             PARAGRAPHS["published"].format(window=kilo(WINDOW)), "",
             PARAGRAPHS["versions"].format(versions=versions()), ""]
    updates = updates_line(compared)
    if updates:
        lines += [PARAGRAPHS["updates"].format(updates=updates), ""]
    lines += [PARAGRAPHS["pairs"], "",
              PARAGRAPHS["holm"].format(alpha=ALPHA, n=len(tests.families()),
                                        total=len(tests.items), least=least,
                                        most=math.floor(ALPHA / least)), "",
              *family_table(tests), "",
              PARAGRAPHS["power"].format(one=power(1.0), more=power(1.75), alpha=ALPHA,
                                         pair=pair, pair_most=math.floor(ALPHA / pair)), "",
              PARAGRAPHS["hyper"], ""]
    return lines


def power(shift: float) -> str:
    """How often 5 seeds against 10 find a true gap of ``shift`` standard deviations."""
    return f"{rank_test_power(5, 10, shift, ALPHA):.0%}"


def family_table(tests: Tests) -> list[str]:
    """Each Holm family: its suite, question, size, Holm's first step, and whether 5 seeds
    against 10 (every seed of one side above the other's) can pass it."""
    least = 2 / math.comb(15, 5)
    lines = ["| suite | question | tests | Holm's first step | can 5 seeds against 10 differ? |",
             "|---|---|---:|---:|---|"]
    families = tests.families()
    suites = list(dict.fromkeys(suite for suite, _ in families))  # in the page's order
    for (suite, kind), members in sorted(families.items(), key=lambda kv: (
            suites.index(kv[0][0]), list(QUESTIONS).index(kv[0][1]))):
        m = len(members)
        lines.append(f"| `{suite}` | {QUESTIONS[kind]} | {m} | {ALPHA / m:.5f} | "
                     f"{'yes' if least <= ALPHA / m else 'no'} |")
    return lines


def versions() -> str:
    """The env versions of the published curves the page uses, by source, with their tasks:
    ``the TD3 paper gym v1 (Hopper, HalfCheetah, Walker2d, Ant); ...``."""
    parts = []
    for source in SOURCES.values():
        tasks = list(dict.fromkeys(r.task for r in REFERENCES
                                   if r.source == source.key and r.curve() is not None))
        if tasks and source.version:
            parts.append(f"{source.name} {source.version}: {', '.join(tasks)}")
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
        if not count.isdigit():
            seen[algo] = f"{algo}: not stated by its source"
        elif ours is None:  # a run dir without its config
            seen[algo] = f"{algo}: {theirs} at {kilo(steps)} (rlzoo's row: not known)"
        else:
            side = "more" if int(count) > ours else "fewer" if int(count) < ours else "as many"
            seen[algo] = f"{algo} {side} ({theirs} against {ours:,} at {kilo(steps)})"
    return "; ".join(seen.values())
