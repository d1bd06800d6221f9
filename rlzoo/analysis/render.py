"""Rendering a computed comparison: ``comparison.json``, ``comparison.md`` (:mod:`.markdown`), one
PNG of learning curves per env, every env's panel in one figure (``curves.png/.pdf/.svg``) and the
aggregate across envs (``aggregate.png/.pdf/.svg``). Nothing here computes a statistic
(:mod:`rlzoo.analysis.report` does); the drawing is :mod:`rlzoo.analysis.figures`'.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlzoo.analysis.aggregate import aggregate_json
from rlzoo.analysis.figures import FORMATS, plot_panel, plot_panels
from rlzoo.analysis.markdown import markdown
from rlzoo.analysis.panels import env_panel, row_colors
from rlzoo.analysis.report import Comparison
from rlzoo.store.writer import check_inside, make_dir, write_atomic

# --------------------------------------------------------------------------- files


# The one line when the learning curves cannot be drawn; the tables are written all the same.
NO_PLOTS = (
    "matplotlib cannot be imported ({reason}), so no learning-curve PNGs were drawn; the tables "
    "are in {out}; install it with pip install matplotlib (or pip install 'rlzoo[compare]')"
)


REPORT_SUFFIXES = (".json", ".md", *(f".{fmt}" for fmt in FORMATS))  # what it writes


def plotting_unavailable() -> str | None:
    """Why the learning curves cannot be drawn (matplotlib does not import), or None."""
    try:
        import matplotlib  # noqa: F401 - a dependency of rlzoo; a broken install is reported
    except ImportError as err:
        return " ".join(str(err).split())[:120] or type(err).__name__
    return None


def write_report(comparison: Comparison, out: Path, plots: bool = True,
                 formats: Sequence[str] = FORMATS, grid: bool = True) -> dict[str, Any]:
    """Write ``out/comparison.json``, ``out/comparison.md`` and (``plots``) the figures: one
    ``out/<env>.png`` per env, and in each of ``formats`` (PNG, PDF, SVG) every env's panel in
    one figure ``out/curves.*`` (``grid``; with two envs or more) and the aggregate across envs
    ``out/aggregate.*`` (when it was computed).

    ``out`` is created if needed. Without matplotlib (:func:`plotting_unavailable`) the tables
    are written without figures, ``figures`` is empty and ``figures_missing`` holds the reason
    (``comparison.md`` says so under each table). Returns the dict written to
    ``comparison.json`` (:func:`report_json`).
    """
    make_dir(out, out.parent)  # never through a link
    for entry in out.iterdir():  # a planted link among the report's kinds: refused before any
        if entry.suffix in REPORT_SUFFIXES:  # file is written (each write checks it again)
            check_inside(out, entry)
    wants = bool(comparison.curves) or comparison.aggregate is not None
    missing = plotting_unavailable() if plots and wants else None
    figures = figure_names(comparison) if plots and missing is None else {}
    files: dict[str, list[str]] = {}
    if figures:
        colors = row_colors(comparison)
        panels = {env: env_panel(comparison, env, colors) for env in figures}
        for env, name in figures.items():
            plot_panel(panels[env], out / name)
        if grid and len(panels) > 1:
            files["curves"] = [p.name for p in plot_panels(list(panels.values()),
                                                           out / "curves", formats)]
    if plots and missing is None and comparison.aggregate is not None:
        from rlzoo.analysis.aggregate_figure import plot_aggregate

        files["aggregate"] = [p.name for p in plot_aggregate(
            comparison.aggregate, out / "aggregate", formats,
            comparison.method["confidence"])]
    report = report_json(comparison, figures)
    report["figure_files"] = files
    if missing is not None:
        report["figures_missing"] = missing  # why matplotlib did not import
    # checked writes (rlzoo.store.writer): a link, hard link or special file there is refused
    write_atomic(out / "comparison.json", json.dumps(report, indent=2) + "\n")
    write_atomic(out / "comparison.md", markdown(report, comparison.n_runs))
    return report


def report_json(comparison: Comparison, figures: dict[str, str]) -> dict[str, Any]:
    """The comparison as comparison.json holds it: ``method``, ``results``,
    ``probability_of_improvement``, ``curves`` (steps, IQM and CI as lists) and ``figures``
    (``{env: PNG file name}``)."""
    poi = comparison.probability_of_improvement
    curves = {
        env: {
            label: {
                "n_runs": c.curve.values.shape[0],
                "runs": c.curve.run_paths,
                "steps": c.curve.steps.tolist(),
                "iqm": c.iqm.tolist(),
                "ci_low": c.ci_low.tolist(),
                "ci_high": c.ci_high.tolist(),
            }
            for label, c in per_group.items()
        }
        for env, per_group in comparison.curves.items()
    }
    return {
        "method": comparison.method,
        "results": {
            env: {label: dataclasses.asdict(row) for label, row in per_group.items()}
            for env, per_group in comparison.results.items()
        },
        "probability_of_improvement": None if poi is None else dataclasses.asdict(poi),
        "curves": curves,
        "figures": dict(figures),
        "floors": {env: dataclasses.asdict(f) for env, f in comparison.floors.items()},
        "published": {env: [{"label": c.label, "seeds": int(c.seeds.shape[0])} for c in found]
                      for env, found in comparison.published.items() if found},
        "aggregate": None if comparison.aggregate is None else aggregate_json(
            comparison.aggregate),
        "aggregate_missing": comparison.aggregate_missing,
    }


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "env"


def figure_names(comparison: Comparison) -> dict[str, str]:
    """``{env: "<env>.png"}`` for every env with a curve; characters unsafe in a file name become
    ``_``, and names that would collide get more ``_``."""
    figures: dict[str, str] = {}
    used_names: set[str] = set()
    for env in comparison.curves:
        name = _safe_filename(env)
        while name in used_names:
            name += "_"
        used_names.add(name)
        figures[env] = f"{name}.png"
    return figures
