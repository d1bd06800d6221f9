"""tools.reproduce, run through its shim scripts/reproduce.py: the smoke suite end to end through
the real script (and the real ``python -m rlzoo.train`` and Stable-Baselines3 workers it starts),
skipping finished cells, resuming a cell stopped by SIGTERM or given a larger budget
bit-identically, one-line usage errors, locked cells, and the raw results (``eval.csv``)
regenerating rlzoo.compare's report."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlzoo.analysis import compute_comparison, find_runs, load_scalars, write_scalars_csv
from rlzoo.config.build import read_run_config
from rlzoo.policy.floors import floor_key
from tools.reproduce.files import CHECKOUT as REPRODUCE_REPO
from tools.reproduce.files import repo_relative
from tools.reproduce.page import verdicts
from tools.reproduce.page.data import (
    SuiteData,
    aggregate_scores,
    aggregate_task_sets,
    pair_tests,
)
from tools.reproduce.page.figures import plot_published, published_figure
from tools.reproduce.page.glance import box_lines, compact_table, glance_cells
from tools.reproduce.page.headline import aggregate_lines, detail_lines, seed_lines
from tools.reproduce.page.method import method_lines
from tools.reproduce.page.render import render_page
from tools.reproduce.page.runs import first_columns, updates_by
from tools.reproduce.page.section import pair_lines, status_lines, suite_section
from tools.reproduce.peer import peer_settings
from tools.reproduce.processes import FileLock
from tools.reproduce.references import REFERENCES, UNPUBLISHED, normalizer, published_data
from tools.reproduce.report import write_page
from tools.reproduce.schema import Row, Suite, SuiteTask, compose_cell_config
from tools.reproduce.suites import LEADS, PAGE_SUITES, SUITES

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "reproduce.py"
HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None
SMOKE_ROWS = ["sac", "td3", *(["sb3_sac"] if HAS_SB3 else [])]
SMOKE_SEEDS = 2  # the smoke suite's K
SMOKE_STEPS = 300  # the smoke suite's budget


def reproduce(*args: str | Path, env: dict[str, str] | None = None,
              timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``python scripts/reproduce.py ARGS`` (one thread per process)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
        timeout=timeout, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def start(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *map(str, args)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def files_and_mtimes(root: Path) -> dict[str, int]:
    """Every file below ``root`` but logs and lock files (a lock is rewritten when taken)."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith((".log", ".lock"))}


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "policy.pt", weights_only=True)["weights"]


def assert_same_run(a: Path, b: Path) -> None:
    """Two run dirs of one seed made the same training: same final weights bit for bit, same
    summary numbers and the same evaluation curve."""
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), (a, key)
    sa, sb = summary(a), summary(b)
    for key in ("total_steps", "final_eval_return", "final_eval_return_std", "updates",
                "episodes"):
        assert sa[key] == sb[key], (a, key, sa[key], sb[key])
    ca, cb = load_scalars(a, ["eval/return"]), load_scalars(b, ["eval/return"])
    assert np.array_equal(ca["eval/return"][0], cb["eval/return"][0])
    assert np.array_equal(ca["eval/return"][1], cb["eval/return"][1])


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The smoke suite run once, end to end, into a fresh OUT."""
    out = tmp_path_factory.mktemp("smoke")
    return out, ok(reproduce("smoke", "--out", out))


@pytest.fixture(scope="module")
def reference_600(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke suite's SAC cell trained to 600 steps without a stop: the home of its group."""
    out = tmp_path_factory.mktemp("ref600")
    ok(reproduce("smoke", "--only", "Pendulum/sac", "--steps", "600", "--out", out))
    return out / "smoke" / "Pendulum" / "sac-s0"


