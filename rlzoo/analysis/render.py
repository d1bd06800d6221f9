"""Rendering a computed comparison: ``comparison.json``, the ``comparison.md`` tables and one PNG of
learning curves per env. Nothing here computes a statistic (:mod:`rlzoo.analysis.report` does).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

from rlzoo.analysis.config import canon, format_value
from rlzoo.analysis.report import Comparison, CurveResult

# --------------------------------------------------------------------------- files


# The one line when the learning curves cannot be drawn; the tables are written all the same.
NO_PLOTS = (
    "matplotlib cannot be imported ({reason}), so no learning-curve PNGs were drawn; the tables "
    "are in {out}; install it with pip install matplotlib (or pip install 'rlzoo[compare]')"
)


def plotting_unavailable() -> str | None:
    """Why the learning curves cannot be drawn (matplotlib does not import), or None."""
    try:
        import matplotlib  # noqa: F401 - a dependency of rlzoo; a broken install is reported
    except ImportError as err:
        return " ".join(str(err).split())[:120] or type(err).__name__
    return None


def write_report(comparison: Comparison, out: Path, plots: bool = True) -> dict[str, Any]:
    """Write ``out/comparison.json``, ``out/comparison.md`` and (``plots``) ``out/<env>.png``.

    ``out`` is created if needed. Without matplotlib (:func:`plotting_unavailable`) the tables
    are written without figures, ``figures`` is empty and ``figures_missing`` holds the reason
    (``comparison.md`` says so under each table). Returns the dict written to
    ``comparison.json`` (:func:`report_json`).
    """
    out.mkdir(parents=True, exist_ok=True)
    missing = plotting_unavailable() if plots and comparison.curves else None
    figures = figure_names(comparison) if plots and missing is None else {}
    tag, confidence = comparison.method["curve_tag"], comparison.method["confidence"]
    for env, name in figures.items():
        plot_env(env, comparison.curves[env], out / name, tag, confidence)
    report = report_json(comparison, figures)
    if missing is not None:
        report["figures_missing"] = missing  # why matplotlib did not import
    (out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "comparison.md").write_text(markdown(report, comparison.n_runs))
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


def plot_env(
    env: str, curves: dict[str, CurveResult], path: Path, tag: str, confidence: float
) -> None:
    """Write the learning-curve PNG of one env: per group (label), its IQM line and CI band
    against env steps; ``confidence`` (e.g. 0.95) only titles the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for label, c in curves.items():
        n = c.curve.values.shape[0]
        (line,) = ax.plot(c.curve.steps, c.iqm, label=f"{label} (n={n})")
        ax.fill_between(
            c.curve.steps, c.ci_low, c.ci_high, color=line.get_color(), alpha=0.25, linewidth=0
        )
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"{tag} (IQM over seeds)")
    ax.set_title(f"{env}: IQM and {confidence:.0%} bootstrap CI")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    with warnings.catch_warnings():  # long labels: a squeezed layout beats a warning on stderr
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------- markdown


def _num(x: float | None) -> str:
    """A number in a table cell: 2 decimals from 1 up, 4 significant digits below, ``—`` if
    missing or not finite."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.4g}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def _grouping_text(grouping: dict[str, Any]) -> str:
    """The paragraph that says how runs were grouped (from ``method["grouping"]``)."""
    always = ", ".join(f"`{k}`" for k in grouping["always_split_on"])
    if grouping["rule"] == "automatic":
        ignored = ", ".join(f"`{k}`" for k in grouping["ignored_keys"])
        rule = (
            "by env, algo and every value of `.hydra/config.yaml` that differs between runs, "
            f"except bookkeeping keys that do not change what is learned ({ignored})"
        )
    else:
        keys = ", ".join(f"`{k}`" for k in grouping["group_by"]) or "nothing else"
        rule = f"by env, algo and {keys} (`--group-by`)"
    return (
        f"**Groups.** Runs are grouped {rule}; runs with different {always} are never pooled. "
        "A group is labelled by its algo and the overrides that set it apart from the algo's "
        "other groups."
    )


def _env_notes(per_group: dict[str, Any]) -> list[str]:
    """Lines under an env's heading: renamed groups and the settings every group shares."""
    lines = []
    renamed = [(k, r["auto_label"]) for k, r in per_group.items() if k != r["auto_label"]]
    if renamed:
        lines += ["Labels: " + "; ".join(f"{a} = `{b}`" for a, b in renamed) + ".", ""]
    left_out: dict[str, dict[str, list[str]]] = {}
    for r in per_group.values():
        for k, v in r["defaults"].items():
            values = left_out.setdefault(r["algo"], {}).setdefault(k, [])
            if v not in values:
                values.append(v)
    if left_out:
        per_algo = [
            f"{algo} `" + " ".join(f"{k}={'/'.join(v)}" for k, v in values.items()) + "`"
            for algo, values in left_out.items()
        ]
        lines += [
            "A label leaves out the values a group shares with the runs that did not set them "
            f"on the command line (the defaults): {'; '.join(per_algo)}.",
            "",
        ]
    settings = [r["settings"] for r in per_group.values()]
    common = {
        k: v for k, v in settings[0].items()
        if all(k in s and canon(s[k]) == canon(v) for s in settings)
    }
    if common:
        shown = ", ".join(f"`{k}={format_value(v)}`" for k, v in common.items())
        lines += [f"Every group here: {shown}.", ""]
    return lines


