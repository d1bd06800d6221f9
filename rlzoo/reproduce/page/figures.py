"""The page's figures: each task's learning curves with the published curves beside them, and
the performance profile across tasks (drawn by the report step, linked by the page)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.reproduce.files import PUBLISHED_SUFFIX
from rlzoo.reproduce.page.runs import WINDOW, kilo, row_of_runs
from rlzoo.reproduce.references import MODERN_ROWS, NORMALIZER, REFERENCES

SOURCE_STYLES = {"td3-paper": ("s", "--"), "tianshou": ("^", ":"), "simbav2": ("D", "-."),
                 "cleanrl": ("*", "none")}


def published_figure(figure: str) -> str:
    """The page figure's name beside rlzoo.compare's ``figure`` (``Hopper.png``)."""
    return Path(figure).stem + PUBLISHED_SUFFIX


def plot_published(env: str, curves: dict[str, dict[str, Any]], path: Path) -> bool:
    """The page's figure of one task: each row's IQM curve and 95% CI band (from
    ``comparison.json``'s ``curves``, by rlzoo.compare's label; the legend names the suite's row,
    from the curve's ``runs`` where it has them) and each published curve's IQM over its seeds
    up to the curves' last step (hollow markers, a marker and line style per source), in the
    colour of the row of its algorithm, or black for CrossQ's, which is set beside the modern
    rows. False (nothing written) when no published curve is set beside these rows."""
    from rlzoo.analysis import stats

    by_row = {row_of_runs(c["runs"]) if c.get("runs") else label: c
              for label, c in curves.items()}
    refs = [r for r in REFERENCES if r.task == env and r.curve() is not None
            and any(label in by_row for label in r.rows)]
    last = max((max(c["steps"]) for c in by_row.values() if c["steps"]), default=0)
    if not refs or last <= 0:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    colors = {}
    for label, c in by_row.items():
        (line,) = ax.plot(c["steps"], c["iqm"], label=f"{label} (n={c['n_runs']})")
        ax.fill_between(c["steps"], c["ci_low"], c["ci_high"], color=line.get_color(),
                        alpha=0.2, linewidth=0)
        colors[label] = line.get_color()
    for ref in refs:
        steps, values = ref.curve()  # type: ignore[misc]
        keep = steps <= last
        row = next(label for label in ref.rows if label in by_row)
        marker, style = SOURCE_STYLES.get(ref.source, ("o", "--"))
        iqm = [stats.iqm(values[:, i]) for i in np.flatnonzero(keep)]
        ax.plot(steps[keep], iqm, color="black" if ref.rows == MODERN_ROWS else colors[row],
                marker=marker, markerfacecolor="white", markersize=5, linestyle=style,
                linewidth=1, label=f"{ref.algo} (published, n={len(values)})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("eval/return")
    ax.set_title(f"{env}: IQM over seeds, rlzoo's with its 95% CI, the published hollow")
    ax.grid(True, alpha=0.3)
    # beside the axes, not on them: with a dozen rows an inside legend covers the curves
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


def plot_profile(tasks: list[str], scores: dict[str, np.ndarray], steps: int, path: Path) -> bool:
    """The performance profile at ``steps``: for each row, the fraction of its runs (every
    task's seeds pooled) whose normalized score is above tau, against tau (rliable's
    ``create_performance_profile`` without its bootstrap bands). False when there is nothing."""
    if not scores:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pooled = np.concatenate([s.ravel() for s in scores.values()])
    taus = np.linspace(min(0.0, pooled.min()), 1.05 * max(pooled.max(), 0.1), 201)
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    colors = plt.get_cmap("tab20").colors  # 20 distinct colours: a dozen rows and more
    for i, (label, s) in enumerate(scores.items()):
        flat = s.ravel()
        ax.plot(taus, [(flat > t).mean() for t in taus], color=colors[i % len(colors)],
                linestyle="--" if label[0].isupper() else "-",
                label=f"{label} ({s.shape[0]} seeds x {s.shape[1]} tasks)")
    ax.set_xlabel(f"normalized score tau (0: {NORMALIZER}'s untrained policy, 1: its mean at 1M)")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_title(f"Performance profile at {kilo(steps)} env steps\n({', '.join(tasks)}; "
                 f"{kilo(WINDOW)} windows)", fontsize="medium")
    ax.grid(True, alpha=0.3)
    # beside the axes, not on them: with a dozen rows an inside legend covers the curves
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True
