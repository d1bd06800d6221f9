"""The page's method section: how every number of the page is made, said once."""

from __future__ import annotations

import math

from rlzoo.reproduce.page.runs import WINDOW, kilo
from rlzoo.reproduce.page.verdicts import ALPHA, Tests, rank_test_power


def method_lines(tests: Tests) -> list[str]:
    """How every number of the page is made, said once."""
    n_ref, n_pair = tests.count("ref"), tests.count("pair")
    total = n_ref + n_pair
    smallest_pair = 2 / math.comb(10, 5)
    smallest_ref = 2 / math.comb(15, 5)  # 5 seeds against 10, every seed on one side
    strictest = ALPHA / max(total, 1)
    most = math.floor(ALPHA / smallest_ref)  # the most tests at which that p passes Holm
    if total <= most:
        ref_reach = (
            f"5 against 10 seeds can reach {smallest_ref:.5f}, only when every seed of one side "
            f"is above every seed of the other (a complete separation, their only way past Holm "
            f"here), and that clears Holm only while the page makes at most {most} tests: each "
            f"cell added to the page adds tests and can turn such an `above`/`below` into `not "
            f"after Holm`.")
    else:
        ref_reach = (
            f"5 against 10 seeds cannot either: their smallest p, {smallest_ref:.5f} (every seed "
            f"of one side above every seed of the other), clears Holm only while the page makes "
            f"at most {most} tests, so a complete separation here reads `not after Holm`.")

    def power(shift: float, alpha: float) -> str:
        return f"{rank_test_power(5, 10, shift, alpha):.0%}"

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
        f"**How many comparisons.** The page makes {total} rank tests ({n_ref} against "
        f"published seeds, {n_pair} between rlzoo rows). Every verdict is read after Holm's "
        f"step-down correction over all {total} at {ALPHA:g} (`above`/`below`); where only the "
        f"uncorrected p is under {ALPHA:g} the verdict says `not after Holm`. Two rows of 5 "
        f"seeds cannot be told apart after this correction: the smallest two-sided p of 5 "
        f"against 5 seeds is {smallest_pair:.3f}, and Holm asks at least {ALPHA:g} / {total} "
        f"= {ALPHA / max(total, 1):.5f} of the smallest p; {ref_reach} So every difference "
        "between rlzoo rows on this page is a lead to follow with more seeds, not a finding. "
        "`no difference found` is not "
        "evidence of a match: with 5 seeds against 10, the rank test finds a true gap of one "
        f"standard deviation {power(1.0, ALPHA)} of the time and of 1.75 standard deviations "
        f"{power(1.75, ALPHA)} at p < {ALPHA:g}, and {power(1.0, strictest)} and "
        f"{power(1.75, strictest)} at Holm's strictest step, p < {strictest:.5f} (simulated: "
        "normal returns, 4,000 draws).", "",
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
