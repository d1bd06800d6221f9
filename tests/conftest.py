"""Shared test helpers: run the real CLI in a temporary run dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# One thread per test process: the suite runs on 2 workers (pyproject.toml's addopts), and torch's
# OpenMP threads spin-wait, so two 2-thread workers on 2 cores would slow each other down by far
# more than 2x. Subprocesses (the CLI) inherit it.
os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402 - after OMP_NUM_THREADS, which torch reads when it loads

torch.set_num_threads(1)  # also if something imported torch before this file

REPO = Path(__file__).resolve().parents[1]
TINY = ["algo.actor.hidden=[32,32]", "critic.hidden=[32,32]"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def run_cli(
    args: list[str], run_dir: Path | None = None, module: str = "rlzoo.train", timeout: int = 600,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> <args>`` (with ``hydra.run.dir=<run_dir>`` when given)."""
    cmd = [sys.executable, "-m", module, *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           # this checkout's rlzoo (and tests.* env modules) wherever the command runs
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env
    )


def read_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def assert_user_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2, one ``rlzoo: error:`` line on stderr, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
