"""The aggregate figure of ``rlzoo.compare``: rliable's interval estimates (IQM, median, mean,
optimality gap of normalized scores), the performance profile with its CI bands, and the
probability of improvement of every two rows, in the layout of rliable's paper figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlzoo.analysis.aggregate import METRICS, Aggregate
from rlzoo.analysis.figures import COLORS, SMALL_N, draw_profile, n_mark, pyplot, save


def degenerate(interval: Sequence[float]) -> bool:
    """An interval of zero width: every bootstrap resample gave the same value (few runs, or
    every run of one side above every run of the other)."""
    return interval[0] == interval[1]


def _interval_panel(ax: Any, agg: Aggregate, metric: str, names: bool) -> None:
    """One metric: per row its point estimate and CI as a horizontal bar (``names``: the rows'
    names beside the axis, on the first metric only)."""
    for i, row in enumerate(agg.rows):
        low, high = agg.intervals[row][metric]
        ax.barh(i, high - low, left=low, height=0.6, color=COLORS[i % len(COLORS)], alpha=0.75)
        ax.plot([agg.points[row][metric]] * 2, [i - 0.3, i + 0.3], color="black", linewidth=2)
    ax.set_yticks(range(len(agg.rows)))
    ax.set_yticklabels([f"{row} ({n_mark(agg.n_runs[row])})" for row in agg.rows]
                       if names else [], fontsize="small")
    ax.invert_yaxis()
    ax.set_title(metric, fontsize="medium")
    ax.set_xlabel("normalized score" if metric != "Optimality gap" else "1 - score, clipped")
    ax.grid(True, axis="x", alpha=0.3)


def _poi_panel(ax: Any, agg: Aggregate) -> None:
    """P(X > Y) of every two rows with its CI; a degenerate interval is said in the label."""
    pairs = list(agg.poi.items())
    labels = []
    for i, ((x, y), poi) in enumerate(pairs):
        low, high = poi.ci
        ax.barh(i, max(high - low, 0.004), left=low, height=0.6, color="#4c72b0", alpha=0.7)
        ax.plot([poi.p, poi.p], [i - 0.3, i + 0.3], color="black", linewidth=2)
        flag = ", degenerate CI" if degenerate(poi.ci) else ""
        labels.append(f"P({x} > {y}) (n = {poi.n_x} vs {poi.n_y}, {poi.n_envs} "
                      f"env{'s' if poi.n_envs != 1 else ''}{flag})")
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels(labels, fontsize="small")
    ax.invert_yaxis()
    ax.axvline(0.5, color="gray", linestyle="--", linewidth=1)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("probability of improvement (final return)")
    ax.set_title("Probability of improvement", fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)


def plot_aggregate(agg: Aggregate, stem: Path, formats: Sequence[str],
                   confidence: float) -> list[Path]:
    """The aggregate figure as ``stem.<format>``: the four metrics (when some env has a
    normalization range), the performance profile, and P(X > Y) (when there are pairs)."""
    has_metrics, has_poi = bool(agg.envs), bool(agg.poi)
    ratios = [1.1 + 0.45 * len(agg.rows), 3.2] if has_metrics else []
    ratios += [1.2 + 0.45 * len(agg.poi)] if has_poi else []
    fig = pyplot().figure(figsize=(16, sum(ratios) + 0.6), dpi=100)
    grid = fig.add_gridspec(len(ratios), 4, height_ratios=ratios)
    if has_metrics:
        for j, metric in enumerate(METRICS):
            _interval_panel(fig.add_subplot(grid[0, j]), agg, metric, names=j == 0)
        counts = {row: f"{n_mark(agg.n_runs[row])} x {len(agg.envs)} envs" for row in agg.rows}
        draw_profile(fig.add_subplot(grid[1, :]), agg.taus, agg.profiles, agg.profile_bands,
                     counts, "normalized score tau")
        fig.axes[-1].legend(fontsize="small", loc="upper right")
        fig.axes[-1].set_title("Performance profile (score distribution)", fontsize="medium")
    if has_poi:
        _poi_panel(fig.add_subplot(grid[len(ratios) - 1, :]), agg)
    small = sorted({n for n in agg.n_runs.values() if n < SMALL_N})
    note = f"; few runs ({', '.join(n_mark(n) for n in small)}): read the CIs as lower bounds" \
        if small else ""
    envs = ", ".join(agg.envs) if agg.envs else "no env has a normalization range"
    fig.suptitle(f"Aggregate over {envs} ({confidence:.0%} stratified-bootstrap CIs, "
                 f"rliable){note}", fontsize="medium")
    return save(fig, stem, formats)
