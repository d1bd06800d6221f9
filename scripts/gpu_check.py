"""The GPU check of issue 40, in at most eight minutes on one GPU: one table, written as it goes.

    python scripts/gpu_check.py [--out DIR] [--budget 470] [--dry-run]

In order (the most wanted rows first, so that a run cut short still leaves them):

1. the ``cuda`` tests (``pytest -m cuda``: graphed updates equal eager for every algorithm, the
   capture fix, the CUDA checkpoint and policy round trips);
2. the headline command, ``python -m rlzoo.train algo=sac env=Humanoid device=cuda``, with
   ``cudagraphs=false`` (eager) and at its default (``cudagraphs=auto``: captured);
3. Stable-Baselines3's SAC with the same settings on the same GPU (when it is installed);
4. ``seeds=10`` against ``seeds=1`` (the default, captured): per-seed env steps/s and wall ratio;
5. every algorithm's env steps/s at its defaults (single-agent ones on Hopper, multi-agent ones on
   MPE simple_spread), SimbaV2 and FlashSAC first.

Each rlzoo row is the real CLI in a subprocess; its env steps/s is the rate between two logs
(``perf/sps`` in TensorBoard, their wall times), after the random warm-up and the graphs'
capture, as issue 40 measured (steps 1,000-3,000 of SAC on Humanoid, UTD 1, batch 256, 256x256).
The replay holds every step of the run (``algo.buffer_size``), which changes no sample. SB3's
rate is taken over the same steps with a callback. Every command gets a timeout from what is
left of ``--budget`` seconds; a row that fails or times out says so in one line. The table is
rewritten after every row to ``DIR/gpu_check.md`` (and ``gpu_check.json``), ``DIR`` being
``--out``, else ``$OUT``, else ``./gpu_check``.

``--dry-run`` runs it all on the CPU at tiny sizes (Pendulum, 150 steps): the test of this script
(tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SINGLE = ("sac", "simbav2", "flashsac", "td3", "dsac_t", "redq", "stac")
MULTI = ("maddpg", "hasac", "coma")
TARGETS = ("Targets (issue 40): the headline command >= 1,000 env steps/s and >= 8x SB3; SimbaV2 "
           "and FlashSAC >= 400 env steps/s for one seed; seeds=10 in <= 1.5x the wall of "
           "seeds=1.")


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
        lines += ["", TARGETS, f"Elapsed {time.monotonic() - self.start:.0f} s of "
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
    run_dir = check.tmp / name
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


SB3_CODE = """
import json, sys, time
import gymnasium as gym
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
env_id, device, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
times = {}
class Clock(BaseCallback):
    def _on_step(self):
        if self.num_timesteps in (first, last):
            if device == "cuda":
                torch.cuda.synchronize()
            times[self.num_timesteps] = time.perf_counter()
        return True
model = SAC("MlpPolicy", gym.make(env_id), learning_starts=first, batch_size=256,
            buffer_size=last, train_freq=1, gradient_steps=1, device=device, seed=0,
            policy_kwargs={"net_arch": [256, 256]})