def test_smoke_suite_end_to_end(smoke: tuple[Path, str]) -> None:
    out, stdout = smoke
    task = out / "smoke" / "Pendulum"
    for row in SMOKE_ROWS:
        for seed in range(SMOKE_SEEDS):
            run = summary(task / f"{row}-s{seed}")
            assert run["total_steps"] == SMOKE_STEPS and run["seed"] == seed, (row, run)
            assert run["env"] == "Pendulum"
    assert (task / "sac-s0" / "checkpoints").is_dir()  # an rlzoo cell: one seed group
    if HAS_SB3:  # each SB3 worker logs a line per evaluation, so a long cell shows its progress
        log = (task / "sb3_sac-s1.log").read_text()
        assert "sb3: step 100/300 (33%) | eval return " in log and "sb3: step 300/300" in log, log
    assert json.loads((task / "sac-s1" / "group.json").read_text())["home"] == "sac-s0"
    # raw results: summary, config, the curve as CSV and SAC's temperature, nothing else
    results = out / "results" / "smoke" / "Pendulum"
    for row in SMOKE_ROWS:
        for seed in range(SMOKE_SEEDS):
            run_dir = results / f"{row}-s{seed}"
            names = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
            assert {"summary.json", "eval.csv", ".hydra/config.yaml", "provenance.json"} <= names
            launches = json.loads((run_dir / "provenance.json").read_text())
            assert [r["launch"] for r in launches] == ["started"], launches
            record = launches[0]
            assert record["packages"]["torch"] == torch.__version__, record
            assert record["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
            if row == "sac":  # rlzoo's SAC logs its temperature; TD3 and SB3's runs none
                assert (run_dir / "train.csv").read_text().splitlines()[0] == \
                    "step,stats/alpha,stats/entropy"
            else:
                assert "train.csv" not in names, (row, names)
            assert record["OMP_NUM_THREADS"] == "1" and record["cores"] == os.cpu_count()
            assert len(record["commit"]) == 40 and record["python"] == sys.version.split()[0]
            worker = "--sb3-worker" if row.startswith("sb3") else "rlzoo.train"
            assert worker in record["command"], record["command"]
            assert not [n for n in names if "tfevents" in n or n.endswith(".pt")], names
            assert summary(run_dir) == summary(task / f"{row}-s{seed}")
            steps, _ = load_scalars(run_dir, ["eval/return"])["eval/return"]
            assert steps.tolist() == [100, 200, 300], (row, steps)  # the same eval steps
    report = out / "results" / "smoke" / "report"
    assert (report / "Pendulum.png").read_bytes()[:4] == b"\x89PNG"
    table = (report / "comparison.md").read_text()
    # rlzoo's rows set the net on their command line, SB3's does not: beside SB3 the labels say so
    net = " critic.hidden=[16] algo.actor.hidden=[16]" if HAS_SB3 else ""
    for label in (f"| sac{net} |", f"| td3{net} |", *(["| sb3_sac |"] if HAS_SB3 else [])):
        assert label in table, table
    page = (out / "results.md").read_text()
    assert "## `smoke`" in page, page
    assert "![Pendulum learning curves](results/smoke/report/Pendulum.png)" in page, page
    assert "## `mujoco`" not in page and "## `gpu`" not in page  # a page of its own
    assert ("`sb3_sac`: Stable-Baselines3's SAC (the peer)" in page) == HAS_SB3
    # rlzoo against the peer: 2 seeds against 2 cannot reach p < 0.05, so the pair is not tested
    pair = (f"| sac | sb3_sac (not tested: sac has {SMOKE_SEEDS} seeds; sb3_sac has "
            f"{SMOKE_SEEDS} seeds) | — |")
    assert (pair in page) == HAS_SB3, page
    assert f"| {SMOKE_SEEDS} seeds x {SMOKE_STEPS} steps |" in page
    assert " (at 100) | " in page  # the first evaluation, at step 100
    assert not (REPO / "docs" / "results.md").exists() or "smoke" not in (
        REPO / "docs" / "results.md").read_text()  # the smoke suite never goes on the real page
    assert stdout.count(": started (") == 2  # the two rlzoo cells
    if not HAS_SB3:
        assert "Stable-Baselines3 is not available" in stdout


def test_rerun_skips_finished_cells(smoke: tuple[Path, str]) -> None:
    out, _ = smoke
    before = files_and_mtimes(out / "smoke")
    results_before = files_and_mtimes(out / "results" / "smoke" / "Pendulum")
    updates = {p: summary(p)["updates"] for p in (out / "smoke" / "Pendulum").glob("*-s*")
               if p.is_dir()}
    stdout = ok(reproduce("smoke", "--out", out))
    assert stdout.count("finished (already finished)") == len(SMOKE_ROWS), stdout
    assert "started" not in stdout and "resumed" not in stdout
    assert files_and_mtimes(out / "smoke") == before  # nothing retrained, nothing rewritten
    assert files_and_mtimes(out / "results" / "smoke" / "Pendulum") == results_before
    assert {p: summary(p)["updates"] for p in updates} == updates


def test_raised_budget_resumes_bit_identically(smoke: tuple[Path, str], reference_600: Path,
                                               tmp_path: Path) -> None:
    """A finished 300-step cell asked for 600 steps continues from its checkpoint and ends as the
    uninterrupted 600-step cell."""
    out, _ = smoke
    task = tmp_path / "smoke" / "Pendulum"
    task.mkdir(parents=True)
    for seed in range(SMOKE_SEEDS):
        shutil.copytree(out / "smoke" / "Pendulum" / f"sac-s{seed}", task / f"sac-s{seed}")
    stdout = ok(reproduce("smoke", "--only", "Pendulum/sac", "--steps", "600", "--out", tmp_path))
    assert "Pendulum/sac: resumed" in stdout, stdout
    for seed in range(SMOKE_SEEDS):
        assert_same_run(task / f"sac-s{seed}", reference_600.with_name(f"sac-s{seed}"))


@pytest.mark.slow
def test_sigterm_then_rerun_resumes_bit_identically(reference_600: Path, tmp_path: Path) -> None:
    """SIGTERM to the script after the cell's first checkpoint stops it there (no report); the
    same command again resumes the cell and ends as the uninterrupted one."""
    home = tmp_path / "smoke" / "Pendulum" / "sac-s0"
    args = ("smoke", "--only", "Pendulum/sac", "--steps", "600", "--out", tmp_path)
    proc = start(*args)
    deadline = time.monotonic() + 300
    while not list((home / "checkpoints").glob("step_*.pt")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, stdout
    assert "stopped by SIGTERM" in stdout and "unfinished" in stdout, stdout
    assert not (home / "summary.json").exists()  # it really stopped before the end
    assert not (tmp_path / "results.md").exists()  # and wrote no report
    stdout = ok(reproduce(*args))
    assert "Pendulum/sac: resumed" in stdout and "Pendulum/sac: finished" in stdout, stdout
    launches = json.loads((tmp_path / "results" / "smoke" / "Pendulum" / "sac-s1" /
                           "provenance.json").read_text())
    assert [r["launch"] for r in launches] == ["started", "resumed"], launches
    assert "resume=" in " ".join(launches[1]["command"])
    for seed in range(SMOKE_SEEDS):
        assert_same_run(home.with_name(f"sac-s{seed}"), reference_600.with_name(f"sac-s{seed}"))


def trainer_pid(run_dir: Path) -> int:
    """The pid of the ``python -m rlzoo.train`` process whose run dir is ``run_dir``."""
    wanted = f"hydra.run.dir={run_dir}".encode()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"rlzoo.train" in argv and wanted in argv:
            return int(proc.name)
    raise AssertionError(f"no trainer of {run_dir} is running")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_sigterm_to_the_trainer_alone_leaves_the_cell_unfinished(tmp_path: Path) -> None:
    """A SIGTERM sent to the trainer (not to the script) stops the cell at a checkpoint: the
    script goes on, and reports and records the cell as unfinished (resumable), not failed."""
    home = tmp_path / "smoke" / "Pendulum" / "sac-s0"
    proc = start("smoke", "--only", "Pendulum/sac", "--steps", "600", "--out", tmp_path)
    deadline = time.monotonic() + 300
    while not list((home / "checkpoints").glob("step_*.pt")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.02)
    os.kill(trainer_pid(home), signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout
    assert "Pendulum/sac: unfinished (stopped (rlzoo: stopped by SIGTERM" in stdout, stdout
    assert "failed" not in stdout, stdout
    status = json.loads((tmp_path / "results" / "smoke" / "status.json").read_text())
    assert status["Pendulum/sac"].startswith("unfinished: stopped (rlzoo: stopped by SIGTERM")
    assert not (home / "summary.json").exists()


@pytest.mark.parametrize(("args", "fragment"), [
    (["nosuch"], "unknown suite 'nosuch'"),
    (["smoke", "--seeds", "0"], "--seeds must be a positive"),
    (["smoke", "--seeds", "two"], "--seeds: invalid int value"),
    (["smoke", "--steps", "-5"], "--steps must be a positive"),
    (["smoke", "--only", "Hopper/*"], "matches no cell of smoke"),
    ([], "required: SUITE"),
    (["smoke", "--results", "{file}"], "is not a directory"),
    (["smoke", "--results", "{file}/sub"], "is not a directory"),
    (["smoke", "--page", "{dir}"], "is a directory; name the page's file"),
    (["smoke", "--page", "{file}/results.md"], "is not a directory"),
])
def test_usage_errors_are_one_line(args: list[str], fragment: str, tmp_path: Path) -> None:
    """Each mistake is one line and exit 2 before anything is trained or written (folders
    that cannot hold the results or the page are refused up front, not after hours)."""
    given = tmp_path / "given"
    (given / "dir").mkdir(parents=True)
    (given / "file").write_text("not a folder")
    args = [a.format(file=given / "file", dir=given / "dir") for a in args]
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    proc = reproduce(*args, "--out", tmp_path) if args else reproduce()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reproduce: error:"), proc.stderr
    assert fragment in lines[0], lines[0]
    assert not list(tmp_path.iterdir())  # nothing written


def test_other_seed_count_is_not_run_and_exits_1(smoke: tuple[Path, str], tmp_path: Path) -> None:
    """A cell holding a group of another K is left as it is, named with the fix, exit 1, and
    leaves no note in status.json (the note is about the invocation, not the cell)."""
    out, _ = smoke
    task = tmp_path / "smoke" / "Pendulum"
    for seed in range(SMOKE_SEEDS):
        shutil.copytree(out / "smoke" / "Pendulum" / f"sac-s{seed}", task / f"sac-s{seed}")
    before = files_and_mtimes(task)
    proc = reproduce("smoke", "--only", "Pendulum/sac", "--seeds", str(SMOKE_SEEDS + 1),
                     "--out", tmp_path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"holds a {SMOKE_SEEDS}-seed group, not {SMOKE_SEEDS + 1} (pass --seeds " \
        f"{SMOKE_SEEDS}" in proc.stdout, proc.stdout
    assert "not run: their runs do not match --seeds/--steps" in proc.stdout
    assert files_and_mtimes(task) == before
    status = tmp_path / "results" / "smoke" / "status.json"
    assert not status.exists() or "Pendulum/sac" not in json.loads(status.read_text())


def test_locked_cell_is_reported_and_skipped(smoke: tuple[Path, str], tmp_path: Path) -> None:
    """A cell another reproduce.py holds, and a cell whose run dir a live rlzoo process holds,
    are reported in one line each and skipped; the script still writes its report."""
    lock = FileLock(tmp_path / "smoke" / "Pendulum" / ".td3.lock")
    assert lock.acquire()
    out, _ = smoke
    task = tmp_path / "smoke" / "Pendulum"
    for seed in range(SMOKE_SEEDS):  # a copy of the finished SAC cell, to resume to 400 steps
        shutil.copytree(out / "smoke" / "Pendulum" / f"sac-s{seed}", task / f"sac-s{seed}")
    holder = subprocess.Popen(  # holds the SAC group's home like a live run
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from rlzoo.store.rundir import RunLock; RunLock.acquire(Path(sys.argv[1])); "
         "print('held', flush=True); time.sleep(600)", str(task / "sac-s0")],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        stdout = ok(reproduce("smoke", "--only", "Pendulum/sac", "Pendulum/td3", "--steps",
                              "400", "--out", tmp_path))
    finally:
        holder.kill()
        holder.wait()
        lock.release()
    assert "Pendulum/td3: locked (another reproduce.py" in stdout, stdout
    assert "Pendulum/sac: locked (locked by a live trainer: rlzoo.train (pid" in stdout, stdout
    assert not (task / "td3-s0").exists()
    assert summary(task / "sac-s0")["total_steps"] == SMOKE_STEPS  # untouched
    assert (tmp_path / "results.md").is_file()


def test_results_csv_regenerate_the_report(smoke: tuple[Path, str], tmp_path: Path) -> None:
    """``python -m rlzoo.compare results/<suite>`` on the raw results (no TensorBoard events)
    writes the report the script wrote, and the same table as the run dirs themselves give."""
    out, _ = smoke
    results = out / "results" / "smoke"
    proc = subprocess.run([sys.executable, "-m", "rlzoo.compare", str(results), "--out",
                           str(tmp_path / "regen")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    original = results / "report"
    assert (tmp_path / "regen" / "comparison.md").read_text() == \
        (original / "comparison.md").read_text()
    regen = json.loads((tmp_path / "regen" / "comparison.json").read_text())
    kept = json.loads((original / "comparison.json").read_text())
    for env, groups in kept["curves"].items():
        for label, curve in groups.items():
            for key in ("steps", "iqm", "ci_low", "ci_high"):
                assert regen["curves"][env][label][key] == curve[key], (label, key)
    from_runs = compute_comparison(find_runs([out / "smoke"]))
    from_csv = compute_comparison(find_runs([results]))
    for env, groups in from_runs.results.items():
        for label, row in groups.items():
            other = from_csv.results[env][label]
            assert (row.iqm, row.iqm_ci, row.seeds) == (other.iqm, other.iqm_ci, other.seeds)
            assert np.array_equal(from_runs.curves[env][label].iqm,
                                  from_csv.curves[env][label].iqm)


def test_missing_sb3_is_one_line_and_on_the_page(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "stable_baselines3").mkdir(parents=True)
    (fake / "stable_baselines3" / "__init__.py").write_text(
        "raise ImportError('simulated: not installed')\n")
    out = tmp_path / "out"
    stdout = ok(reproduce("smoke", "--only", "Pendulum/sb3_sac", "--out", out,
                          env={"PYTHONPATH": str(fake)}))
    lines = [line for line in stdout.splitlines() if "Stable-Baselines3 is not available" in line]
    assert len(lines) == 1 and "simulated: not installed" in lines[0], stdout
    page = (out / "results.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| Pendulum | sb3_sac |"))
    letter = row.split("not run (")[1][0]  # the reason, said once below the status table
    assert f"\n({letter}) skipped: stable_baselines3 is not importable (ImportError: " \
           "simulated: not installed)." in page, page
    assert not list((out / "smoke" / "Pendulum").glob("sb3_sac-s*"))


def test_module_entry_point_is_the_shims_command(tmp_path: Path) -> None:
    """``python -m tools.reproduce`` is what ``python scripts/reproduce.py`` runs: the same
    one-line mistakes (each naming the command it was given as) and the same page; and every
    module of tools.reproduce imports where ``stable_baselines3`` cannot be."""
    for module_args, name in ((["-m", "tools.reproduce"], "python -m tools.reproduce"),
                              ([str(SCRIPT)], "python scripts/reproduce.py")):
        proc = subprocess.run([sys.executable, *module_args, "smoke", "--seeds", "x"],
                              capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 2 and proc.stderr == (
            "reproduce: error: argument --seeds: invalid int value: 'x'; see "
            f"{name} --help\n"), proc.stderr
    out = tmp_path / "out"
    pages = []
    for module_args in (["-m", "tools.reproduce"], [str(SCRIPT)]):
        proc = subprocess.run([sys.executable, *module_args, "smoke", "--report-only", "--out",
                               str(out)], capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1] == f"reproduce: wrote {out / 'results.md'}"
        pages.append((out / "results.md").read_text())
    assert pages[0] == pages[1] and "## `smoke`" in pages[0]
    fake = tmp_path / "fake" / "stable_baselines3"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('simulated: not installed')\n")
    code = ("import importlib, pkgutil, sys, tools.reproduce as r; names = [m.name for m in "
            "pkgutil.walk_packages(r.__path__, 'tools.reproduce.')]; "
            "[importlib.import_module(n) for n in names]; "
            "print(len(names), 'stable_baselines3' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(fake.parent)})
    assert proc.returncode == 0, proc.stderr
    count, imported = proc.stdout.split()
    assert int(count) >= 20 and imported == "False", proc.stdout


def test_the_tool_is_the_checkouts_not_the_packages(tmp_path: Path) -> None:
    """The results tool lives in the checkout's tools/, not in rlzoo (the wheel does not ship
    it): ``rlzoo.reproduce`` is no module, and the shim runs this checkout's tool from any
    folder, naming itself in its one-line mistakes."""
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                           "print(u.find_spec('rlzoo.reproduce'))"], capture_output=True,
                          text=True, cwd=tmp_path, env={**bare, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and proc.stdout == "None\n", (proc.stdout, proc.stderr)
    proc = subprocess.run([sys.executable, str(SCRIPT), "smoke", "--seeds", "x"],
                          capture_output=True, text=True, cwd=tmp_path, env=bare)
    assert proc.returncode == 2 and proc.stderr == (
        "reproduce: error: argument --seeds: invalid int value: 'x'; see "
        "python scripts/reproduce.py --help\n"), proc.stderr


# --------------------------------------------------------------------------- in-process parts


def test_eval_csv_round_trips_and_events_win(tmp_path: Path) -> None:
    """``eval.csv`` reads back the exact floats written; a run dir with both a CSV and event
    files takes the events' value on a step present in both."""
    from torch.utils.tensorboard import SummaryWriter

    values = np.array([-1234.5678901234, 0.1 + 0.2, 1e-300])
    scalars = {"eval/return": (np.array([100, 200, 300]), values),
               "eval/return_std": (np.array([200]), np.array([3.0]))}
    write_scalars_csv(tmp_path / "eval.csv", scalars)
    back = load_scalars(tmp_path)
    assert back["eval/return"][0].tolist() == [100, 200, 300]
    assert back["eval/return"][1].tolist() == values.tolist()  # bit for bit
    assert back["eval/return_std"][0].tolist() == [200]  # empty cells are no points
    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("eval/return", 7.0, 200)
    writer.close()
    merged = load_scalars(tmp_path, ["eval/return"])["eval/return"]
    assert merged[1].tolist() == [values[0], 7.0, values[2]]
    (tmp_path / "eval.csv").write_text("time,eval/return\n1,2\n")
    with pytest.raises(ValueError, match="does not start with a 'step' column"):
        load_scalars(tmp_path)


def test_peer_settings_match_rlzoo_config() -> None:
    """The SB3 peer takes rlzoo's SAC and TD3 settings, each optimizer's rate included, and
    converts SAC's env-unit target entropy to SB3's [-1, 1] units."""
    cfg = compose_cell_config(["algo=sac", "env=Hopper"])
    sac = peer_settings(cfg, "sac")
    assert sac.learning_rates == {"actor": 3e-4, "critic": 1e-3, "alpha": 1e-3}
    assert sac.kwargs["learning_starts"] == 5000 and sac.kwargs["batch_size"] == 256
    assert sac.kwargs["policy_kwargs"] == {"net_arch": {"pi": [256, 256], "qf": [256, 256]}}
    assert sac.kwargs["ent_coef"] == "auto_1.0"
    ones = np.ones(3)
    assert sac.sac_target_entropy(-ones, ones) == -3.0  # Hopper: [-1, 1], the units agree
    assert sac.sac_target_entropy(-0.4 * ones, 0.4 * ones) == pytest.approx(-3 - 3 * np.log(0.4))
    td3 = peer_settings(compose_cell_config(["algo=td3", "env=Hopper"]), "td3")
    assert td3.learning_rates == {"actor": 1e-3, "critic": 1e-3}
    assert (td3.kwargs["policy_delay"], td3.kwargs["target_policy_noise"],
            td3.kwargs["target_noise_clip"], td3.exploration_noise) == (2, 0.2, 0.5, 0.1)
    assert td3.kwargs["batch_size"] == 100 and td3.kwargs["learning_starts"] == 10000
    assert td3.kwargs["policy_kwargs"] == {"net_arch": {"pi": [400, 300], "qf": [400, 300]}}
    with pytest.raises(ValueError, match="twin critic"):
        peer_settings(compose_cell_config(["algo=sac", "env=Hopper", "critic=ensemble"]), "sac")


def test_the_sb3_contrib_peers_take_the_rows_settings() -> None:
    """DDPG, TQC and CrossQ's peers read their rows' configs: one critic and no smoothing;
    TQC's quantiles, drop and per-optimizer rates; CrossQ's batch renorm, delay and betas.
    A config the peer cannot be is refused with what differs."""
    from tools.reproduce.suites import SUITES as ALL

    rows = {r.label: r for r in ALL["peers"].rows}
    cfg = {label: compose_cell_config(["env=Hopper", *rows[label].overrides])
           for label in ("ddpg", "tqc", "crossq")}
    ddpg = peer_settings(cfg["ddpg"], "ddpg")
    assert ddpg.kwargs["policy_kwargs"] == {"net_arch": {"pi": [400, 300], "qf": [400, 300]}}
    assert (ddpg.kwargs["learning_starts"], ddpg.exploration_noise) == (10_000, 0.1)
    assert "policy_delay" not in ddpg.kwargs and ddpg.learning_rates == {"actor": 1e-3,
                                                                         "critic": 1e-3}
    tqc = peer_settings(cfg["tqc"], "tqc")
    assert tqc.kwargs["top_quantiles_to_drop_per_net"] == 2 and tqc.kwargs["tau"] == 0.005
    assert tqc.kwargs["policy_kwargs"] == {"net_arch": {"pi": [256, 256], "qf": [256, 256]},
                                           "n_critics": 2, "n_quantiles": 25}
    assert tqc.learning_rates == {"actor": 3e-4, "critic": 3e-4, "alpha": 3e-4}
    assert not tqc.entropy_env_units and tqc.kwargs["learning_starts"] == 100
    crossq = peer_settings(cfg["crossq"], "crossq")
    assert "tau" not in crossq.kwargs and crossq.kwargs["policy_delay"] == 3
    assert crossq.kwargs["policy_kwargs"] == {
        "net_arch": {"pi": [256, 256], "qf": [1024, 1024]}, "batch_norm_momentum": 0.01,
        "batch_norm_eps": 0.001, "renorm_warmup_steps": 100_000,
        "optimizer_kwargs": {"betas": (0.5, 0.999)}}
    assert crossq.learning_rates == {"actor": 1e-3, "critic": 1e-3, "alpha": 1e-3}
    for overrides, peer, fragment in (
            (["algo=crossq", "net=batch_norm"], "crossq", "net=batch_renorm"),
            (["algo=crossq", "algo.target_networks=polyak"], "crossq", "target_networks none"),
            (["algo=ddpg", "algo.policy_noise=0.2"], "ddpg", "no target smoothing"),
            (["algo=td3"], "ddpg", "one Q-network"),
            (["algo=sac", "critic=tqc", "net=batch_norm"], "tqc", "MLPs")):
        with pytest.raises(ValueError, match=fragment):
            peer_settings(compose_cell_config(["env=Hopper", *overrides]), peer)


def test_suites_are_as_the_issue_lists() -> None:
    suites = SUITES
    mujoco = {(t.name, r.label) for t, r in suites["mujoco"].cells()}
    rows = {"sac", "td3", "dsac_t", "sac-ensemble", "sac-action_sequence", "simbav2", "flashsac",
            "stac", "stac-author", "sac-categorical", "sb3_sac", "sb3_td3", "crossq"}
    controls = {("Hopper", "sac-n_step4"), ("Hopper", "dsac_t-sac_start"),
                ("HalfCheetah", "sac-n_step4")}
    crossq_elsewhere = {(t, "crossq") for t in ("HalfCheetah",)}  # Hopper only (issue 54)
    walker = {("Walker2d", r) for r in ("sac", "td3", "sb3_sac", "sb3_td3", "stac-author")}
    ant = {("Ant", "sac"), ("Ant", "td3")}
    assert mujoco == ({(t, r) for t in ("Hopper", "HalfCheetah") for r in rows} | controls
                      | walker | ant) - crossq_elsewhere
    peers = suites["peers"]  # each rlzoo row beside its SB3 / sb3-contrib peer, same config
    assert [(r.label, r.peer) for r in peers.rows] == [
        ("ddpg", None), ("sb3_ddpg", "ddpg"), ("tqc", None), ("sb3c_tqc", "tqc"),
        ("crossq", None), ("sb3c_crossq", "crossq")]
    for ours, theirs in zip(peers.rows[::2], peers.rows[1::2]):
        assert ours.overrides == theirs.overrides
    assert peers.steps == 50_000 and "peers" not in PAGE_SUITES and "17 h" in peers.not_run
    for row in suites["mujoco"].rows:  # a control row says what it controls
        assert (row.label in rows) != row.note.startswith("control for `"), row.label
    assert suites["mujoco"].steps == 100_000 and suites["mujoco"].seeds == 5
    assert suites["mujoco"].headline_steps == (50_000, 100_000)
    assert [r.label for t, r in suites["mujoco"].cells() if t.name == "Ant"] == ["sac", "td3"]
    marl = {(t.name, r.label) for t, r in suites["marl"].cells()}
    critics = ("hasac-distributional", "hasac-categorical", "maddpg-distributional",
               "maddpg-categorical")
    assert marl == {(t, r) for t in ("mpe-simple_spread", "mpe-simple_speaker_listener")
                    for r in ("maddpg", "hasac", "coma", *critics)} | {
        ("mamujoco-HalfCheetah-2x3", r) for r in ("maddpg", "hasac", *critics)}
    for row in suites["marl"].rows:  # a critic variant is set against its algorithm's row
        if row.label in critics:
            assert row.against == (row.label.split("-")[0],), row.label
    long = suites["long"]  # mujoco's HalfCheetah sac row, on to 300k, against the published
    assert [(t.name, r.label) for t, r in long.cells()] == [("HalfCheetah", "sac"),
                                                             ("Humanoid", "sac")]
    assert long.rows[0].overrides == next(r for r in suites["mujoco"].rows
                                          if r.label == "sac").overrides
    assert long.steps == 300_000 and long.seeds == 5
    # HalfCheetah at 300k only (its 50k and 100k are the mujoco suite's), Humanoid along its curve
    assert [long.budgets(t) for t in long.tasks] == [(300_000,), (100_000, 200_000, 300_000)]
    assert long.eval_every == suites["mujoco"].eval_every and "long" in PAGE_SUITES
    gpu = suites["gpu"]
    assert {t.name for t in gpu.tasks} == {"Hopper", "HalfCheetah", "Humanoid"}
    assert gpu.steps == 1_000_000 and "device=cuda" in gpu.overrides
    assert {"stac", "sac-categorical"} <= {r.label for r in gpu.rows}
    for suite in suites.values():  # every row's config composes
        for task, row in suite.cells():
            compose_cell_config([f"env={task.env}", *row.overrides, *suite.overrides])


def test_exported_configs_carry_no_path_of_this_machine() -> None:
    """Paths inside the checkout become relative to it; a sibling dir sharing its prefix and
    paths elsewhere are left alone."""
    repo = str(REPRODUCE_REPO)
    text = (f"dir: {repo}/runs/reproduce/mujoco/Hopper/td3-s0\ncwd: {repo}\n"
            f"- hydra.run.dir='{repo}/runs/x'\n- path: {repo}2/conf\n- path: /elsewhere/conf\n")
    assert repo_relative(text) == (
        "dir: runs/reproduce/mujoco/Hopper/td3-s0\ncwd: .\n- hydra.run.dir='runs/x'\n"
        f"- path: {repo}2/conf\n- path: /elsewhere/conf\n")
    committed = REPO / "results"
    for path in [*committed.rglob("*.yaml"), *committed.rglob("*.json")]:
        assert repo not in path.read_text(), path


def test_page_figure_draws_published_points_within_the_curves(tmp_path: Path) -> None:
    """The page's figure of a task: drawn when a published curve is set beside one of its rows
    (its points up to the curves' last step), not drawn (False, no file) for a task or rows with
    no published curve."""
    curve = {"n_runs": 5, "steps": [5_000, 25_000, 50_000], "iqm": [10.0, 200.0, 300.0],
             "ci_low": [0.0, 150.0, 250.0], "ci_high": [20.0, 250.0, 350.0]}
    path = tmp_path / "Hopper-published.png"
    assert plot_published("Hopper", {"td3": curve}, path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    # rlzoo.compare labels a group by its overrides; the figure finds the row by its runs, so
    # CrossQ's curve is drawn beside `stac`
    named = {"stac total_steps=100000": {**curve, "runs": ["results/x/Hopper/stac-s0"]}}
    assert plot_published("Hopper", named, tmp_path / "stac.png")
    assert not plot_published("Hopper", {"stac total_steps=100000": curve}, tmp_path / "no.png")
    assert not plot_published("Hopper", {"dsac_t": curve}, tmp_path / "no.png")
    assert not plot_published("Pendulum", {"sac": curve}, tmp_path / "no.png")
    assert not (tmp_path / "no.png").exists()
    assert published_figure("Hopper.png") == "Hopper-published.png"


def test_first_evaluation_columns(tmp_path: Path) -> None:
    """The final-return table's start cells: the IQM over seeds of each run's first
    ``eval/return`` point (not its last), with the env step (a range when seeds differ), and
    how many seeds' ``final_eval_return`` ended above their own first evaluation."""
    runs = []
    for seed, first in enumerate([-40.0, -30.0, -20.0, 100.0]):
        run = tmp_path / f"coma-s{seed}"
        run.mkdir()
        write_scalars_csv(run / "eval.csv", {"eval/return": (
            np.array([2500, 5000]), np.array([first, 7.0]))})
        (run / "summary.json").write_text(json.dumps({"final_eval_return": 7.0}))
        runs.append(run)
    # IQM of four values: the mean of the middle two; seed 3 ended below its start
    assert first_columns(runs) == ("-25.0 (at 2,500)", "3 of 4")
    write_scalars_csv(runs[3] / "eval.csv", {"eval/return": (
        np.array([3000, 5000]), np.array([100.0, 7.0]))})
    assert first_columns(runs)[0] == "-25.0 (at 2,500-3,000)"
    (tmp_path / "empty").mkdir()
    assert first_columns([tmp_path / "empty"]) == ("—", "—")  # no evaluation


def test_pair_tables_on_final_returns_and_on_the_mean_over_evaluations(tmp_path: Path) -> None:
    """A control row against the rows it controls, and an rlzoo row against its peer: P(A > B)
    and Mann-Whitney on the final returns, then on each seed's mean over its evaluations, which
    here disagree (A ends higher on every seed pair, B was higher for most of the curve); the
    curve's cells are ``—`` when the rows were evaluated at different steps."""
    def runs(label: str, curves: list[list[float]], steps: tuple[int, ...] = (1, 2, 3)) -> list:
        dirs = []
        for seed, curve in enumerate(curves):
            run = tmp_path / f"{label}-s{seed}"
            run.mkdir()
            write_scalars_csv(run / "eval.csv", {"eval/return": (np.array(steps),
                                                                 np.array(curve))})
            (run / "summary.json").write_text(json.dumps({"final_eval_return": curve[-1]}))
            dirs.append(run)
        return dirs

    late = [[0.0, 0.0, 10.0 + s] for s in range(5)]  # means 3.3-4.7, finals 10-14
    early = [[9.0, 9.0, 5.0 + s] for s in range(5)]  # means 7.7-9, finals 5-9
    suite = Suite(
        name="x", title="x", tasks=(), steps=3, seeds=5, eval_every=1, eval_episodes=1,
        checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("base", ()), Row("sb3_base", (), peer="base"),
              Row("ctl", (), note="control for `base`", against=("base", "gone"))))
    rows = {"ctl": runs("ctl", late), "base": runs("base", early)}

    def lines_of(rows: dict) -> list[str]:
        data = SuiteData(suite, tmp_path, {"T": rows}, None, {})
        tests = verdicts.Tests()
        pair_lines(data, tests, "T")
        tests.holm()  # as the page does: every test of the page first, then the lines
        return pair_lines(data, tests, "T")

    lines = lines_of(rows)
    # two tests, each at p = 0.008 (the least of 5 against 5): Holm doubles them, 0.016
    assert "| ctl | base | 1.00 [1.00, 1.00] | above (p = 0.008, Holm = 0.016) | 0.00 [0.00, " \
           "0.00] | below (p = 0.008, Holm = 0.016) |" in lines
    assert not any("gone" in line or "sb3_base" in line for line in lines)  # no runs: no row
    assert not any(line.startswith("Against the peer") for line in lines)
    rows["sb3_base"] = runs("sb3_base", early, steps=(1, 2, 4))  # evaluated elsewhere
    lines = lines_of(rows)
    peer = next(i for i, line in enumerate(lines) if line.startswith("Against the peer"))
    assert lines[peer + 4] == "| base | sb3_base | 0.50 [0.16, 0.86] | no difference found " \
                              "(p = 1.00, Holm = 1.00) | — | — |"


def test_updates_by_then_on_both_sides(tmp_path: Path) -> None:
    """The published table's updates column: rlzoo's from its config's warm-up and updates per
    step (an SB3 peer's from gradient_steps / train_freq), the source's from its warm-up."""
    rlzoo_run, sb3_run, bare = tmp_path / "td3-s0", tmp_path / "sb3_sac-s0", tmp_path / "x-s0"
    for run, algo in ((rlzoo_run, "{learning_starts: 10000, utd: 1}"),
                      (sb3_run, "{learning_starts: 5000, gradient_steps: 1, train_freq: 2}"),
                      (bare, "{name: x}")):
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text(f"algo: {algo}\n")
    assert updates_by(rlzoo_run, 50_000) == 40_000
    assert updates_by(rlzoo_run, 5_000) == 0  # still in the warm-up
    assert updates_by(sb3_run, 50_000) == 22_500
    assert updates_by(bare, 50_000) is None
    by_source = {(r.task, r.algo): r for r in REFERENCES}
    # the TD3 paper's main.py trains at each episode end, its random warm-up included
    assert by_source[("Hopper", "TD3 (paper)")].updates(50_000) == "~50,000"
    assert by_source[("HalfCheetah", "TD3 (paper)")].updates(100_000) == "~100,000"
    assert by_source[("Hopper", "SAC (Tianshou)")].updates(50_000) == "40,000"
    assert by_source[("Hopper", "TD3 (Tianshou)")].updates(50_000) == "25,000"
    assert by_source[("Hopper", "SAC (SimbaV2 baseline)")].updates(50_000) == "?"  # not stated


def test_page_of_a_suite_with_no_results_links_nothing_missing(tmp_path: Path) -> None:
    """A suite with no results yet: the page says so and every relative link it holds exists."""
    import re

    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    (tmp_path / "results").mkdir()
    write_page(tmp_path / "results", page, ["gpu"])
    text = page.read_text()
    assert "Raw results: none yet (they will go to `" in text, text[:2000]
    assert "**Not run yet**: no cell of this suite has run (needs a CUDA GPU" in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if target == "#method":  # an anchor of the page itself
            assert "\n## Method\n" in text
        elif "://" not in target:
            assert (page.parent / target).exists(), target


def test_marl_notes_follow_the_task_family(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """MPE sections carry HARL's sum-over-agents caveat; the MaMuJoCo section its own note
    (one shared reward, the single-agent scale) and not the MPE one; a row's note goes to every
    section the row is in, a TASK/row note to that task's only."""
    monkeypatch.setitem(UNPUBLISHED, "maddpg", "Row-wide note.")
    monkeypatch.setitem(UNPUBLISHED, "mamujoco-HalfCheetah-2x3/maddpg",
                        "One-task note.")
    root = tmp_path / "results" / "marl"
    group = {"n_runs": 1, "total_steps": [25_000], "iqm": -20.0, "iqm_ci": [-21.0, -19.0],
             "mean": -20.0, "std": 0.0, "final_eval_returns": [-20.0]}
    results = {}
    floors = {}
    for i, task in enumerate(("mpe-simple_spread", "mamujoco-HalfCheetah-2x3")):
        run = root / task / "maddpg-s0"
        shutil.copytree(REPO / "results" / "marl" / task / "maddpg-s0" / ".hydra", run / ".hydra")
        (run / "summary.json").write_text(json.dumps({"final_eval_return": -20.0}))
        results[task] = {"maddpg": {**group, "runs": [str(run)]}}
        key = floor_key(read_run_config(run), 0, 10)
        floors[key] = {"random": [-30.0 - i] * 10, "zero": [-20.0 - i] * 10}
    (root / "report").mkdir()
    (root / "report" / "comparison.json").write_text(json.dumps({"results": results}))
    (root / "floors.json").write_text(json.dumps(floors))  # read, not recomputed
    data = SuiteData.read(SUITES["marl"], tmp_path / "results")
    text = "\n".join(suite_section(data, verdicts.Tests(), Path("../results/marl"),
                                  LEADS["marl"]))
    lead, rest = text.split("### mpe-simple_spread")
    mpe, mamujoco = rest.split("### mamujoco-HalfCheetah-2x3")
    assert "shows that the multi-agent rows run, not how well" in lead  # said once, at the top
    assert "divide HARL's by the number of agents" in lead and "divide HARL's" not in rest
    assert "Every agent gets the env's one reward" in mamujoco and "one reward" not in mpe
    assert "env seeds seed + 10,000 to seed + 10,009" in mpe
    assert "uniform random actions -30.0, the env's zero action (no force or torque) " \
           "-20.0: floors" in mpe
    assert "uniform random actions -31.0, the env's zero action -21.0." in mamujoco
    # the seed's final return (-20.0) against its own zero action's: not above -20, above -21
    assert "beats their own zero action's (by the final return minus it): maddpg 0 of 1 " \
           "(0.00)." in mpe
    assert "maddpg 1 of 1 (+1.0)." in mamujoco
    assert "Row-wide note." in mpe and "Row-wide note. One-task note." in mamujoco
    assert "One-task note." not in mpe


def test_results_page_is_a_fresh_rendering_of_the_committed_results() -> None:
    """docs/results.md is, byte for byte, what the script renders from results/ now: a hand
    edit of the page, or a result changed without regenerating it, fails here. Regenerate with
    ``python scripts/reproduce.py mujoco --report-only``."""
    fresh = render_page(REPO / "results", REPO / "docs", [SUITES[s] for s in PAGE_SUITES], LEADS)
    committed = (REPO / "docs" / "results.md").read_text()
    for suite in PAGE_SUITES:  # the final-return tables' source is current
        report = REPO / "results" / suite / "report" / "comparison.json"
        if not report.is_file():
            continue
        for env, groups in json.loads(report.read_text())["results"].items():
            for label, group in groups.items():
                finals = [summary(REPO / run)["final_eval_return"] for run in group["runs"]]
                assert finals == group["final_eval_returns"], (suite, env, label)
    if fresh != committed:
        import difflib

        diff = "\n".join(list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(),
                                                   "docs/results.md", "rendered", lineterm=""))
                         [:40])
        pytest.fail(f"docs/results.md is not the rendering of results/:\n{diff}")


def test_published_seeds_are_the_sources_numbers() -> None:
    """The stored per-seed data reproduce the sources' published means (Tianshou's Hopper SAC
    spike at 50k, its steps shifted by the 10,000-step warm-up; the TD3 paper's HalfCheetah),
    each file names its repository and commit, and a window averages each seed over it."""
    refs = {(r.task, r.algo): r for r in REFERENCES}
    tianshou = refs[("Hopper", "SAC (Tianshou)")]
    steps, values = tianshou.curve()
    means = {int(s): round(float(m)) for s, m in zip(steps, values.mean(axis=0))}
    assert (means[45_000], means[50_000], means[55_000]) == (535, 1030, 705)
    assert values.shape[0] == 10
    window = tianshou.window(50_000, 10_000)
    at = [list(steps).index(s) for s in (40_000, 45_000, 50_000)]
    assert np.allclose(window, values[:, at].mean(axis=1))
    td3 = refs[("HalfCheetah", "TD3 (paper)")]
    steps, values = td3.curve()
    assert round(float(values[:, list(steps).index(50_000)].mean())) == 3352
    assert td3.window(50_000, 10_000).shape == (10,)
    simba = refs[("Hopper", "SAC (SimbaV2 baseline)")]
    assert np.allclose(simba.window(50_000, 10_000), simba.curve()[1][:, 3])  # only 49,998
    for key in ("td3-paper", "tianshou", "simbav2"):
        record = published_data(key)
        assert len(record["commit"]) == 40 and record["repo"].startswith("github.com/")
    low, high = normalizer("Hopper")
    assert low < 100 < 3000 < high  # untrained policy, the paper's mean at 1M
    for algo, points in (("SAC (Tianshou)", 3), ("SAC (SimbaV2 baseline)", 1)):  # the long suite
        ref = refs[("HalfCheetah", algo)]
        steps, values = ref.curve()
        inside = (steps >= 290_000) & (steps <= 300_000)
        assert inside.sum() == points and ref.window(300_000, 10_000).shape == (10,)
        assert np.allclose(ref.window(300_000, 10_000), values[:, inside].mean(axis=1))


def mean_at(ref: Any, steps: int) -> float:
    at, values = ref.curve()
    return float(values[:, list(at).index(steps)].mean())


def test_the_issue_52_references_are_the_sources_numbers() -> None:
    """Humanoid and Ant (issue 52), value by value against numbers read from the sources'
    repositories by other code (awk on `git show` of Tianshou's CSVs, whose own `rew` column is
    the mean over its 10 seeds; awk on SimbaV2's sac.csv; numpy on the TD3 paper's .npy files):
    Tianshou's env steps shifted by its warm-up (SAC 10,000, TD3 25,000), SimbaV2's at 16,666
    steps apart, the TD3 paper's every 5,000 to 1M (the Ant normalization's top); 10 seeds each;
    every file named at its commit."""
    refs = {(r.task, r.algo): r for r in REFERENCES}
    tianshou = refs[("Humanoid", "SAC (Tianshou)")]
    assert tianshou.curve()[1].shape[0] == 10
    # CSV env_step 90,000 / 190,000 / 290,000: rew 618.5582, 680.1662, 1266.3388
    assert [round(mean_at(tianshou, s), 2) for s in (100_000, 200_000, 300_000)] == [
        618.56, 680.17, 1266.34]
    assert tianshou.curve()[1][0, list(tianshou.curve()[0]).index(300_000)] == 1439.751
    ant = refs[("Ant", "SAC (Tianshou)")]  # CSV 40,000 and 90,000: rew 605.0013, 901.242
    assert [round(mean_at(ant, s), 2) for s in (50_000, 100_000)] == [605.0, 901.24]
    ant_td3 = refs[("Ant", "TD3 (Tianshou)")]  # CSV 75,000 (warm-up 25,000): rew 787.1799
    assert round(mean_at(ant_td3, 100_000), 2) == 787.18
    simba = refs[("Humanoid", "SAC (SimbaV2 baseline)")]  # sac.csv, Humanoid-v4, 10 seeds
    assert [round(mean_at(simba, s), 2) for s in (99_996, 199_992, 299_988)] == [
        632.14, 994.4, 3014.75]
    assert np.allclose(simba.window(300_000, 10_000), simba.curve()[1][:, -1])  # 299,988 only
    assert round(mean_at(refs[("Ant", "SAC (SimbaV2 baseline)")], 99_996), 2) == 747.25
    paper = refs[("Ant", "TD3 (paper)")]  # TD3_Ant-v1_<seed>.npy, evaluation i at i x 5,000
    assert [round(mean_at(paper, s), 2) for s in (50_000, 100_000)] == [330.44, 585.51]
    low, high = normalizer("Ant")
    assert (round(low, 2), round(high, 2)) == (986.88, 4242.53)
    assert normalizer("Humanoid") is None  # the paper ran no Humanoid: no cross-task score
    assert ("Humanoid", "TD3 (paper)") not in refs
    assert "Ant" in published_data("td3-paper")["path"]


def test_holm_and_the_verdicts() -> None:
    """Holm's step-down adjustment (the i-th smallest p times m - i, monotone, capped at 1) and
    the verdict it gives: a side only when the adjusted p is under 0.05."""
    tests = verdicts.Tests()
    for i, p in enumerate([0.01, 0.04, 0.03, 0.5]):
        tests.items[("ref", "x", str(i))] = verdicts.Test((0.9, 0.5, 1.0), p)
    tests.holm()
    adjusted = [tests.items[("ref", "x", str(i))].adjusted for i in range(4)]
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert tests.items[("ref", "x", "0")].verdict() == "above"
    assert tests.items[("ref", "x", "1")].verdict() == "above at p < 0.05, not after Holm"
    assert tests.items[("ref", "x", "3")].verdict() == "no difference found"
    assert tests.count("ref") == 4 and tests.count("variant") == 0
    with pytest.raises(ValueError, match="a test's kind is one of"):
        tests.run(("pair", "x"), [1.0], [2.0])  # the page's old page-wide kind


def test_holm_runs_within_each_suite_and_question() -> None:
    """One family per suite and question: a family of m tests weighs only its own; 5 against 10
    seeds give p = 2 / C(15, 5) = 0.000666 at the least, which clears Holm's first step in a
    family of up to 75 tests, and the method's table says which families still allow it; a test
    of another suite, or of another question, keeps its adjusted p however many tests `x`'s
    family holds; an adjusted p of 0.0493 prints as 0.049, not as the 0.05 it is under."""
    least = 2 / math.comb(15, 5)
    for m, passes in ((74, True), (75, True), (76, False)):
        tests = verdicts.Tests()
        tests.items[("head", "y", "0")] = verdicts.Test((1.0, 1.0, 1.0), least)
        tests.items[("head", "x", "0")] = verdicts.Test((1.0, 1.0, 1.0), least)
        tests.items[("ref", "x", "0")] = verdicts.Test((1.0, 1.0, 1.0), least)
        for i in range(1, m):
            tests.items[("ref", "x", str(i))] = verdicts.Test((0.5, 0.2, 0.8), 0.9)
        tests.holm()
        for key in (("head", "y", "0"), ("head", "x", "0")):  # families of one test each
            assert tests.items[key].adjusted == pytest.approx(least)
            assert tests.items[key].verdict() == "above"
        assert tests.items[("ref", "x", "0")].adjusted == pytest.approx(min(1.0, m * least))
        assert (tests.items[("ref", "x", "0")].verdict() == "above") is passes
        assert tests.family_size("x", "ref") == m and tests.family_size("y", "head") == 1
        text = "\n".join(method_lines(tests))
        assert f"(3 families, {m + 2} tests;" in text
        assert (f"| `x` | each cell against its algorithm's other published curves | {m} | "
                f"{0.05 / m:.5f} | {'yes' if passes else 'no'} |") in text
        assert "passes Holm's first step only in a family of at most 75 tests" in text
    assert verdicts.pval(74 * least) == "= 0.049" and verdicts.pval(0.37) == "= 0.37"


def test_rank_test_power_is_the_exact_tests() -> None:
    """The page's power statement: under no difference the exact test of 5 against 10 seeds
    rejects at most alpha of the time; at a gap of 1.75 std its rate is scipy's exact
    Mann-Whitney's on the same kind of draws; below the least p it can give (2 / C(15, 5)) it
    never rejects."""
    from scipy.stats import mannwhitneyu

    power = verdicts.rank_test_power
    assert 0.03 < power(5, 10, 0.0, 0.05) <= 0.05
    assert power(5, 10, 3.0, 0.9 * 2 / 3003) == 0.0
    rng = np.random.default_rng(1)
    hits = np.mean([mannwhitneyu(rng.normal(1.75, 1, 5), rng.normal(0, 1, 10),
                                 method="exact").pvalue < 0.05 for _ in range(1000)])
    assert abs(power(5, 10, 1.75, 0.05) - hits) < 0.05, hits


def glance(data: SuiteData) -> tuple[verdicts.Tests, list[str], list[str], list[str]]:
    """The box, compact table and detail of one suite, as the page makes them: every test
    first, Holm, then the lines."""
    tests = verdicts.Tests()
    glance_cells([data], tests)
    tests.holm()
    cells = glance_cells([data], tests)
    return tests, box_lines([data], cells), compact_table(cells), detail_lines(cells)


def test_headline_handles_cells_with_no_results_and_no_reference(tmp_path: Path) -> None:
    """A suite row that has not run, and one that ran but has no published curve: the compact
    table leaves out the first (the box names it under `Not yet`) and marks the second `–`, and
    says how far a cell got short of a budget; a row with a curve gets the best one and a
    verdict; every IQM is of the seeds' window means (here 20 below the evaluation at the step,
    which the per-seed table gives, with how far a cell got short of a budget); a non-best
    reference that differs after Holm gets a footnote; one task makes no aggregate."""
    suite = Suite(
        name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),), steps=50_000,
        seeds=5, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("td3", ()), Row("new_algo", ()), Row("never_run", ())),
        headline_steps=(50_000, 100_000))
    for label, level, last in (("td3", 300.0, 100_000), ("new_algo", 100.0, 50_000)):
        steps = np.arange(5_000, last + 1, 5_000)
        for seed in range(5):
            run = tmp_path / "x" / "Hopper" / f"{label}-s{seed}"
            run.mkdir(parents=True)
            bump = 30.0 * (steps % 50_000 == 0)  # the evaluation at 50k and 100k: +30
            write_scalars_csv(run / "eval.csv", {"eval/return": (steps, level + seed + bump)})
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": level + seed, "total_steps": int(last)}))
    data = SuiteData.read(suite, tmp_path)
    tests, box, table, detail = glance(data)
    rows = {line.split(" | ")[0].strip("| `"): line for line in table if line.startswith("| `")}
    # a row with no result at any budget is named once in the box, not given a row of dashes
    assert "never_run" not in rows
    assert "`never_run`" in next(line for line in box if "**Not yet**" in line)
    # rlzoo's cells read the window as the published ones do: (100 + 100 + 130) / 3 + seed,
    # not the evaluation at the step (130 + seed, in the per-seed table)
    assert rows["new_algo"] == "| `new_algo` | 112 – | 5 seeds to 50k only |"
    # the TD3 paper's windows have the higher IQM at both budgets (Tianshou's TD3: 225, 336);
    # the verdict is on the window, (300 + 300 + 330) / 3 + seed, as is the IQM beside it;
    # TD3 (Tianshou) at 50k, not the best, differs after Holm: a footnote
    assert rows["td3"] == "| `td3` | 312 ○ᵃ | 312 ▼ |"
    assert ("ᵃ Differs after Holm from another published curve of its algorithm: `td3` above "
            "TD3 (Tianshou) on Hopper at 50k.") in table
    assert ("| Hopper | td3 | 50k | 312 [311, 314] (5) | TD3 (paper): 285 [239, 320] (10) | "
            "○ 0.66 [0.38, 0.90] |") in "\n".join(detail)
    assert ("| Hopper | td3 | 100k | 312 [311, 314] (5) | TD3 (paper): 559 [366, 962] (10) | "
            "▼ 0.10 [0.00, 0.30] |") in "\n".join(detail)
    seeds = "\n".join(seed_lines(data))
    assert ("| Hopper | td3 (seeds 0-4) | `x` | 50k | 330, 331, 332, 333, 334 | 310, 311, 312, "
            "313, 314 |") in seeds
    assert "| Hopper | new_algo (seeds 0-4) | `x` | 100k | not reached (50k only) | — |" in seeds
    # td3 against the paper's seeds (the best, the headline's family) and Tianshou's, at 50k and
    # 100k
    assert tests.count("head") == 2 and tests.count("ref") == 2
    validated = next(line for line in box if "**Validated**" in line)
    assert "`td3` (2 cells on Hopper at 50k and 100k env steps); 1 differs from its best " \
           "curve after Holm's correction (`td3` below on Hopper at 100k)" in validated
    # each compared curve's updates, more or fewer, as its source gives them (these run dirs
    # have no config, so rlzoo's count is not known)
    method = "\n".join(method_lines(tests, [("TD3 (paper)", 50_000, None, "~50,000")]))
    assert "TD3 (paper): ~50,000 at 50k (rlzoo's row: not known)" in method
    tasks, scores = aggregate_scores(data, 50_000)
    assert tasks == [] and scores == {}  # one task: its headline, not an aggregate


def test_a_row_on_fewer_tasks_keeps_its_place_in_the_aggregate(tmp_path: Path) -> None:
    """Rows run on every task are aggregated over all of them; a row run on two of three tasks
    is not dropped from the aggregate but gets a second table over those two, beside every row
    that has them (rlzoo's and the published), each labelled with its tasks; a row on one task
    gets no table of its own (that is its headline row)."""
    suite = Suite(
        name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),
                                    SuiteTask("HalfCheetah", "HalfCheetah"),
                                    SuiteTask("Walker2d", "Walker2d")), steps=50_000,
        seeds=3, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("sac", ()), Row("stac", ()), Row("one_seed", ()), Row("one_task", ())),
        headline_steps=(50_000,))
    cells = [("sac", t, 3) for t in ("Hopper", "HalfCheetah", "Walker2d")]
    cells += [("stac", t, 3) for t in ("Hopper", "HalfCheetah")]
    cells += [("one_seed", "Hopper", 1), ("one_task", "Hopper", 3)]
    for label, task, seeds in cells:
        steps = np.arange(5_000, 50_001, 5_000)
        for seed in range(seeds):
            run = tmp_path / "x" / task / f"{label}-s{seed}"
            run.mkdir(parents=True)
            write_scalars_csv(run / "eval.csv", {"eval/return": (steps, 100.0 * seed + 0 * steps)})
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": 100.0 * seed, "total_steps": 50_000}))
    data = SuiteData.read(suite, tmp_path)
    assert aggregate_task_sets(data, 50_000) == [["Hopper", "HalfCheetah", "Walker2d"],
                                                 ["Hopper", "HalfCheetah"]]
    tasks, full = aggregate_scores(data, 50_000)
    assert tasks == ["Hopper", "HalfCheetah", "Walker2d"] and full["sac"].shape == (3, 3)
    assert "stac" not in full and "TD3 (paper)" in full
    _, two = aggregate_scores(data, 50_000, ["Hopper", "HalfCheetah"])
    assert two["stac"].shape == (3, 2) and two["sac"].shape == (3, 2) and "TD3 (paper)" in two
    assert "one_seed" not in two and "one_task" not in two
    text = "\n".join(aggregate_lines(data, Path("x")))
    assert "At 50k (Hopper, HalfCheetah, Walker2d):" in text
    assert "At 50k (Hopper, HalfCheetah):" in text and "At 50k (Hopper):" not in text
    assert text.count("| stac | 3 x 2 |") == 1 and text.count("| sac | 3 x") == 2
    alone = SuiteData.read(replace(suite, tasks=suite.tasks[:1]), tmp_path)  # one task: none
    assert aggregate_task_sets(alone, 50_000) == []
    assert aggregate_lines(alone, Path("x")) == []


