"""The results page read at a glance (issue 52): its box, the compact table and the word limits,
on the committed results and on a copy of them with synthetic Humanoid and Ant cells (a temporary
folder: nothing here writes into results/), the cells not run yet, partial, and done; the README's
results paragraph (fresh, at most 150 words, every file it links there); Holm's families, one per
suite and question, which a row added to one suite leaves the other suites' verdicts untouched;
and every number of the new cells recomputed here by other means than the page's (numpy on
eval.csv and on the published JSON files)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from rlzoo.analysis import compare, find_runs, write_scalars_csv
from tools.reproduce.files import REPORT_DIR
from tools.reproduce.page import text as page_text
from tools.reproduce.page.data import SuiteData, pair_tests
from tools.reproduce.page.figures import plot_published, published_figure
from tools.reproduce.page.glance import glance_cells
from tools.reproduce.page.readme import END, README_WORDS, START, replace_block
from tools.reproduce.page.render import render
from tools.reproduce.page.verdicts import Tests as PageTests
from tools.reproduce.schema import Row, Suite, SuiteTask
from tools.reproduce.suites import LEADS, PAGE_SUITES, SUITES

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
PUBLISHED = RESULTS / "published"


def render_both(results: Path) -> tuple[str, list[str]]:
    return render(results, REPO / "docs", [SUITES[s] for s in PAGE_SUITES], LEADS, REPO)


@pytest.fixture(scope="module")
def now() -> tuple[str, list[str]]:
    """The page and README paragraph of the committed results."""
    return render_both(RESULTS)


# --- synthetic cells: a copy of results/ with Humanoid (long) and Ant (mujoco) cells ---------

def iqm(values: list[float]) -> float:
    """The interquartile mean, written here apart from rlzoo's (scipy's trimmed mean of the
    middle half, as rliable's IQM)."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(values, float), 0.25))


def level(task: str, row: str, seed: int, step: int) -> float:
    """The synthetic return: rising with the steps, a row's level, spread by seed."""
    base = {"Humanoid": 4000.0, "Ant": 1500.0}[task] * (1.0 if row == "sac" else 0.8)
    return base * step / 300_000 + 40.0 * seed


def synth_cell(results: Path, suite: str, task: str, row: str, seeds: range, budget: int) -> None:
    """A cell as the report step exports it: each seed's summary.json, eval.csv every 5k and the
    run's Hydra config, from a committed run dir of the same row with the task and budget
    changed."""
    template = next((RESULTS / "mujoco" / "HalfCheetah").glob(f"{row}-s0"))
    steps = np.arange(5_000, budget + 1, 5_000)
    for seed in seeds:
        run = results / suite / task / f"{row}-s{seed}"
        shutil.rmtree(run, ignore_errors=True)  # a real seed already in results/ is replaced
        shutil.copytree(template / ".hydra", run / ".hydra")
        for path in (run / ".hydra").iterdir():
            config = path.read_text().replace("HalfCheetah", task)
            path.write_text(re.sub(r"(total_steps[=:] ?)\d+", rf"\g<1>{budget}", config))
        values = np.array([level(task, row, seed, int(s)) for s in steps])
        write_scalars_csv(run / "eval.csv", {"eval/return": (steps, values)})
        (run / "summary.json").write_text(json.dumps(
            {"algo": row, "env": task, "seed": seed, "total_steps": budget,
             "final_eval_return": float(values[-1]), "wall_time_s": 3600.0,
             "group_seeds": [seed]}, indent=2))


def redraw(results: Path, suite: str) -> None:
    """What the report step does after an export: rlzoo.compare and the published figures."""
    root = results / suite
    kept = compare(find_runs([root]), root / REPORT_DIR)
    for env, curves in kept["curves"].items():
        plot_published(env, curves, root / REPORT_DIR / published_figure(kept["figures"][env]),
                       [r.label for r in SUITES[suite].rows])


