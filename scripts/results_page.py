"""The results page (docs/results.md) and its figures, rendered from the raw results alone.

:func:`render_page` turns ``RESULTS/<suite>/`` (every seed's ``summary.json``, ``eval.csv`` and
``provenance.json``, and rlzoo.compare's ``report/comparison.json``) and the published seeds
(scripts/published_references.py) into the page's text; nothing else is read, so the page
written by scripts/reproduce.py and a fresh rendering of the committed results are the same
bytes (tests/test_reproduce.py checks this). The figures are drawn by scripts/reproduce.py's
report step (:func:`plot_published`, :func:`plot_profile`).

Layout: the headline (one table of every cell at the suite's headline budgets against the best
published reference, one figure per task, the aggregate across tasks and its performance
profile), the per-seed values, the method (said once), then each suite in detail, and the
sources.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from published_references import (
    NORMALIZER,
    PUBLISHED_DIR,
    REFERENCES,
    SOURCES,
    UNPUBLISHED,
    Reference,
    normalizer,
    published_data,
)
from suite_schema import Suite, Task, compose_cell_config

REPO = Path(__file__).resolve().parents[1]
REPORT_DIR = "report"
STATUS_FILE = "status.json"
PROVENANCE_FILE = "provenance.json"  # in an exported run dir: what trained it, on what
PUBLISHED_SUFFIX = "-published.png"  # RESULTS/<suite>/report/<figure stem>-published.png
PROFILE_FIGURE = "profile-{k}k.png"  # RESULTS/<suite>/report/: the performance profile at k x 1,000
SOURCE_STYLES = {"td3-paper": ("s", "--"), "tianshou": ("^", ":"), "simbav2": ("D", "-."),
                 "cleanrl": ("*", "none")}
WINDOW = 10_000  # a comparison's window: each seed's mean over its evaluations in [S - W, S]
ALPHA = 0.05     # the tests' level, after Holm's correction over the page's tests
SCALE_FILE = "scale.json"  # RESULTS/<suite>/: returns of scripted policies, computed once
SCALE_EPISODES = 100       # episodes of each scripted policy (env seeds 10000..10099)
MULTI_AGENT_PREFIXES = ("mpe-", "mamujoco-")  # task names of multi-agent envs


# --------------------------------------------------------------------------- files


def read_json(path: Path) -> dict[str, Any] | None:
    """``path`` as a JSON object, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def repo_relative(text: str) -> str:
    """``text`` with this checkout's absolute path written relative to it (``/x/repo/runs/a`` ->
    ``runs/a``, ``/x/repo`` -> ``.``), so exported configs carry no path of this machine."""
    repo = re.escape(str(REPO))
    return re.sub(repo + r"(?![^/\s'\"])", ".", re.sub(repo + "/", "", text))


def summary_steps(run_dir: Path) -> int | None:
    """``total_steps`` of ``run_dir/summary.json`` (None without a usable one)."""
    summary = read_json(run_dir / "summary.json")
    steps = summary.get("total_steps") if summary else None
    return int(steps) if isinstance(steps, int) else None


def fmt(x: float | None) -> str:
    """A return in a table: no decimals from 100 up, 1 below, ``—`` when missing."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def kilo(steps: int) -> str:
    """``50000`` -> ``50k``."""
    return f"{steps // 1000:,}k" if steps % 1000 == 0 else f"{steps:,}"


def run_rows(folder: Path) -> dict[str, list[Path]]:
    """The exported runs of one task folder by row label: ``{label: [run dirs]}``."""
    rows: dict[str, list[Path]] = {}
    for d in sorted(folder.iterdir()) if folder.is_dir() else []:
        if (d / "summary.json").is_file() and "-s" in d.name and not d.name.startswith("."):
            rows.setdefault(d.name.rsplit("-s", 1)[0], []).append(d)
    return rows


_CURVES: dict[str, list[tuple[int, float]]] | None = None  # while render_page reads: by run dir


def eval_points(run_dir: Path) -> list[tuple[int, float]]:
    """A run's ``eval/return`` curve as (env step, return) pairs in step order; [] when none.
    While :func:`render_page` runs, each run dir is read once."""
    from rlzoo.analysis.curves import CURVE_TAG, load_scalars

    if _CURVES is not None and str(run_dir) in _CURVES:
        return _CURVES[str(run_dir)]
    points = load_scalars(run_dir, [CURVE_TAG]).get(CURVE_TAG)
    curve = [] if points is None else [
        (int(step), float(value)) for step, value in zip(points[0].tolist(), points[1].tolist())]
    if _CURVES is not None:
        _CURVES[str(run_dir)] = curve
    return curve


def value_at(run_dir: Path, steps: int, window: int) -> float | None:
    """A run's ``eval/return`` at ``steps``: its first evaluation at a step in
    ``[steps, steps + window)`` (an evaluation lands on the first env step at or after its
    multiple), None when it has none there."""
    return next((v for step, v in eval_points(run_dir) if steps <= step < steps + window), None)


def window_mean(run_dir: Path, steps: int, every: int, width: int = WINDOW) -> float | None:
    """A run's mean ``eval/return`` over its evaluations at ``steps - width, ..., steps`` (every
    ``every`` env steps; each within ``every`` of its multiple); None unless it has them all."""
    values = [value_at(run_dir, s, every) for s in range(steps - width, steps + 1, every)]
    return None if any(v is None for v in values) else float(np.mean(values))  # type: ignore[arg-type]


def first_eval(run_dir: Path) -> tuple[int, float] | None:
    """A run's first ``eval/return`` point: (env step, return); None when it has none."""
    return next(iter(eval_points(run_dir)), None)


def first_columns(runs: list[Path]) -> tuple[str, str]:
    """The final-return table's two cells about where the runs started: the IQM over seeds of
    each run's first evaluation with its env step (a range when the seeds differ), and how many
    seeds ended above it (``final_eval_return`` of summary.json against the first evaluation);
    ``—`` for each when no run has a first evaluation."""
    from rlzoo.analysis import stats

    pairs = [(f, read_json(d / "summary.json") or {}) for d in runs
             if (f := first_eval(d)) is not None]
    if not pairs:
        return "—", "—"
    steps = [f[0] for f, _ in pairs]
    at = f"{min(steps):,}" if min(steps) == max(steps) else f"{min(steps):,}-{max(steps):,}"
    finals = [(f[1], summary.get("final_eval_return")) for f, summary in pairs]
    better = sum(1 for first, final in finals if final is not None and final > first)
    return f"{fmt(stats.iqm([f[1] for f, _ in pairs]))} (at {at})", f"{better} of {len(pairs)}"


