"""``scripts/gpu_check.py --dry-run``: the GPU check runs end to end on the CPU at tiny sizes and
writes its table as it goes, so a run cut short still leaves the rows it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpu_check(out: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("OUT", None)
    return subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_check.py"), "--dry-run",
                           "--out", str(out), *args], cwd=out.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_dry_run_fills_every_row_of_the_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpu_check(out, "--algos", "sac", "coma")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert [r["check"] for r in rows] == ["cuda tests", "headline", "headline", "sb3", "seeds",
                                          "algorithm", "algorithm"]
    assert rows[0]["status"].startswith("ok: ") and "skipped" in rows[0]["status"]
    for row in rows[1:]:
        assert row["status"].startswith("ok"), row
        assert row["sps"] > 0, row
    assert rows[1]["relative"].endswith("x SB3") and rows[4]["relative"].startswith("wall ")
    assert "cudagraphs=false" in rows[1]["cmd"] and "cudagraphs" not in rows[2]["cmd"]
    assert "seeds=2" in rows[4]["cmd"] and "algo=coma" in rows[6]["cmd"]
    table = (out / "gpu_check.md").read_text()
    assert "| headline | algo=sac env=Pendulum (default: cudagraphs=auto) |" in table
    assert "no GPU (CPU run)" in table


def test_a_run_out_of_time_leaves_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpu_check(out, "--skip-tests", "--budget", "4", "--algos", "sac", timeout=300)
    assert proc.returncode == 1  # rows that did not run are failures
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert [r["check"] for r in rows] == ["headline", "headline", "sb3", "seeds", "algorithm"]
    assert all(r["sps"] is None for r in rows if r["check"] != "sb3")
    assert all("timed out" in r["status"] for r in rows if r["check"] != "sb3")
    assert (out / "gpu_check.md").read_text().count("timed out") >= 4


def test_the_tests_row_reads_pytests_summary_past_a_warning_on_stderr() -> None:
    """Run from a pytest-xdist worker (CI), the nested ``pytest -m cuda`` inherits
    PYTEST_XDIST_WORKER and pytest-benchmark warns on stderr after pytest's summary; the row
    must still show the summary ('23 skipped, ...'), not the warning's last line."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    stdout = "sssssssssssssssssssssss                                  [100%]\n" \
             "23 skipped, 45 deselected in 3.62s\n"
    stderr = ("/site-packages/pytest_benchmark/logger.py:44: PytestBenchmarkWarning: Benchmarks "
              "are automatically disabled because xdist plugin is active.\n"
              "  warner(PytestBenchmarkWarning(text))\n")
    assert script.pytest_summary(stdout + stderr) == "23 skipped, 45 deselected in 3.62s"
    assert script.pytest_summary("=== 1 failed, 2 passed in 9.10s ===\n") == \
        "1 failed, 2 passed in 9.10s"
    assert script.pytest_summary("no tests ran in 0.01s\n") == "no tests ran in 0.01s"
    assert script.pytest_summary("Traceback ...\nImportError: x\n") == "ImportError: x"


# ----------------------------------------------------------------------------- issue 41's parts
def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "gpu_check.json").read_text())["rows"]


def warp_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("mujoco_warp", "warp"))


@pytest.mark.slow
def test_the_envs_part_fills_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpu_check(out, "--part", "envs")
    rows = rows_of(out)
    assert [r["check"] for r in rows] == ["warp env"] * 2 + ["batched env"] * 2 + ["trainer"] * 2
    warp_rows = [rows[0], rows[1], rows[4]]
    if warp_installed():
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert all(r["status"] == "ok" and r["sps"] > 0 for r in warp_rows), warp_rows
        assert "--worlds 4" in rows[1]["cmd"] and "env.backend=warp" in rows[4]["cmd"]
    else:  # CI: the rows say what installs it, and the check fails
        assert proc.returncode == 1
        assert all(r["status"] == "not run: needs MuJoCo Warp (pip install rlzoo[warp])"
                   for r in warp_rows), warp_rows
    for r in (rows[2], rows[3], rows[5]):
        assert r["status"] == "ok" and r["sps"] > 0, r
    assert "256 envs" in rows[3]["setting"] and "env.backend=batched" in rows[5]["cmd"]
    assert "algo.utd=0.001953125" in rows[5]["cmd"]


