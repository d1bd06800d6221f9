"""Env steps/s of MPE simple_spread: mpe2's envs stepped in turn against env.backend=batched.

    python scripts/bench_mpe_batched.py                      # CPU, 1 thread, E = 1 .. 8192
    python scripts/bench_mpe_batched.py --device cuda --envs 1 1024 8192 65536

Random actions in [-1, 1], autoresets included; the rate is env steps (E per vector step) per
second of wall time over ``--seconds`` per cell, after one warm-up step. The PettingZoo backend is
timed only up to ``--max-pettingzoo`` envs (it is linear in E). Prints one markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rlzoo.envs.mpe_batched import BatchedMPE
from rlzoo.envs.pettingzoo import make_multi_agent_env

KW = {"max_cycles": 25, "local_ratio": 0.5}


def rate(env, E: int, seconds: float, tensors: bool, device: str) -> float:
    env.reset()
    rng = np.random.default_rng(0)
    if tensors:
        g = torch.Generator(device=device).manual_seed(0)
        act = lambda: torch.rand(E, 3, 5, generator=g, device=device) * 2 - 1  # noqa: E731
        step = lambda: env.step_tensors(act())  # noqa: E731
    else:
        step = lambda: env.step(rng.uniform(-1, 1, (E, 3, 5)).astype(np.float32))  # noqa: E731
    step()
    if device == "cuda":
        torch.cuda.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    if device == "cuda":
        torch.cuda.synchronize()
    return n * E / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, nargs="+", default=[1, 64, 1024, 8192])
    p.add_argument("--device", default="cpu")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--max-pettingzoo", type=int, default=64)
    a = p.parse_args()
    torch.set_num_threads(1)
    print("| envs | mpe2 (pettingzoo), steps/s | batched, numpy out | batched, tensors |")
    print("|---:|---:|---:|---:|")
    for E in a.envs:
        pz = "-"
        if E <= a.max_pettingzoo:
            env = make_multi_agent_env("mpe", "simple_spread_v3", E, 0, **KW)
            pz = f"{rate(env, E, a.seconds, False, 'cpu'):,.0f}"
        b = BatchedMPE("simple_spread_v3", E, 0, device=a.device, **KW)
        numpy_out = rate(b, E, a.seconds, False, a.device)
        b = BatchedMPE("simple_spread_v3", E, 0, device=a.device, **KW)
        tens = rate(b, E, a.seconds, True, a.device)
        print(f"| {E:,} | {pz} | {numpy_out:,.0f} | {tens:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
