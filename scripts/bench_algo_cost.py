"""Cost per env step of whole algorithms, each with its own defaults, interleaved on this machine.

    python scripts/bench_algo_cost.py [--algos sac simbav2] [--env Hopper] [--warmup 1000]
                                      [--steps 2000] [--repeats 3] [--threads 1] [--json OUT]

An entry of ``--algos`` may carry overrides after the algorithm's name, in one quoted word:
``--algos sac stac "sac critic=categorical"``.

Unlike ``bench_throughput.py`` (one network size and learning rate for every algorithm), each
algorithm runs here as a user gets it (``algo=<name>``: its own networks, critic, normalizers and
updates per step), through the real CLI, at one update per env step where that is its default.
Only the training phase is timed: the TensorBoard wall times of the scalar logs at the end of the
random warm-up and at the end of the run (no evaluation or checkpoint in between). The algorithms
run in turn (A, B, A, B, ...) ``--repeats`` times, so load from other tenants of a shared machine
falls on all of them alike; the report gives every run, each algorithm's range, and the ratio of
each to the first algorithm within each round, with its range over rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli_ms_per_step(algo: str, env: str, warmup: int, steps: int, seed: int,
                    threads: int) -> float:
    """Milliseconds per env step of ``algo=<algo>`` over the training phase (after warm-up);
    ``algo`` is a name, optionally followed by overrides (``"sac critic=categorical"``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        name, *overrides = algo.split()
        cmd = [sys.executable, "-m", "rlzoo.train", f"algo={name}", *overrides, f"env={env}",
               f"total_steps={warmup + steps}", f"algo.learning_starts={warmup}",
               f"log.every={math.gcd(warmup, steps)}", f"seed={seed}", "eval.every=0",
               "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
               f"torch_threads={threads}", "device=cpu", f"hydra.run.dir={run_dir}"]
        env_vars = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env_vars)
        if proc.returncode != 0:
            raise RuntimeError(f"{algo} on {env} failed: {proc.stderr[-500:]}")
        times = {}
        for events in run_dir.glob("events.out.tfevents.*"):
            acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
            acc.Reload()
            if "perf/sps" in acc.Tags()["scalars"]:
                times.update({e.step: e.wall_time for e in acc.Scalars("perf/sps")})
        return 1000.0 * (times[warmup + steps] - times[warmup]) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=["sac", "simbav2"])
    parser.add_argument("--env", default="Hopper")
    parser.add_argument("--warmup", type=int, default=1000, help="random warm-up env steps")
    parser.add_argument("--steps", type=int, default=2000, help="timed training env steps")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of all algorithms")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {a: [] for a in args.algos}
    for r in range(args.repeats):
        for algo in args.algos:
            ms = cli_ms_per_step(algo, args.env, args.warmup, args.steps, args.seed,
                                 args.threads)
            runs[algo].append(ms)
            print(f"round {r + 1}: {algo:22s} {ms:8.2f} ms per env step", flush=True)
    base = args.algos[0]
    print(f"\n{args.env}, {args.steps} training steps after {args.warmup} random ones, "
          f"{args.threads} thread(s), {args.repeats} interleaved rounds")
    for algo in args.algos:
        ms = runs[algo]
        ratios = [a / b for a, b in zip(ms, runs[base])]
        print(f"{algo:22s} ms/step min {min(ms):.2f} max {max(ms):.2f}; x{base} per round: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (range {min(ratios):.2f}-"
              f"{max(ratios):.2f})")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "ms_per_step": runs}, indent=1))


if __name__ == "__main__":
    main()
