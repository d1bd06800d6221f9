"""Cost per env step of whole algorithms, each with its own defaults, interleaved on this machine.

    python scripts/bench_algo_cost.py [--algos sac simbav2] [--env Hopper] [--warmup 1000]
                                      [--steps 2000] [--repeats 3] [--threads 1] [--json OUT]
    python scripts/bench_algo_cost.py --updates 20 [--algos sac simbav2] [--env Hopper] ...

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

With ``--updates N`` it times, instead, N calls of each algorithm's ``update`` in this process
(built from its config for the env's sizes, on synthetic batches of its batch size, after 2
untimed updates), interleaved the same way, and reports both wall time and this process's CPU
time per update. On a busy shared machine the CPU time is the steadier measure; at one update per
env step it is the cost of an env step less the env's own (well under 1 ms on MuJoCo).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def build(algo: str, env: str) -> tuple[Any, list[Any]]:
    """``algo=<algo> env=<env>`` built on the CPU with its own defaults, and 4 synthetic
    batches of its batch size (normalizers, if the algorithm has them, are attached as in a
    run)."""
    import gymnasium as gym
    import torch
    from hydra import compose, initialize_config_module

    from rlzoo.algos.base import EnvSpec
    from rlzoo.buffers.batch import Batch
    from rlzoo.config.build import build_algorithm

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"algo={algo}", f"env={env}"])
    probe = gym.make(cfg.env.id)
    spec = EnvSpec(probe.observation_space.shape[0], probe.action_space.shape[0])
    model = build_algorithm(cfg, spec, torch.device("cpu"))
    b, a = int(cfg.algo.batch_size), spec.act_dim * model.action_horizon
    batches = [Batch(obs=torch.randn(b, spec.obs_dim), action=torch.rand(b, a) * 2 - 1,
                     reward=torch.randn(b), next_obs=torch.randn(b, spec.obs_dim),
                     discount=torch.full((b,), 0.99), terminated=torch.zeros(b))
               for _ in range(4)]
    return model, batches


def time_updates(model: Any, batches: list[Any], updates: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per ``update`` call, over ``updates`` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(updates):
        model.update(batches[i % len(batches)])
    return (1000 * (time.perf_counter() - wall) / updates,
            1000 * (time.process_time() - cpu) / updates)


def main_inprocess(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))  # this checkout's rlzoo, as the CLI runs get it (cwd=REPO)
    import torch

    torch.set_num_threads(args.threads)
    models = {algo: build(algo, args.env) for algo in args.algos}
    for model, batches in models.values():
        time_updates(model, batches, 2)  # untimed: optimizer state, caches
    runs: dict[str, list[tuple[float, float]]] = {a: [] for a in args.algos}
    for r in range(args.repeats):
        for algo, (model, batches) in models.items():
            runs[algo].append(time_updates(model, batches, args.updates))
            wall, cpu = runs[algo][-1]
            print(f"round {r + 1}: {algo:10s} {wall:8.2f} ms wall, {cpu:8.2f} ms CPU per update",
                  flush=True)
    base = args.algos[0]
    print(f"\n{args.env}, {args.updates} updates per round, {args.threads} thread(s), "
          f"{args.repeats} interleaved rounds")
    for algo in args.algos:
        for k, kind in enumerate(("wall", "CPU")):
            ms = [x[k] for x in runs[algo]]
            ratios = [x[k] / y[k] for x, y in zip(runs[algo], runs[base])]
            print(f"{algo:10s} {kind:4s} ms/update {min(ms):.2f}-{max(ms):.2f}; x{base} per "
                  f"round: {', '.join(f'{x:.1f}' for x in ratios)}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "wall_cpu_ms_per_update": runs}, indent=1))


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
    parser.add_argument("--updates", type=int, default=0,
                        help="time N in-process updates per round instead of CLI runs")
    args = parser.parse_args()
    if args.updates:
        return main_inprocess(args)
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
