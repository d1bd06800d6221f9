"""What the page says of a row's entropy temperature, read from the ``train.csv`` each of its
runs was exported with (the temperature ``stats/alpha``, or one per agent
``stats/alpha/agent_<i>``, and the policy's entropy ``stats/entropy``, at every logged step), as
the returns are read from ``eval.csv``. Where a slow-moving temperature explains a row's curve, the
page gives these numbers instead of quoting TensorBoard. A cell exported without ``train.csv``
(trained before tools.reproduce kept it) gets no such sentence."""

from __future__ import annotations

from pathlib import Path

from rlzoo.analysis.curves import read_scalars_csv
from tools.reproduce.files import TRAIN_CSV
from tools.reproduce.page.data import SuiteData, cell_budget
from tools.reproduce.page.runs import kilo, run_config
from tools.reproduce.page.text import joined, phrase, seeds_text
from tools.reproduce.page.verdicts import Tests

ALPHA_TAG = "stats/alpha"      # the temperature; per agent stats/alpha/agent_<i>
ENTROPY_TAG = "stats/entropy"  # the policy's entropy (mean over agents), in the tuner's units

# |A| of one agent on each task whose temperature the page reads: the default entropy target is
# -target_entropy_scale * |A| (optim/entropy.py). From the envs' action spaces (Hopper-v5,
# HalfCheetah-v5, MPE simple_spread_v3 with continuous actions); tests/test_reproduce.py checks.
ACTION_SIZES = {"Hopper": 3, "HalfCheetah": 6, "mpe-simple_spread": 5}

Series = list[tuple[int, float]]  # (env step, value), steps ascending

# the entropy's words (templates.txt) by (several agents, read at the temperature's steps)
ENTROPY = {(False, True): "temperature.entropy_same", (False, False): "temperature.entropy_apart",
           (True, True): "temperature.agents_entropy_same",
           (True, False): "temperature.agents_entropy_apart"}


def diagnostics(run: Path) -> dict[str, Series]:
    """A run's ``train.csv`` as ``{tag: [(step, value), ...]}``; ``{}`` without one."""
    path = run / TRAIN_CSV
    if not path.is_file():
        return {}
    return {tag: sorted(points.items()) for tag, points in read_scalars_csv(path).items()}


def temperatures(found: dict[str, Series]) -> list[Series]:
    """A run's temperature curves: ``[stats/alpha]``, or one per agent (the page reads their
    range, so their order does not matter)."""
    if ALPHA_TAG in found:
        return [found[ALPHA_TAG]]
    return [found[t] for t in sorted(found) if t.startswith(ALPHA_TAG + "/agent_")]


def logged_at(series: Series, step: int) -> tuple[int, float] | None:
    """The last logged (step, value) at or before ``step``; None before the first."""
    before = [(s, v) for s, v in series if s <= step]
    return before[-1] if before else None


