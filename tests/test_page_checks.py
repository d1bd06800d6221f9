"""The results page and rlzoo.compare refuse bad result files in one line naming the file: a
non-finite or absurd return, a repeated or out-of-order step, a junk line, NaN, an empty or
truncated summary.json, an enormous step, a step beyond the run's budget; and nothing of the
page is written then."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rlzoo.analysis import find_runs, load_scalars, write_scalars_csv
from rlzoo.analysis.curves import group_curve
from rlzoo.analysis.runs import RETURN_LIMIT, STEP_LIMIT
from tools.reproduce.page.checks import BadResults, check_results, check_summary
from tools.reproduce.page.render import render_page
from tools.reproduce.schema import Row, Suite, SuiteTask

REPO = Path(__file__).resolve().parents[1]
SUITE = Suite(name="mujoco", title="x", tasks=(SuiteTask("Hopper", "Hopper"),), steps=20_000,
              seeds=3, eval_every=5_000, eval_episodes=1, checkpoint_every=1,
              checkpoint_keep=1, rows=(Row("sac", ()),))


def write_cell(results: Path, seeds: int = 3) -> list[Path]:
    """A good 3-seed cell of SUITE: evaluations every 5k to 20k, summary.json as the trainer's."""
    steps = np.arange(5_000, 20_001, 5_000)
    runs = []
    for seed in range(seeds):
        run = results / "mujoco" / "Hopper" / f"sac-s{seed}"
        run.mkdir(parents=True)
        values = 100.0 * seed + steps / 100
        write_scalars_csv(run / "eval.csv", {"eval/return": (steps, values),
                                             "eval/return_std": (steps, values / 10)})
        write_scalars_csv(run / "train.csv", {"stats/alpha": (steps, 0.1 + 0 * values)})
        (run / "summary.json").write_text(json.dumps(
            {"algo": "sac", "env": "Hopper", "seed": seed, "total_steps": 20_000,
             "final_eval_return": float(values[-1]), "wall_time_s": 10.0, "updates": 15_000},
            indent=2))
        runs.append(run)
    return runs


def edit(path: Path, change: Callable[[str], str]) -> None:
    path.write_text(change(path.read_text()))


def key(name: str, raw: str) -> Callable[[str], str]:
    """A change of summary.json's text: ``name``'s value written as ``raw``."""
    return lambda text: re.sub(f'"{name}": [^,\n]*', f'"{name}": {raw}', text)


