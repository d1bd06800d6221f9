"""comparison.md: per env the table of groups (with their paired floors), the figures, P(X > Y),
the aggregate across envs, and how every number was computed. A statistic of fewer than
:data:`~rlzoo.analysis.figures.SMALL_N` runs carries ``n = k`` in its cell, and an interval of
zero width says so (every bootstrap resample gave the same value)."""

from __future__ import annotations

import math
from typing import Any

from rlzoo.analysis.aggregate import METRICS, MISSING_EXTRA
from rlzoo.analysis.config import canon, format_value
from rlzoo.analysis.figures import SMALL_N, n_mark


def num(x: float | None) -> str:
    """A number in a table cell: 2 decimals from 1 up, 4 significant digits below, ``—`` if
    missing or not finite."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.4g}"


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def marks(n: int | str, interval: list[float] | None = None) -> str:
    """What a cell adds about its sample: `` (n = 2)`` below :data:`SMALL_N` runs (``n`` may
    be ``"2 vs 3"``), ``degenerate CI`` when the interval has zero width."""
    said = []
    counts = [int(x) for x in str(n).split(" vs ")]
    if min(counts) < SMALL_N:
        said.append(n_mark(n) if isinstance(n, int) else f"n = {n}")
    if interval is not None and interval[0] == interval[1]:
        said.append("degenerate CI: every resample gave this value")
    return f" ({'; '.join(said)})" if said else ""


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
        "A group is labelled by its algo, the overrides that set it apart from the algo's "
        "other groups, and any key its own command line set that another group does not share."
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
    """comparison.md: per env a table of groups, the figure, P(X > Y), the aggregate across
    envs, and how it was computed. ``report`` is comparison.json's dict, ``n_runs`` the number
    of runs compared."""
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
        f"read it as a lower bound on the uncertainty: a cell computed from fewer than {SMALL_N} "
        "runs says `n = k`, and an interval of zero width says so. Raw returns of different "
        "envs are on different scales: "
        + ("they are aggregated only normalized, below."
           if report.get("aggregate") or report.get("aggregate_missing")
           else "no aggregate over envs is given."),
        "",
    ]
    if report.get("floors"):
        lines += [
            "**Floors.** Each run's final return is set against two scripted policies played on "
            "its own evaluation episodes (env seeds seed + 10,000 + i, as every evaluation of "
            "that seed; `rlzoo/policy/floors.py`): the env's zero action and uniform random "
            "actions. "
            "*above zero / random* counts the runs whose final return beats their own floor's "
            "mean over the same episodes.",
            "",
        ]
    for env, per_group in report["results"].items():
        lines += _env_section(env, per_group, report)
    poi = report["probability_of_improvement"]
    if poi is not None:
        lines += _improvement_section(poi, conf)
    lines += aggregate_section(report, conf)
    lines += _curves_section(report)
    return "\n".join(lines)


def _curves_section(report: dict[str, Any]) -> list[str]:
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    lines = ["## Learning curves", ""]
    grid = report.get("figure_files", {}).get("curves")
    if grid:
        others = ", ".join(f"[{name}]({name})" for name in grid[1:])
        lines += [f"![every env's learning curves]({grid[0]})", "",
                  f"Every env in one figure: {grid[0]}" + (f" (also {others})" if others else "")
                  + ".", ""]
    lines += [
        f"`{m['curve_tag']}` against env steps; line = IQM over seeds, band = {conf} bootstrap CI "
        "at each step (each step resampled independently, as rliable does for sample-efficiency "
        "curves). Runs evaluated at different steps are aligned on the union of their eval "
        "steps within the range every run of the group covers (a curve ends at its shortest "
        "run's last evaluation), each run contributing its last value at or before that step"
        f"; at most {m['curve_max_points']} points per curve. Legends give each curve's number "
        "of runs (`n = k`)" + "".join(_reference_lines(report)) + ".",
        "",
    ]
    return lines


def _reference_lines(report: dict[str, Any]) -> list[str]:
    """How the figures draw the reference lines this report holds (none: nothing said)."""
    said = []
    if any(report.get("published", {}).values()):
        said.append("; published curves (`--published`) are hollow markers at their seeds' IQM")
    if report.get("floors"):
        said.append("; floors (`--floors`) are horizontal lines at the mean over the env's seeds")
    return said


def _floor_cells(r: dict[str, Any]) -> str:
    f = r.get("floors")
    if not f:
        return " — | — |"
    return f" {f['above_zero']} of {f['n']} | {f['above_random']} of {f['n']} |"


def _env_section(env: str, per_group: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """One env's part of comparison.md: its notes, the table of groups and the figure (or why
    there is none)."""
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    floors = bool(report.get("floors"))
    lines = [f"## {env}", ""]
    lines += _env_notes(per_group)
    lines += [
        f"| group | seeds | IQM [{conf} CI] | mean ± std | min | max |"
        + (" above zero action | above random |" if floors else ""),
        "|---|---:|---|---|---:|---:|" + ("---:|---:|" if floors else ""),
    ]
    for label, r in per_group.items():
        seeds = ", ".join(str(s) for s in r["seeds"])
        lo, hi = r["iqm_ci"]
        n = r["n_runs"]
        lines.append(
            f"| {cell(label)} | {n} ({seeds}) "
            f"| {num(r['iqm'])} [{num(lo)}, {num(hi)}]{marks(n, r['iqm_ci'])} "
            f"| {num(r['mean'])} ± {num(r['std'])}{marks(n)} | {num(r['min'])} "
            f"| {num(r['max'])} |" + (_floor_cells(r) if floors else "")
        )
    lines.append("")
    found = (report.get("floors") or {}).get(env)
    if found:
        lines += [
            f"Floors on {env} (each seed's 10-episode means on its own episodes, lowest to "
            f"highest over {found['seeds']} seeds): zero action {num(found['low']['zero'])} to "
            f"{num(found['high']['zero'])}, uniform random actions "
            f"{num(found['low']['random'])} to {num(found['high']['random'])}.", ""]
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
            sizes = f"{r['n_x']} vs {r['n_y']}"
            lines.append(
                f"| {env} | {r['p']:.3f} [{lo:.3f}, {hi:.3f}]{marks(sizes, r['ci'])} "
                f"| {r['n_x']} | {r['n_y']} |"
            )
    avg = poi["average_over_envs"]
    if avg is not None and avg["n_envs"] > 1:
        lo, hi = avg["ci"]
        lines.append(
            f"| average over {avg['n_envs']} envs | {avg['p']:.3f} [{lo:.3f}, {hi:.3f}]"
            f"{' (degenerate CI)' if lo == hi else ''} | | |"
        )
    lines.append("")
    return lines


def aggregate_section(report: dict[str, Any], conf: str) -> list[str]:
    """The aggregate across envs (rliable): the normalization used per env, the four metrics
    per row, P(X > Y) of every two rows, the figure; or one line saying what is missing."""
    if report.get("aggregate_missing"):
        return ["## Aggregate across envs", "",
                MISSING_EXTRA.format(reason=report["aggregate_missing"]) + ".", ""]
    agg = report.get("aggregate")
    if not agg:
        return []
    lines = ["## Aggregate across envs", "",
             "Computed with rliable (Agarwal et al., NeurIPS 2021): stratified bootstrap over "
             f"each env's runs, {conf} percentile CIs, {report['method']['bootstrap_reps']} "
             "resamples."]
    if agg["envs"]:
        lines[-1] += (" Scores are normalized per env, `(return - low) / (high - low)`; "
                      "optimality gap = mean of `1 - min(score, 1)`.")
        lines += ["", "| env | low (0) | high (1) | normalization |", "|---|---:|---:|---|"]
        lines += [f"| {env} | {num(r['low'])} | {num(r['high'])} | {cell(r['source'])} |"
                  for env, r in agg["normalization"].items()]
        lines += ["", "| row | runs per env | " + " | ".join(f"{m} [{conf} CI]" for m in METRICS)
                  + " |", "|---|---:|" + "---|" * len(METRICS)]
        for row in agg["rows"]:
            n = agg["runs_per_env"][row]
            values = [f"{agg['points'][row][m]:.3f} [{lo:.3f}, {hi:.3f}]{marks(n, [lo, hi])}"
                      for m in METRICS for lo, hi in [agg["intervals"][row][m]]]
            lines.append(f"| {cell(row)} | {n} | " + " | ".join(values) + " |")
    if agg["probability_of_improvement"]:
        lines += ["", f"| X | Y | P(X > Y) [{conf} CI] | envs |", "|---|---|---|---:|"]
        for r in agg["probability_of_improvement"]:
            lo, hi = r["ci"]
            sizes = f"{r['n_x']} vs {r['n_y']}"
            lines.append(f"| {cell(r['x'])} | {cell(r['y'])} | {r['p']:.3f} [{lo:.3f}, "
                         f"{hi:.3f}]{marks(sizes, r['ci'])} | {r['n_envs']} |")
    figure = report.get("figure_files", {}).get("aggregate")
    if figure:
        lines += ["", f"![aggregate across envs]({figure[0]})", "",
                  "The figure: " + ", ".join(f"[{name}]({name})" for name in figure) + "."]
    if agg["left_out"]:
        lines += ["", "Not in the normalized aggregate: " + "; ".join(agg["left_out"]) + "."]
    return lines + [""]