def number(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits (at least one decimal, never in e-notation, no
    ``-0.0``): 2.0, 0.61, 0.065, -4.3."""
    if x == 0:
        return "0.0"
    rounded = float(f"{x:.{digits}g}")
    decimals = max(1, digits - 1 - int(f"{abs(rounded):e}".split("e")[1]))
    text = f"{rounded:.{decimals}f}"
    return "0.0" if float(text) == 0 else text


def value_range(values: list[float], digits: int) -> str:
    """``values`` as :func:`number` writes them: one value when they all read the same, else
    ``low to high``."""
    low, high = number(min(values), digits), number(max(values), digits)
    return low if low == high else phrase("span", low=low, high=high)


def steps_text(steps: list[int]) -> str:
    """``33k`` or ``33k-34k``: the range of ``steps``."""
    low, high = min(steps), max(steps)
    return kilo(low) if low == high else f"{kilo(low)}-{kilo(high)}"


def shown_steps(first: int, budget: int) -> list[int]:
    """Where the page reads a temperature: ``first`` (the first step every curve has logged),
    then a quarter, half and all of the cell's ``budget`` (those after it)."""
    return [first, *sorted({s for s in (budget // 4, budget // 2, budget) if s > first})]


def readings(curves: list[Series], steps: list[int]) -> list[tuple[str, list[float]]]:
    """At each of ``steps``, every curve's last logged value, labelled with the logged step
    (``25k``; a range when the curves logged at different steps), a logged step once however
    many of ``steps`` fall on it. ``steps`` must not start before every curve's first point."""
    out: dict[str, list[float]] = {}
    for step in steps:
        found = [f for c in curves if (f := logged_at(c, step)) is not None]
        out.setdefault(steps_text([s for s, _ in found]), [v for _, v in found])
    return list(out.items())


def tuner_setting(runs: list[Path], key: str) -> float | None:
    """A number of a row's tuner config (``init_alpha``, ``target_entropy``, ...; its first
    run's); None when it has no tuner or no such number (a peer's run)."""
    value = (run_config(runs[0]).get("tuner") or {}).get(key) if runs else None
    return float(value) if isinstance(value, (int, float)) else None


def entropy_target(runs: list[Path], task: str) -> float | None:
    """The row's entropy target: ``tuner.target_entropy``, else ``-target_entropy_scale * |A|``
    (:data:`ACTION_SIZES`); None when neither is known."""
    target = tuner_setting(runs, "target_entropy")
    scale = tuner_setting(runs, "target_entropy_scale")
    if target is None and scale is not None and task in ACTION_SIZES:
        target = -scale * ACTION_SIZES[task]
    return target


def reached(curves: list[Series], target: float) -> str:
    """When the entropy ``curves`` first reached ``target`` (at or below it): ``first reached at
    31k-44k steps``, with how many had not by their last logged step."""
    firsts = [next((s for s, v in c if v <= target), None) for c in curves]
    got = [s for s in firsts if s is not None]
    last = max(c[-1][0] for c in curves)
    if not got:
        return phrase("temperature.not_reached", last=kilo(last))
    return phrase("temperature.reached" if len(got) == len(curves) else "temperature.reached_some",
                  steps=steps_text(got), missing=len(curves) - len(got), n=len(curves),
                  last=kilo(last))


def exceeded(curves: list[Series], level: float, name: str) -> str:
    """A sentence on when the temperature ``curves`` were last above ``level`` (called
    ``name``): ``The temperature was last above SAC's starting value (1) at 33k-34k steps.``,
    with how many never were and how many still were at their last logged step."""
    lasts = [max((s for s, v in c if v > level), default=None) for c in curves]
    above = [s for s in lasts if s is not None]
    still = sum(1 for s, c in zip(lasts, curves) if s is not None and s == c[-1][0])
    if not above:
        return phrase("temperature.never_above", name=name)
    if still == len(curves):
        return phrase("temperature.still_above", name=name, step=kilo(max(above)))
    notes = [phrase("temperature.note_still", k=still)] if still else []
    notes += [phrase("temperature.note_never", k=len(curves) - len(above))] \
        if len(above) < len(curves) else []
    return phrase("temperature.last_above_notes" if notes else "temperature.last_above", name=name,
                  steps=steps_text(above), notes="; ".join(notes), n=len(curves))


def temperature_text(data: SuiteData, task: str, row: str
                     ) -> tuple[list[Series], str] | None:
    """``row``'s temperature curves (every seed's, and every agent's) and ``min to max over 5
    seeds: temperature ... at 11k, ... at 100k steps; policy entropy ... at those steps (target
    -3), first reached at ...``; None when a seed has no ``train.csv``."""
    runs = data.cell(task, row)
    found = [diagnostics(run) for run in runs]
    if not runs or any(not temperatures(f) or ENTROPY_TAG not in f for f in found):
        return None  # (a tag in train.csv has at least one point)
    alphas = [c for f in found for c in temperatures(f)]
    entropies = [f[ENTROPY_TAG] for f in found]
    first = max(c[0][0] for c in alphas + entropies)  # every curve has a value from here on
    steps = shown_steps(first, cell_budget(runs))
    alpha = readings(alphas, steps)
    entropy = readings(entropies, steps)
    agents = len(alphas) // len(runs)
    whose = seeds_text(len(runs)) if agents == 1 else \
        phrase("temperature.agents", seeds=seeds_text(len(runs)), agents=agents)
    same = [at for at, _ in alpha] == [at for at, _ in entropy]
    values = [value_range(v, 2) if same
              else phrase("temperature.at", value=value_range(v, 2), at=at) for at, v in entropy]
    target = entropy_target(runs, task)
    return alphas, phrase(
        "temperature.readings" if target is None else "temperature.readings_target", whose=whose,
        temperature=joined([phrase("temperature.at", value=value_range(v, 2), at=at)
                              for at, v in alpha]),
        entropy=phrase(ENTROPY[agents > 1, same], values=joined(values)),
        target=None if target is None else number(target, 2),
        reached=None if target is None else reached(entropies, target))


def slow_temperature(data: SuiteData, tests: Tests, task: str) -> str | None:
    """DSAC-T's temperature against SAC's start: the official start (``e``, lr 3e-4, updated
    every second step) keeps it above SAC's starting value for the first part of the budget."""
    found = temperature_text(data, task, "dsac_t")
    if found is None:
        return None
    alphas, text = found
    start = tuner_setting(data.cell(task, "sac"), "init_alpha")
    if start is None:
        return phrase("temperature.dsac_t", task=task, readings=text)
    return phrase("temperature.dsac_t_start", task=task, readings=text, above=exceeded(
        alphas, start, phrase("temperature.sac_start", start=start)))


def agents_temperature(data: SuiteData, tests: Tests, task: str) -> str | None:
    """HASAC's agents' temperatures and their policies' entropy over the budget."""
    found = temperature_text(data, task, "hasac")
    return None if found is None else phrase("temperature.hasac", task=task, readings=found[1])


# TASK/row -> its temperature finding (page/findings.py shows it after the task's tables).
TEMPERATURE_FINDINGS = {
    "Hopper/dsac_t": slow_temperature,
    "HalfCheetah/dsac_t": slow_temperature,
    "mpe-simple_spread/hasac": agents_temperature,
}
