"""Per-env normalization ranges for scores aggregated across envs: ``(return - low) / (high -
low)``, so 0 is a reference's low end and 1 its high end on every env.

Known ranges (:data:`KNOWN_RANGES`) are the TD3 paper's (Fujimoto et al. 2018; its 10 seeds'
evaluation curves, github.com/sfujim/TD3 at bc98e62, ``learning_curves/``): its mean return at
step 0 (the untrained policy) and at 1M env steps, on gym v1 envs (rlzoo runs v5, so the range is
a published scale, not the same env). ``--normalize ENV=LOW:HIGH`` gives or replaces a range;
``LOW`` may be ``random`` or ``zero``: the mean of the env's paired floors (``--floors``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rlzoo.analysis.messages import CompareError

TD3_PAPER = ("the TD3 paper's mean at step 0 (0) and at 1M env steps (1), 10 seeds, gym v1 "
             "(Fujimoto et al. 2018, github.com/sfujim/TD3 bc98e62)")

KNOWN_RANGES: dict[str, tuple[float, float]] = {
    "Hopper": (44.7622, 3390.7867),
    "HalfCheetah": (-1.5336, 9566.5633),
    "Walker2d": (42.2595, 4412.8865),
    "Ant": (986.8761, 4242.5279),
}
"""``{env: (low, high)}`` from results/published/td3-paper.json (tests/test_compare_figures.py
recomputes them)."""

FLOOR_WORDS = ("random", "zero")


@dataclass(frozen=True)
class Range:
    """One env's normalization: score = ``(return - low) / (high - low)``; ``source`` says where
    the two numbers come from (in words, for the report and the figure)."""

    low: float
    high: float
    source: str

    def apply(self, value: float) -> float:
        return (value - self.low) / (self.high - self.low)


@dataclass(frozen=True)
class RangeRule:
    """One ``--normalize ENV=LOW:HIGH``; ``low`` is a number or a floor's name."""

    env: str
    low: float | str
    high: float


def parse_normalize(items: Sequence[str]) -> list[RangeRule]:
    """``["Hopper=0:3000", "mpe-simple_spread=random:-10"]`` -> rules; CompareError on a
    malformed one."""
    rules = []
    for item in items:
        env, _, span = item.rpartition("=")
        low_text, sep, high_text = span.partition(":")
        try:
            low: float | str = low_text if low_text in FLOOR_WORDS else float(low_text)
            high = float(high_text)
        except ValueError:
            low, high = math.nan, math.nan
        if not env or not sep or not math.isfinite(high) or (
                isinstance(low, float) and (not math.isfinite(low) or low == high)):
            raise CompareError(
                f"--normalize {item!r} is not ENV=LOW:HIGH with two different finite numbers "
                "(LOW may be random or zero: the env's paired floor, with --floors); e.g. "
                "--normalize Hopper=0:3500 mpe-simple_spread=random:-10")
        rules.append(RangeRule(env, low, high))
    return rules


def check_rules(rules: Sequence[RangeRule], envs: Sequence[str]) -> None:
    """CompareError for a rule naming an env no run has."""
    for rule in rules:
        if rule.env not in envs:
            raise CompareError(f"--normalize names env {rule.env!r}, which no run has; the envs "
                               f"are {', '.join(envs)}")


def ranges_for(envs: Sequence[str], rules: Sequence[RangeRule],
               floor_means: dict[str, dict[str, float]]) -> dict[str, Range]:
    """The range of each env of ``envs`` that has one: a rule's (the user's) first, else a
    known one. ``floor_means[env][kind]`` is the mean over the env's runs of their paired
    floors (empty without ``--floors``). CompareError for a rule naming an env no run has, or a
    floor that was not computed."""
    found: dict[str, Range] = {}
    check_rules(rules, envs)
    for rule in rules:
        low = rule.low
        source = f"--normalize: 0 = {low}, 1 = {rule.high:g}"
        if isinstance(low, str):
            if low not in floor_means.get(rule.env, {}):
                raise CompareError(f"--normalize {rule.env}={low}:... needs the paired floors; "
                                   "add --floors")
            low = floor_means[rule.env][rule.low]  # type: ignore[index]
            source = (f"--normalize: 0 = the {rule.low} floor (mean over the env's seeds, each "
                      f"on its own episodes: {low:.4g}), 1 = {rule.high:g}")
        if low == rule.high:
            raise CompareError(f"--normalize {rule.env}: low and high are both {low:g}")
        found.setdefault(rule.env, Range(float(low), rule.high, source))
    for env in envs:
        if env not in found and env in KNOWN_RANGES:
            found[env] = Range(*KNOWN_RANGES[env], TD3_PAPER)
    return found
