"""Throughput of the training loop of two checkouts of rlzoo, side by side, interleaved.

    python scripts/bench_loop.py OTHER_CHECKOUT [--repeats 3] [--steps 4000]

Runs the same short jobs with this checkout's and OTHER_CHECKOUT's ``python -m rlzoo.train``
(each with its own ``PYTHONPATH``), alternating A, B, A, B, ... ``--repeats`` times, and reports
each side's best steps/s (``summary.json``'s ``steps_per_sec``: env steps over the wall time of
the whole training loop) and the ratio this/other. The jobs isolate what a loop change can cost:

* ``sac-warmup``: SAC on Pendulum with ``learning_starts = total_steps`` (random actions, every
  step stored, no update): the loop, the env adapter and the replay's ``add`` only;
* ``sac``: SAC on Pendulum with updates (UTD 1, 64x64 nets): the whole off-policy loop;
* ``maddpg-warmup``: MADDPG on MPE simple_spread, random actions only: the multi-agent path;
* ``coma``: COMA on MPE simple_spread (on-policy rollouts, 64x64 nets).

Every job runs with ``torch_threads=1`` and ``OMP_NUM_THREADS=1`` and no evaluation but the final
one (2 episodes). Interference only ever slows a run down, so the best of the repeats is the
estimate; run it once on an idle machine and once beside another job.
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
COMMON = ["eval.every=0", "eval.episodes=2", "checkpoint.every=0", "log.progress=false",
          "torch_threads=1", "device=cpu"]


def jobs(steps: int) -> dict[str, list[str]]:
    """The benchmark jobs: name -> overrides."""
    small = ["algo.actor.hidden=[64,64]", "critic.hidden=[64,64]"]
    return {
        "sac-warmup": ["algo=sac", "env=Pendulum", f"total_steps={steps}",
                       f"algo.learning_starts={steps}", *small],
        "sac": ["algo=sac", "env=Pendulum", f"total_steps={steps // 4}",
                "algo.learning_starts=200", "algo.batch_size=64", *small],
        "maddpg-warmup": ["algo=maddpg", "env=mpe/simple_spread", f"total_steps={steps}",
                          f"algo.learning_starts={steps}", *small],
        "coma": ["algo=coma", "env=mpe/simple_spread", f"total_steps={steps // 2}",
                 "algo.rollout_steps=200", "algo.critic_steps=2", *small],
    }


def run_once(checkout: Path, overrides: list[str], run_dir: Path) -> float:
    """Steps/s of one CLI run of ``checkout``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        [sys.executable, "-m", "rlzoo.train", *overrides, *COMMON, f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, cwd=checkout, env=env, timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(overrides)} failed:\n{proc.stderr[-2000:]}")
    return float(json.loads((run_dir / "summary.json").read_text())["steps_per_sec"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="another checkout of rlzoo (e.g. a worktree)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--only", nargs="*", default=None, help="job names to run")
    args = parser.parse_args()
    sides = {"this": REPO, "other": args.other.resolve()}
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in jobs(args.steps).items():
            if args.only and name not in args.only:
                continue
            results[name] = {side: [] for side in sides}
            for r in range(args.repeats):
                for side, checkout in sides.items():
                    sps = run_once(checkout, overrides, Path(tmp) / f"{name}-{side}-{r}")
                    results[name][side].append(sps)
            best = {side: max(v) for side, v in results[name].items()}
            print(f"{name:15s} this {best['this']:8.1f} steps/s   other {best['other']:8.1f} "
                  f"steps/s   this/other {best['this'] / best['other']:.3f}   (all: "
                  f"{json.dumps({k: [round(x, 1) for x in v] for k, v in results[name].items()})})",
                  flush=True)


if __name__ == "__main__":
    main()