@pytest.mark.parametrize("task", ["Hopper", "HalfCheetah"])
def test_the_stac_row_pins_the_settings_its_cells_ran_with(task: str) -> None:
    """`algo=stac` now follows its author; the `stac` row's overrides (STAC_FIRST) give back the
    settings of the committed `stac` cells (trained before that change) in every key those
    cells' configs have, and `stac-author` is today's `algo=stac`."""
    from omegaconf import OmegaConf

    from rlzoo.analysis.config import flatten_config, is_ignored
    from rlzoo.analysis.runs import read_config
    from rlzoo.conf.history import ADDED
    from tools.reproduce.suites import STAC_FIRST

    suite = SUITES["mujoco"]
    row = next(r for r in suite.rows if r.label == "stac")
    assert row.overrides == ("algo=stac", *STAC_FIRST)
    assert next(r for r in suite.rows if r.label == "stac-author").overrides == ("algo=stac",)
    run = REPRODUCE_REPO / "results" / "mujoco" / task / "stac-s0"
    ran, _, _ = read_config(run)
    cfg = compose_cell_config([f"env={task}", *row.overrides, *suite.overrides, "seed=0",
                               f"eval.every={suite.eval_every}",
                               f"eval.episodes={suite.eval_episodes}"])
    composed = flatten_config(OmegaConf.to_container(cfg, resolve=True))
    # keys added after the cells ran are read as the older runs ran (rlzoo.conf.history.ADDED),
    # for every run alike: one this algorithm's config has no key for (HASAC's actor_update) is
    # not a setting of these cells
    added = {f"{a.node}.{key}" for a in ADDED for key in a.values}
    differ = {k: (v, composed.get(k)) for k, v in ran.items()
              if not is_ignored(k) and k not in ("seeds", "total_steps") and composed.get(k) != v
              and not (k in added and k not in composed)}
    assert differ == {}
    author = compose_cell_config([f"env={task}", "algo=stac", *suite.overrides])
    assert author.critic.pessimism == {"Hopper": 0.5, "HalfCheetah": 0.0}[task]


