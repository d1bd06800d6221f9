"""The results page's first screen (issue 42 item 4): one answer per question, each number in it
recomputed here from results/ by other means than the page's; the power caveat beside the
verdicts; another algorithm's curve (CrossQ) counted apart from the verdicts on reproducing; one
IQM per cell; each published curve's updates said to be fewer or more as they are; the
references' env versions and commits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlzoo.analysis import stats, write_scalars_csv
from rlzoo.analysis.curves import read_scalars_csv
from rlzoo.reproduce.page import verdicts
from rlzoo.reproduce.page.answers import joined
from rlzoo.reproduce.page.data import SuiteData, best_reference, reference_tests
from rlzoo.reproduce.page.headline import headline_lines, updates_caveat
from rlzoo.reproduce.page.render import render_page
from rlzoo.reproduce.page.runs import fmt
from rlzoo.reproduce.references import REFERENCES
from rlzoo.reproduce.schema import Row, Suite, SuiteTask
from rlzoo.reproduce.suites import LEADS, PAGE_SUITES, SUITES

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"


@pytest.fixture(scope="module")
def page() -> str:
    return render_page(RESULTS, REPO / "docs", [SUITES[s] for s in PAGE_SUITES], LEADS)


def first_screen(page: str) -> str:
    return page.split("## Headline", 1)[0]


def eval_at(run: Path, steps: int) -> float:
    return read_scalars_csv(run / "eval.csv", {"eval/return"})["eval/return"][steps]


def test_the_short_cell_fact_is_recomputed_from_eval_csv(page: str) -> None:
    """SimbaV2's HalfCheetah seed at the step it reached, against every SAC seed there."""
    cells = RESULTS / "mujoco" / "HalfCheetah"
    simba = sorted(cells.glob("simbav2-s*"))
    if len(simba) != 1:
        pytest.skip("the fact is about a single-seed simbav2 cell")
    reached = json.loads((simba[0] / "summary.json").read_text())["total_steps"]
    ours = eval_at(simba[0], reached)
    sac = [eval_at(d, reached) for d in sorted(cells.glob("sac-s[0-9]*"))]
    above = sum(ours > v for v in sac)
    share = f"all {above}" if above == len(sac) else f"{above} of the {len(sac)}"
    assert (f"`simbav2` has run 1 seed on HalfCheetah, to {reached // 1000}k only: {fmt(ours)} at "
            f"{reached // 1000}k, above {share} `sac` seeds there ({fmt(min(sac))} to "
            f"{fmt(max(sac))})") in first_screen(page)


@pytest.mark.parametrize("task,row,still", [
    ("mpe-simple_spread", "hasac", "not acting"), ("mpe-simple_spread", "coma", "not acting"),
    ("mamujoco-HalfCheetah-2x3", "hasac", "standing still")])
def test_rows_below_the_zero_action_are_on_the_first_screen(page: str, task: str, row: str,
                                                            still: str) -> None:
    """The IQM of the final returns (summary.json) and the seeds beating the env's zero action
    (scale.json), for each row below it."""
    zero = json.loads((RESULTS / "marl" / "scale.json").read_text())[task]["zero"][0]
    finals = [json.loads((d / "summary.json").read_text())["final_eval_return"]
              for d in sorted((RESULTS / "marl" / task).glob(f"{row}-s[0-9]*"))]
    iqm = stats.iqm(np.asarray(finals))
    if iqm >= zero:
        pytest.skip(f"{row} is not below the zero action on {task} now")
    beat = sum(f > zero for f in finals)
    text = first_screen(page)
    line = next(line for line in text.splitlines() if "multi-agent rows" in line)
    part = line.split(f"on {task} ", 1)[1].split(f"({still})", 1)[0]
    assert f"`{row}` ({fmt(iqm)}; {beat} of {len(finals)} seeds beat it)" in part
    assert f"against the zero action's {fmt(zero)} " in part


