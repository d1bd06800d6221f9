"""Checkpoint size and the peak memory of writing and resuming one, for a checkout of rlzoo.

    python scripts/bench_checkpoint.py [--checkout DIR] [--case humanoid] [--case ...]

Each case is two ``python -m rlzoo.train`` processes with ``OMP_NUM_THREADS=1``,
``torch_threads=1`` and ``device=cpu``, running DIR's rlzoo (default: this checkout):

1. a run of the case's steps with one checkpoint, at the end (``checkpoint.every=0``);
2. ``resume=`` of that run with the same budget: it loads the checkpoint and stops (already
   finished), so the restore is all it does.

In both, ``Trainer.save`` / ``Trainer.restore`` are wrapped to read the process's resident set
(``VmRSS`` of ``/proc/self/status``) before the call and its peak during the call (``VmHWM``,
reset by writing 5 to ``/proc/self/clear_refs`` just before: Linux only). Printed per case: the
checkpoint file's size, the process's RSS before the call (the buffer is allocated by then), the
peak during it and the difference, and the process's peak over its whole life. Sizes in MB (1e6
bytes). Cases:

* ``humanoid``: SAC on Humanoid-v5 (obs 348, actions 17), 3,000 steps, default 1M-step replay;
* ``maddpg3``: a MADDPG 3-seed group on MPE simple_spread, 1,500 steps, default replay;
* ``wrapped``: SAC on Humanoid-v5, 3,000 steps, ``algo.buffer_size=1000`` (the ring is full: a
  checkpoint then holds the whole capacity, which is the data);
* ``full``: SAC on Humanoid-v5, 30,000 steps into a 30,000-step buffer (44 MB of replay): what
  writing and loading a full buffer costs beyond the buffer itself;
* ``buffer1m``: no run, the checkpoint functions alone on a full 1M-step Humanoid-shaped buffer
  (1.47 GB): ``state_dict``, the NaN/inf check and ``save_checkpoint`` as ``Trainer.save`` does
  them, then in a fresh process a new buffer, ``load_latest_valid`` and ``load_state_dict`` as
  ``Trainer.restore`` does (random data; needs about 6 GB free with the code before 2026-12-02).

All steps are warm-up steps (uniform random actions, no update) so a case takes seconds to a
minute; the buffer's contents, not learning, decide a checkpoint's size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = ["eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
          "torch_threads=1", "device=cpu"]
CASES = {
    "humanoid": ["algo=sac", "env=Humanoid", "total_steps=3000"],
    "maddpg3": ["algo=maddpg", "env=mpe/simple_spread", "seeds=3", "total_steps=1500"],
    "wrapped": ["algo=sac", "env=Humanoid", "total_steps=3000", "algo.buffer_size=1000"],
    "full": ["algo=sac", "env=Humanoid", "total_steps=30000", "algo.buffer_size=30000",
             "algo.learning_starts=30000"],
}

# Runs inside the measured process: wraps Trainer.save / Trainer.restore, then runs the CLI.
CHILD = r"""
import json, runpy, sys
import rlzoo.run.loop as loop

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)

record = {"life_peak": 0}

def measured(name, fn):
    def wrapper(self, *args, **kwargs):
        record["life_peak"] = max(record["life_peak"], status("VmHWM"))
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak restarts from the current RSS
        before = status("VmRSS")
        try:
            return fn(self, *args, **kwargs)
        finally:
            record[name] = {"rss_before": before, "peak": status("VmHWM")}
    return wrapper

loop.Trainer.save = measured("save", loop.Trainer.save)
loop.Trainer.restore = measured("restore", loop.Trainer.restore)
sys.argv = ["rlzoo.train", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("rlzoo.train", run_name="__main__", alter_sys=True)
except SystemExit as stop:
    code = stop.code
record["life_peak"] = max(record["life_peak"], status("VmHWM"))
record["exit"] = code
print("BENCH " + json.dumps(record), flush=True)
"""


# The buffer1m case: the same measurements around the checkpoint functions themselves.
BUFFER_CHILD = r"""
import json, sys
from pathlib import Path
import numpy as np
from rlzoo.buffers import ReplayBuffer
from rlzoo.store.nonfinite import nonfinite_entries
from rlzoo.store.checkpoint import (checkpoint_path, load_latest_valid,
                                  save_checkpoint)

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)

def reset():
    record["life_peak"] = max(record.get("life_peak", 0), status("VmHWM"))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status("VmRSS")

directory, phase = Path(sys.argv[1]), sys.argv[2]
T, O, A = 1_000_000, 348, 17
record = {}
try:  # one buffer on a leading axis (storage [K, T, E, ...], K = 1) from 2026-12-08 on
    buffer = ReplayBuffer(T, (O,), (A,), 1, generator_seeds=(0,))
    lead = lambda x: x[None]  # noqa: E731
