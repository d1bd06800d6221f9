"""The multi-agent tasks' floors on the page: the returns of two scripted policies (uniform random
actions and the env's zero action) on each seed's own evaluation episodes
(:mod:`rlzoo.policy.floors`),
computed once into ``RESULTS/<suite>/floors.json``, and the page's sentence about them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlzoo.policy.floors import run_floors
from rlzoo.store import for_tools
from tools.reproduce.files import read_json
from tools.reproduce.page.runs import fmt, seed_of
from tools.reproduce.page.text import phrase
from tools.reproduce.schema import Suite, SuiteTask

FLOORS_FILE = "floors.json"  # RESULTS/<suite>/: each seed's scripted-policy returns, computed once
MULTI_AGENT_PREFIXES = ("mpe-", "mamujoco-")  # task names of multi-agent envs


def _span(values: list[float], signed: bool = False) -> str:
    """``low to high`` of ``values`` as the page writes returns (``+`` before a positive
    difference when ``signed``); one value alone when they are equal."""
    def one(x: float) -> str:  # a difference below 1 with two decimals: +0.04, not +0.0
        text = f"{x:.2f}" if signed and abs(x) < 1 else fmt(x)
        return ("+" if signed and x > 0 else "") + text

    low, high = min(values), max(values)
    return one(low) if fmt(low) == fmt(high) else phrase("span", low=one(low), high=one(high))


def paired_floors(root: Path, rows: dict[str, list[Path]]
                  ) -> dict[Path, dict[str, float]]:
    """Each run's final return and its seed's floors, ``{run dir: {"final", "zero",
    "random"}}`` (10-episode means, the evaluation's episodes), from ``root/floors.json``
    (computed and written there for the seeds missing from it)."""
    runs = [d for dirs in rows.values() for d in dirs]
    floors = run_floors([(d, seed_of(d)) for d in runs], root / FLOORS_FILE)
    out = {}
    for d in runs:
        summary = read_json(d / "summary.json") or {}
        if str(d) in floors and "final_eval_return" in summary:
            out[d] = {"final": float(summary["final_eval_return"]),
                      **{k: float(np.mean(v)) for k, v in floors[str(d)].items()}}
    return out


def scale_lines(suite: Suite, task_name: str, root: Path,
                rows: dict[str, list[Path]] | None = None, brief: bool = False) -> list[str]:
    """The page's floors paragraphs for a multi-agent task: the range over seeds of each
    scripted policy's mean on the seed's own evaluation episodes; then, for each row of
    ``rows`` (label: its run dirs), how many seeds' final returns beat their own zero action's,
    and by how much (two paragraphs: each within the page's words per line). Empty for other
    tasks or without runs. ``brief``: the method was said at an earlier task, so only the
    numbers are given."""
    task: SuiteTask | None = next((t for t in suite.tasks if t.name == task_name), None)
    if task is None or not task.name.startswith(MULTI_AGENT_PREFIXES) or not rows:
        return []
    paired = paired_floors(root, rows)
    if not paired:
        return []
    by_seed = {seed_of(d): v for d, v in paired.items()}
    random = _span([v["random"] for v in by_seed.values()])
    zero = _span([v["zero"] for v in by_seed.values()])
    first = for_tools.EVAL_SEED_OFFSET
    last = suite.eval_episodes - 1
    # brief: the method was said at an earlier task of the suite
    line = phrase("floors.again" if brief else "floors.method", random=random, zero=zero,
                  first=first, last=first + last, episodes=suite.eval_episodes, seeds=len(by_seed))
    beat = []
    for label, dirs in sorted(rows.items()):
        margins = [paired[d]["final"] - paired[d]["zero"] for d in dirs if d in paired]
        if margins:
            beat.append(phrase("floors.beat_row", row=label, beat=sum(m > 0 for m in margins),
                               seeds=len(margins), margins=_span(margins, signed=True)))
    return [line, phrase("floors.beat", rows=", ".join(beat))] if beat else [line]
