"""How long the README's first command takes to its end on this machine: SAC on Humanoid-v5 at
its defaults (1M env steps), measured as learning speed x steps.

    python scripts/bench_humanoid_sac.py [--steps 2000] [--repeats 3] [--json OUT]

Each round runs, through the real CLI, ``python -m rlzoo.train algo=sac env=Humanoid`` at its
defaults (SAC's 5,000 random steps, batch 256, one update per env step, ``torch_threads=auto``:
1 thread or all cores, whichever trains faster under the load; ``OMP_NUM_THREADS`` is removed
from its environment, as a user's shell would not set it) for ``--steps`` learning steps after
the warm-up, with no evaluation or checkpoint on the way; then the same on Hopper-v5 as a gauge
of the machine's load (the README's table gives SAC on Hopper about 142 env steps/s on 2 quiet
cores). Rounds alternate the two, so load from other tenants falls on both alike. Each run's
learning speed is its summary.json's ``learning_steps_per_sec`` (wall time, the learning phase
only), with the thread count ``auto`` used and the run's CPU time.

Each round also runs Humanoid's warm-up alone (``total_steps=5000``): the full run's CPU time less
it is the learning steps' CPU time, so ``steps / that`` is the speed of one busy core whatever the
load (``auto`` takes 1 thread when the other core is busy; on 2 quiet cores it may take both, so
a quiet machine is at least this fast). The full run's time is ``(1,000,000 - 5,000) / speed``
plus the warm-up and the evaluations (100 of 10 episodes at the default ``eval.every=10000``),
which this does not time. On a shared machine say what else ran beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FULL = 1_000_000   # Humanoid's default total_steps (rlzoo/conf/env/Humanoid.yaml)
WARMUP = 5_000     # SAC's default algo.learning_starts


def run(env: str, steps: int) -> dict[str, float]:
    """One CLI run of SAC's defaults on ``env`` for ``steps`` learning steps (0: the warm-up
    alone): its learning speed (env steps/s of wall time; 0 without learning), the threads its
    updates ran on and the CPU seconds of the whole process."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "rlzoo.train", "algo=sac", f"env={env}",
               f"total_steps={WARMUP + steps}", "eval.every=0", "eval.episodes=1",
               "checkpoint.every=0", "log.progress=false", f"hydra.run.dir={tmp}/run"]
        child_env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=child_env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"SAC on {env} failed: {proc.stderr[-500:]}")
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    return {"steps_per_s": float(summary.get("learning_steps_per_sec") or 0.0),
            "threads": float(max(summary["torch_threads"]["updates_on"] or [0])),
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="timed learning steps a run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of Humanoid and Hopper")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    kinds = {"Humanoid": ("Humanoid", args.steps), "Humanoid warm-up": ("Humanoid", 0),
             "Hopper": ("Hopper", args.steps)}
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for r in range(args.repeats):
        for kind, (env, steps) in kinds.items():
            runs[kind].append(run(env, steps))
            last = runs[kind][-1]
            print(f"round {r + 1}: SAC on {kind:16s} {last['steps_per_s']:6.1f} learning steps/s"
                  f" (updates on {last['threads']:.0f} thread(s)); {last['cpu_s']:5.1f} s CPU",
                  flush=True)
    # CPU per learning step: a round's full run less its warm-up-only run (start-up, imports,
    # the 5,000 random steps), over the learning steps
    cpu = [args.steps / (full["cpu_s"] - warm["cpu_s"])
           for full, warm in zip(runs["Humanoid"], runs["Humanoid warm-up"])]
    print(f"\n{args.steps} learning steps after {WARMUP} random ones, torch_threads=auto, "
          f"{args.repeats} interleaved rounds; load average at the end: "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for kind in ("Humanoid", "Hopper"):
        rates = [x["steps_per_s"] for x in runs[kind]]
        print(f"SAC on {kind:8s} wall steps/s: median {statistics.median(rates):.1f} (range "
              f"{min(rates):.1f}-{max(rates):.1f})")
    print(f"SAC on Humanoid, learning steps per CPU second (one thread busy): median "
          f"{statistics.median(cpu):.1f} (range {min(cpu):.1f}-{max(cpu):.1f})")
    for name, rates in (("wall", [x["steps_per_s"] for x in runs["Humanoid"]]), ("CPU", cpu)):
        hours = [(FULL - WARMUP) / rate / 3600 for rate in sorted(rates)]
        print(f"Humanoid's 1M steps at the {name} speeds: {statistics.median(hours):.1f} h "
              f"(median; {hours[-1]:.1f}-{hours[0]:.1f} h), plus the warm-up and evaluations")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "runs": runs, "cpu_steps_per_s": cpu}, indent=1) + "\n")


if __name__ == "__main__":
    main()