except TypeError:  # code before: one buffer, no leading axis
    buffer = ReplayBuffer(T, (O,), (A,), 1)
    lead = lambda x: x  # noqa: E731
if phase == "save":
    rng = np.random.default_rng(0)
    pool = rng.standard_normal((1024, 1, O)).astype(np.float32)
    actions = rng.uniform(-1, 1, (1024, 1, A)).astype(np.float32)
    no = np.zeros(1, bool)
    for t in range(T + 10):  # wraps: every row holds data
        buffer.add(*(lead(x) for x in (pool[t % 1024], actions[t % 1024], pool[t % 1024, :, 0],
                                       pool[(t + 1) % 1024], no, no, no)))
    before = reset()
    state = {"format": 1, "buffer": buffer.state_dict()}
    assert not nonfinite_entries(state)
    save_checkpoint(checkpoint_path(directory, T), state)
    record["save"] = {"rss_before": before, "peak": status("VmHWM")}
else:
    before = reset()
    path, state = load_latest_valid(directory)
    try:  # as Trainer.restore did from 2026-12-02: the loaded tensors are the buffer's to keep
        buffer.load_state_dict(state["buffer"], take=True)
    except TypeError:  # code before 2026-12-02, and from 2026-12-08 on: no take (copied)
        buffer.load_state_dict(state["buffer"])
    del state
    record["restore"] = {"rss_before": before, "peak": status("VmHWM")}
record["life_peak"] = max(record["life_peak"], status("VmHWM"))
print("BENCH " + json.dumps(record), flush=True)
"""


def measure_buffer(checkout: Path, directory: Path, phase: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}
    proc = subprocess.run([sys.executable, "-c", BUFFER_CHILD, str(directory), phase],
                          capture_output=True, text=True, cwd=checkout, env=env, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("BENCH ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"buffer1m {phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("BENCH "):])


def measure(checkout: Path, args: list[str]) -> dict:
    """One measured CLI process: its ``save`` / ``restore`` records and life peak (bytes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True,
                          text=True, cwd=checkout, env=env, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("BENCH ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    record = json.loads(lines[-1][len("BENCH "):])
    if record["exit"] not in (0, None):
        raise SystemExit(f"{' '.join(args)} exited {record['exit']}:\n{proc.stderr[-3000:]}")
    return record


def run_case(checkout: Path, name: str, root: Path) -> dict:
    """Train, then resume, one case; sizes and RSS figures in bytes."""
    run_dir = root / name
    if name == "buffer1m":
        save = measure_buffer(checkout, run_dir, "save")
        restore = measure_buffer(checkout, run_dir, "restore")
        (path,) = run_dir.glob("step_*.pt")
        return {"checkpoint_bytes": path.stat().st_size, "save": save["save"],
                "train_life_peak": save["life_peak"], "restore": restore["restore"],
                "resume_life_peak": restore["life_peak"]}
    train = measure(checkout, [*CASES[name], *COMMON, f"hydra.run.dir={run_dir}"])
    steps = next(a for a in CASES[name] if a.startswith("total_steps="))
    resume = measure(checkout, [f"resume={run_dir}", steps])
    files = sorted(run_dir.glob("checkpoints/step_*.pt"))
    return {"checkpoint_bytes": files[-1].stat().st_size, "save": train["save"],
            "train_life_peak": train["life_peak"], "restore": resume["restore"],
            "resume_life_peak": resume["life_peak"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=REPO, help="rlzoo checkout to measure")
    parser.add_argument("--case", action="append", choices=sorted([*CASES, "buffer1m"]),
                        help="case to run (repeatable; default: all)")
    opts = parser.parse_args()
    mb = 1e6
    print(f"checkout {opts.checkout.resolve()}")
    print(f"{'case':10} {'file MB':>8} | {'save: RSS before':>16} {'peak':>7} {'+':>6} "
          f"{'life':>7} | {'restore: RSS before':>19} {'peak':>7} {'+':>6} {'life':>7}")
    with tempfile.TemporaryDirectory(prefix="bench_checkpoint_") as tmp:
        for name in opts.case or [*CASES, "buffer1m"]:
            r = run_case(opts.checkout.resolve(), name, Path(tmp))
            s, lo = r["save"], r["restore"]
            print(f"{name:10} {r['checkpoint_bytes'] / mb:8.1f} | "
                  f"{s['rss_before'] / mb:16.0f} {s['peak'] / mb:7.0f} "
                  f"{(s['peak'] - s['rss_before']) / mb:6.0f} {r['train_life_peak'] / mb:7.0f} | "
                  f"{lo['rss_before'] / mb:19.0f} {lo['peak'] / mb:7.0f} "
                  f"{(lo['peak'] - lo['rss_before']) / mb:6.0f} {r['resume_life_peak'] / mb:7.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