def test_answers_verdicts_and_power_on_the_first_screen(page: str) -> None:
    """The reproduction answer, the power beside it and beside the headline's verdicts (the
    method's own simulation), CrossQ counted apart and marked as another algorithm, and none
    of the old wordings."""
    text = first_screen(page)
    power = f"{verdicts.rank_test_power(5, 10, 1.0, 0.05):.0%}"
    assert "**Does rlzoo reproduce SAC and TD3?**" in text
    # Hopper's sac and td3 have 10 seeds (a second group), the other tasks 5
    ten = f"{verdicts.rank_test_power(10, 10, 1.0, 0.05):.0%}"
    assert (f"with 5 to 10 seeds against 10 the rank test finds a true gap of one standard "
            f"deviation only {power} to {ten} of the time") in text
    assert "**How do the modern rows compare?**" in text and "**What is not run yet?**" in text
    headline = page.split("## Headline", 1)[1].split("| task | row |", 1)[0]
    assert f"standard deviation {power} of the time" in headline
    assert "Against another algorithm's curve (no curve of their own)" in headline
    cells = [line for line in page.splitlines() if line.startswith("| ") and "CrossQ" in line]
    assert any("CrossQ (SimbaV2 repo), another algorithm:" in line for line in cells)
    assert not any("CrossQ (SimbaV2 repo):" in line for line in cells)  # every comparison
    for stale in ("strongest curves published", "may have made fewer", "**In short:**"):
        assert stale not in page


def test_the_long_suite_answers_the_question_again_further_on(page: str) -> None:
    """HalfCheetah sac at 300k (the `long` suite): its own bullet after the first answer, its
    seed count and IQM recomputed from eval.csv, set against the published SAC curve with the
    higher IQM over 290k-300k."""
    runs = [d for d in sorted((RESULTS / "long" / "HalfCheetah").glob("sac-s[0-9]*"))
            if json.loads((d / "summary.json").read_text())["total_steps"] >= 300_000]
    if len(runs) < 2:
        pytest.skip("fewer than 2 seeds of the long suite have reached 300k")
    ours = []
    for run in runs:
        curve = read_scalars_csv(run / "eval.csv", {"eval/return"})["eval/return"]
        ours.append(np.mean([v for step, v in curve.items() if 290_000 <= step <= 300_000]))
    text = first_screen(page)
    question = "**Does it hold further on (HalfCheetah SAC to 300k on the CPU)?**"
    assert text.index("**Does rlzoo reproduce SAC and TD3?**") < text.index(question)
    line = next(line for line in text.splitlines() if question in line)
    assert "rlzoo's one `sac` verdict" in line and f"with {len(runs)} seeds against 10" in line
    published = {r.algo: stats.iqm(r.window(300_000, 10_000)) for r in REFERENCES
                 if r.task == "HalfCheetah" and "sac" in r.rows and r.window(300_000, 10_000)
                 is not None}
    best = max(published, key=published.get)
    assert len(published) == 2
    long = page.split("## Headline: HalfCheetah SAC to 300k", 1)[1].split("## ", 1)[0]
    row = next(line for line in long.splitlines() if line.startswith("| HalfCheetah | sac |"))
    assert row.split(" | ")[2].startswith(fmt(stats.iqm(np.asarray(ours))) + " [")
    assert f"| {best}: {fmt(published[best])} (10) |" in row


def test_one_iqm_per_cell_and_the_references(page: str) -> None:
    """A suite with a headline gives each cell's IQM [CI] there only; CleanRL's MuJoCo runs are
    named v2, Tianshou's runs cite the commit its README credits, SimbaV2's update ratios are
    said to rest on file names."""
    mujoco = page.split("## `mujoco`", 1)[1].split("## `marl`", 1)[0]
    assert "| row | seeds | steps | mean ± std |" in mujoco and "IQM [95% CI] |" not in mujoco
    marl = page.split("## `marl`", 1)[1].split("## `gpu`", 1)[0]
    assert "| row | seeds | steps | IQM [95% CI] | mean ± std |" in marl  # its only IQM
    sources = page.split("## Sources", 1)[1]
    assert "HalfCheetah, Hopper and Walker2d on gym **v2** envs" in sources
    assert "e605bdea942b408126ef4fbc740359773259c9ec" in sources
    assert "rest on the files' names alone" in sources


def test_updates_said_fewer_or_more_as_they_are() -> None:
    assert updates_caveat([("TD3 (paper)", 50_000, 40_000, "~50,000"),
                           ("TD3 (Tianshou)", 50_000, 40_000, "25,000"),
                           ("TD3 (paper)", 100_000, 90_000, "~100,000"),
                           ("SAC (SimbaV2 baseline)", 50_000, 45_000, "?")]) == [
        "Gradient updates by the compared step, each published curve against rlzoo's row: "
        "TD3 (paper) more (~50,000 against 40,000 at 50k); TD3 (Tianshou) fewer (25,000 against "
        "40,000 at 50k); SAC (SimbaV2 baseline): not stated by its source (the sections' "
        "`updates` columns give every cell).", ""]