def test_a_second_seed_group_on_one_task(tmp_path: Path) -> None:
    """Seeds 4-5 trained later on Hopper only (`--first-seed 4`, their own process): the
    aggregate scores each row over the seeds every task has (0-3, not a dropped row), the
    status table sums the two processes' wall times, and the power caveat gives the range of
    seed counts and powers its verdicts rest on."""
    suite = Suite(
        name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),
                                    SuiteTask("HalfCheetah", "HalfCheetah")), steps=50_000,
        seeds=4, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("sac", ()),), headline_steps=(50_000,))
    steps = np.arange(5_000, 50_001, 5_000)
    for task, seeds in (("Hopper", range(6)), ("HalfCheetah", range(4))):
        for seed in seeds:
            run = tmp_path / "x" / task / f"sac-s{seed}"
            run.mkdir(parents=True)
            write_scalars_csv(run / "eval.csv",
                              {"eval/return": (steps, 1000.0 * seed + 0 * steps)})
            group = [4, 5] if seed >= 4 else [0, 1, 2, 3]
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": 1000.0 * seed, "total_steps": 50_000,
                 "wall_time_s": 1800.0 * len(group), "group_seeds": group}))
    data = SuiteData.read(suite, tmp_path)
    tasks, scores = aggregate_scores(data, 50_000)
    assert tasks == ["Hopper", "HalfCheetah"] and scores["sac"].shape == (4, 2)
    low, high = normalizer("Hopper")
    assert scores["sac"][:, 0] == pytest.approx((1000.0 * np.arange(4) - low) / (high - low))
    status = "\n".join(status_lines(data))
    assert ("| Hopper | sac | 6 seeds x 50,000 steps | 3.00 h (sum of 2 processes, one per seed "
            "group) |") in status
    assert "| HalfCheetah | sac | 4 seeds x 50,000 steps | 2.00 h (one process) |" in status
    _, _, table, _ = glance(data)  # Hopper's 6 seeds against the suite's 4, said in the cell
    assert next(line for line in table if line.startswith("| `sac` |")).split(" | ")[1] \
        .endswith("(6)")