def updates_by(run_dir: Path, steps: int) -> int | None:
    """Gradient updates a run had made by env step ``steps``, from its config: (steps - warm-up)
    x updates per env step (rlzoo's ``algo.learning_starts`` and ``algo.utd``; an SB3 peer's
    ``learning_starts`` and ``gradient_steps / train_freq``); None when the config lacks them."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    algo = OmegaConf.load(path).get("algo", {}) if path.is_file() else {}
    start = algo.get("learning_starts")
    utd = algo.get("utd")
    if utd is None and algo.get("gradient_steps") and algo.get("train_freq"):
        utd = algo["gradient_steps"] / algo["train_freq"]
    if start is None or utd is None:
        return None
    return int(max(0, steps - int(start)) * float(utd))


def iqm_ci(values: list[float] | np.ndarray) -> tuple[float, float, float]:
    """IQM and its 95% stratified-bootstrap CI (rlzoo.compare's method and defaults)."""
    from rlzoo.analysis import stats

    return stats.stratified_bootstrap_ci(np.asarray(values, dtype=float))


def iqm_text(values: list[float] | np.ndarray) -> str:
    """``IQM [low, high]`` of ``values``."""
    point, lo, hi = iqm_ci(values)
    return f"{fmt(point)} [{fmt(lo)}, {fmt(hi)}]"


def mean_over_evaluations(run_dir: Path, last: int | None = None
                          ) -> tuple[tuple[int, ...], float] | None:
    """A run's evaluation steps (up to ``last``, default all) and the mean of its
    ``eval/return`` over them (the area under its curve divided by its length: it weighs how
    early a run learns as well as where it ends); None when it has no evaluation."""
    points = [(s, v) for s, v in eval_points(run_dir) if last is None or s <= last]
    if not points:
        return None
    return tuple(step for step, _ in points), sum(v for _, v in points) / len(points)


def cell_wall_time(runs: list[Path]) -> tuple[float, str] | None:
    """A finished cell's wall time in hours and how it was measured: an rlzoo cell is one
    process for all its seeds (summary.json's ``wall_time_s``, summed over resumes); an SB3 cell
    is one process per seed (the sum of theirs). None without the numbers."""
    summaries = [read_json(d / "summary.json") or {} for d in runs]
    walls = [s.get("wall_time_s") for s in summaries]
    if not walls or any(not isinstance(w, (int, float)) for w in walls):
        return None
    if any("library" in s for s in summaries):
        return sum(walls) / 3600, f"sum of {len(walls)} one-seed processes"
    return max(walls) / 3600, "one process"


def machine(runs: list[Path]) -> str | None:
    """The machine the runs' last training launch ran on (provenance.json): CPU and cores."""
    names = set()
    for d in runs:
        path = d / PROVENANCE_FILE
        try:
            records = json.loads(path.read_text()) if path.is_file() else []
        except ValueError:
            records = []
        if isinstance(records, list) and records and isinstance(records[-1], dict):
            names.add(f"{records[-1].get('cpu')}, {records[-1].get('cores')} cores")
    return ", ".join(sorted(names)) or None


# --------------------------------------------------------------------------- tests


@dataclass
class Test:
    """One rank test of the page: P(A > B) over seed pairs with its 95% bootstrap CI, and the
    two-sided Mann-Whitney U test's p; ``adjusted`` is its Holm-adjusted p over the page."""

    poi: tuple[float, float, float]
    p: float
    adjusted: float = math.nan

    def verdict(self) -> str:
        """``above``/``below`` when the Holm-adjusted p is under :data:`ALPHA`; the uncorrected
        reading when only it is; else ``no difference found``."""
        side = "above" if self.poi[0] > 0.5 else "below"
        if self.adjusted < ALPHA:
            return side
        if self.p < ALPHA:
            return f"{side} at p < {ALPHA:g}, not after Holm"
        return "no difference found"

    def cells(self) -> str:
        """Two table cells: ``P [lo, hi]`` and ``verdict (p = .., Holm ..)``."""
        point, lo, hi = self.poi
        return (f"{point:.2f} [{lo:.2f}, {hi:.2f}] | {self.verdict()} (p {pval(self.p)}, "
                f"Holm {pval(self.adjusted)})")


def pval(p: float) -> str:
    """A p-value with its relation: ``= 0.37``, ``= 0.008`` (three decimals below 0.01),
    ``< 0.001``; ``—`` when not finite."""
    if not math.isfinite(p):
        return "—"
    if p < 0.001:
        return "< 0.001"
    return f"= {p:.3f}" if p < 0.01 else f"= {p:.2f}"


@dataclass
class Tests:
    """The page's family of rank tests, by key; :meth:`holm` adjusts them all together."""

    items: dict[tuple[str, ...], Test] = field(default_factory=dict)

    def run(self, key: tuple[str, ...], x: Sequence[float], y: Sequence[float]) -> Test:
        """The test of ``x`` against ``y`` (computed once per key)."""
        if key not in self.items:
            from scipy.stats import mannwhitneyu

            from rlzoo.analysis import stats

            poi = stats.probability_of_improvement_ci(list(x), list(y))
            p = float(mannwhitneyu(list(x), list(y), alternative="two-sided").pvalue)
            self.items[key] = Test(poi, p)
        return self.items[key]

    def holm(self) -> None:
        """Holm's step-down adjustment over every test: the i-th smallest p (from 0) times
        (m - i), made monotone and capped at 1."""
        order = sorted(self.items.values(), key=lambda t: t.p)
        running = 0.0
        for i, test in enumerate(order):
            running = max(running, min(1.0, (len(order) - i) * test.p))
            test.adjusted = running

    def count(self, kind: str) -> int:
        return sum(1 for key in self.items if key[0] == kind)


def rank_test_power(n_a: int, n_b: int, shift: float, alpha: float, draws: int = 4000,
                    seed: int = 0) -> float:
    """How often the two-sided exact Mann-Whitney test of ``n_a`` against ``n_b`` seeds finds a
    true gap of ``shift`` standard deviations at level ``alpha`` (normal returns, ``draws``
    simulated pairs of samples, a fixed seed): the page's statement of what `no difference
    found` can mean."""
    from itertools import combinations

    n = n_a + n_b
    ranks_a = np.array([sum(c) for c in combinations(range(1, n + 1), n_a)])
    null = np.sort(ranks_a - n_a * (n_a + 1) // 2)  # U of A under no difference, all orders
    rng = np.random.default_rng(seed)
    samples = np.concatenate([rng.normal(shift, 1.0, (draws, n_a)),
                              rng.normal(0.0, 1.0, (draws, n_b))], axis=1)
    ranks = samples.argsort(axis=1).argsort(axis=1) + 1
    u = ranks[:, :n_a].sum(axis=1) - n_a * (n_a + 1) // 2
    low = np.searchsorted(null, u, side="right") / len(null)   # P(U <= u)
    high = 1.0 - np.searchsorted(null, u, side="left") / len(null)  # P(U >= u)
    p = np.minimum(1.0, 2.0 * np.minimum(low, high))
    return float((p < alpha).mean())


# --------------------------------------------------------------------------- the data of a suite


@dataclass
class SuiteData:
    """What the page reads of one suite's results: runs by task and row, rlzoo.compare's
    report, the status file."""

    suite: Suite
    root: Path
    runs: dict[str, dict[str, list[Path]]]
    report: dict[str, Any] | None
    status: dict[str, Any]

    @classmethod
    def read(cls, suite: Suite, results: Path) -> SuiteData:
        root = results / suite.name
        return cls(suite, root, {t.name: run_rows(root / t.name) for t in suite.tasks},
                   read_json(root / REPORT_DIR / "comparison.json"),
                   read_json(root / STATUS_FILE) or {})

    def cell(self, task: str, row: str) -> list[Path]:
        return self.runs.get(task, {}).get(row, [])

    def values_at(self, task: str, row: str, steps: int) -> list[float] | None:
        """Each seed's evaluation at ``steps``; None unless every seed has one."""
        runs = self.cell(task, row)
        values = [value_at(d, steps, self.suite.eval_every) for d in runs]
        return None if not runs or None in values else values  # type: ignore[return-value]

    def windows(self, task: str, row: str, steps: int) -> list[float] | None:
        """Each seed's mean over its evaluations in the window ending at ``steps``; None
        unless every seed has them."""
        runs = self.cell(task, row)
        values = [window_mean(d, steps, self.suite.eval_every) for d in runs]
        return None if not runs or None in values else values  # type: ignore[return-value]


def references_of(task: str, row: str) -> list[Reference]:
    """The published curves with per-seed data set beside ``row`` on ``task``."""
    return [r for r in REFERENCES if r.task == task and row in r.rows and r.data_algo]


def reference_tests(data: SuiteData, tests: Tests, task: str, row: str,
                    steps: int) -> list[tuple[Reference, np.ndarray, Test]]:
    """``row``'s seeds against each published curve's seeds at ``steps`` (windows on both
    sides): (reference, its seeds' windows, the test); [] when either side lacks the window."""
    ours = data.windows(task, row, steps)
    out = []
    for ref in references_of(task, row) if ours else []:
        theirs = ref.window(steps, WINDOW)
        if theirs is not None:
            test = tests.run(("ref", data.suite.name, task, row, ref.algo, str(steps)), ours,
                             theirs.tolist())
            out.append((ref, theirs, test))
    return out


def pair_tests(data: SuiteData, tests: Tests, task: str) -> list[tuple[str, str, str, Test,
                                                                       Test | None]]:
    """The rows of one task set against each other: (kind, A, B, test on the final returns,
    test on the means over evaluations or None when the rows were evaluated at other steps);
    each rlzoo row against its peer, and each row against the rows of ``Row.against``. Rows
    trained to different budgets are compared at the smaller one (B's label then says at which
    step): each seed's evaluation there, and its mean over the evaluations up to it."""
    rows = data.runs.get(task, {})
    peers = [("peer", str(r.peer), r.label) for r in data.suite.rows if r.peer]
    against = [("against", r.label, other) for r in data.suite.rows for other in r.against]
    out = []
    for kind, a, b in peers + against:
        if not (rows.get(a) and rows.get(b)):
            continue
        budgets = {name: max(summary_steps(d) or 0 for d in rows[name]) for name in (a, b)}
        common = min(budgets.values())
        label = b if budgets[a] == budgets[b] else f"{b} (both at {kilo(common)})"
        if budgets[a] == budgets[b]:
            finals = [[float((read_json(d / "summary.json") or {})["final_eval_return"])
                       for d in rows[name]] for name in (a, b)]
        else:
            finals = [[value_at(d, common, data.suite.eval_every) for d in rows[name]]
                      for name in (a, b)]
            if any(v is None for side in finals for v in side):
                continue
        base = ("pair", data.suite.name, task, a, b)
        final = tests.run((*base, "final"), *finals)  # type: ignore[arg-type]
        last = None if budgets[a] == budgets[b] else common
        means = [[mean_over_evaluations(d, last) for d in rows[name]] for name in (a, b)]
        flat = [m for side in means for m in side]
        curve = None
        if all(m is not None for m in flat) and len({m[0] for m in flat if m}) == 1:
            curve = tests.run((*base, "curve"), *([m[1] for m in side if m] for side in means))
        out.append((kind, a, label, final, curve))
    return out


def aggregate_scores(data: SuiteData, steps: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """The cross-task scores at ``steps``: the tasks (those where an rlzoo row of the suite has
    its window at ``steps`` and the normalizer has the task) and, for each rlzoo row and each
    published curve with seeds on every one of them, the seeds' windows normalized
    (:func:`published_references.normalizer`), ``[seeds, tasks]``."""
    tasks = [t.name for t in data.suite.tasks if normalizer(t.name) is not None and any(
        data.windows(t.name, r.label, steps) for r in data.suite.rows)]
    scores: dict[str, np.ndarray] = {}
    if not tasks:
        return tasks, scores

    def norm(task: str, values: Sequence[float]) -> np.ndarray:
        low, high = normalizer(task)  # type: ignore[misc]
        return (np.asarray(values, float) - low) / (high - low)

    for row in data.suite.rows:
        columns = [data.windows(task, row.label, steps) for task in tasks]
        if all(c is not None for c in columns) and len({len(c) for c in columns}) == 1:
            scores[row.label] = np.stack([norm(t, c) for t, c in zip(tasks, columns)], axis=1)
    for algo in dict.fromkeys(r.algo for r in REFERENCES if r.data_algo):
        refs = {r.task: r for r in REFERENCES if r.algo == algo and r.data_algo}
        columns = [refs[t].window(steps, WINDOW) if t in refs else None for t in tasks]
        if all(c is not None for c in columns) and len({len(c) for c in columns}) == 1:
            scores[algo] = np.stack([norm(t, c) for t, c in zip(tasks, columns)], axis=1)
    return tasks, scores


# --------------------------------------------------------------------------- figures


def published_figure(figure: str) -> str:
    """The page figure's name beside rlzoo.compare's ``figure`` (``Hopper.png``)."""
    return Path(figure).stem + PUBLISHED_SUFFIX


def plot_published(env: str, curves: dict[str, dict[str, Any]], path: Path) -> bool:
    """The page's figure of one task: each row's IQM curve and 95% CI band (from
    ``comparison.json``'s ``curves``) and, in the colour of the row they are set beside, each
    published curve's mean over its seeds up to the curves' last step (a marker and line style
    per source). False (nothing written) when no published curve is set beside these rows."""
    refs = [r for r in REFERENCES if r.task == env and r.curve() is not None
            and any(label in curves for label in r.rows)]
    last = max((max(c["steps"]) for c in curves.values() if c["steps"]), default=0)
    if not refs or last <= 0:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    colors = {}
    for label, c in curves.items():
        (line,) = ax.plot(c["steps"], c["iqm"], label=f"rlzoo {label} (n={c['n_runs']})"
                          if not label.startswith("sb3_") else f"{label} (n={c['n_runs']})")
        ax.fill_between(c["steps"], c["ci_low"], c["ci_high"], color=line.get_color(),
                        alpha=0.2, linewidth=0)
        colors[label] = line.get_color()
    for ref in refs:
        steps, values = ref.curve()  # type: ignore[misc]
        keep = steps <= last
        label = next(label for label in ref.rows if label in curves)
        marker, style = SOURCE_STYLES.get(ref.source, ("o", "--"))
        ax.plot(steps[keep], values[:, keep].mean(axis=0), color=colors[label], marker=marker,
                markerfacecolor="white", markersize=5, linestyle=style, linewidth=1,
                label=f"{ref.algo} (mean, n={len(values)})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("eval/return")
    ax.set_title(f"{env}: rlzoo IQM and 95% CI over seeds; published means (hollow)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
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
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for label, s in scores.items():
        flat = s.ravel()
        ax.plot(taus, [(flat > t).mean() for t in taus],
                linestyle="--" if label[0].isupper() else "-",
                label=f"{label} ({s.shape[0]} seeds x {s.shape[1]} tasks)")
    ax.set_xlabel(f"normalized score tau (0: {NORMALIZER}'s untrained policy, 1: its mean at 1M)")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_title(f"Performance profile at {kilo(steps)} env steps ({', '.join(tasks)}; "
                 f"{kilo(WINDOW)} windows)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- the headline


def best_reference(data: SuiteData, tests: Tests, task: str, row: str,
                   steps: int) -> tuple[Reference, np.ndarray, Test] | None:
    """The published curve of ``row`` on ``task`` whose seeds' windows at ``steps`` have the
    highest IQM (the hardest to match), with the test against it; None without one."""
    from rlzoo.analysis import stats

    found = reference_tests(data, tests, task, row, steps)
    return max(found, key=lambda item: stats.iqm(item[1])) if found else None


def headline_lines(data: SuiteData, tests: Tests, rel: Path) -> list[str]:
    """The headline of a suite: every cell at each headline budget against the best published
    reference, then one figure per task."""
    suite = data.suite
    budgets = suite.headline_steps
    head = "| task | row |"
    rule = "|---|---|"
    for s in budgets:
        span = f"{kilo(s - WINDOW)}-{kilo(s)}"
        head += (f" rlzoo at {kilo(s)}: IQM [95% CI] | best published, {span}: IQM (seeds) | "
                 f"verdict on {span} |")
        rule += "---|---|---|"
    lines = [f"## Headline: {suite.title} ({suite.seeds} seeds)", "",
             f"Every cell of the `{suite.name}` suite: rlzoo's IQM over seeds of the evaluation at "
             "that env step; the published curve of the same algorithm whose seeds' means over "
             f"the last {kilo(WINDOW)} (three evaluations) have the highest IQM, and that IQM; "
             "the verdict of rlzoo's seeds' means over the same window against the published "
             "seeds', with P(rlzoo > published) [95% CI], after Holm's correction "
             "([method](#method)). `not run yet`: no result at that budget (the cells' status "
             f"is at the end of the `{suite.name}` section).", "", head, rule]
    verdicts: dict[int, list[tuple[str, Test]]] = {s: [] for s in budgets}
    for task, row in suite.cells():
        cells = []
        for s in budgets:
            values = data.values_at(task.name, row.label, s)
            if values is None:
                cells += ["not run yet", "—", "—"]
                continue
            best = best_reference(data, tests, task.name, row.label, s)
            if best is None:
                cells += [iqm_text(values), "no reference", "—"]
                continue
            ref, theirs, test = best
            verdicts[s].append((f"{task.name} {row.label}", test))
            point, lo, hi = test.poi
            cells += [iqm_text(values), f"{ref.algo}: {fmt(iqm_ci(theirs)[0])} ({len(theirs)})",
                      f"{test.verdict()} (P = {point:.2f} [{lo:.2f}, {hi:.2f}])"]
        lines.append(f"| {task.name} | {row.label} | " + " | ".join(cells) + " |")
    lines += ["", "**In short.** " + " ".join(verdict_summary(s, verdicts[s]) for s in budgets), ""]
    for task in suite.tasks:
        figure = (data.report or {}).get("figures", {}).get(task.name)
        published = published_figure(figure) if figure else ""
        if figure and (data.root / REPORT_DIR / published).is_file():
            lines += [f"![{task.name}: learning curves and published means]"
                      f"({rel / REPORT_DIR / published})", ""]
        elif figure:
            lines += [f"![{task.name}: learning curves]({rel / REPORT_DIR / figure})", ""]
        else:
            lines += [f"{task.name}: no figure yet (no cell of this task has run).", ""]
    lines += aggregate_lines(data, rel)
    return lines


def verdict_summary(steps: int, found: list[tuple[str, Test]]) -> str:
    """One sentence on the headline's verdicts at ``steps``: how many cells have a reference,
    how many differ after Holm, and which differ only before it."""
    if not found:
        return f"At {kilo(steps)}, no cell with a published reference has run yet."
    after = [(name, t) for name, t in found if t.adjusted < ALPHA]
    before = [(name, t) for name, t in found if t.p < ALPHA <= t.adjusted]
    def names(items: list[tuple[str, Test]]) -> str:
        return ", ".join(f"{name} {'above' if t.poi[0] > 0.5 else 'below'}" for name, t in items)
    cells = f"{len(found)} cells have" if len(found) != 1 else "1 cell has"
    text = (f"At {kilo(steps)}, {cells} a published reference; "
            f"{len(after)} differ from the best one after Holm" + (f" ({names(after)})"
                                                                   if after else ""))
    if before:
        text += f", {len(before)} more only before it ({names(before)})"
    return text + f"; the other {len(found) - len(after) - len(before)} show no difference."


def aggregate_lines(data: SuiteData, rel: Path) -> list[str]:
    """The aggregate across tasks at each headline budget: IQM of normalized scores with a
    task-stratified bootstrap CI, and the performance profile's figure."""
    from rlzoo.analysis import stats

    low, high = "its evaluation at step 0 (the untrained policy)", "its mean at 1M env steps"
    lines = []
    for s in data.suite.headline_steps:
        tasks, scores = aggregate_scores(data, s)
        if not scores:
            continue
        if not lines:
            lines += [f"**Across tasks** (as rliable does): each seed's {kilo(WINDOW)} window "
                      f"normalized per task by the TD3 paper's 10 seeds, 0 = {low}, 1 = {high}; "
                      "IQM over every task's seeds pooled, 95% CI by a task-stratified bootstrap "
                      "(each task's seeds resampled on their own, 2,000 resamples). A row is "
                      "aggregated only where it has every task; published rows are capitalized.",
                      ""]
        lines += [f"At {kilo(s)} ({', '.join(tasks)}):", "",
                  "| row | seeds x tasks | IQM normalized score [95% CI] |", "|---|---|---|"]
        for label, x in sorted(scores.items(), key=lambda kv: -stats.iqm(kv[1])):
            point, lo, hi = stats.stratified_bootstrap_ci(x)
            lines.append(f"| {label} | {x.shape[0]} x {x.shape[1]} | {point:.2f} "
                         f"[{lo:.2f}, {hi:.2f}] |")
        lines.append("")
        profile = PROFILE_FIGURE.format(k=s // 1000)
        if (data.root / REPORT_DIR / profile).is_file():
            lines += [f"![Performance profile at {kilo(s)}]({rel / REPORT_DIR / profile})", ""]
    return lines


def seed_lines(data: SuiteData) -> list[str]:
    """One line per cell with results: each seed's evaluation at each headline budget (or the
    final return where the suite has none), seeds in order."""
    suite = data.suite
    lines = []
    for task, row in suite.cells():
        runs = data.cell(task.name, row.label)
        if not runs:
            continue
        parts = []
        for s in suite.headline_steps or (suite.steps,):
            values = data.values_at(task.name, row.label, s)
            parts.append(f"{kilo(s)}: " + (", ".join(fmt(v) for v in values) if values
                                           else "not run yet"))
        seeds = [int(d.name.rsplit("-s", 1)[1]) for d in runs]
        lines.append(f"- {task.name} `{row.label}` (seeds {min(seeds)}-{max(seeds)}): "
                     + "; ".join(parts))
    return lines


# --------------------------------------------------------------------------- the method


def method_lines(tests: Tests) -> list[str]:
    """How every number of the page is made, said once."""
    n_ref, n_pair = tests.count("ref"), tests.count("pair")
    total = n_ref + n_pair
    smallest_pair = 2 / math.comb(10, 5)
    strictest = ALPHA / max(total, 1)

    def power(shift: float, alpha: float) -> str:
        return f"{rank_test_power(5, 10, shift, alpha):.0%}"

    return [
        "## Method", "",
        "**Returns.** Each evaluation is the mean return of 10 deterministic episodes (the "
        "policy's mode), on env seeds `seed + 10000 + i` (so seeds s and s + 1 share 9 of "
        "their 10 evaluation start states; their training runs are independent). A row is one "
        "algorithm and config; its seeds are 0..K-1. IQM = interquartile mean over seeds (with "
        "5 seeds, the mean of the middle three); its 95% CI is a bootstrap over seeds (2,000 "
        "resamples, rlzoo.compare's method), best read as a lower bound on the uncertainty at "
        "5 seeds.", "",
        f"**Against published seeds.** The TD3 paper, Tianshou and SimbaV2 publish every seed's "
        "curve; the page compares seeds with seeds. Each side's seeds are reduced to their mean "
        f"over their evaluations in the {kilo(WINDOW)} window ending at the compared step (S - "
        f"{kilo(WINDOW)} to S; rlzoo and the TD3 paper and Tianshou evaluate every 5k, so "
        "three evaluations; SimbaV2 every 16,666, so one): a single published evaluation can "
        "spike (Tianshou's Hopper SAC reads 535, 1,030 and 705 at 45k, 50k and 55k). "
        "P(rlzoo > published) is the fraction of seed pairs where rlzoo's is higher (ties "
        "half), with its 95% bootstrap CI (each side resampled on its own); the test is "
        "Mann-Whitney's U, two-sided. The published runs used older env versions (gym v1, v3, "
        "v4; rlzoo runs v5) and other settings and warm-ups (Sources), and the `updates` "
        "columns give both sides' gradient updates by then: a difference is a prompt to look, "
        "not a verdict on the algorithm.", "",
        "**Between rlzoo rows** (a row against its Stable-Baselines3 peer, a variant or control "
        "against the rows it builds on): P(A > B) and the same test, first on the final "
        "returns, then on each seed's mean over all its evaluations, which also weighs how "
        "early a row learns (a second measure, added after the Hopper action-sequence cell had "
        "been seen; cells run later are fresh tests of it).", "",
        f"**How many comparisons.** The page makes {total} rank tests ({n_ref} against "
        f"published seeds, {n_pair} between rlzoo rows). Every verdict is read after Holm's "
        f"step-down correction over all {total} at {ALPHA:g} (`above`/`below`); where only the "
        f"uncorrected p is under {ALPHA:g} the verdict says `not after Holm`. Two rows of 5 "
        f"seeds cannot be told apart after this correction: the smallest two-sided p of 5 "
        f"against 5 seeds is {smallest_pair:.3f}, and Holm asks at least {ALPHA:g} / {total} "
        f"= {ALPHA / max(total, 1):.4f} of the smallest p; 5 against 10 seeds can reach "
        f"{2 / math.comb(15, 5):.4f}. So every difference between rlzoo rows on this page is "
        "a lead to follow with more seeds, not a finding. `no difference found` is not "
        "evidence of a match: with 5 seeds against 10, the rank test finds a true gap of one "
        f"standard deviation {power(1.0, ALPHA)} of the time and of 1.75 standard deviations "
        f"{power(1.75, ALPHA)} at p < {ALPHA:g}, and {power(1.0, strictest)} and "
        f"{power(1.75, strictest)} at Holm's strictest step, p < {strictest:.4f} (simulated: "
        "normal returns, 4,000 draws).", "",
        "**Hyperparameters.** Every row runs rlzoo's defaults unchanged but a control row, "
        "which changes the settings its note names (\"control for ...\"); each file under "
        "`rlzoo/conf/algo/` says which paper or reference code each default comes from, and no "
        "run on these tasks chose them. One choice between published settings was made by "
        "looking at returns, on another task: TD3's defaults were switched from CleanRL's (lr "
        "3e-4, 256x256, batch 256) to the TD3 paper's (lr 1e-3, 400x300, batch 100) with 10,000 "
        "random steps (the paper's warm-up on HalfCheetah and Ant; it used 1,000 on Hopper and "
        "Walker2d) after CleanRL's, with 1,000 random steps, did not solve InvertedPendulum-v5 "
        "within 15k steps on seeds 0 and 1 (nor did Stable-Baselines3's TD3 with those settings "
        "on the one seed tried) and the paper's solved it by 25k steps on seeds 0-2 "
        "(`rlzoo/conf/algo/td3.yaml`). rlzoo's TD3 does **not** follow the paper's code in one "
        "respect: the paper's `main.py` trains at each episode's end, the random warm-up's "
        "episodes included, so by env step t it has made about t updates; rlzoo's TD3 makes "
        "none during its 10,000 random steps (40,000 by 50k, 90,000 by 100k). Nothing else was "
        "tuned. The Stable-Baselines3 peer takes the same settings as the rlzoo row of the "
        "same algorithm.", ""]


# --------------------------------------------------------------------------- a suite in detail


def status_lines(data: SuiteData) -> list[str]:
    """Every cell's state and, for a finished one, its wall time on the machine it ran on; the
    reason a cell has not run is said once, below the table."""
    suite = data.suite
    rows, reasons = [], []
    machines = set()
    for task, row in suite.cells():
        runs = data.cell(task.name, row.label)
        budget = task.steps or suite.steps
        if runs:
            steps = sorted({summary_steps(d) or 0 for d in runs})
            state = f"{len(runs)} seeds x {', '.join(f'{s:,}' for s in steps)} steps"
            if max(steps) < budget:
                state += f"; {budget:,} not run yet"
            wall = cell_wall_time(runs)
            time_text = f"{wall[0]:.2f} h ({wall[1]})" if wall else "—"
            machines.add(machine(runs) or "?")
        else:
            note = data.status.get(f"{task.name}/{row.label}") or suite.not_run
            if note not in reasons:
                reasons.append(note)
            state = f"not run ({chr(ord('a') + reasons.index(note))})"
            time_text = "—"
        rows.append(f"| {task.name} | {row.label} | {state} | {time_text} |")
    where = "; ".join(sorted(machines)) if machines else "—"
    lines = [f"Cells (wall time on: {where}; shared with other jobs):", "",
             "| task | row | state | wall time |", "|---|---|---|---|", *rows, ""]
    lines += [f"({chr(ord('a') + i)}) {reason}." for i, reason in enumerate(reasons)]
    return lines + ([""] if reasons else [])


def row_notes(suite: Suite, shown: set[str]) -> list[str]:
    """The suite's row notes, but those an earlier section of the page gave (``shown``, which
    gets these)."""
    notes = [f"`{r.label}`: {r.note}." for r in suite.rows if r.note]
    peers = [r for r in suite.rows if r.peer]
    if peers:
        notes.append(
            f"{', '.join(f'`{r.label}`' for r in peers)}: Stable-Baselines3's "
            f"{' and '.join(str(r.peer).upper() for r in peers)} (the peer) with rlzoo's "
            "settings for the same algorithm, read from rlzoo's config (networks, batch, buffer, "
            "warm-up, tau, gamma, one update per step, TD3's noises and delay, SAC's initial "
            "temperature and target entropy), each optimizer at rlzoo's learning rate for it "
            "(SB3 has one rate for all: a subclass sets each optimizer's rate before an update, "
            "nothing else is changed). What still differs: SB3's SAC clamps log std to [-20, 2] "
            "(rlzoo's SAC: [-5, 2]).")
    fresh = [n for n in notes if n not in shown]
    shown.update(notes)
    if not fresh and notes:
        return ["Rows: as described above.", ""]
    return ["Rows: " + " ".join(fresh) + (" The others as described above." if len(fresh) <
                                           len(notes) else ""), ""] if notes else []


def final_table(data: SuiteData, env: str, groups: dict[str, Any]) -> list[str]:
    rows = data.runs.get(env, {})
    lines = ["Final return (IQM [95% CI] over seeds of `final_eval_return`, rlzoo.compare); "
             "beside it, where the row started: the IQM of each seed's first evaluation "
             f"({data.suite.first_eval}) and how many seeds ended above their own first "
             "evaluation:", "",
             "| row | seeds | steps | IQM [95% CI] | mean ± std | first evaluation: IQM (at env "
             "step) | seeds above their first evaluation |", "|---|---:|---:|---|---|---|---:|"]
    for label, g in groups.items():
        steps = ", ".join(f"{s:,}" for s in sorted({int(s) for s in g["total_steps"] if s}))
        lo, hi = g["iqm_ci"]
        names = sorted({Path(r).name.rsplit("-s", 1)[0] for r in g["runs"]})
        row = ", ".join(names) + ("" if names == [label] else f" (`{label}`)")
        first, better = first_columns([d for name in names for d in rows.get(name, [])])
        lines.append(f"| {row} | {g['n_runs']} | {steps} | {fmt(g['iqm'])} "
                     f"[{fmt(lo)}, {fmt(hi)}] | {fmt(g['mean'])} ± {fmt(g['std'])} "
                     f"| {first} | {better} |")
    return lines + [""]


def reference_table(data: SuiteData, tests: Tests, env: str) -> list[str]:
    shown = []
    for s in data.suite.headline_steps:
        for row in data.suite.rows:
            for ref, theirs, test in reference_tests(data, tests, env, row.label, s):
                ours = data.windows(env, row.label, s) or []
                runs = data.cell(env, row.label)
                mine = updates_by(runs[0], s)
                shown.append(f"| {kilo(s)} | {row.label} | {iqm_text(ours)} ({len(ours)}) | "
                             f"{ref.algo}: {iqm_text(theirs)} ({len(theirs)}) | `{ref.source}` "
                             f"| {'?' if mine is None else f'{mine:,}'} / {ref.updates(s)} | "
                             f"{test.cells()} |")
    if not shown:
        return []
    return [f"Against the published seeds ({kilo(WINDOW)} windows, IQM [95% CI] (seeds) on "
            "each side; sources at the end of the page):", "",
            "| env steps | row | rlzoo | published | source | updates by then: rlzoo / source | "
            "P(rlzoo > published) [95% CI] | rank test |", "|---:|---|---|---|---|---:|---|---|",
            *shown, ""]


def pair_lines(data: SuiteData, tests: Tests, env: str) -> list[str]:
    """The tables setting one task's rows against each other (:func:`pair_tests`)."""
    found = pair_tests(data, tests, env)
    lines = []
    for kind, intro, names in (("peer", "Against the peer", "| rlzoo row (A) | peer row (B) |"),
                               ("against", "Variants and controls against the rows they build "
                                "on", "| row (A) | row (B) |")):
        shown = [f"| {a} | {b} | {final.cells()} | {curve.cells() if curve else '— | —'} |"
                 for k, a, b, final, curve in found if k == kind]
        if shown:
            lines += [f"{intro}:", "",
                      f"{names} final: P(A > B) [95% CI] | final: A vs B | mean over "
                      "evaluations: P(A > B) [95% CI] | mean over evaluations: A vs B |",
                      "|---|---|---|---|---|---|", *shown, ""]
    return lines


def suite_section(data: SuiteData, tests: Tests, rel: Path, lead: str = "",
                  shown: set[str] | None = None) -> list[str]:
    """The detail of one suite: its command and budget, its rows, per task the final-return
    table, the published comparisons, the rows against each other and the notes, then the
    cells' status."""
    suite = data.suite
    here = repo_relative(str(data.root.resolve()))
    raw = (f"[`{here}`]({rel})" if data.root.is_dir()
           else f"none yet (they will go to `{here}`)")
    lines = [f"## `{suite.name}`: {suite.title}", ""]
    if lead:
        lines += [lead, ""]
    lines += [f"Command: `python scripts/reproduce.py {suite.name}` ({suite.seeds} seeds; "
              f"{suite.why}). Evaluation: {suite.eval_episodes} deterministic episodes every "
              f"{suite.eval_every:,} env steps. Raw results: {raw}; from the repository's root, "
              f"`python -m rlzoo.compare {here} --out report/` regenerates the final-return "
              f"tables and learning curves, and `python scripts/reproduce.py {suite.name} "
              "--report-only` (which trains nothing) this whole page.", ""]
    if suite.overrides:
        lines += [f"Every rlzoo row of this suite also gets `{' '.join(suite.overrides)}`.", ""]
    lines += row_notes(suite, set() if shown is None else shown)
    if data.report is None:
        lines += ["**Not run yet**: no cell of this suite has run" + (
            f" ({suite.not_run})." if not data.status else "."), ""]
        return lines + (status_lines(data) if data.status else [])
    order = [t.name for t in suite.tasks]
    for env, groups in sorted(data.report["results"].items(),
                              key=lambda item: (order.index(item[0]) if item[0] in order
                                                else len(order), item[0])):
        lines += [f"### {env}", ""]
        lines += final_table(data, env, groups)
        figure = data.report.get("figures", {}).get(env)
        if figure and not suite.headline_steps:
            lines += [f"![{env} learning curves]({rel / REPORT_DIR / figure})", ""]
        lines += reference_table(data, tests, env)
        lines += pair_lines(data, tests, env)
        scale = scale_line(suite, env, data.root,
                           {label: g["final_eval_returns"] for label, g in groups.items()})
        if scale:
            lines += [scale, ""]
        rows = data.runs.get(env) or run_rows(data.root / env)
        notes = [UNPUBLISHED[key] for label in rows for key in (label, f"{env}/{label}")
                 if key in UNPUBLISHED]
        notes += [UNPUBLISHED[prefix] for prefix in MULTI_AGENT_PREFIXES
                  if prefix in UNPUBLISHED and env.startswith(prefix)]
        if notes:
            lines += [" ".join(notes), ""]
    return lines + status_lines(data)


# --------------------------------------------------------------------------- multi-agent scale


def scripted_policy(kind: str, env: Any, rng: np.random.Generator) -> Any:
    """Actions in ``[-1, 1]`` for ``env``'s observations ``[B, ...]``: uniform random
    (``kind="random"``, from ``rng``) or the env's own zero action (``"zero"``), padding 0."""
    span = np.where(env.act_mask, env.action_high - env.action_low, 1.0)
    zero = np.where(env.act_mask, -1.0 - 2.0 * env.action_low / span, 0.0)

    def policy(batch: np.ndarray) -> np.ndarray:
        shape = (len(batch), *env.act_shape)
        return rng.uniform(-1.0, 1.0, shape) if kind == "random" else np.broadcast_to(zero, shape)

    return policy


def scale_returns(env_option: str, episodes: int = SCALE_EPISODES) -> dict[str, list[float]]:
    """Mean and std over ``episodes`` episodes (env seeds ``EVAL_SEED_OFFSET + i``, which
    include every evaluation's ``seed + EVAL_SEED_OFFSET + i`` for seed + i < episodes) of the
    team return under uniform random actions (``random``) and under the env's zero action
    (``zero``: no force in MPE, no torque in MaMuJoCo), for ``env=<env_option>``."""
    from rlzoo.envs.base import run_episodes
    from rlzoo.run.build import EVAL_SEED_OFFSET, make_env

    cfg = compose_cell_config([f"env={env_option}"])
    out = {}
    for kind in ("random", "zero"):
        env = make_env(cfg, episodes, EVAL_SEED_OFFSET)
        obs, _ = env.reset()
        policy = scripted_policy(kind, env, np.random.default_rng(0))
        returns = run_episodes([env], [obs], lambda batch, act=policy: act(batch[0])[None])[0]
        env.close()
        out[kind] = [float(returns.returns.mean()), float(returns.returns.std(ddof=1))]
    return out


def scale_line(suite: Suite, task_name: str, root: Path,
               finals: dict[str, list[float]] | None = None) -> str | None:
    """The page's scale sentence for a multi-agent task, from ``root/scale.json`` (computed and
    written there when the task is missing from it), and for each row of ``finals`` (label:
    the seeds' final returns, as in the report) how many beat the zero action's; None for other
    tasks."""
    from rlzoo.run.build import EVAL_SEED_OFFSET

    task: Task | None = next((t for t in suite.tasks if t.name == task_name), None)
    if task is None or not task.name.startswith(MULTI_AGENT_PREFIXES):
        return None
    cache = read_json(root / SCALE_FILE) or {}
    if task.name not in cache:
        cache[task.name] = {"episodes": SCALE_EPISODES,
                            **scale_returns(task.env, SCALE_EPISODES)}
        (root / SCALE_FILE).write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    entry = cache[task.name]
    (r_mean, r_std), (z_mean, z_std) = entry["random"], entry["zero"]
    first, last = EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + int(entry["episodes"]) - 1
    line = (f"For scale, two scripted policies, {entry['episodes']} episodes each on env seeds "
            f"{first:,}-{last:,} (which hold every evaluation's: seed + {first:,} + i), mean ± std "
            f"over episodes (a {suite.eval_episodes}-episode mean, as each evaluation's, "
            f"varies {suite.eval_episodes ** -0.5:.2f} times as much): uniform random "
            f"actions {fmt(r_mean)} ± {fmt(r_std)}, the env's zero action (no force or torque) "
            f"{fmt(z_mean)} ± {fmt(z_std)}: floors, not marks of skill (beating them says a "
            "policy does better than not acting, not that it does well).")
    beat = [f"{label} {sum(f > z_mean for f in values)} of {len(values)}"
            for label, values in sorted((finals or {}).items()) if values]
    if beat:
        line += f" Seeds whose final return beats the zero action's: {', '.join(beat)}."
    return line


# --------------------------------------------------------------------------- the page


def sources_lines(page_dir: Path) -> list[str]:
    lines = ["## Sources", ""]
    for s in SOURCES.values():
        line = f"- `{s.key}`: {s.text}."
        try:
            record = published_data(s.key)
        except OSError:
            record = None
        if record:
            line += (f" Per-seed values used here: [`results/published/{s.key}.json`]"
                     f"({os.path.relpath(PUBLISHED_DIR / f'{s.key}.json', page_dir.resolve())}) "
                     f"({record['repo']} at "
                     f"{record['commit'][:7]}, `{record['path']}`; written by "
                     "`scripts/published_seeds.py`).")
        lines.append(line)
    return lines + [""]


def render_page(results: Path, page_dir: Path, suites: Sequence[Suite],
                leads: dict[str, str] | None = None) -> str:
    """The page's text from ``results`` for a page in ``page_dir`` (its links are relative to
    it): the headline of each suite with headline budgets, the per-seed values, the method, each
    suite in detail (``leads``: a suite's first sentence), the sources."""
    global _CURVES
    _CURVES = {}
    try:
        return _render(results, page_dir, suites, leads)
    finally:
        _CURVES = None


def _render(results: Path, page_dir: Path, suites: Sequence[Suite],
            leads: dict[str, str] | None) -> str:
    tests = Tests()
    data = [SuiteData.read(s, results) for s in suites]
    rels = {d.suite.name: Path(os.path.relpath(d.root, page_dir.resolve())) for d in data}
    rel_results = os.path.relpath(results, page_dir.resolve())
    lines: list[str] = []
    for _ in range(2):  # the first pass runs every test, Holm adjusts them, the second writes
        lines = [
            "# Results: rlzoo against published curves and a peer library, at small budgets",
            "",
            "Generated by `python scripts/reproduce.py SUITE` from the raw results under "
            f"[`{rel_results}`]({rel_results}) (every seed's `summary.json` and evaluation curve "
            "as `eval.csv`; the published seeds under `results/published/`); do not edit by "
            "hand: tests/test_reproduce.py fails when this page differs from a fresh rendering. "
            "Headline first; how every number is made is said once, under [Method](#method).",
            ""]
        for d in data:
            if d.suite.headline_steps and d.report is not None:
                lines += headline_lines(d, tests, rels[d.suite.name])
        seeds = [line for d in data if d.report is not None for line in seed_lines(d)]
        if seeds:
            lines += ["## Per-seed returns", "",
                      "Each seed's evaluation return at the headline budgets (the final return "
                      "where a suite has none), seeds in order:", "", *seeds, ""]
        lines += method_lines(tests)
        shown: set[str] = set()
        for d in data:
            lines += suite_section(d, tests, rels[d.suite.name],
                                   (leads or {}).get(d.suite.name, ""), shown)
        lines += sources_lines(page_dir)
        tests.holm()
    return "\n".join(lines)
