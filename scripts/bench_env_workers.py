"""env_workers: env steps/s of ``num_envs`` envs stepped in W worker processes against the same
envs stepped in turn in one process, with random actions (issue 41 item 5).

Rounds alternate (in turn, workers, in turn, ...) so that load from other jobs falls on both
alike; the table gives each round's rate and the median ratio.

    OMP_NUM_THREADS=1 python scripts/bench_env_workers.py --env Humanoid-v5 --envs 8 --workers 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.envs.workers import WorkerVecEnv


def rate(env: object, steps: int, rng: np.random.Generator) -> float:
    """Vector steps x envs per second over ``steps`` vector steps of uniform random actions."""
    E, shape = env.num_envs, env.act_shape  # type: ignore[attr-defined]
    actions = rng.uniform(-1, 1, (steps, E, *shape)).astype(np.float32)
    start = time.perf_counter()
    for action in actions:
        env.step(action)  # type: ignore[attr-defined]
    return steps * E / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Humanoid-v5")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=500, help="vector steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    def make(n: int, seed: int) -> SingleAgentVecEnv:
        return SingleAgentVecEnv(args.env, n, seed)

    in_turn = make(args.envs, 0)
    workers = WorkerVecEnv(make, args.envs, 0, args.workers)
    in_turn.reset(), workers.reset()
    rng = np.random.default_rng(0)
    rate(in_turn, 50, rng), rate(workers, 50, rng)  # warm up
    print(f"{args.env}, {args.envs} envs, {args.workers} workers, {os.cpu_count()} CPUs, "
          f"{args.steps} vector steps per round")
    print("| round | in turn (steps/s) | workers (steps/s) | ratio |\n|---|---|---|---|")
    ratios = []
    for r in range(args.rounds):
        a = rate(in_turn, args.steps, rng)
        b = rate(workers, args.steps, rng)
        ratios.append(b / a)
        print(f"| {r + 1} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f}")
    workers.close()
    in_turn.close()


if __name__ == "__main__":
    main()
