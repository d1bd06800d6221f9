"""What each env's learning-curve panel shows, from a computed comparison: every group's IQM curve
and CI band, the published curves of that env (their seeds' IQM), and the paired floors (the zero
action and uniform random actions, each seed on its own evaluation episodes)."""

from __future__ import annotations

import numpy as np

import rlzoo.analysis.stats as stats
from rlzoo.analysis.figures import COLORS, Floor, Line, Panel, PublishedLine
from rlzoo.analysis.floor_summary import FLOOR_NAMES
from rlzoo.analysis.report import Comparison

REFERENCE_MARKERS = ("s", "^", "D", "v", "P", "X", "*", "h")
FLOOR_STYLES = {"zero": ":", "random": "-."}


def row_colors(comparison: Comparison) -> dict[str, str]:
    """One colour per group label, the same in every panel (labels in order of appearance)."""
    labels = dict.fromkeys(label for rows in comparison.results.values() for label in rows)
    return {label: COLORS[i % len(COLORS)] for i, label in enumerate(labels)}


def env_panel(comparison: Comparison, env: str, colors: dict[str, str]) -> Panel:
    """The panel of ``env``: its groups' curves, published curves up to the groups' last step,
    and the floor lines with the number of seeds they come from."""
    conf = comparison.method["confidence"]
    lines = [Line(label, c.curve.steps, c.iqm, c.ci_low, c.ci_high, c.curve.values.shape[0],
                  colors.get(label)) for label, c in comparison.curves.get(env, {}).items()]
    last = max((int(line.steps[-1]) for line in lines if len(line.steps)), default=0)
    refs = []
    for i, curve in enumerate(comparison.published.get(env, [])):
        keep = curve.steps <= last if last else np.ones(len(curve.steps), bool)
        if keep.any():
            refs.append(PublishedLine(curve.label, curve.steps[keep],
                                  np.array([stats.iqm(curve.seeds[:, j])
                                            for j in np.flatnonzero(keep)]),
                                  curve.seeds.shape[0],
                                  marker=REFERENCE_MARKERS[i % len(REFERENCE_MARKERS)]))
    floors = []
    found = comparison.floors.get(env)
    if found is not None:
        for kind, name in FLOOR_NAMES.items():
            floors.append(Floor(f"{name}, paired floor (mean of {found.seeds} seeds' own "
                                f"episodes)", found.mean[kind], FLOOR_STYLES[kind]))
    tag = comparison.method["curve_tag"]
    return Panel(f"{env}: IQM and {conf:.0%} bootstrap CI", f"{tag} (IQM over seeds)", lines,
                 refs, floors)