def test_rows_at_different_budgets_are_compared_where_both_reached(tmp_path: Path) -> None:
    """A row resumed to 100k set against one still at 50k: both are read at 50k (each seed's
    evaluation there and its mean over the evaluations up to it), and the table says so."""
    suite = Suite(
        name="x", title="x", tasks=(), steps=100_000, seeds=5, eval_every=50_000,
        eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("base", ()), Row("sb3_base", (), peer="base")))
    rows = {}
    for label, curve in (("base", [1.0, 10.0, 1000.0]), ("sb3_base", [2.0, 20.0])):
        rows[label] = []
        for seed in range(5):
            run = tmp_path / f"{label}-s{seed}"
            run.mkdir()
            steps = np.array([0, 50_000, 100_000][:len(curve)])
            write_scalars_csv(run / "eval.csv", {"eval/return": (steps, np.array(curve) + seed)})
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": curve[-1] + seed, "total_steps": int(steps[-1])}))
            rows[label].append(run)
    data = SuiteData(suite, tmp_path, {"T": rows}, None, {})
    tests = verdicts.Tests()
    (kind, a, b, final, curve), = pair_tests(data, tests, "T")
    assert (kind, a, b) == ("peer", "base", "sb3_base (both at 50k)")
    assert final.poi[0] == pytest.approx(0.0)  # at 50k base (10-14) is below sb3_base (20-24)
    assert curve is not None and curve.poi[0] == pytest.approx(0.0)  # means 5.5-9.5 vs 11-15


