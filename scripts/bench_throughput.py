"""Training throughput of rlzoo against Stable-Baselines3, on this machine, in one run.

    python scripts/bench_throughput.py [--envs Hopper Humanoid] [--steps 2000] [--warmup 1000]
                                       [--repeats 2] [--compile]

For each env and algorithm it runs the real CLI (`python -m rlzoo.train ...`) at UTD 1 with
batch 256, 256x256 MLPs, lr 3e-4 and the same random warm-up, and times only the training phase:
the TensorBoard wall times of the scalar logs at the end of the warm-up and at the end of the run
(no evaluation or checkpoint in between). Stable-Baselines3 (a benchmark peer, not a dependency)
runs the same budget when it is installed: `learn(warmup)` first, then a timed `learn(steps)`.
The two sides run interleaved `--repeats` times and the best run of each is reported (the machine
may be shared; interference only ever slows a run down). `--compile` runs rlzoo with
`compile=true`.

It also reports how close one update comes to the machine's matmul roofline: FLOPs per update
counted by `torch.utils.flop_counter` from the layer shapes of a real update (forward and
backward), divided by the update time (in-process, synthetic batch), divided by the sgemm peak
measured in the same run (the best of square fp32 matmuls of a few sizes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
ENV_IDS = {"Hopper": "Hopper-v5", "Humanoid": "Humanoid-v5", "HalfCheetah": "HalfCheetah-v5",
           "Walker2d": "Walker2d-v5", "Ant": "Ant-v5", "Pendulum": "Pendulum-v1"}
# Same network and optimiser settings for every algorithm (the benchmark's contract).
COMMON = ["algo.batch_size=256", "algo.actor.hidden=[256,256]", "critic.hidden=[256,256]",
          "algo.utd=1", "eval.every=0", "eval.episodes=1", "checkpoint.every=0",
          "log.progress=false"]
LRS = {"sac": ["algo.actor_lr=3e-4", "algo.critic_lr=3e-4", "tuner.lr=3e-4"],
       "td3": ["algo.actor_lr=3e-4", "algo.critic_lr=3e-4"],
       "dsac_t": ["algo.actor_lr=3e-4", "algo.critic_lr=3e-4", "tuner.lr=3e-4",
                  "algo.actor.activation=relu", "critic.activation=relu"],
       "redq": ["algo.actor_lr=3e-4", "algo.critic_lr=3e-4", "tuner.lr=3e-4",
                "algo.policy_delay=1"]}  # REDQ at UTD 1: one actor step per critic step


def sgemm_peak(seconds: float = 0.5) -> dict[str, float]:
    """GFLOP/s of fp32 square matmuls (n = 256, 512, 1024, 2048), best of three timed windows
    each after a warm-up, and the best of them ("peak")."""
    result = {}
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        best = 0.0
        for window in range(4):  # the first window only warms up caches and threads
            reps, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                a @ b
                reps += 1
            if window:
                best = max(best, 2 * n**3 * reps / (time.perf_counter() - start) / 1e9)
        result[f"n{n}"] = best
    result["peak"] = max(result.values())
    return result


def rlzoo_cli_sps(algo: str, env: str, warmup: int, steps: int, seed: int,
                  extra: tuple[str, ...] = (), settings: bool = False) -> float:
    """Env steps/s of the real CLI over the training phase (after the warm-up). ``settings``:
    ``extra`` is the whole config (the algorithm and its settings, scripts/bench_peers.py) in
    place of ``algo=<algo>`` with this benchmark's common settings."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = list(extra) if settings else [f"algo={algo}", *COMMON, *LRS.get(algo, []), *extra]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "rlzoo.train", f"env={env}",
               f"total_steps={warmup + steps}", f"algo.learning_starts={warmup}",
               f"log.every={math.gcd(warmup, steps)}",
               f"seed={seed}", f"hydra.run.dir={run_dir}", *config]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"{algo} on {env} failed: {proc.stderr[-500:]}")
        times = {}
        for events in run_dir.glob("events.out.tfevents.*"):
            acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
            acc.Reload()
            if "perf/sps" in acc.Tags()["scalars"]:
                times.update({e.step: e.wall_time for e in acc.Scalars("perf/sps")})
        return steps / (times[warmup + steps] - times[warmup])


def sb3_sps(algo: str, env_id: str, warmup: int, steps: int, seed: int) -> float | None:
    """Env steps/s of Stable-Baselines3 over the training phase, or None if not installed."""
    try:
        import stable_baselines3 as sb3
    except ImportError:
        return None
    import gymnasium as gym

    cls = {"sac": sb3.SAC, "td3": sb3.TD3}[algo]
    env = gym.make(env_id)
    model = cls("MlpPolicy", env, learning_rate=3e-4, batch_size=256, learning_starts=warmup,
                train_freq=1, gradient_steps=1, policy_kwargs={"net_arch": [256, 256]},
                seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=warmup)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - start)