def test_the_spread_part_reads_the_runs_progress_lines(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpu_check(out, "--part", "spread", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [row] = rows_of(out)
    assert row["check"] == "spread 9 min" and row["steps"] == 12_800  # the dry run's total
    assert row["status"].startswith("ok: finished at ") and "12,800 env steps" in row["status"]
    assert "last eval return -" in row["status"] and row["relative"] == "target not met"
    assert row["sps"] > 0 and "num_envs=64" in row["cmd"]
    assert "Targets (issue 41)" in (out / "gpu_check.md").read_text()


@pytest.mark.slow
def test_the_humanoid_part_reports_the_best_evaluation(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpu_check(out, "--part", "humanoid", timeout=600)
    [row] = rows_of(out)
    if not warp_installed():
        assert proc.returncode == 1 and row["status"].startswith("not run: needs MuJoCo Warp")
        return
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert row["steps"] >= 200 and row["relative"] == "target not met"
    seconds, step, value = row["best"]
    assert 0 < seconds < 120 and step in (100, 101, 200, 202) and value > 0
    assert f"best eval return {value:,.1f}" in row["status"]


def test_a_run_past_its_deadline_is_killed_and_read_up_to_it(tmp_path: Path) -> None:
    """deadline_run: lines timed as they come, the process group killed at the deadline, and
    the steps and evaluations read from the lines printed before it."""
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("gpu_check_rows",
                                                  REPO / "scripts" / "gpu_check_rows.py")
    assert spec is not None and spec.loader is not None
    rows = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = rows  # dataclasses look their module up there
    spec.loader.exec_module(rows)
    pid_file = tmp_path / "child.pid"
    code = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('rlzoo: step 1024/9999 (10%) | 5 steps/s | train return 1.0 | eval return n/a |',"
        " flush=True)\n"
        "time.sleep(0.5)\n"
        "print('rlzoo: step 2048/9999 (20%) | 5 steps/s | train return 1.0 | eval return "
        "5012.5 ± 3.0 | elapsed', flush=True)\n"
        "print('rlzoo: step 3072/9999 (30%) | 5 steps/s | train return 1.0 | eval return "
        "-7.5 ± 3.0 | elapsed', flush=True)\n"
        "time.sleep(60)\n")
    start = time.monotonic()
    timeline = rows.deadline_run([sys.executable, "-c", code], 3.0)
    assert time.monotonic() - start < 20
    assert timeline.status is None and timeline.deadline == 3.0
    assert timeline.steps_by(3.0) == 3072 and timeline.steps_by(0.0) == 0
    assert [(s, v) for _, s, v in timeline.evals()] == [(2048, 5012.5), (3072, -7.5)]
    hit = timeline.first_at_least(5000.0)
    assert hit is not None and hit[1:] == (2048, 5012.5) and 0.3 < hit[0] < 3.0
    assert timeline.first_at_least(6000.0) is None
    child = int(pid_file.read_text())
    for _ in range(50):  # the grandchild went with the group
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the run's child outlived the deadline")


def test_a_check_stopped_before_its_deadline_leaves_no_run_behind(tmp_path: Path) -> None:
    """SIGTERM to the check (an outer timeout) while a nine-minute part runs: the run dies with
    it (PR_SET_PDEATHSIG), not left holding the GPU."""
    import signal
    import time

    pid_file = tmp_path / "run.pid"
    run = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    check = subprocess.Popen([sys.executable, "-c", (
        f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r}); import gpu_check_rows; "
        f"gpu_check_rows.deadline_run([sys.executable, '-c', {run!r}], 120)")])
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        check.send_signal(signal.SIGTERM)
        check.wait(timeout=30)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise AssertionError("the run outlived its check")
    finally:
        check.kill()