def test_a_cell_of_one_seed_is_shown_but_never_tested(tmp_path: Path) -> None:
    """A cell that ran what fitted (`--seeds 1`): the headline gives its one value as such, its
    published reference and where its seed falls among the published seeds, but no test; no
    test of it enters Holm's family, its pair with the row it builds on says `not tested`, its
    per-seed line names its seed and the status table counts it against the suite's K."""
    suite = Suite(
        name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),), steps=50_000,
        seeds=5, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("sac", ()), Row("td3", (), against=("sac",))), headline_steps=(50_000,))
    for label, level, seeds in (("sac", 500.0, 5), ("td3", 300.0, 1)):
        steps = np.arange(5_000, 50_001, 5_000)
        for seed in range(seeds):
            run = tmp_path / "x" / "Hopper" / f"{label}-s{seed}"
            run.mkdir(parents=True)
            write_scalars_csv(run / "eval.csv", {"eval/return": (steps, level + seed + 0 * steps)})
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": level + seed, "total_steps": 50_000}))
    data = SuiteData.read(suite, tmp_path)
    tests, box, table, detail = glance(data)
    td3 = next(line for line in table if line.startswith("| `td3` |"))
    assert td3 == "| `td3` | 300 (1 of 5) (not tested) |"
    paper = next(r for r in REFERENCES if r.task == "Hopper" and r.algo == "TD3 (paper)")
    below = int((paper.window(50_000, 10_000) < 300.0).sum())
    assert 0 < below < 10  # the TD3 paper's 10 seeds straddle 300 at 40k-50k
    assert ("| Hopper | td3 | 50k | 300 (1 seed) (1) | TD3 (paper): 285 [239, 320] (10) | not "
            f"tested: 1 seed, above {below} of 10 | — |") in detail
    # sac against its best SAC curve (the headline's family) and the other one; td3 untested
    assert tests.count("head") == 1 and tests.count("ref") == 1
    seeds = "\n".join(seed_lines(data))
    assert "| Hopper | td3 (seed 0) | `x` | 50k | 300 |" in seeds and "(seeds 0-4)" in seeds
    pairs = pair_lines(data, tests, "Hopper")
    assert "| td3 | sac (not tested: td3 has 1 seed; sac has 5 seeds) | — | — | — | — |" in pairs
    assert not any("td3" in key for key in tests.items)  # td3 entered no test of the family
    assert "`td3` (Hopper: 1 of 5 seeds)" in next(line for line in box if "**Not yet**" in line)
    status = "\n".join(status_lines(data))
    assert "| Hopper | td3 | 1 seed (of the suite's 5) x 50,000 steps | — |" in status
    assert "| Hopper | sac | 5 seeds x 50,000 steps |" in status
    assert aggregate_scores(data, 50_000) == ([], {})  # one task: no aggregate


