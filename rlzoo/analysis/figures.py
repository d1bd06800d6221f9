"""Drawing, for ``rlzoo.compare`` and the results page alike: learning-curve panels (IQM lines with
CI bands, published curves as hollow markers, floors as horizontal lines), one figure of every
env's panel, and the aggregate figure (interval estimates, performance profiles, probability of
improvement). Nothing here computes a statistic; the callers pass what to draw.

Every line's legend entry says its number of runs (``(n = 2)``). Figures are written as PNG,
PDF and/or SVG (:data:`FORMATS`) without a creation date, so the same data gives the same file.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.store.writer import atomic_file

FORMATS = ("png", "pdf", "svg")
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf", "#000080", "#808000", "#ff1493", "#00ced1",
          "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94")
SMALL_N = 5
"""Fewer runs than this are a small sample: marked ``n = k`` in every cell that shows a statistic
of them (and every figure legend gives ``n``)."""
_METADATA = {"png": {}, "pdf": {"CreationDate": None}, "svg": {"Date": None}}


def n_mark(n: int) -> str:
    """``n = 2`` (every legend entry and small-sample cell)."""
    return f"n = {n}"


@dataclass
class Line:
    """A row's curve: ``center [P]`` (e.g. IQM over seeds) with ``low``/``high`` ``[P]`` (the
    CI band; None: no band) at ``steps [P]`` (env steps), from ``n`` runs."""

    label: str
    steps: np.ndarray
    center: np.ndarray
    low: np.ndarray | None
    high: np.ndarray | None
    n: int
    color: str | None = None


@dataclass
class PublishedLine:
    """A published curve: ``values [P]`` (its seeds' IQM) at ``steps [P]``, from ``n`` seeds;
    drawn with hollow ``marker``s joined by ``linestyle`` (``"none"``: markers only)."""

    label: str
    steps: np.ndarray
    values: np.ndarray
    n: int
    color: str = "black"
    marker: str = "s"
    linestyle: str = "--"


@dataclass
class Floor:
    """A horizontal line at ``value`` (a floor: the zero action, uniform random actions)."""

    label: str
    value: float
    linestyle: str = ":"
    color: str = "dimgray"


@dataclass
class Panel:
    """One env's axes: its title, y label, rows' lines, published references and floors."""

    title: str
    ylabel: str
    lines: list[Line]
    references: list[PublishedLine] = field(default_factory=list)
    floors: list[Floor] = field(default_factory=list)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, stem: Path, formats: Sequence[str], layout: bool = True) -> list[Path]:
    """Write ``fig`` as ``stem.<format>`` for each of ``formats`` (``layout``: tight layout
    first); the paths written."""
    written = []
    if layout:
        with warnings.catch_warnings():  # long labels: a squeezed layout beats a warning
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout()
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        with atomic_file(path) as f:  # checked (rlzoo.store.writer): never through a link
            fig.savefig(f, format=fmt, metadata=_METADATA[fmt], bbox_inches="tight")
        written.append(path)
    pyplot().close(fig)
    return written


def draw_panel(ax: Any, panel: Panel, legend: str | None = "inside") -> None:
    """Draw ``panel`` on ``ax``; ``legend``: ``inside``, ``outside`` (right of the axes, for
    many rows) or None (the caller draws one legend for several panels)."""
    for i, line in enumerate(panel.lines):
        color = line.color or COLORS[i % len(COLORS)]
        ax.plot(line.steps, line.center, color=color, label=f"{line.label} ({n_mark(line.n)})")
        if line.low is not None and line.high is not None:
            ax.fill_between(line.steps, line.low, line.high, color=color, alpha=0.2,
                            linewidth=0)
    for ref in panel.references:
        ax.plot(ref.steps, ref.values, color=ref.color, marker=ref.marker,
                markerfacecolor="white", markersize=5, linestyle=ref.linestyle, linewidth=1,
                label=f"{ref.label} ({n_mark(ref.n)})")
    for floor in panel.floors:
        ax.axhline(floor.value, color=floor.color, linestyle=floor.linestyle, linewidth=1.2,
                   label=floor.label)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(panel.ylabel)
    ax.set_title(panel.title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    if legend == "inside":
        ax.legend(fontsize="small")
    elif legend == "outside":
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def plot_panel(panel: Panel, path: Path, size: tuple[float, float] = (7, 4.5),
               legend: str = "inside") -> Path:
    """One panel as a figure of its own, written to ``path`` (its suffix is the format)."""
    fig, ax = pyplot().subplots(figsize=size, dpi=100)
    draw_panel(ax, panel, legend)
    return save(fig, path.with_suffix(""), [path.suffix.lstrip(".")])[0]


def plot_panels(panels: Sequence[Panel], stem: Path, formats: Sequence[str],
                title: str = "") -> list[Path]:
    """Every panel in one figure (up to 3 columns), one legend below them all (each label once);
    written as ``stem.<format>``."""
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = pyplot().subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), dpi=100,
                                  squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        draw_panel(ax, panel, legend=None)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    for ax in axes.flat[:len(panels)]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if title:
        fig.suptitle(title, fontsize="medium")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    # below the panels (the saved area grows to hold it: bbox_inches="tight")
    fig.legend(list(handles.values()), list(handles), loc="upper center", fontsize="small",
               ncol=min(3, max(1, len(handles))), bbox_to_anchor=(0.5, 0.0),
               bbox_transform=fig.transFigure)
    return save(fig, stem, formats, layout=False)


def draw_profile(ax: Any, taus: np.ndarray, profiles: dict[str, np.ndarray],
                 bands: dict[str, np.ndarray] | None, counts: dict[str, str], xlabel: str,
                 styles: dict[str, str] | None = None) -> None:
    """A performance profile (rliable's score distribution): per row the fraction of its runs
    whose normalized score is above tau, against ``taus``; ``bands[row]`` ``[2, taus]`` its CI
    (None: no bands); ``counts[row]`` what the legend says of its runs."""
    for i, (label, fraction) in enumerate(profiles.items()):
        color = COLORS[i % len(COLORS)]
        ax.plot(taus, fraction, color=color, linestyle=(styles or {}).get(label, "-"),
                label=f"{label} ({counts[label]})")
        if bands is not None and label in bands:
            ax.fill_between(taus, bands[label][0], bands[label][1], color=color, alpha=0.2,
                            linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
