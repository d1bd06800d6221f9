"""The GPU check's plumbing: the table written as it goes, commands with a timeout, and the two
ways a row reads a run's speed (TensorBoard's ``perf/sps`` window, or the progress lines of a run
stopped at a wall-clock deadline). Used by ``scripts/gpu_check.py`` and its parts."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


class Check:
    """The rows so far, the clock, and where they go."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.start = args, time.monotonic()
        self.rows: list[dict[str, Any]] = []
        self.out = Path(args.out or os.environ.get("OUT") or "gpu_check")
        self.out.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_check-"))
        self.device = "cpu" if args.dry_run else "cuda"
        self.header = header(self.device)
        self.targets = ""  # the part's targets, printed under the table

    def left(self) -> float:
        return self.args.budget - (time.monotonic() - self.start)

    def timeout(self, cap: float) -> float:
        return max(0.0, min(cap, self.left() - 5.0))

    def add(self, **row: Any) -> dict[str, Any]:
        self.rows.append(row)
        self.write()
        return row

    def write(self) -> None:
        lines = [*self.header, "", "| check | setting | env steps/s | relative | status |",
                 "|---|---|---|---|---|"]
        for r in self.rows:
            sps = "" if r.get("sps") is None else f"{r['sps']:,.1f}"
            lines.append(f"| {r['check']} | {r['setting']} | {sps} | {r.get('relative', '')} | "
                         f"{r['status']} |")
        lines += ["", self.targets, f"Elapsed {time.monotonic() - self.start:.0f} s of "
                  f"{self.args.budget:.0f} s."]
        (self.out / "gpu_check.md").write_text("\n".join(lines) + "\n")
        (self.out / "gpu_check.json").write_text(json.dumps(
            {"header": self.header, "rows": self.rows}, indent=1) + "\n")
        if self.rows:
            print(lines[5 + len(self.rows)], flush=True)


def header(device: str) -> list[str]:
    import torch

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (CPU run)"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return [f"# rlzoo GPU check, {when}", "",
            f"{gpu}; torch {torch.__version__} (CUDA {torch.version.cuda}); device={device}; "
            f"{os.cpu_count()} CPU cores; rlzoo commit {commit}."]


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:200].replace("|", "/")


# pytest's closing line: "23 skipped, 45 deselected in 3.62s" (-q), "=== 2 passed in 1.0s ===",
# "no tests ran in 0.1s"
PYTEST_SUMMARY = re.compile(r"^=*\s*(\d+ \w+|no tests ran)\b.* in [\d.]+s\b")


def pytest_summary(out: str) -> str:
    """pytest's closing line in ``out`` (its stdout followed by its stderr), else its last line.
    Not simply the last line: a plugin may warn on stderr after it (pytest-benchmark does when
    the environment says xdist is active, as it does for a check run from a test worker)."""
    found = [line.strip("= ") for line in out.splitlines() if PYTEST_SUMMARY.match(line.strip())]
    return found[-1][:200].replace("|", "/") if found else last_line(out)


def run(cmd: list[str], timeout: float, cwd: Path = REPO) -> tuple[int | None, str]:
    """(exit status or None on a timeout, stdout + stderr)."""
    if timeout <= 1:
        return None, "no time left"
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"") + (err.stderr or b"")
        return None, out.decode(errors="replace") if isinstance(out, bytes) else str(out)
    return proc.returncode, proc.stdout + proc.stderr