model.learn(last, callback=Clock())
print(json.dumps({"sps": (last - first) / (times[last] - times[first])}))
"""


def sb3_row(check: Check, env_id: str, first: int, last: int, cap: float) -> dict[str, Any]:
    setting = f"Stable-Baselines3 SAC, {env_id}, same settings"
    try:
        import stable_baselines3  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure is a row
        return check.add(check="sb3", setting=setting, sps=None,
                         status=f"not run: stable_baselines3 is not importable ({err})")
    status, out = run([sys.executable, "-c", SB3_CODE, env_id, check.device, str(first),
                       str(last)], check.timeout(cap))
    if status != 0:
        return check.add(check="sb3", setting=setting, sps=None,
                         status="timed out" if status is None else f"failed: {last_line(out)}")
    sps = json.loads(out.strip().splitlines()[-1])["sps"]
    return check.add(check="sb3", setting=setting, sps=sps, status="ok")


def cuda_tests(check: Check) -> None:
    files = [str(REPO / "tests" / f) for f in ("test_accel.py", "test_capture.py",
                                               "test_cuda_runs.py")]
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
           "-m", "cuda", *[f for f in files if Path(f).exists()]]
    status, out = run(cmd, check.timeout(180 if not check.args.dry_run else 120))
    summary = pytest_summary(out)
    failed = [line.split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED")]
    check.add(check="cuda tests", setting="pytest -m cuda", sps=None,
              status={None: "timed out: ", 0: "ok: "}.get(status, "failed: ") + summary
              + (f" ({', '.join(failed[:6])})" if failed else ""), failed=failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="directory of the table (default $OUT)")
    parser.add_argument("--budget", type=float, default=470.0, help="seconds in all")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (a test)")
    parser.add_argument("--skip-tests", action="store_true", help="no pytest row")
    parser.add_argument("--algos", nargs="*", default=[*SINGLE, *MULTI],
                        help="algorithms of the last section (default: all)")
    args = parser.parse_args()
    check = Check(args)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        check.add(check="setup", setting="", sps=None, status="no CUDA device: nothing measured")
        sys.exit(1)
    dry = args.dry_run
    # the window: steps [first, last] after the random warm-up (first = learning_starts)
    first, last = (50, 150) if dry else (1000, 3000)
    env = "Pendulum" if dry else "Humanoid"
    small = ["algo.batch_size=32", "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]"] \
        if dry else []
    common = [f"total_steps={last}", f"algo.learning_starts={first}", f"algo.buffer_size={last}",
              f"log.every={(last - first) // 2}", *small]
    if not args.skip_tests:
        cuda_tests(check)
    head = ["algo=sac", f"env={env}", *common]
    eager = rlzoo_row(check, "headline", f"algo=sac env={env} cudagraphs=false (eager)",
                      [*head, "cudagraphs=false"], first, last, 90)
    graphed = rlzoo_row(check, "headline", f"algo=sac env={env} (default: cudagraphs=auto)",
                        head, first, last, 90)
    sb3 = sb3_row(check, "Pendulum-v1" if dry else "Humanoid-v5", first, last, 120)
    for row in (eager, graphed):
        if row.get("sps") and sb3.get("sps"):
            row["relative"] = f"{row['sps'] / sb3['sps']:.2f}x SB3"
    seeds = 2 if dry else 10
    group = rlzoo_row(check, "seeds", f"algo=sac env={env} seeds={seeds} (per seed)",
                      [*head, f"seeds={seeds}"], first, last, 150)
    if group.get("sps") and graphed.get("sps"):
        group["relative"] = f"wall {graphed['sps'] / group['sps']:.2f}x seeds=1"
    check.write()
    single_env, multi_env = ("Pendulum", "mpe/simple_spread") if dry else \
        ("Hopper", "mpe/simple_spread")
    for algo in args.algos:
        # the window starts after the warm-up (multi-agent: at least one batch of 1,000)
        a_first, a_last = (50, 150) if dry else (1000, 2000) if algo in MULTI else (500, 1500)
        env_name = multi_env if algo in MULTI else single_env
        overrides = [f"algo={algo}", f"env={env_name}", f"total_steps={a_last}",
                     f"++algo.learning_starts={a_first}", f"++algo.buffer_size={a_last}",
                     f"log.every={(a_last - a_first) // 2}"]
        if dry:
            overrides.append("++algo.batch_size=32")
        rlzoo_row(check, "algorithm", f"algo={algo} env={env_name}", overrides, a_first, a_last,
                  60)
    shutil.rmtree(check.tmp, ignore_errors=True)
    failed = [r for r in check.rows if not str(r["status"]).startswith("ok")
              and r["check"] != "sb3"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