# (file, how it is spoiled, a fragment of the one line that must name it)
CASES = {
    "final 1e308": ("summary.json", key("final_eval_return", '1e308'),
                    "final_eval_return 1e+308 is beyond +-1,000,000"),
    "final NaN": ("summary.json", key("final_eval_return", 'NaN'),
                  "final_eval_return is nan"),
    "final a string": ("summary.json", key("final_eval_return", '"200"'),
                       "final_eval_return is '200', not a number"),
    "empty summary": ("summary.json", lambda t: "", "summary.json: empty"),
    "truncated summary": ("summary.json", lambda t: t[:40], "not JSON"),
    "summary a list": ("summary.json", lambda t: "[1, 2]", "not a JSON object"),
    "no total_steps": ("summary.json", lambda t: t.replace('"total_steps"', '"steps"'),
                       "no total_steps"),
    "total_steps 1e400 digits": ("summary.json",
                                 lambda t: t.replace('"total_steps": 20000',
                                                     '"total_steps": 1' + "0" * 5000),
                                 "not JSON the page reads"),
    "negative wall time": ("summary.json", lambda t: t.replace('"wall_time_s": 10.0',
                                                               '"wall_time_s": -1'),
                           "wall_time_s is -1, below 0"),
    "repeated row": ("eval.csv", lambda t: "".join(
        (ls := t.splitlines(keepends=True))[:3] + [ls[2]] + ls[3:]),
        "eval.csv line 4: step 10,000 repeats line 3's step 10,000"),
    "out of order": ("eval.csv", lambda t: "".join(
        (ls := t.splitlines(keepends=True))[:2] + [ls[3], ls[2]] + ls[4:]),
        "eval.csv line 4: step 10,000 comes after line 3's step 15,000"),
    "junk line": ("eval.csv", lambda t: t + "hello world\n", "eval.csv line 6: 1 cells, not 3"),
    "junk step": ("eval.csv", lambda t: t + "abc,1,1\n", "step 'abc' is not an integer"),
    "junk value": ("eval.csv", lambda t: t.replace("10000,", "10000,x", 1),
                   "eval.csv line 3: eval/return 'x"),
    "NaN return": ("eval.csv", lambda t: t.replace("10000,200.0", "10000,nan"),
                   "eval.csv line 3: eval/return is nan"),
    "absurd return": ("eval.csv", lambda t: t.replace("10000,200.0", "10000,1e308"),
                      "eval.csv line 3: eval/return 1e+308 is beyond +-1,000,000"),
    "enormous step": ("eval.csv", lambda t: t + "9" * 40 + ",1,1\n",
                      "is not an integer from 0 to 1,000,000,000,000"),
    "step past the budget": ("eval.csv", lambda t: t + "25000,1,1\n",
                             "eval.csv: step 25,000 is beyond the run's total_steps (20,000"),
    "no header": ("eval.csv", lambda t: t.split("\n", 1)[1], "does not start with a 'step'"),
    "no returns": ("eval.csv", lambda t: "step,eval/return\n", "eval.csv: no eval/return value"),
    "train.csv inf": ("train.csv", lambda t: t.replace("10000,0.1", "10000,inf"),
                      "train.csv line 3: stats/alpha is inf"),
    "eval.csv a folder": ("eval.csv", None, "eval.csv: it is not a regular file"),
    "NUL byte": ("eval.csv", lambda t: t.replace("10000,", "10000\0,", 1),
                 "eval.csv line 3: step '10000\\x00"),
    "train.csv repeated": ("train.csv", lambda t: t + t.splitlines(keepends=True)[-1],
                           "train.csv line 6: step 20,000 repeats"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_page_refuses_a_bad_file_in_one_line_naming_it(case: str, tmp_path: Path) -> None:
    """Each spoiled file (of seed 1, the middle one) stops the page before any number is used,
    with one line that names the file and what is wrong; the good cell renders."""
    runs = write_cell(tmp_path)
    render_page(tmp_path, tmp_path, [SUITE])  # the good cell renders
    name, spoil, fragment = CASES[case]
    if spoil is None:  # the file replaced by a folder of that name
        (runs[1] / name).unlink()
        (runs[1] / name).mkdir()
    else:
        edit(runs[1] / name, spoil)
    with pytest.raises(BadResults) as caught:
        render_page(tmp_path, tmp_path, [SUITE])
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400, message
    assert message.startswith(f"{runs[1] / name}"), message
    assert fragment in message, message


def test_the_bounds_are_the_declared_ones(tmp_path: Path) -> None:
    """A return exactly at RETURN_LIMIT and the largest steps within the run pass; just past
    RETURN_LIMIT does not: the bound is the declared one, not a number of the check's own."""
    runs = write_cell(tmp_path)
    edit(runs[0] / "eval.csv", lambda t: t.replace("10000,100.0", f"10000,{-RETURN_LIMIT!r}"))
    edit(runs[0] / "summary.json", key("final_eval_return", f'{RETURN_LIMIT!r}'))
    check_results(tmp_path, [SUITE])
    edit(runs[0] / "eval.csv", lambda t: t.replace(f"10000,{-RETURN_LIMIT!r}",
                                                    f"10000,{-RETURN_LIMIT * 1.0001!r}"))
    with pytest.raises(BadResults, match="eval/return -1e\\+06 is beyond"):
        check_results(tmp_path, [SUITE])
    assert STEP_LIMIT >= 10**9 and 2**53 > STEP_LIMIT  # steps exact in float64 and int64


def test_compare_readers_refuse_the_same_files_with_a_note(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """rlzoo.compare shares the readers: a repeated eval.csv row and a 1e308 final return are
    one note each naming the run, and the runs are left out (never averaged)."""
    runs = write_cell(tmp_path)
    edit(runs[0] / "eval.csv", lambda t: t + t.splitlines(keepends=True)[-1])
    with pytest.raises(ValueError, match=f"^{runs[0] / 'eval.csv'} line 6: step 20,000 repeats"):
        load_scalars(runs[0])
    edit(runs[1] / "summary.json", key("final_eval_return", 'true'))
    assert [r.path for r in find_runs([tmp_path])] == [runs[0], runs[2]]
    assert "final_eval_return is not a number" in capsys.readouterr().err
    edit(runs[1] / "summary.json", key("final_eval_return", '1e308'))
    found = find_runs([tmp_path])
    assert [r.path for r in found] == [runs[0], runs[2]]
    err = capsys.readouterr().err
    assert (f"rlzoo: note: skipping {runs[1]}: summary.json's final_eval_return is 1e+308, "
            "not a finite return within +-1,000,000\n") in err
    curve = group_curve(found)
    assert curve is not None and curve.run_paths == [str(runs[2])]
    err = capsys.readouterr().err
    assert err == (f"rlzoo: note: {runs[0]}: cannot read its curve (ValueError: "
                   f"{runs[0] / 'eval.csv'} line 6: step 20,000 repeats line 5's step 20,000 "
                   "(steps must rise)); no curve\n")


def test_reproduce_report_stops_in_one_line_and_keeps_the_page(tmp_path: Path) -> None:
    """Through the command: ``--report-only`` over results with one repeated eval.csv row exits
    2 with one ``reproduce: error:`` line naming the file, no traceback, and leaves the page and
    the report folder as they were."""
    results = tmp_path / "results"
    runs = write_cell(results)
    edit(runs[2] / "eval.csv", lambda t: "".join(
        (ls := t.splitlines(keepends=True))[:3] + [ls[2]] + ls[3:]))
    page = tmp_path / "page.md"
    page.write_text("the old page\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.reproduce", "mujoco", "--report-only", "--results",
         str(results), "--page", str(page), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stderr
    err = [line for line in proc.stderr.splitlines() if line]
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert err[0].startswith(f"reproduce: error: {runs[2] / 'eval.csv'} line 4: step 10,000 "
                             "repeats line 3's"), err
    assert page.read_text() == "the old page\n"
    assert not (results / "mujoco" / "report").exists()


def test_a_hostile_config_or_a_fifo_is_refused_in_one_line(tmp_path: Path) -> None:
    """The page reads a run's .hydra/config.yaml and summary.json bounded: an alias bomb (a few
    bytes that expand to 2**30 items) and a FIFO named summary.json (a read would wait forever)
    are each refused in one line naming the file, at no cost."""
    import os

    from tools.reproduce.console import UsageError
    from tools.reproduce.page.runs import run_config

    runs = write_cell(tmp_path)
    render_page(tmp_path, tmp_path, [SUITE])
    config = runs[1] / ".hydra" / "config.yaml"
    config.parent.mkdir()
    config.write_text("a: &a [x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20)))
    with pytest.raises(UsageError) as caught:  # read where a row's updates or tuner are shown
        run_config(runs[1])
    message = str(caught.value)
    assert "\n" not in message and str(config) in message and "alias" in message, message
    config.unlink()
    (runs[2] / "summary.json").unlink()
    os.mkfifo(runs[2] / "summary.json")
    with pytest.raises(BadResults, match="summary.json: .*regular file"):
        check_summary(runs[2])