def window_rate(run_dir: Path, first: int, last: int) -> float | None:
    """Env steps/s between the ``perf/sps`` logs at steps ``first`` and ``last`` (their
    TensorBoard wall times) in ``run_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    times: dict[int, float] = {}
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if "perf/sps" in acc.Tags().get("scalars", []):
            times.update({e.step: e.wall_time for e in acc.Scalars("perf/sps")})
    steps = sorted(s for s in times if first <= s <= last)
    if len(steps) < 2 or times[steps[-1]] <= times[steps[0]]:
        return None
    return (steps[-1] - steps[0]) / (times[steps[-1]] - times[steps[0]])


def rlzoo_row(check: Check, name: str, setting: str, overrides: list[str], first: int, last: int,
              cap: float) -> dict[str, Any]:
    """One CLI run; its env steps/s between steps ``first`` and ``last`` (seed 0's run dir)."""
    run_dir = check.tmp / f"{name}-{len(check.rows)}"  # its own dir, even after a failed row
    cmd = [sys.executable, "-m", "rlzoo.train", *overrides, f"device={check.device}",
           "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
           f"hydra.run.dir={run_dir}"]
    status, out = run(cmd, check.timeout(cap))
    row: dict[str, Any] = {"check": name, "setting": setting, "cmd": " ".join(cmd[1:])}
    if status != 0:
        row["status"] = ("timed out" if status is None else f"failed: {last_line(out)}")
        return check.add(**row, sps=None)
    row["sps"] = window_rate(run_dir, first, last)
    notes = [line.split("warning: ", 1)[1] for line in out.splitlines() if "cudagraphs=" in line
             and "warning: " in line]
    row["status"] = "ok" + (f"; {notes[0]}" if notes else "")
    if row["sps"] is None:
        row["status"] = "ran, but the log has no window to time"
    shutil.rmtree(run_dir, ignore_errors=True)
    return check.add(**row)


# the trainer's progress line: "rlzoo: step S/T (P%) | ... | eval return Y ± Z | ..."
PROGRESS_STEP = re.compile(r"^rlzoo: step (\d+)/\d+ ")
PROGRESS_EVAL = re.compile(r"\| eval return (-?\d+(?:\.\d+)?)")


@dataclass
class Timeline:
    """What a run printed, each line with the seconds since its command started.

    Attributes:
        lines: ``(seconds, line)`` in order.
        status: the exit status; None when it was stopped at its deadline.
        deadline: the seconds it was given.
    """

    lines: list[tuple[float, str]] = field(default_factory=list)
    status: int | None = None
    deadline: float = 0.0

    def steps_by(self, seconds: float) -> int:
        """The last env step a progress line reported by ``seconds`` (0 if none)."""
        steps = [int(m.group(1)) for t, line in self.lines if t <= seconds
                 if (m := PROGRESS_STEP.match(line))]
        return max(steps, default=0)

    def evals(self) -> list[tuple[float, int, float]]:
        """``(seconds, env step, eval return)`` of each evaluation: the first progress line that
        reports its return (the lines between two evaluations repeat the last one; two
        evaluations with the same return to 0.1 count as one)."""
        out: list[tuple[float, int, float]] = []
        for t, line in self.lines:
            step, value = PROGRESS_STEP.match(line), PROGRESS_EVAL.search(line)
            if step and value and (not out or float(value.group(1)) != out[-1][2]):
                out.append((t, int(step.group(1)), float(value.group(1))))
        return out

    def first_at_least(self, threshold: float) -> tuple[float, int, float] | None:
        """The first evaluation of at least ``threshold``: (seconds, env step, return)."""
        return next((e for e in self.evals() if e[2] >= threshold), None)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the check itself dies (Linux), so that no run is
    left on the GPU by a check stopped another way than its deadline."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def deadline_run(cmd: list[str], seconds: float) -> Timeline:
    """Run ``cmd`` (in its own process group) for at most ``seconds`` of wall time, then kill the
    group (SIGKILL: a measurement run writes no checkpoint); every line of its output is timed
    as it comes (stdout and stderr together). The group is killed too when this check stops on
    an error or Ctrl-C, and the run dies with the check's process (PR_SET_PDEATHSIG)."""
    import signal

    timeline = Timeline(deadline=seconds)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", bufsize=1, start_new_session=True,
                            preexec_fn=_die_with_parent,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            timeline.lines.append((time.monotonic() - start, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        timeline.status = proc.wait(timeout=max(seconds, 1.0))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10.0)
    return timeline
