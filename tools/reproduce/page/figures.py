"""The page's figures: each task's learning curves with the published curves beside them, and
the performance profile across tasks (drawn by the report step, linked by the page), with
rlzoo.compare's drawing code (:mod:`rlzoo.analysis.figures`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.analysis import stats
from rlzoo.analysis.figures import (
    Line,
    Panel,
    PublishedLine,
    draw_profile,
    plot_panel,
    pyplot,
    save,
)
from tools.reproduce.files import PUBLISHED_SUFFIX
from tools.reproduce.page.runs import WINDOW, kilo, row_of_runs
from tools.reproduce.references import MODERN_ROWS, NORMALIZER, REFERENCES

SOURCE_STYLES = {"td3-paper": "--", "tianshou": ":", "simbav2": "-.", "cleanrl": "none"}
REFERENCE_MARKERS = ("s", "^", "D", "v", "P", "X", "*", "h")  # one per published curve drawn
# A row keeps its colour in every figure: the suite's n-th row gets the n-th colour.
ROW_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f", "#bcbd22", "#17becf", "#000080", "#808000", "#ff1493", "#00ced1")
SPARSE = 5  # a published curve with fewer points than this in view is drawn as markers only


def published_figure(figure: str) -> str:
    """The page figure's name beside rlzoo.compare's ``figure`` (``Hopper.png``)."""
    return Path(figure).stem + PUBLISHED_SUFFIX


def plot_published(env: str, curves: dict[str, dict[str, Any]], path: Path,
                   order: Sequence[str] = ()) -> bool:
    """The page's figure of one task: each row's IQM curve and 95% CI band (from
    ``comparison.json``'s ``curves``, by rlzoo.compare's label; the legend names the suite's row,
    from the curve's ``runs`` where it has them), in the colour of its place in ``order`` (the
    suite's rows, so a row has one colour in every figure), and each published curve's IQM over
    its seeds up to the curves' last step (hollow markers, one marker per curve, a line style
    per source; markers only where it has few points), in the colour of the row of its
    algorithm, or black for CrossQ's, which is set beside the modern rows. False (nothing
    written) when no published curve is set beside these rows."""
    by_row = {row_of_runs(c["runs"]) if c.get("runs") else label: c
              for label, c in curves.items()}
    rank = {label: i for i, label in enumerate(order)}
    by_row = dict(sorted(by_row.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    refs = [r for r in REFERENCES if r.task == env and r.curve() is not None
            and any(label in by_row for label in r.rows)]
    last = max((max(c["steps"]) for c in by_row.values() if c["steps"]), default=0)
    if not refs or last <= 0:
        return False
    colors = {label: ROW_COLORS[rank.get(label, len(rank) + i) % len(ROW_COLORS)]
              for i, label in enumerate(by_row)}
    lines = [Line(label, np.asarray(c["steps"]), np.asarray(c["iqm"]), np.asarray(c["ci_low"]),
                  np.asarray(c["ci_high"]), c["n_runs"], colors[label])
             for label, c in by_row.items()]
    published = []
    for marker, ref in zip(REFERENCE_MARKERS * 2, refs):
        steps, values = ref.curve()  # type: ignore[misc]
        keep = np.flatnonzero(steps <= last)
        row = next(label for label in ref.rows if label in by_row)
        published.append(PublishedLine(
            f"{ref.algo}, published", steps[keep],
            np.array([stats.iqm(values[:, i]) for i in keep]), len(values),
            "black" if ref.rows == MODERN_ROWS else colors[row], marker,
            SOURCE_STYLES.get(ref.source, "--") if len(keep) >= SPARSE else "none"))
    panel = Panel(f"{env}: IQM over seeds (rlzoo: lines and 95% CI; published: hollow markers)",
                  "eval/return", lines, published)
    # the legend beside the axes, not on them: with a dozen rows an inside legend covers curves
    plot_panel(panel, path, size=(10, 4.5), legend="outside")
    return True


def plot_profile(tasks: list[str], scores: dict[str, np.ndarray], steps: int, path: Path) -> bool:
    """The performance profile at ``steps``: for each row, the fraction of its runs (every
    task's seeds pooled) whose normalized score is above tau, against tau (rliable's
    ``create_performance_profile`` without its bootstrap bands). False when there is nothing."""
    if not scores:
        return False
    pooled = np.concatenate([s.ravel() for s in scores.values()])
    taus = np.linspace(min(0.0, pooled.min()), 1.05 * max(pooled.max(), 0.1), 201)
    fig, ax = pyplot().subplots(figsize=(10, 4.5), dpi=100)
    draw_profile(ax, taus, {label: np.array([(s.ravel() > t).mean() for t in taus])
                            for label, s in scores.items()}, None,
                 {label: f"{s.shape[0]} seeds x {s.shape[1]} tasks" for label, s in scores.items()},
                 f"normalized score tau (0: {NORMALIZER}'s untrained policy, 1: its mean at 1M)",
                 styles={label: "--" for label in scores if label[0].isupper()})
    ax.set_title(f"Performance profile at {kilo(steps)} env steps\n({', '.join(tasks)}; "
                 f"{kilo(WINDOW)} windows)", fontsize="medium")
    # beside the axes, not on them: with a dozen rows an inside legend covers the curves
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, path.with_suffix(""), ["png"])
    return True