def test_a_yardstick_is_counted_apart_and_never_preferred(tmp_path: Path) -> None:
    """A row with no curve of its own (`stac`) is set against CrossQ, marked as another
    algorithm and counted apart from the verdicts; a row with a curve of its own never gets a
    yardstick as its best, however high the yardstick's IQM."""
    suite = Suite(name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),), steps=50_000,
                  seeds=5, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
                  rows=(Row("stac", ()),), headline_steps=(50_000,))
    steps = np.arange(5_000, 50_001, 5_000)
    for seed in range(5):
        run = tmp_path / "x" / "Hopper" / f"stac-s{seed}"
        run.mkdir(parents=True)
        write_scalars_csv(run / "eval.csv", {"eval/return": (steps, 100.0 + seed + 0 * steps)})
        (run / "summary.json").write_text(json.dumps(
            {"final_eval_return": 100.0 + seed, "total_steps": 50_000}))
    data = SuiteData.read(suite, tmp_path)
    tests = verdicts.Tests()
    headline_lines(data, tests, Path("x"))
    tests.holm()
    lines = headline_lines(data, tests, Path("x"))
    row = next(line for line in lines if line.startswith("| Hopper | stac |"))
    assert "| CrossQ (SimbaV2 repo), another algorithm: 1,807 (10) | below" in row
    assert any("1 cell has a published reference" not in line and "Against another algorithm's "
               "curve (no curve of their own), 1 cell at 50k: 1 differs after Holm (Hopper stac "
               "below)." in line for line in lines)
    assert any(line.startswith("- At 50k, no cell with a published reference has run yet.")
               for line in lines)
    found = reference_tests(data, tests, "Hopper", "stac", 50_000)
    assert best_reference(found)[0].yardstick  # type: ignore[index]
    own = next(r for r in REFERENCES if r.task == "Hopper" and r.algo == "TD3 (paper)")
    yard = next(r for r in REFERENCES if r.task == "Hopper" and r.yardstick)
    assert best_reference([(yard, np.full(10, 9e3)), (own, np.full(10, 1.0))])[0] is own


def test_the_modern_rows_against_their_base_name_the_base_once(page: str) -> None:
    """The modern rows against rlzoo's `sac` on each seed's mean over evaluations: one sentence
    naming `sac` once, each row's verdict by task as the `mujoco` section's tables give it."""
    mujoco = page.split("## `mujoco`", 1)[1].split("\n## ", 1)[0]
    by_row: dict[str, dict[str, list[str]]] = {}
    for part in mujoco.split("\n### ")[1:]:
        task = part.split("\n", 1)[0].strip()
        for line in part.splitlines():
            cols = [c.strip() for c in line.strip("|").split(" | ")]
            if len(cols) == 6 and cols[0] in ("stac", "stac-author", "sac-categorical") \
                    and cols[1] == "sac":
                verdict = cols[5].split(" (p ")[0]
                by_row.setdefault(cols[0], {}).setdefault(verdict, []).append(task)
    if not by_row:
        pytest.skip("no modern row has been tested against sac")
    line = next(line for line in first_screen(page).splitlines() if "modern rows" in line)
    assert line.count("Against rlzoo's `sac`") == 1
    clause = line.split("Against rlzoo's `sac`, on each seed's mean over evaluations: ", 1)[1]
    for row, verdicts_ in by_row.items():
        named = [f"{verdict} on {joined(tasks)}" for verdict, tasks in verdicts_.items()]
        assert f"`{row}` {named[0]}" in clause
        assert all(n in clause.split(f"`{row}` ", 1)[1].split("; `", 1)[0] for n in named[1:])


def test_rows_above_the_zero_action_by_iqm_but_not_by_most_seeds_are_named(page: str) -> None:
    """A multi-agent row whose IQM of final returns is above the env's zero action while fewer
    than half its seeds beat it is named with its count (summary.json, scale.json)."""
    scale = json.loads((RESULTS / "marl" / "scale.json").read_text())
    line = next(line for line in first_screen(page).splitlines() if "multi-agent rows" in line)
    named = 0
    for task, value in scale.items():
        zero = value["zero"][0]
        rows: dict[str, list[float]] = {}
        for run in sorted((RESULTS / "marl" / task).glob("*-s[0-9]*")):
            if run.is_dir():
                row = run.name.rsplit("-s", 1)[0]
                rows.setdefault(row, []).append(
                    json.loads((run / "summary.json").read_text())["final_eval_return"])
        for row, finals in rows.items():
            beat = sum(f > zero for f in finals)
            if stats.iqm(np.asarray(finals)) >= zero and 2 * beat < len(finals):
                assert f"`{row}` on {task}, {beat} of {len(finals)} seeds" in line
                named += 1
    if not named:
        pytest.skip("every row above the zero action by its IQM has most seeds above it")
    assert "though fewer than half the seeds beat it for" in line
