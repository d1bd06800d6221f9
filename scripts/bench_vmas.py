"""Env steps/s of a VMAS scenario: VMAS's own ``step`` against rlzoo's adapter (env=vmas/...).

    OMP_NUM_THREADS=1 python scripts/bench_vmas.py                       # navigation, CPU
    python scripts/bench_vmas.py --scenario balance --envs 64 1024 8192 --device cuda

Uniform random actions in the scenario's bounds. ``vmas``: ``vmas.make_env(...).step`` with
tensors (no autoreset: VMAS leaves that to the caller, so its worlds run on past ``max_steps``).
``rlzoo step``: ``VmasVecEnv.step`` with numpy in and out as the trainer calls it (actions mapped
from [-1, 1], padding, the state, truncation at 100 steps and autoresets included).
``rlzoo tensors``: ``VmasVecEnv.step_tensors``. The two are timed interleaved, ``--rounds``
rounds of ``--seconds`` each per cell, and the median rate is printed (env steps = E per vector
step). Prints one markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch


def timed(step: Callable[[], None], seconds: float, cuda: bool) -> float:
    """Vector steps per second of ``step`` over ``seconds`` (after one untimed call)."""
    step()
    if cuda:
        torch.cuda.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    if cuda:
        torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def cells(scenario: str, E: int, device: str) -> dict[str, Callable[[], None]]:
    """The three ways of stepping ``E`` worlds of ``scenario``."""
    import vmas

    from rlzoo.envs.vmas_batched import VmasVecEnv

    raw = vmas.make_env(scenario, num_envs=E, device=device, continuous_actions=True, seed=0)
    raw.reset()
    ours = VmasVecEnv(scenario, E, 0, max_steps=100, device=device)
    ours.reset()
    rng = np.random.default_rng(0)
    g = torch.Generator(device=device).manual_seed(0)
    low = torch.as_tensor(ours.action_low, dtype=torch.float32, device=device)
    high = torch.as_tensor(ours.action_high, dtype=torch.float32, device=device)

    def raw_step() -> None:
        a = low + torch.rand(E, *ours.act_shape, generator=g, device=device) * (high - low)
        raw.step([a[:, i, :d] for i, d in enumerate(ours.act_dims)])

    def np_step() -> None:
        ours.step(rng.uniform(-1, 1, (E, *ours.act_shape)).astype(np.float32))

    def tensor_step() -> None:
        ours.step_tensors(torch.rand(E, *ours.act_shape, generator=g, device=device) * 2 - 1)

    return {"vmas": raw_step, "rlzoo step": np_step, "rlzoo tensors": tensor_step}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="navigation")
    p.add_argument("--envs", type=int, nargs="+", default=[64, 1024, 8192])
    p.add_argument("--device", default="cpu")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print(f"{args.scenario} on {args.device}, torch threads {torch.get_num_threads()}, median of "
          f"{args.rounds} interleaved rounds of {args.seconds:g} s; env steps/s\n")
    print("| E | vmas | rlzoo step | rlzoo tensors |\n|---|---|---|---|")
    for E in args.envs:
        ways = cells(args.scenario, E, args.device)
        rates: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(args.rounds):
            for name, step in ways.items():
                rates[name].append(E * timed(step, args.seconds, args.device != "cpu"))
        row = " | ".join(f"{statistics.median(rates[k]):,.0f}" for k in ways)
        print(f"| {E:,} | {row} |", flush=True)


if __name__ == "__main__":
    main()
