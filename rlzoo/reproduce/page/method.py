"""The page's method section: how every number of the page is made, said once."""

from __future__ import annotations

import math

from rlzoo.reproduce.page.runs import WINDOW, kilo
from rlzoo.reproduce.page.verdicts import ALPHA, Tests, rank_test_power


def method_lines(tests: Tests) -> list[str]:
    """How every number of the page is made, said once."""
    return [
        "## Method", "",
        "**Returns.** Each evaluation is the mean return of 10 deterministic episodes (the "
        "policy's mode), on env seeds `seed + 10000 + i` (so seeds s and s + 1 share 9 of "
        "their 10 evaluation start states; their training runs are independent). A row is one "
        "algorithm and config; its seeds are 0..K-1. IQM = interquartile mean over seeds (with "
        "5 seeds, the mean of the middle three); its 95% CI is a bootstrap over seeds (2,000 "
        "resamples, rlzoo.compare's method), best read as a lower bound on the uncertainty at "
        "5 seeds.", "",
        f"**Against published seeds.** The TD3 paper, Tianshou and SimbaV2 publish every seed's "
        "curve; the page compares seeds with seeds. Each side's seeds are reduced to their mean "
        f"over their evaluations in the {kilo(WINDOW)} window ending at the compared step (S - "
        f"{kilo(WINDOW)} to S, both ends included; rlzoo, the TD3 paper and Tianshou evaluate "
        "every 5k, so three evaluations; CrossQ in the SimbaV2 repo every 2k, so six; the SimbaV2 "
        "repo's SAC baseline every 16,666 and its SimbaV2 curves every 50k, so one): a single "
        "published evaluation can spike (the mean of Tianshou's 10 Hopper SAC seeds reads 535, "
        "1,030 and 705 at 45k, 50k and 55k). "
        "P(rlzoo > published) is the fraction of seed pairs where rlzoo's is higher (ties "
        "half), with its 95% bootstrap CI (each side resampled on its own); the test is "
        "Mann-Whitney's U, two-sided. The published runs used older env versions (gym v1, v3, "
        "v4; rlzoo runs v5) and other settings and warm-ups (Sources), and the `updates` "
        "columns give both sides' gradient updates by then: a difference is a prompt to look, "
        "not a verdict on the algorithm.", "",
        "**Between rlzoo rows** (a row against its Stable-Baselines3 peer, a variant or control "
        "against the rows it builds on): P(A > B) and the same test, first on the final "
        "returns, then on each seed's mean over all its evaluations, which also weighs how "
        "early a row learns (a second measure, added after the Hopper action-sequence cell had "
        "been seen; cells run later are fresh tests of it).", "",
        comparisons_paragraph(tests), "",
        "**Hyperparameters.** Every row but the control rows runs rlzoo's defaults unchanged; "
        "a control row changes the settings its note names (\"control for ...\"); each file under "
        "`rlzoo/conf/algo/` says which paper or reference code each default comes from, and no "
        "run on these tasks chose them. One choice between published settings was made by "
        "looking at returns, on another task: TD3's defaults were switched from CleanRL's (lr "
        "3e-4, 256x256, batch 256) to the TD3 paper's (lr 1e-3, 400x300, batch 100) with 10,000 "
        "random steps (the paper's warm-up on HalfCheetah and Ant; it used 1,000 on Hopper and "
        "Walker2d) after CleanRL's, with 1,000 random steps, did not solve InvertedPendulum-v5 "
        "within 15k steps on seeds 0 and 1 (nor did Stable-Baselines3's TD3 with those settings "
        "on the one seed tried) and the paper's solved it by 25k steps on seeds 0-2 "
        "(`rlzoo/conf/algo/td3.yaml`). rlzoo's TD3 does **not** follow the paper's code in one "
        "respect: the paper's `main.py` trains at each episode's end, the random warm-up's "
        "episodes included, so by env step t it has made about t updates; rlzoo's TD3 makes "
        "none during its 10,000 random steps (40,000 by 50k, 90,000 by 100k). Nothing else was "
        "tuned. The Stable-Baselines3 peer takes the same settings as the rlzoo row of the "
        "same algorithm.", ""]


def comparisons_paragraph(tests: Tests) -> str:
    """How many rank tests the page makes, in which Holm families, and what the correction
    leaves a 5-seed row able to show: the method's `How many comparisons` paragraph."""
    n_head, n_ref, n_pair = tests.count("head"), tests.count("ref"), tests.count("pair")
    total = n_head + n_ref + n_pair
    n_other = tests.family_size("other")
    smallest_pair = 2 / math.comb(10, 5)
    smallest_ref = 2 / math.comb(15, 5)  # 5 seeds against 10, every seed on one side
    strictest = ALPHA / max(n_head, 1)  # Holm's first step in the headline's family
    most = math.floor(ALPHA / smallest_ref)  # the most tests at which that p passes Holm

    def step(m: int) -> str:
        """A family's size and Holm's first step in it."""
        return f"{m} tests, first step {ALPHA:g} / {m} = {ALPHA / max(m, 1):.5f}"

    def can(m: int) -> str:
        """Whether 5 against 10 seeds can pass Holm's first step in a family of ``m``."""
        if m == most:
            return "can pass, only just (one more test in it and it cannot)"
        return "can pass" if m < most else f"cannot pass (more than {most} tests)"

    if smallest_pair > ALPHA / max(n_other, 1):
        pairs = (f"Two rows of 5 seeds cannot be told apart after the correction: the smallest "
                 f"two-sided p of 5 against 5 seeds is {smallest_pair:.3f}, above {ALPHA:g} / "
                 f"{n_other} = {ALPHA / max(n_other, 1):.5f}, so a difference between two "
                 "5-seed rlzoo rows is a lead to follow with more seeds, not a finding; between "
                 f"a 5-seed and a 10-seed rlzoo row the smallest p is {smallest_ref:.5f}, as "
                 "against a published curve of 10 seeds.")
    else:
        pairs = (f"Two rows of 5 seeds can be told apart only by their smallest p, "
                 f"{smallest_pair:.3f} (every seed of one above every seed of the other).")

    def power(shift: float, alpha: float) -> str:
        return f"{rank_test_power(5, 10, shift, alpha):.0%}"

    return (
        f"**How many comparisons.** The page makes {total} rank tests in two families, and "
        f"Holm's step-down correction runs within each at {ALPHA:g} (`above`/`below`; where "
        f"only the uncorrected p is under {ALPHA:g} the verdict says `not after Holm`): the "
        f"headline's {n_head} verdicts (each cell against its best published curve at each "
        f"headline budget: the page's question), and {n_other} others ({n_ref} against other "
        f"published curves, {n_pair} between rlzoo rows). One family over the whole page would "
        f"grow with every cell until 5 seeds against 10 could never differ: their smallest p, "
        f"{smallest_ref:.5f}, comes only when every seed of one side is above every seed of "
        f"the other, and it passes Holm's first step only in a family of at most {most} tests: "
        f"in the headline family ({step(n_head)}) it {can(n_head)}, and in the other family "
        f"({step(n_other)}), which also grows with every row added, it {can(n_other)}. "
        f"{pairs} `no difference found` is not evidence of a match: with 5 seeds against 10, "
        "the rank test finds a true gap of one "
        f"standard deviation {power(1.0, ALPHA)} of the time and of 1.75 standard deviations "
        f"{power(1.75, ALPHA)} at p < {ALPHA:g}, and {power(1.0, strictest)} and "
        f"{power(1.75, strictest)} at the headline family's strictest step, p < "
        f"{strictest:.5f} (simulated: normal returns, 4,000 draws).")