@pytest.fixture(scope="module")
def after(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """The page and README paragraph once the issue's cells are in: Humanoid sac, 5 seeds to
    300k; Ant sac and td3, 5 seeds to 100k (synthetic; in a temporary copy of results/)."""
    results = tmp_path_factory.mktemp("after") / "results"
    shutil.copytree(RESULTS, results)
    synth_cell(results, "long", "Humanoid", "sac", range(5), 300_000)
    for row in ("sac", "td3"):
        synth_cell(results, "mujoco", "Ant", row, range(5), 100_000)
    for suite in ("long", "mujoco"):
        redraw(results, suite)
    return (results, *render_both(results))


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """Three of Humanoid's five seeds in, no Ant cell yet."""
    results = tmp_path_factory.mktemp("partial") / "results"
    shutil.copytree(RESULTS, results)
    synth_cell(results, "long", "Humanoid", "sac", range(3), 300_000)
    redraw(results, "long")
    return (results, *render_both(results))


def compact_row(page: str, row: str) -> dict[str, str]:
    """The compact table's cells of ``row`` by column name."""
    table = page.split("\n| row | ", 1)[1].split("\n\n", 1)[0].splitlines()
    names = ["row", *[c.strip() for c in table[0].strip(" |").split(" | ")]]
    line = next(line for line in table if line.startswith(f"| `{row}` |"))
    return dict(zip(names, [c.strip() for c in line.strip("|").split("|")]))


# --- the limits, on every state of the results ------------------------------------------------

def prose_lines(page: str) -> list[str]:
    """The page's prose: every line that is not blank, a table row, a heading or a figure."""
    return [line for line in page.splitlines() if line.strip()
            and not line.startswith(("|", "#", "!["))]


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


@pytest.mark.parametrize("state", ["now", "after", "partial"])
def test_the_page_keeps_its_limits(state: str, request: pytest.FixtureRequest) -> None:
    """At most 8 box lines and 200 words before the first table, no prose line over 120 words,
    at most 4,500 words of prose, whatever the results hold."""
    page = request.getfixturevalue(state)[-2]
    lines = page.splitlines()
    first_table = next(i for i, line in enumerate(lines) if line.startswith("|"))
    assert words(lines[:first_table]) <= page_text.FIRST_WORDS
    box = [line for line in lines[:first_table] if line.startswith(">")]
    assert 1 <= len(box) <= page_text.BOX_LINES
    assert all(line.startswith("> - **") for line in box)
    long = [line[:80] for line in prose_lines(page) if len(line.split()) > page_text.LINE_WORDS]
    assert not long, long
    assert words(prose_lines(page)) <= page_text.PROSE_WORDS
    # the figures come before the detailed tables
    assert page.index("## Figures") < page.index("## Detail") < page.index("## Method")


def test_the_limits_are_the_issues() -> None:
    assert (page_text.BOX_LINES, page_text.FIRST_WORDS, page_text.LINE_WORDS,
            page_text.PROSE_WORDS, README_WORDS) == (8, 200, 120, 4500, 150)


def test_a_word_too_many_fails_the_limits() -> None:
    """The counting itself: a table row, heading or figure is not prose; a 121-word line is."""
    page = "\n".join(["# a b c", "| " + "x " * 300 + "|", "![a b c](x.png)",
                      " ".join(["w"] * 121), "", "short line"])
    assert words(prose_lines(page)) == 123
    assert [len(line.split()) for line in prose_lines(page)] == [121, 2]


# --- the new cells, not run, partial, done ----------------------------------------------------

def test_the_new_cells_are_not_run_yet_on_the_committed_results(now: tuple[str, list[str]]
                                                                ) -> None:
    page, readme = now
    if list((RESULTS / "long" / "Humanoid").glob("sac-s*")):
        pytest.skip("the Humanoid cells are in results/ now")
    sac = compact_row(page, "sac")
    assert [sac[f"Humanoid {s}k"] for s in (100, 200, 300)] == ["not run yet"] * 3
    assert [sac[f"Ant {s}k"] for s in (50, 100)] == ["not run yet"] * 2
    box = page.split("\n| row |", 1)[0]
    assert "`sac` (" in box and "Humanoid" in box.split("**Not yet**", 1)[1]
    block = " ".join(readme)
    assert "`sac` on Humanoid-v5, the command above (5 seeds to 300k): not on the page yet " \
           "(running" in block and "![" not in block


def test_a_partial_cell_says_how_many_seeds(partial: tuple[Path, str, list[str]]) -> None:
    """3 of 5 Humanoid seeds: each budget's IQM over those 3 with `(3 of 5)`; the box names
    the cell as short of its seeds."""
    results, page, _ = partial
    runs = sorted((results / "long" / "Humanoid").glob("sac-s*"))
    for s in (100_000, 200_000, 300_000):
        cell = compact_row(page, "sac")[f"Humanoid {s // 1000}k"]
        ours = [np.mean([level("Humanoid", "sac", seed, t) for t in (s - 10_000, s - 5_000, s)])
                for seed in range(len(runs))]
        assert cell.startswith(f"{iqm(ours):,.0f} ") and cell.endswith("(3 of 5)"), cell
    assert "Humanoid: 3 of 5 seeds" in page.split("**Not yet**", 1)[1].split("\n", 1)[0]


def published_windows(source: str, algo: str, task: str, steps: int) -> np.ndarray:
    """Each published seed's mean over its evaluations in [steps - 10k, steps], from the JSON
    file alone."""
    entry = json.loads((PUBLISHED / f"{source}.json").read_text())["algos"][algo][task]
    at = np.asarray(entry["steps"])
    inside = (at >= steps - 10_000) & (at <= steps)
    return np.asarray(entry["seeds"], float)[:, inside].mean(axis=1)


def test_the_new_cells_once_they_are_in(after: tuple[Path, str, list[str]]) -> None:
    """Humanoid sac at 100k-300k and Ant sac and td3 at 50k-100k: each cell's IQM and its
    best published curve recomputed from eval.csv and the published files; the box and the
    README name them validated; the README shows the Humanoid figure, which exists."""
    results, page, readme = after
    best = {("sac", "Humanoid"): [("tianshou", "SAC"), ("simbav2", "SAC")],
            ("sac", "Ant"): [("tianshou", "SAC"), ("simbav2", "SAC")],
            ("td3", "Ant"): [("td3-paper", "TD3"), ("tianshou", "TD3")]}
    names = {("tianshou", "SAC"): "SAC (Tianshou)", ("simbav2", "SAC"): "SAC (SimbaV2 baseline)",
             ("td3-paper", "TD3"): "TD3 (paper)", ("tianshou", "TD3"): "TD3 (Tianshou)"}
    detail = page.split("## Detail", 1)[1].split("\n## ", 1)[0]
    for (row, task), sources in best.items():
        suite = "long" if task == "Humanoid" else "mujoco"
        for s in ((100_000, 200_000, 300_000) if task == "Humanoid" else (50_000, 100_000)):
            ours = []
            for run in sorted((results / suite / task).glob(f"{row}-s*")):
                csv = np.loadtxt(run / "eval.csv", delimiter=",", skiprows=1)
                ours.append(csv[(csv[:, 0] >= s - 10_000) & (csv[:, 0] <= s), 1].mean())
            cell = compact_row(page, row)[f"{task} {s // 1000}k"]
            assert cell.split(" ")[0] == f"{iqm(ours):,.0f}", (row, task, s, cell)
            assert cell.split(" ")[1][0] in "○▲▼", cell
            published = {names[k]: iqm(list(published_windows(*k, task, s))) for k in sources}
            top = max(published, key=published.get)
            line = next(line for line in detail.splitlines()
                        if line.startswith(f"| {task} | {row} | {s // 1000}k |"))
            assert f"| {top}: {published[top]:,.0f} [" in line, (line, published)
    validated = page.split("**Validated**", 1)[1].split("\n", 1)[0]
    assert "(32 cells on Hopper, HalfCheetah, Walker2d, Ant and Humanoid at 50k, 100k, 200k " \
           "and 300k env steps)" in validated
    assert "Humanoid" not in page.split("**Not yet**", 1)[1].split("\n", 1)[0]
    block = "\n".join(readme)
    figure = re.search(r"!\[[^\]]*\]\(([^)]+)\)", block)
    assert figure and figure.group(1).endswith("long/report/Humanoid-published.png")
    assert (REPO / figure.group(1)).resolve() == (
        results / "long" / REPORT_DIR / "Humanoid-published.png").resolve()
    assert (results / "long" / REPORT_DIR / "Humanoid-published.png").is_file()
    assert "`sac` on Humanoid-v5, the command above (5 of 5 seeds): IQM " in block


# --- the README ------------------------------------------------------------------------------

def readme_words(block: list[str]) -> int:
    return words([line for line in block if not line.startswith("![")])


@pytest.mark.parametrize("state", ["now", "after", "partial"])
def test_the_readme_paragraph_is_short(state: str, request: pytest.FixtureRequest) -> None:
    assert readme_words(request.getfixturevalue(state)[-1]) <= README_WORDS


def test_the_readme_paragraph_is_fresh_and_links_only_what_exists(
        now: tuple[str, list[str]]) -> None:
    """README.md's results paragraph is what the page's rendering writes there now, and every
    file the README links (figures and pages, results paragraph or not) exists."""
    readme = (REPO / "README.md").read_text()
    assert START in readme and END in readme
    assert replace_block(readme, now[1]) == readme, "regenerate: python -m tools.reproduce " \
                                                    "mujoco --report-only --no-sb3"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if not re.match(r"[a-z]+://", target):
            assert (REPO / target).exists(), f"README links {target}, which is not there"


def test_replace_block_keeps_the_rest_and_puts_figures_apart() -> None:
    readme = f"head\n\n{START}\nold words\n{END}\n\ntail\n"
    new = replace_block(readme, ["one.", "two.", "![fig](x.png)"])
    assert new == f"head\n\n{START}\none. two.\n\n![fig](x.png)\n{END}\n\ntail\n"
    assert replace_block("no markers", ["x"]) == "no markers"


# --- Holm's families ---------------------------------------------------------------------------

def flat_cell(results: Path, suite: str, task: str, row: str, base: float) -> None:
    steps = np.arange(5_000, 50_001, 5_000)
    for seed in range(5):
        run = results / suite / task / f"{row}-s{seed}"
        run.mkdir(parents=True)
        values = base + 100.0 * seed + 0 * steps
        write_scalars_csv(run / "eval.csv", {"eval/return": (steps, values)})
        (run / "summary.json").write_text(json.dumps(
            {"final_eval_return": float(values[-1]), "total_steps": 50_000}))


def suite(name: str, rows: tuple[str, ...]) -> Suite:
    return Suite(name=name, title=name, tasks=(SuiteTask("Hopper", "Hopper"),), steps=50_000,
                 seeds=5, eval_every=5_000, eval_episodes=1, checkpoint_every=1,
                 checkpoint_keep=1, headline_steps=(50_000,),
                 rows=tuple(Row(r, (), against=("sac",) if r != "sac" else ()) for r in rows))


def adjusted(results: Path, suites: list[Suite]) -> dict[tuple[str, ...], tuple[float, str]]:
    """Every test's Holm-adjusted p and verdict, as the page computes them."""
    data = [SuiteData.read(s, results) for s in suites]
    tests = PageTests()
    for _ in range(2):
        glance_cells(data, tests)
        for d in data:
            pair_tests(d, tests, "Hopper")
        tests.holm()
    return {key: (t.adjusted, t.verdict()) for key, t in tests.items.items()}


def test_a_row_added_to_one_suite_leaves_the_others_verdicts(tmp_path: Path) -> None:
    """Two suites on Hopper: `a` with sac and td3 (sac far above its published curve), `b` with
    sac and variants. Adding two rows to `b` grows `b`'s families and leaves every test of `a`
    (its p adjusted, its verdict) as it was; within `b`, the variant family grows with them."""
    for name in ("a", "b"):
        flat_cell(tmp_path, name, "Hopper", "sac", 5_000.0)
    flat_cell(tmp_path, "a", "Hopper", "td3", 300.0)
    flat_cell(tmp_path, "b", "Hopper", "v1", 9_000.0)
    before = adjusted(tmp_path, [suite("a", ("sac", "td3")), suite("b", ("sac", "v1"))])
    flat_cell(tmp_path, "b", "Hopper", "v2", 9_100.0)
    flat_cell(tmp_path, "b", "Hopper", "v3", 9_200.0)
    grown = adjusted(tmp_path, [suite("a", ("sac", "td3")),
                                suite("b", ("sac", "v1", "v2", "v3"))])
    ours = {k: v for k, v in before.items() if k[1] == "a"}
    assert ours and all(grown[k] == v for k, v in ours.items())
    assert before[("head", "a", "Hopper", "sac", "SAC (Tianshou)", "50000")][1] == "above"
    variant = ("variant", "b", "Hopper", "v1", "sac", "final")
    assert grown[variant][0] > before[variant][0]  # its own family grew


def test_every_headline_family_on_the_page_can_still_find_a_difference(
        now: tuple[str, list[str]]) -> None:
    """No headline family (a suite's cells against their best published curves, or another
    algorithm's) has grown past the size at which 5 seeds against 10 can pass Holm's first step:
    adding cells until one did would make every difference in it unreachable; split the suite or
    say so before raising this."""
    page = now[0]
    table = page.split("**Holm's families.**", 1)[1].split("\n\n", 2)[1]
    least = 2 / math.comb(15, 5)
    for line in table.splitlines()[2:]:
        _, suite_name, question, m, _, can, _ = line.split("|")
        if "best published curve" in question or "another algorithm" in question:
            assert least <= 0.05 / int(m) and can.strip() == "yes", line