def markdown(report: dict[str, Any], n_runs: int) -> str:
    """comparison.md: per env a table of groups, the figure, P(X > Y), and how it was computed.

    ``report`` is :func:`report_json`'s dict, ``n_runs`` the number of runs compared.
    """
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    lines = [
        "# Run comparison",
        "",
        f"{n_runs} finished runs. Score of a run: `final_eval_return` from its `summary.json`.",
        "",
        _grouping_text(m["grouping"]),
        "",
        f"**Method.** Per group: IQM (interquartile mean: the mean of the middle 50% of "
        f"seeds, `scipy.stats.trim_mean(x, 0.25)`) with a {conf} percentile confidence interval "
        f"from a stratified bootstrap over seeds (rliable's definitions, Agarwal et al. 2021), "
        f"{m['bootstrap_reps']} bootstrap resamples, RNG `{m['bootstrap_rng']}`. "
        "Mean ± std (sample std, ddof=1) for reference. "
        "With fewer than 4 seeds the IQM trims nothing and equals the mean; with few seeds the "
        "bootstrap interval is too narrow (it cannot see values the seeds did not reach) — "
        "read it as a lower bound on the uncertainty. Raw returns of different envs are on "
        "different scales, so no aggregate over envs is given.",
        "",
    ]
    for env, per_group in report["results"].items():
        lines += _env_section(env, per_group, report)
    poi = report["probability_of_improvement"]
    if poi is not None:
        lines += _improvement_section(poi, conf)
    lines += [
        "## Learning curves",
        "",
        f"`{m['curve_tag']}` against env steps; line = IQM over seeds, band = {conf} bootstrap CI "
        "at each step (each step resampled independently, as rliable does for sample-efficiency "
        "curves). Runs evaluated at different steps are aligned on the union of their eval "
        "steps within the range every run of the group covers (a curve ends at its shortest "
        "run's last evaluation), each run contributing its last value at or before that step"
        f"; at most {m['curve_max_points']} points per curve.",
        "",
    ]
    return "\n".join(lines)


def _env_section(env: str, per_group: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """One env's part of comparison.md: its notes, the table of groups and the figure (or why
    there is none)."""
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    lines = [f"## {env}", ""]
    lines += _env_notes(per_group)
    lines += [
        f"| group | seeds | IQM [{conf} CI] | mean ± std | min | max |",
        "|---|---:|---|---|---:|---:|",
    ]
    for label, r in per_group.items():
        seeds = ", ".join(str(s) for s in r["seeds"])
        lo, hi = r["iqm_ci"]
        lines.append(
            f"| {_cell(label)} | {r['n_runs']} ({seeds}) "
            f"| {_num(r['iqm'])} [{_num(lo)}, {_num(hi)}] "
            f"| {_num(r['mean'])} ± {_num(r['std'])} | {_num(r['min'])} | {_num(r['max'])} |"
        )
    lines.append("")
    if env in report["figures"]:
        fig = report["figures"][env]
        lines += [f"![{env} learning curves]({fig})", ""]
    elif report.get("figures_missing") and env in report["curves"]:
        lines += [f"No learning-curve figure for {env}: matplotlib cannot be imported "
                  f"({report['figures_missing']}; `pip install matplotlib`); the curves' "
                  "numbers are in comparison.json.", ""]
    else:
        lines += [f"No learning curve for {env}: no run has `{m['curve_tag']}` scalars.", ""]
    return lines


def _improvement_section(poi: dict[str, Any], conf: str) -> list[str]:
    """comparison.md's probability of improvement P(X > Y): per env and averaged over envs."""
    x, y = poi["x"], poi["y"]
    lines = [
        f"## Probability of improvement P({x} > {y})",
        "",
        "Probability that a run of "
        f"{x} ends with a higher final eval return than a run of {y} (Mann-Whitney U / "
        f"(n_x · n_y), ties count 1/2), with a {conf} CI from resampling both groups' "
        "seeds independently. 0.5 = no difference.",
        "",
        f"| env | P({x} > {y}) [{conf} CI] | n {x} | n {y} |",
        "|---|---|---:|---:|",
    ]
    for env, r in poi["per_env"].items():
        if r is None:
            lines.append(f"| {env} | n/a (not both groups ran) | | |")
        else:
            lo, hi = r["ci"]
            lines.append(
                f"| {env} | {r['p']:.3f} [{lo:.3f}, {hi:.3f}] | {r['n_x']} | {r['n_y']} |"
            )
    avg = poi["average_over_envs"]
    if avg is not None and avg["n_envs"] > 1:
        lo, hi = avg["ci"]
        lines.append(
            f"| average over {avg['n_envs']} envs | {avg['p']:.3f} [{lo:.3f}, {hi:.3f}] | | |"
        )
    lines.append("")
    return lines
