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