def benchmark_model(algo: str, env: str, batch_size: int = 256) -> tuple[Any, list[Any]]:
    """The algorithm built from the benchmark's config (on CPU) and 8 synthetic batches for it
    (random observations, actions in [-1, 1], rewards; also used by profile_update.py)."""
    import gymnasium as gym
    from hydra import compose, initialize_config_module

    from rlzoo.algos.base import EnvSpec
    from rlzoo.buffers.batch import Batch
    from rlzoo.config.build import build_algorithm

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"algo={algo}", f"env={env}", *COMMON,
                                           *LRS.get(algo, [])])
    probe = gym.make(cfg.env.id)
    spec = EnvSpec(probe.observation_space.shape[0], probe.action_space.shape[0])
    model = build_algorithm(cfg, spec, torch.device("cpu"))
    B, A = batch_size, spec.act_dim * model.action_horizon
    batches = [Batch(obs=torch.randn(B, spec.obs_dim), action=torch.rand(B, A) * 2 - 1,
                     reward=torch.randn(B), next_obs=torch.randn(B, spec.obs_dim),
                     discount=torch.full((B,), 0.99), terminated=torch.zeros(B))
               for _ in range(8)]
    return model, batches


def update_profile(algo: str, env: str, updates: int = 200,
                   compile: bool = False) -> dict[str, float]:
    """FLOPs per update (counted) and in-process updates/s on a synthetic batch."""
    from torch.utils.flop_counter import FlopCounterMode

    from rlzoo.run.accel import update_fn

    model, batches = benchmark_model(algo, env)
    period = 20  # an average over whole cycles of delayed actor updates
    with FlopCounterMode(display=False) as counter:  # counted eagerly: compiling changes no FLOP
        for i in range(period):
            model.update(batches[i % 8])
    flops = counter.get_total_flops() / period
    update = update_fn(model, compile=compile, cudagraphs=False)
    for i in range(20):
        update(batches[i % 8])
    ups = 0.0
    for _ in range(3):  # best of three windows, as for the CLI runs
        start = time.perf_counter()
        for i in range(updates):
            update(batches[i % 8])
        ups = max(ups, updates / (time.perf_counter() - start))
    return {"gflop_per_update": flops / 1e9, "updates_per_sec": ups}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Hopper", "Humanoid"])
    parser.add_argument("--algos", nargs="+", default=["sac", "td3", "dsac_t", "redq"])
    parser.add_argument("--steps", type=int, default=2000, help="timed training env steps")
    parser.add_argument("--warmup", type=int, default=1000, help="random warm-up env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2,
                        help="interleaved runs of each side; the best is reported")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--compile", action="store_true", help="run rlzoo with compile=true")
    args = parser.parse_args()
    extra = ("compile=true",) if args.compile else ()

    torch.set_num_threads(os.cpu_count() or 1)
    peak = sgemm_peak()
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("# sgemm GFLOP/s: " + ", ".join(f"{k}={v:.1f}" for k, v in peak.items()))
    rows = []
    for env in args.envs:
        # Interleaved repeats, best of each: load from other tenants only ever slows a run down,
        # so the best of a few interleaved runs is the least disturbed estimate of each side.
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.repeats):
            for algo in args.algos:
                if algo in ("sac", "td3"):
                    base = sb3_sps(algo, ENV_IDS[env], args.warmup, args.steps, args.seed)
                    if base is not None:
                        best[("sb3", algo)] = max(best.get(("sb3", algo), 0.0), base)
                try:
                    sps = rlzoo_cli_sps(algo, env, args.warmup, args.steps, args.seed, extra)
                except Exception as err:  # noqa: BLE001 - one failing algo must not end the run
                    print(f"# {algo} on {env}: skipped ({str(err).splitlines()[0][:120]})")
                    continue
                best[("rlzoo", algo)] = max(best.get(("rlzoo", algo), 0.0), sps)
        for algo in args.algos:
            if ("rlzoo", algo) not in best:
                continue
            sps, base = best[("rlzoo", algo)], best.get(("sb3", algo))
            prof = update_profile(algo, env, compile=args.compile)
            rows.append({
                "env": env, "algo": algo, "rlzoo_sps": sps, "sb3_sps": base,
                "ratio": sps / base if base else None, **prof,
                "update_roofline": prof["gflop_per_update"] * prof["updates_per_sec"]
                / peak["peak"],
                "train_roofline": prof["gflop_per_update"] * sps / peak["peak"],
            })
    header = ("| env | algo | rlzoo steps/s | SB3 steps/s | ratio | GFLOP/update | updates/s "
              "(in-process) | update roofline | training roofline |")
    print(header)
    print("|" + "---|" * 9)
    for r in rows:
        base = f"{r['sb3_sps']:.1f}" if r["sb3_sps"] else "n/a"
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "n/a"
        print(f"| {r['env']} | {r['algo']} | {r['rlzoo_sps']:.1f} | {base} | {ratio} | "
              f"{r['gflop_per_update']:.3f} | {r['updates_per_sec']:.1f} | "
              f"{100 * r['update_roofline']:.0f}% | {100 * r['train_roofline']:.0f}% |")
    if args.json:
        args.json.write_text(json.dumps({"sgemm": peak, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
