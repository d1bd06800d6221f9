"""A CPU seed group run in turn (each seed its single run's kernels) against the same group
vmapped (one batched kernel for all seeds), side by side in one process.

    python scripts/seed_group_speed.py --algos sac td3 --env Hopper --seeds 5 10 \\
        [--hidden 256 256] [--batch 256] [--windows 7] [--updates 20] [--acts 200] \\
        [--threads 1] [--out table.md]

For each algorithm and K, two groups of K seeds are built from the same K algorithms
(``rlzoo.config.build.build_algorithm`` under seeds 0..K-1, then ``stack_seeds``): one given its
seeds' generators (``stack_seeds(..., generators)``: what the loop does for a CPU group, so
``compute`` runs each seed in turn and Adam steps each seed's slice as its own tensor), one
without (``compute`` is
one ``torch.vmap`` over all seeds, ``randomness="different"``: what a CUDA group does, and the
cost of a CPU group before 2026-12-06 less its per-seed draws, so a lower bound of that cost).
Windows alternate between the two (``--updates`` updates on a synthetic ``[K, 256, ...]`` batch,
then ``--acts`` act calls on ``[K, 1, obs]``, as the loop's one act call per env step); the
table gives the median over ``--windows`` of each window pair's time ratio (in turn / vmapped;
below 1: in turn is faster) and the in-turn times. The batch and act inputs are the env's sizes
(``--env``); ``--hidden`` sets the actor's and critic's hidden sizes (default: the algorithm's),
``--batch`` the batch (256).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import gymnasium as gym
import torch
from hydra import compose, initialize_config_module

from rlzoo.algos.base import EnvSpec
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.buffers.batch import Batch
from rlzoo.config.build import build_algorithm


def group(cfg, spec: EnvSpec, seeds: int, in_turn: bool):  # noqa: ANN001, ANN201
    members = []
    for k in range(seeds):
        torch.manual_seed(k)
        members.append(build_algorithm(cfg, spec, torch.device("cpu")))
    generators = [torch.Generator().manual_seed(100 + k) for k in range(seeds)]
    return stack_seeds(members, generators if in_turn else None)


def batch(spec: EnvSpec, seeds: int, size: int) -> Batch:
    def r(*shape: int) -> torch.Tensor:
        return torch.randn(seeds, *shape)

    return Batch(obs=r(size, spec.obs_dim), action=r(size, spec.act_dim).clamp(-1, 1),
                 reward=r(size), next_obs=r(size, spec.obs_dim),
                 discount=torch.full((seeds, size), 0.99), terminated=torch.zeros(seeds, size))


def timed(fn, n: int) -> float:  # noqa: ANN001
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def measure(algo_name: str, env: str, seeds: int, args: argparse.Namespace) -> dict[str, float]:
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        sizes = [] if args.hidden is None else [
            f"{key}=[{','.join(map(str, args.hidden))}]" for key in ("algo.actor.hidden",
                                                                     "critic.hidden")]
        cfg = compose("config", overrides=[f"algo={algo_name}", f"env={env}", *sizes])
    probe = gym.make(cfg.env.id)
    spec = EnvSpec(probe.observation_space.shape[0], probe.action_space.shape[0])
    turn, vmapped = group(cfg, spec, seeds, True), group(cfg, spec, seeds, False)
    data, obs = batch(spec, seeds, args.batch), torch.randn(seeds, 1, spec.obs_dim)
    jobs = {name: (lambda g=g: g.update(data), lambda g=g: g.compute(g.act, obs))
            for name, g in (("turn", turn), ("vmap", vmapped))}
    for update, act in jobs.values():  # warm-up: optimizer state, caches
        timed(update, 3)
        timed(act, 10)
    ratios_u, ratios_a, turn_u, turn_a = [], [], [], []
    for _ in range(args.windows):
        t = {name: (timed(u, args.updates), timed(a, args.acts)) for name, (u, a) in jobs.items()}
        ratios_u.append(t["turn"][0] / t["vmap"][0])
        ratios_a.append(t["turn"][1] / t["vmap"][1])
        turn_u.append(t["turn"][0] / args.updates * 1e3)
        turn_a.append(t["turn"][1] / args.acts * 1e3)
    return {"update": statistics.median(ratios_u), "act": statistics.median(ratios_a),
            "update_ms": statistics.median(turn_u), "act_ms": statistics.median(turn_a),
            "update_lo": min(ratios_u), "update_hi": max(ratios_u)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["sac", "td3"])
    parser.add_argument("--env", default="Hopper")
    parser.add_argument("--seeds", nargs="+", type=int, default=[5, 10])
    parser.add_argument("--hidden", nargs="+", type=int)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--windows", type=int, default=7)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--acts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lines = [f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
             f"{args.threads} thread(s), {args.windows} alternating windows, env {args.env}, "
             f"hidden {args.hidden or 'default'}, batch {args.batch}",
             "", "| algo | K | update: in turn / vmapped (median, range) | in turn ms/update | "
             "act: in turn / vmapped | in turn ms/act |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for algo_name in args.algos:
        for seeds in args.seeds:
            r = measure(algo_name, args.env, seeds, args)
            line = (f"| {algo_name} | {seeds} | {r['update']:.3f} ({r['update_lo']:.3f}-"
                    f"{r['update_hi']:.3f}) | {r['update_ms']:.1f} | {r['act']:.2f} | "
                    f"{r['act_ms']:.2f} |")
            print(line, flush=True)
            lines.append(line)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
