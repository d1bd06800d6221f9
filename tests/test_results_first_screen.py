"""The results page's first screen (issues 42 and 52): the box and the compact table, each number
in them recomputed here from results/ by other means than the page's; another algorithm's curve
(CrossQ) marked apart from the verdicts on reproducing; each published curve's updates said to be
fewer or more as they are; the references' env versions and commits; the multi-agent rows'
counts against the env's zero action, in their section."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rlzoo.analysis import stats, write_scalars_csv
from rlzoo.analysis.curves import read_scalars_csv
from tools.reproduce.page import verdicts
from tools.reproduce.page.data import SuiteData, best_reference, reference_tests
from tools.reproduce.page.glance import compact_table, glance_cells
from tools.reproduce.page.method import updates_line
from tools.reproduce.page.render import render_page
from tools.reproduce.page.runs import fmt
from tools.reproduce.references import REFERENCES
from tools.reproduce.schema import Row, Suite, SuiteTask
from tools.reproduce.suites import LEADS, PAGE_SUITES, SUITES

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"


@pytest.fixture(scope="module")
def page() -> str:
    return render_page(RESULTS, REPO / "docs", [SUITES[s] for s in PAGE_SUITES], LEADS)


def first_screen(page: str) -> str:
    """The box, the compact table and its footnotes: everything before the figures."""
    return page.split("## Figures", 1)[0]


def compact(page: str) -> dict[str, dict[str, str]]:
    """The compact table: each row's cells by column name."""
    lines = page.split("\n| row | ", 1)[1].split("\n\n", 1)[0].splitlines()
    names = [c.strip() for c in lines[0].strip(" |").split(" | ")]
    out = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out[cells[0].strip("`")] = dict(zip(names, cells[1:]))
    return out


def window(run: Path, steps: int) -> float:
    curve = read_scalars_csv(run / "eval.csv", {"eval/return"})["eval/return"]
    return float(np.mean([v for s, v in curve.items() if steps - 10_000 <= s <= steps]))


def test_the_short_cell_is_named_where_it_stopped(page: str) -> None:
    """SimbaV2's HalfCheetah seed, at the step it reached: in the compact table and the box."""
    cells = RESULTS / "mujoco" / "HalfCheetah"
    simba = sorted(cells.glob("simbav2-s*"))
    if len(simba) != 1:
        pytest.skip("the fact is about a single-seed simbav2 cell")
    reached = json.loads((simba[0] / "summary.json").read_text())["total_steps"]
    assert compact(page)["simbav2"]["HalfCheetah 50k"] == f"1 seed to {reached // 1000}k only"
    box = first_screen(page).split("**Not yet**", 1)[1].split("\n", 1)[0]
    assert f"`simbav2` (Hopper; HalfCheetah: 1 of 5 seeds, to {reached // 1000}k)" in box


def test_every_compact_cell_is_the_iqm_of_the_seeds_windows(page: str) -> None:
    """Every number of the compact table is the IQM of the seeds' means over the window ending
    at its budget, recomputed from eval.csv (scipy's trimmed mean, not rlzoo's IQM)."""
    from scipy.stats import trim_mean

    table = compact(page)
    checked = 0
    for suite in ("mujoco", "long"):
        for task_dir in sorted((RESULTS / suite).iterdir()):
            if not task_dir.is_dir() or task_dir.name == "report":
                continue
            rows: dict[str, list[Path]] = {}
            for run in sorted(task_dir.glob("*-s[0-9]*")):
                rows.setdefault(run.name.rsplit("-s", 1)[0], []).append(run)
            for row, runs in rows.items():
                for column, cell in table.get(row, {}).items():
                    task, budget = column.split(" ")[:2]
                    steps = int(budget.rstrip("k")) * 1000
                    in_long = task == "Humanoid" or steps > 100_000  # else the mujoco suite's
                    if task != task_dir.name or not cell[:1].isdigit() or "only" in cell \
                            or (suite == "long") != in_long:
                        continue
                    means = [window(r, steps) for r in runs]
                    assert cell.split(" ")[0] == fmt(trim_mean(means, 0.25)), (row, column)
                    checked += 1
    assert checked >= 40


def test_the_box_and_the_verdicts(page: str) -> None:
    """The box names the validated rows and what Holm leaves of their verdicts, points to the
    method for what `no difference found` means, and says what is not there: no GPU run, no 1M;
    CrossQ's comparisons are marked as another algorithm's and never counted as verdicts."""
    text = first_screen(page)
    box = [line for line in text.splitlines() if line.startswith("> - ")]
    assert [line.split("**")[1] for line in box] == ["Validated", "No published curve of their "
                                                     "own", "Device", "Not yet"]
    assert "`sac`, `td3`, `sb3_sac` and `sb3_td3`" in box[0]
    # none differing, or the ones that do named (Humanoid at 100k since seed 2: above the source)
    assert "not a match shown ([Method](#method))" in box[0]
    assert "none differs" in box[0] or re.search(r"\d+ differs? from", box[0]), box[0]
    assert "no GPU run, nothing past 300k env steps (1M: the `gpu` suite)" in box[3]
    assert "2-core CPU" in box[2]
    power = f"{verdicts.rank_test_power(5, 10, 1.0, 0.05):.0%}"
    method = page.split("## Method", 1)[1].split("\n## ", 1)[0]
    assert f"finds a true gap of one standard deviation {power} of the time" in method
    for row in ("stac", "stac-author"):
        assert all(cell.split(" ")[1].startswith("◇") for cell in compact(page)[row].values()
                   if cell and cell[0].isdigit()), row
    assert "◇ Set against CrossQ (SimbaV2 repo), another algorithm's curve" in text
    detail = page.split("## Detail", 1)[1].split("\n## ", 1)[0]
    cells = [line for line in detail.splitlines() if "CrossQ" in line]
    assert cells and all("CrossQ (SimbaV2 repo), another algorithm:" in line for line in cells)
    for stale in ("In one minute", "strongest curves published", "**In short:**"):
        assert stale not in page


