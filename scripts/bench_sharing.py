"""Do concurrent rlzoo runs share a machine well? Throughput of one run alone against two (or
``--jobs``) running at once, for thread counts and OpenMP wait policies, interleaved.

    python scripts/bench_sharing.py --env Hopper --algo sac --steps 600 --warmup 1000 --repeats 2

Each arrangement launches the real CLI (``python -m rlzoo.train``) in subprocesses and reads each
run's training rate from its TensorBoard ``perf/sps`` events after the warm-up (the rate of every
``log.every`` window; evaluation and checkpoint are excluded). "together" sums the concurrent
runs' rates; the ratio is together / alone with the same settings, and also against the best
single run of any setting. Environment variables of an arrangement apply to its processes only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

# name -> (torch_threads override or None for rlzoo's default, extra environment)
SETTINGS = {
    "default": (None, {}),
    "threads=1": (1, {}),
    "threads=2": (2, {}),
    "threads=2,passive": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "threads=2,spin=30k": (2, {"GOMP_SPINCOUNT": "30000"}),
    "threads=2,spin=10k": (2, {"GOMP_SPINCOUNT": "10000"}),
    "threads=2,spin=1k": (2, {"GOMP_SPINCOUNT": "1000"}),
}


def launch(args: argparse.Namespace, run_dir: Path, threads: int | None,
           extra_env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "rlzoo.train", f"algo={args.algo}", f"env={args.env}",
           f"total_steps={args.warmup + args.steps}", f"algo.learning_starts={args.warmup}",
           "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.every=100",
           "log.progress=false", f"seeds={args.seeds}", f"hydra.run.dir={run_dir}"]
    if threads is not None:
        cmd.append(f"torch_threads={threads}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    return subprocess.Popen(cmd, env={**env, **extra_env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def rate(run_dir: Path, warmup: int) -> float:
    """Mean of ``perf/sps`` over the windows that start after the warm-up (steps/s)."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    values = [e.value for e in acc.Scalars("perf/sps") if e.step > warmup + 100]
    if not values:
        raise RuntimeError(f"no perf/sps after the warm-up in {run_dir}")
    return sum(values) / len(values)


def measure(args: argparse.Namespace, name: str, jobs: int, root: Path) -> list[float]:
    threads, extra_env = SETTINGS[name]
    tag = name.replace("=", "").replace(",", "-")
    dirs = [root / f"{tag}-{jobs}-{i}-{os.urandom(3).hex()}" for i in range(jobs)]
    procs = [launch(args, d, threads, extra_env) for d in dirs]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            sys.exit(f"a run failed:\n{err[-2000:]}")
    return [rate(d, args.warmup) for d in dirs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Hopper")
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--seeds", type=int, default=1, help="seeds=K of every run")
    parser.add_argument("--steps", type=int, default=600, help="timed env steps per run")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once in 'together'")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    raw: dict[str, dict[str, list]] = {n: {"alone": [], "together": []} for n in args.settings}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name in args.settings:  # interleaved: alone and together of every setting
                raw[name]["alone"].append(measure(args, name, 1, Path(tmp))[0])
                raw[name]["together"].append(sum(measure(args, name, args.jobs, Path(tmp))))
                print(f"repeat {repeat}: {name}: alone {raw[name]['alone'][-1]:.1f}, "
                      f"{args.jobs} together {raw[name]['together'][-1]:.1f} steps/s",
                      file=sys.stderr, flush=True)
    best_alone = max(max(r["alone"]) for r in raw.values())
    print(f"\n{args.algo} on {args.env}, seeds={args.seeds} per run, {args.steps} timed steps "
          f"after {args.warmup} warm-up, best of {args.repeats}; cores: {os.cpu_count()}\n")
    print(f"| setting | one run alone (steps/s) | {args.jobs} runs together (sum) | "
          "together / alone | together / best alone of any setting |")
    print("|---|---:|---:|---:|---:|")
    for name, r in raw.items():
        alone, together = max(r["alone"]), max(r["together"])
        print(f"| {name} | {alone:.1f} | {together:.1f} | {together / alone:.2f} | "
              f"{together / best_alone:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)},
                                         "raw": raw}, indent=2))


if __name__ == "__main__":
    main()