def test_cells_from_two_machines_each_name_theirs(tmp_path: Path) -> None:
    """The status table's wall times: on one machine the header names it once; when cells ran on
    different machines, each timed cell names the machine of its last launch (provenance.json),
    and a cell without a wall time or without runs stays `—`."""
    suite = Suite(
        name="x", title="x", tasks=(SuiteTask("Hopper", "Hopper"),), steps=50_000,
        seeds=2, eval_every=5_000, eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("sac", ()), Row("td3", ()), Row("untimed", ()), Row("never_run", ())))

    def cell(label: str, cpus: list[str], wall: float | None) -> None:
        for seed in range(2):
            run = tmp_path / "x" / "Hopper" / f"{label}-s{seed}"
            run.mkdir(parents=True)
            summary = {"final_eval_return": 1.0, "total_steps": 50_000}
            if wall is not None:
                summary["wall_time_s"] = wall
            (run / "summary.json").write_text(json.dumps(summary))
            (run / "provenance.json").write_text(json.dumps(
                [{"cpu": cpu, "cores": 2} for cpu in cpus]))

    cell("sac", ["AMD EPYC"], 3600.0)
    cell("untimed", ["AMD EPYC"], None)
    cell("td3", ["AMD EPYC", "Intel Xeon"], 7200.0)  # resumed on another machine: its last launch
    status = status_lines(SuiteData.read(suite, tmp_path))
    assert status[0] == ("Cells (wall time on the machine of each cell's last launch; shared "
                         "with other jobs):")
    assert "| Hopper | sac | 2 seeds x 50,000 steps | 1.00 h (one process; AMD EPYC, 2 cores) |" \
        in status
    assert ("| Hopper | td3 | 2 seeds x 50,000 steps | 2.00 h (one process; Intel Xeon, 2 "
            "cores) |") in status
    assert "| Hopper | untimed | 2 seeds x 50,000 steps | — |" in status
    assert "| Hopper | never_run | not run (a) | — |" in status
    shutil.rmtree(tmp_path / "x" / "Hopper" / "td3-s0")
    shutil.rmtree(tmp_path / "x" / "Hopper" / "td3-s1")
    status = status_lines(SuiteData.read(suite, tmp_path))
    assert status[0] == "Cells (wall time on: AMD EPYC, 2 cores; shared with other jobs):"
    assert "| Hopper | sac | 2 seeds x 50,000 steps | 1.00 h (one process) |" in status
    # one CPU name over two generations: torch's kernel level (recorded since) tells them apart
    for seed in range(2):
        record = tmp_path / "x" / "Hopper" / f"untimed-s{seed}" / "provenance.json"
        record.write_text(json.dumps([{"cpu": "AMD EPYC", "cores": 2,
                                       "torch_cpu_capability": "AVX512"}]))
    status = status_lines(SuiteData.read(suite, tmp_path))
    assert "| Hopper | sac | 2 seeds x 50,000 steps | 1.00 h (one process; AMD EPYC, 2 cores) |" \
        in status


def test_findings_are_computed_from_the_curves_they_describe(tmp_path: Path) -> None:
    """The page's findings about the chunked critic (page/findings.py) take every number from
    the runs: the seed pairs it wins, the evaluations where its IQM leads, the seeds' range at
    the second evaluation, the largest fall of a curve, and the reading of the control, which
    changes with the data (so no stale number or claim outlives a cell trained again)."""
    from tools.reproduce.page.findings import chunks_gap, chunks_lead

    steps = np.arange(5_000, 50_001, 5_000)
    suite = Suite(
        name="x", title="x", tasks=(), steps=50_000, seeds=5, eval_every=5_000,
        eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
        rows=(Row("sac", ()), Row("sac-action_sequence", (), against=("sac", "sac-n_step4")),
              Row("sac-n_step4", (), against=("sac",))))

    def cell(task: str, label: str, curve: Callable[[int], np.ndarray]) -> list[Path]:
        dirs = []
        for seed in range(5):
            run = tmp_path / task / f"{label}-s{seed}"
            run.mkdir(parents=True, exist_ok=True)
            values = curve(seed)
            write_scalars_csv(run / "eval.csv", {"eval/return": (steps, values)})
            (run / "summary.json").write_text(json.dumps(
                {"final_eval_return": float(values[-1]), "total_steps": 50_000}))
            dirs.append(run)
        return dirs

    def flat(level: float) -> Callable[[int], np.ndarray]:
        return lambda seed: np.full(len(steps), level + seed, dtype=float)

    def fallen(seed: int) -> np.ndarray:  # seed 2 reaches 2,000 at 30k and falls to 300 at 45k
        values = np.full(len(steps), 500.0 + seed)
        if seed == 2:
            values[5], values[8] = 2_000.0, 300.0
        return values

    def text(task: str, rows: dict[str, list[Path]], finding: Callable) -> str:
        data = SuiteData(suite, tmp_path, {task: rows}, None, {})
        tests = verdicts.Tests()
        finding(data, tests, task)
        tests.holm()  # as the page does: every test first, then the words
        out = finding(data, tests, task)
        assert out is not None
        return out

    rows = {"sac": cell("H", "sac", flat(100.0)),
            "sac-action_sequence": cell("H", "sac-action_sequence", fallen),
            "sac-n_step4": cell("H", "sac-n_step4", lambda s: np.full(len(steps), 104.5 - s))}
    lead = text("H", rows, chunks_lead)
    assert "ahead on every seed pair" in lead
    assert "its IQM is above SAC's at every learned evaluation (10k to 50k; at 10k its seeds " \
           "were at 500 to 504, SAC's at 100 to 104)" in lead
    # between consecutive evaluations, by the run's own seed; SAC's flat curves never drop
    assert "this row's seed 2, 2,000 at 30k to 502 at 35k, SAC's none" in lead
    # the control against SAC: 15 of 25 pairs, no difference; the row is above the control
    assert "on the mean over evaluations no difference found (P(A > B) = 0.60" in lead
    assert "which points to the chunked actions and critic" in lead
    rows["sac-n_step4"] = cell("H", "sac-n_step4", flat(300.0))  # the control leads SAC too
    lead = text("H", rows, chunks_lead)
    assert "do not single out the chunked actions" in lead
    assert "which points to" not in lead
    assert chunks_lead(SuiteData(suite, tmp_path, {"H": {"sac": rows["sac"]}}, None, {}),
                       verdicts.Tests(), "H") is None  # cells missing: no finding, no guess

    rows = {"sac": cell("C", "sac", flat(3_000.0)),
            "sac-action_sequence": cell("C", "sac-action_sequence", fallen),
            "sac-n_step4": cell("C", "sac-n_step4", flat(500.5))}
    gap = text("C", rows, chunks_gap)
    assert "behind on every seed pair" in gap
    assert "behind on every seed pair (its seeds' means 500 to 632, SAC's 3,000 to 3,004)" in gap
    assert "Its largest drop between two evaluations: seed 2, 2,000 at 30k to 502 at 35k" in gap
    assert "4-step returns alone put the control behind SAC too" in gap
    rows["sac-n_step4"] = cell("C", "sac-n_step4", flat(3_000.5))  # the control keeps up
    assert "do not show that 4-step returns alone account" in text("C", rows, chunks_gap)