def test_halfcheetah_at_300k_is_its_own_column(page: str) -> None:
    """HalfCheetah sac at 300k (the `long` suite): its IQM recomputed from eval.csv, against
    the published SAC curve with the higher IQM over 290k-300k."""
    runs = [d for d in sorted((RESULTS / "long" / "HalfCheetah").glob("sac-s[0-9]*"))
            if json.loads((d / "summary.json").read_text())["total_steps"] >= 300_000]
    if len(runs) < 2:
        pytest.skip("fewer than 2 seeds of the long suite have reached 300k")
    ours = [window(run, 300_000) for run in runs]
    assert compact(page)["sac"]["HalfCheetah 300k"].startswith(fmt(stats.iqm(np.asarray(ours))))
    published = {r.algo: stats.iqm(r.window(300_000, 10_000)) for r in REFERENCES
                 if r.task == "HalfCheetah" and "sac" in r.rows and r.window(300_000, 10_000)
                 is not None}
    best = max(published, key=published.get)
    assert len(published) == 2
    detail = page.split("## Detail", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in detail.splitlines()
               if line.startswith("| HalfCheetah | sac | 300k |"))
    assert f"| {best}: {fmt(published[best])} [" in row


def test_one_iqm_per_cell_and_the_references(page: str) -> None:
    """A suite with a headline gives each cell's IQM [CI] in the detail and the published table
    only; CleanRL's MuJoCo runs are named v2, Tianshou's runs cite the commit its README
    credits, SimbaV2's update ratios are said to rest on file names; the method states every
    source's env version."""
    mujoco = page.split("## `mujoco`", 1)[1].split("## `marl`", 1)[0]
    assert "| row | seeds | steps | mean ± std |" in mujoco and "IQM [95% CI] |" not in mujoco
    marl = page.split("## `marl`", 1)[1].split("## `gpu`", 1)[0]
    assert "| row | seeds | steps | IQM [95% CI] | mean ± std |" in marl  # its only IQM
    sources = page.split("## Sources", 1)[1]
    assert "HalfCheetah, Hopper and Walker2d on gym **v2** envs" in sources
    assert "e605bdea942b408126ef4fbc740359773259c9ec" in sources
    assert "rest on the files' names alone" in sources
    method = page.split("## Method", 1)[1].split("\n## ", 1)[0]
    assert "the TD3 paper gym v1: Hopper, HalfCheetah, Walker2d, Ant" in method
    assert "Tianshou gym v3: Hopper, HalfCheetah, Walker2d, Ant, Humanoid" in method
    assert "SimbaV2's repository gym v4: Hopper, HalfCheetah, Walker2d, Ant, Humanoid" in method


def test_updates_said_fewer_or_more_as_they_are() -> None:
    assert updates_line([("TD3 (paper)", 50_000, 40_000, "~50,000"),
                         ("TD3 (Tianshou)", 50_000, 40_000, "25,000"),
                         ("TD3 (paper)", 100_000, 90_000, "~100,000"),
                         ("SAC (SimbaV2 baseline)", 50_000, 45_000, "?")]) == (
        "TD3 (paper) more (~50,000 against 40,000 at 50k); TD3 (Tianshou) fewer (25,000 against "
        "40,000 at 50k); SAC (SimbaV2 baseline): not stated by its source")


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
    glance_cells([data], tests)
    tests.holm()
    cells = glance_cells([data], tests)
    lines = compact_table(cells)
    assert "| `stac` | 102 ◇ |" in lines
    assert any(line.startswith("◇ Set against CrossQ (SimbaV2 repo)") and
               "`stac` below on Hopper at 50k" in line for line in lines)
    assert tests.count("yardstick") == 1 and tests.count("head") == 0
    found = reference_tests(data, tests, "Hopper", "stac", 50_000)
    assert best_reference(found)[0].yardstick  # type: ignore[index]
    own = next(r for r in REFERENCES if r.task == "Hopper" and r.algo == "TD3 (paper)")
    yard = next(r for r in REFERENCES if r.task == "Hopper" and r.yardstick)
    assert best_reference([(yard, np.full(10, 9e3)), (own, np.full(10, 1.0))])[0] is own


def test_the_multi_agent_rows_against_the_zero_action(page: str) -> None:
    """Each multi-agent task's floors line counts the seeds whose final return (summary.json)
    beats the zero action on the seed's own evaluation episodes (floors.json), row by row."""
    from rlzoo.config.build import read_run_config
    from rlzoo.policy.floors import floor_key, read_cache

    floors = read_cache(RESULTS / "marl" / "floors.json")
    marl = page.split("## `marl`", 1)[1].split("\n## ", 1)[0]
    for task in sorted({key.split("/", 1)[0] for key in floors}):
        section = marl.split(f"### {task}\n", 1)[1].split("\n### ", 1)[0]
        line = next(line for line in section.splitlines()
                    if "Seeds whose final return beats their own zero action's" in line)
        rows: dict[str, list[bool]] = {}
        for run in sorted((RESULTS / "marl" / task).glob("*-s[0-9]*")):
            seed = int(run.name.rsplit("-s", 1)[1])
            zero = floors[floor_key(read_run_config(run), seed, 10)]["zero"]
            final = json.loads((run / "summary.json").read_text())["final_eval_return"]
            rows.setdefault(run.name.rsplit("-s", 1)[0], []).append(final > np.mean(zero))
        for row, above in rows.items():
            assert f"{row} {sum(above)} of {len(above)} (" in line, (task, row)
