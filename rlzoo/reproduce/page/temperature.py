"""What the page says of a row's entropy temperature, read from the ``train.csv`` each of its
runs was exported with (the temperature ``stats/alpha``, or one per agent
``stats/alpha/agent_<i>``, and the policy's entropy ``stats/entropy``, at every logged step), as
the returns are read from ``eval.csv``. Where a slow-moving temperature explains a row's curve, the
page gives these numbers instead of quoting TensorBoard. A cell exported without ``train.csv``
(trained before rlzoo.reproduce kept it) gets no such sentence."""

from __future__ import annotations

from pathlib import Path

from rlzoo.reproduce.files import TRAIN_CSV
from rlzoo.reproduce.page.data import SuiteData, cell_budget
from rlzoo.reproduce.page.runs import kilo
from rlzoo.reproduce.page.verdicts import Tests

ALPHA_TAG = "stats/alpha"      # the temperature; per agent stats/alpha/agent_<i>
ENTROPY_TAG = "stats/entropy"  # the policy's entropy (mean over agents), in the tuner's units

Series = list[tuple[int, float]]  # (env step, value), steps ascending


def diagnostics(run: Path) -> dict[str, Series]:
    """A run's ``train.csv`` as ``{tag: [(step, value), ...]}``; ``{}`` without one."""
    from rlzoo.analysis.curves import read_scalars_csv

    path = run / TRAIN_CSV
    if not path.is_file():
        return {}
    return {tag: sorted(points.items()) for tag, points in read_scalars_csv(path).items()}


def temperatures(found: dict[str, Series]) -> list[Series]:
    """A run's temperature curves: ``[stats/alpha]``, or one per agent in agent order."""
    if ALPHA_TAG in found:
        return [found[ALPHA_TAG]]
    agents = sorted((t for t in found if t.startswith(ALPHA_TAG + "/agent_")),
                    key=lambda t: int(t.rsplit("_", 1)[1]))
    return [found[t] for t in agents]


def logged_at(series: Series, step: int) -> tuple[int, float] | None:
    """The last logged (step, value) at or before ``step``; None before the first."""
    before = [(s, v) for s, v in series if s <= step]
    return before[-1] if before else None


def value_range(values: list[float], form: str) -> str:
    """``values`` written with ``form`` (a format spec): one value when they all read the same,
    else ``low to high``."""
    low, high = format(min(values), form), format(max(values), form)
    return low if low == high else f"{low} to {high}"


def readings(curves: list[Series], steps: list[int], form: str) -> list[str] | None:
    """At each of ``steps``, the range of ``curves``' last logged values and that logged step:
    ``0.27 to 0.31 at 25k`` (a logged step once, however many of ``steps`` fall on it); None
    when a curve has nothing logged by a step."""
    out: dict[int, str] = {}
    for step in steps:
        found = [f for c in curves if (f := logged_at(c, step)) is not None]
        if len(found) < len(curves):
            return None
        at = max(s for s, _ in found)
        out.setdefault(at, f"{value_range([v for _, v in found], form)} at {kilo(at)}")
    return list(out.values())


def listing(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def shown_steps(first: int, budget: int) -> list[int]:
    """Where the page reads a temperature: its first logged step, then a quarter, half and all of
    the cell's ``budget`` (those after the first)."""
    return [first, *sorted({s for s in (budget // 4, budget // 2, budget) if s > first})]


def last_above(curves: list[Series], level: float) -> list[int]:
    """Each curve's last logged step with a value above ``level`` (0 when never above)."""
    return [max((s for s, v in c if v > level), default=0) for c in curves]


def initial_alpha(runs: list[Path]) -> float | None:
    """A row's starting temperature (``tuner.init_alpha`` of its first run's config); None when
    its config has none (a fixed temperature, or a peer's run)."""
    from omegaconf import OmegaConf

    path = runs[0] / ".hydra" / "config.yaml" if runs else None
    if path is None or not path.is_file():
        return None
    value = OmegaConf.load(path).get("tuner", {}).get("init_alpha")
    return float(value) if isinstance(value, (int, float)) else None


def temperature_lines(data: SuiteData, task: str, row: str, name: str
                      ) -> tuple[list[Series], list[Series], int, str] | None:
    """What every finding here starts from: ``row``'s temperature curves (every seed's, and every
    agent's), its entropy curves, the cell's budget and ``Its temperature on <task> (...) was
    ...; its policy's entropy was ...`` (``name`` names the row); None when a seed has no
    ``train.csv``."""
    runs = data.cell(task, row)
    found = [diagnostics(run) for run in runs]
    if not runs or any(not temperatures(f) or ENTROPY_TAG not in f for f in found):
        return None
    alphas = [c for f in found for c in temperatures(f)]
    entropies = [f[ENTROPY_TAG] for f in found]
    budget = cell_budget(runs)
    steps = shown_steps(min(s for c in alphas for s, _ in c[:1]), budget)
    alpha, entropy = readings(alphas, steps, ".2g"), readings(entropies, steps, ".1f")
    if alpha is None or entropy is None:
        return None
    agents = len(alphas) // len(runs)
    whose = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}" + (
        f" x {agents} agents" if agents > 1 else "")
    text = (f"{name}'s temperature on {task} ({whose}; range over them) was {listing(alpha)}; "
            f"its policy's entropy was {listing(entropy)}")
    return alphas, entropies, budget, text


def slow_temperature(data: SuiteData, tests: Tests, task: str) -> str | None:
    """DSAC-T's temperature against SAC's start: the official start (``e``, lr 3e-4, updated
    every second step) keeps it above SAC's starting value for the first part of the budget."""
    found = temperature_lines(data, task, "dsac_t", "DSAC-T")
    if found is None:
        return None
    alphas, _, _, text = found
    start = initial_alpha(data.cell(task, "sac"))
    if start is None:
        return text + "."
    steps = sorted(last_above(alphas, start))
    if steps[-1] == 0:
        return text + f". It was below SAC's starting temperature ({start:g}) from the first."
    until = kilo(steps[0]) if steps[0] == steps[-1] else f"{kilo(steps[0])}-{kilo(steps[-1])}"
    return (text + f". It stayed above SAC's starting temperature ({start:g}) until {until} "
            "steps (each seed's last logged step above it).")


def agents_temperature(data: SuiteData, tests: Tests, task: str) -> str | None:
    """HASAC's agents' temperatures and entropy over the multi-agent budget."""
    found = temperature_lines(data, task, "hasac", "HASAC")
    return None if found is None else found[3] + "."


# TASK/row -> its temperature finding (page/findings.py shows it after the task's tables).
TEMPERATURE_FINDINGS = {
    "Hopper/dsac_t": slow_temperature,
    "HalfCheetah/dsac_t": slow_temperature,
    "mpe-simple_spread/hasac": agents_temperature,
}