def test_temperature_findings_are_read_from_the_exported_train_csv(tmp_path: Path) -> None:
    """export_run keeps a run's temperature and entropy (and no other training scalar) as
    train.csv, also over an export made before train.csv was kept, and none for a run that logs
    neither; the page's temperature findings read every number from it: the range over seeds (and
    agents) at the first logged step, a quarter, half and all of the budget, when the entropy
    first reached its target, and when the temperature was last above SAC's start (both from the
    rows' configs). A cell without train.csv gets no sentence rather than an old one."""
    from torch.utils.tensorboard import SummaryWriter

    from rlzoo.envs.gym import make_single_env
    from rlzoo.envs.pettingzoo import make_multi_agent_env
    from tools.reproduce.page.findings import finding_lines
    from tools.reproduce.page.temperature import ACTION_SIZES, exceeded, slow_temperature
    from tools.reproduce.report import export_run

    steps = np.arange(11_000, 100_001, 1_000)
    source = tmp_path / "runs" / "dsac_t-s0"
    with SummaryWriter(str(source)) as writer:
        for step in steps.tolist():
            writer.add_scalar("stats/alpha", 2.0 * 0.97 ** ((step - 11_000) / 1_000), step)
            writer.add_scalar("stats/entropy", 2.0 - step / 25_000, step)
            writer.add_scalar("loss/critic", 1.0, step)
        writer.add_scalar("eval/return", 30.0, 5_000)
    (source / "summary.json").write_text(json.dumps({"total_steps": 100_000}))
    out = tmp_path / "out"
    assert export_run(source, out)
    assert (out / "eval.csv").read_text().splitlines()[0] == "step,eval/return"
    assert (out / "train.csv").read_text().splitlines()[0] == "step,stats/alpha,stats/entropy"
    (out / "train.csv").unlink()  # as exported before train.csv was kept
    assert export_run(source, out) and (out / "train.csv").is_file()
    assert not export_run(source, out)  # nothing new: left as it is
    peer = tmp_path / "runs" / "sb3_sac-s0"  # a run that logs no temperature
    peer.mkdir()
    write_scalars_csv(peer / "eval.csv", {"eval/return": (np.array([5_000]), np.array([1.0]))})
    (peer / "summary.json").write_text(json.dumps({"total_steps": 5_000}))
    assert export_run(peer, tmp_path / "peer") and not (tmp_path / "peer" / "train.csv").exists()
    assert not export_run(peer, tmp_path / "peer")  # nothing new for a run without train.csv

    suite = Suite(name="x", title="x", tasks=(), steps=100_000, seeds=2, eval_every=5_000,
                  eval_episodes=1, checkpoint_every=1, checkpoint_keep=1,
                  rows=(Row("sac", ()), Row("dsac_t", ()), Row("hasac", ())))
    runs: dict[str, list[Path]] = {"dsac_t": [], "sac": []}
    for seed in range(2):
        run = tmp_path / "Hopper" / f"dsac_t-s{seed}"
        shutil.copytree(out, run)
        (run / ".hydra").mkdir(exist_ok=True)  # export_run made it (the source had none)
        (run / ".hydra" / "config.yaml").write_text(  # a target of -0.5 |A| = -1.5
            "tuner:\n  init_alpha: 2.718\n  target_entropy: null\n  target_entropy_scale: 0.5\n")
        if seed == 1:  # this seed's temperature one logged step behind
            write_scalars_csv(run / "train.csv", {
                "stats/alpha": (steps, 2.0 * 0.97 ** ((steps - 12_000) / 1_000)),
                "stats/entropy": (steps, 2.0 - steps / 25_000)})
        runs["dsac_t"].append(run)
        sac = tmp_path / "Hopper" / f"sac-s{seed}"
        (sac / ".hydra").mkdir(parents=True)
        (sac / ".hydra" / "config.yaml").write_text("tuner:\n  init_alpha: 1.0\n")
        runs["sac"].append(sac)
    data = SuiteData(suite, tmp_path, {"Hopper": runs}, None, {})
    # 2 * 0.97^k: at 11k, 25k, 50k, 100k; above 1 up to k = 22 (33k for seed 0, 34k for seed 1);
    # entropy 2 - step / 25k: at or below -1.5 from 87.5k, so first logged there at 88k
    assert finding_lines(data, verdicts.Tests(), "Hopper", ["sac", "dsac_t"]) == [
        "DSAC-T on Hopper, min to max over 2 seeds: temperature 2.0 to 2.1 at 11k, 1.3 at 25k, "
        "0.61 to 0.63 at 50k and 0.13 to 0.14 at 100k steps; policy entropy 1.6, 1.0, 0.0 and "
        "-2.0 at those steps (target -1.5), first reached at 88k steps. The temperature was last "
        "above SAC's starting value (1) at 33k-34k steps."]
    high = [[(1_000, 2.0), (2_000, 0.5)], [(1_000, 0.5)], [(1_000, 3.0), (2_000, 2.0)]]
    assert exceeded(high, 1.0, "1") == \
        "The temperature was last above 1 at 1k-2k steps (1 still above it at the end; " \
        "1 never above it, of 3)."
    (runs["dsac_t"][1] / "train.csv").unlink()  # a cell exported before train.csv was kept
    assert slow_temperature(data, verdicts.Tests(), "Hopper") is None

    agents = tmp_path / "mpe-simple_spread" / "hasac-s0"
    agents.mkdir(parents=True)
    logged = np.arange(6_000, 25_000, 1_000)
    write_scalars_csv(agents / "train.csv", {
        "stats/alpha/agent_0": (logged, np.full(len(logged), 0.3)),
        "stats/alpha/agent_1": (logged[2:], 0.1 / (logged[2:] / 8_000))})  # logs from 8k on
    (agents / "summary.json").write_text(json.dumps({"total_steps": 25_000}))
    data = SuiteData(suite, tmp_path, {"mpe-simple_spread": {"hasac": [agents]}}, None, {})
    assert finding_lines(data, verdicts.Tests(), "mpe-simple_spread", ["hasac"]) == []  # entropy?
    write_scalars_csv(agents / "train.csv", {
        "stats/alpha/agent_0": (logged, np.full(len(logged), 0.3)),
        "stats/alpha/agent_1": (logged[2:], 0.1 / (logged[2:] / 8_000)),
        "stats/entropy": (logged, 3.0 - logged / 3_000)})
    # read from 8k, where both agents have logged (8k, 12.5k -> 12k, 25k -> 24k): agent 1 at
    # 0.1 * 8k / step; entropy 3 - step / 3k; without a config the target is not known
    assert finding_lines(data, verdicts.Tests(), "mpe-simple_spread", ["hasac"]) == [
        "HASAC on mpe-simple_spread, min to max over 1 seed x 2 agents: temperature 0.10 to "
        "0.30 at 8k, 0.067 to 0.30 at 12k and 0.033 to 0.30 at 24k steps; mean policy entropy "
        "over agents 0.33, -1.0 and -5.0 at those steps."]

    assert ACTION_SIZES["Hopper"] == make_single_env("Hopper-v5").action_space.shape[0]
    assert ACTION_SIZES["HalfCheetah"] == make_single_env("HalfCheetah-v5").action_space.shape[0]
    mpe = make_multi_agent_env("mpe", "simple_spread_v3", max_cycles=25)
    assert set(mpe.act_dims) == {ACTION_SIZES["mpe-simple_spread"]}
    mpe.close()


def test_the_multi_agent_halfcheetah_note_quotes_the_results() -> None:
    """The hand-written MaMuJoCo note quotes returns that results/ holds (MADDPG's IQM at 7,500
    steps, both rows' final returns, the single-agent SAC row at 10k): each must be the
    committed results' number as the page writes it, so a cell trained again cannot leave the
    note stale."""
    from rlzoo.analysis import stats
    from tools.reproduce.page.runs import fmt, value_at

    note = UNPUBLISHED["mamujoco-"]
    marl = REPO / "results" / "marl" / "mamujoco-HalfCheetah-2x3"
    mujoco = REPO / "results" / "mujoco" / "HalfCheetah"

    def seeds(folder: Path, row: str) -> list[Path]:
        return sorted(folder.glob(f"{row}-s[0-9]"))

    def listed(values: list[float]) -> str:
        text = [fmt(v) for v in sorted(values, reverse=True)]
        return ", ".join(text[:-1]) + f" and {text[-1]}"

    maddpg = seeds(marl, "maddpg")
    assert f"IQM of {fmt(stats.iqm([value_at(d, 7_500, 2_500) for d in maddpg]))} at 7,500" in note
    for row in ("maddpg", "hasac"):
        finals = [summary(d)["final_eval_return"] for d in seeds(marl, row)]
        assert len(finals) == 5 and listed(finals) in note, row
    sac = [value_at(d, 10_000, 5_000) for d in seeds(mujoco, "sac")]
    assert len(sac) >= 5 and f"was at {listed(sac)}" in note
