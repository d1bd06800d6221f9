"""Per-env-step speed of rlzoo's DDPG, TQC and CrossQ against their peers, Stable-Baselines3's DDPG
and sb3-contrib's TQC and CrossQ, with the same settings, at one thread, interleaved.

    python -m pip install sb3-contrib==2.9.2     # the peers; not dependencies of rlzoo
    python scripts/bench_peers.py [--env Hopper] [--steps 1000] [--warmup 1000] [--repeats 2]

Each pair is an rlzoo config and the peer built from it by the results tool's own translation
(``tools.reproduce.peer_kinds.peer_settings``: networks, batch, buffer, warm-up, tau, gamma,
delays, noises, batch renorm, Adam betas, temperature; each optimizer at rlzoo's rate), so both
sides run the same algorithm with the same settings:

* ``ddpg``: ``algo=ddpg`` (SB3's DDPG defaults, rl-baselines3-zoo's MuJoCo noise);
* ``tqc``: ``algo=sac critic=tqc`` at sb3-contrib's TQC defaults (lr 3e-4 everywhere, log std
  from -20, entropy of the [-1, 1] action);
* ``crossq``: ``algo=crossq`` (sb3-contrib's CrossQ defaults).

Every run is a fresh process at one thread (``OMP_NUM_THREADS=1``; rlzoo ``torch_threads=1``,
the peer ``torch.set_num_threads(1)``) that makes ``--warmup`` random steps, then ``--steps``
training steps at one update per step; only the training steps are timed (rlzoo: the
TensorBoard wall times of the logs at the warm-up's end and the run's end, no evaluation or
checkpoint between; the peer: a second ``learn`` call). The sides alternate, ``--repeats``
times, and the best run of each is kept (load from other processes only slows a run down).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from bench_throughput import ENV_IDS, rlzoo_cli_sps  # noqa: E402

# each pair: the rlzoo overrides (the peer takes its settings from them)
PAIRS = {
    "ddpg": ("algo=ddpg",),
    "tqc": ("algo=sac", "critic=tqc", "algo.actor_lr=3e-4", "algo.critic_lr=3e-4",
            "tuner.lr=3e-4", "tuner.entropy_units=normalized", "algo.actor.log_std_min=-20"),
    "crossq": ("algo=crossq",),
}
ONE_THREAD = ("torch_threads=1", "eval.every=0", "eval.episodes=1", "checkpoint.every=0",
              "log.progress=false")


def peer_sps(pair: str, env: str, warmup: int, steps: int, seed: int) -> float:
    """Env steps/s of the peer over the training steps, in a fresh one-thread process."""
    code = (
        "import json, sys, time, torch\n"
        "torch.set_num_threads(1)\n"
        "from bench_peers import build_peer\n"
        "model, steps = build_peer(*json.loads(sys.argv[1]))\n"
        "model.learn(total_timesteps=model.learning_starts)\n"
        "start = time.perf_counter()\n"
        "model.learn(total_timesteps=steps, reset_num_timesteps=False)\n"
        "print(steps / (time.perf_counter() - start))\n")
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps([pair, env, warmup, steps,
                                                                   seed])],
                          capture_output=True, text=True, cwd=REPO, env=env_vars)
    if proc.returncode != 0:
        raise RuntimeError(f"the {pair} peer failed: {proc.stderr[-800:]}")
    return float(proc.stdout.split()[-1])


def build_peer(pair: str, env: str, warmup: int, steps: int, seed: int) -> tuple[object, int]:
    """The peer of ``pair`` with the rlzoo config's settings (``learning_starts = warmup``)."""
    import gymnasium as gym
    from hydra import compose, initialize_config_module

    from tools.reproduce.peer_kinds import peer_class, peer_settings

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[*PAIRS[pair], f"env={env}",
                                           f"algo.learning_starts={warmup}"])
    settings = peer_settings(cfg, pair)
    gym_env = gym.make(ENV_IDS[env])
    kwargs = dict(settings.kwargs)
    space = gym_env.action_space
    if pair == "ddpg":
        import numpy as np
        from stable_baselines3.common.noise import NormalActionNoise

        kwargs["action_noise"] = NormalActionNoise(np.zeros(space.shape),
                                                   settings.exploration_noise * np.ones(
                                                       space.shape))
    else:
        kwargs["target_entropy"] = settings.sac_target_entropy(space.low, space.high)
    from tools.reproduce.peer import matched

    model = matched(peer_class(pair), settings.learning_rates)(
        "MlpPolicy", gym_env, seed=seed, device="cpu", verbose=0, **kwargs)
    return model, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Hopper", choices=sorted(ENV_IDS))
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    parser.add_argument("--steps", type=int, default=1000, help="timed training env steps")
    parser.add_argument("--warmup", type=int, default=1000, help="random warm-up env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2,
                        help="interleaved runs of each side; the best is kept")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    import sb3_contrib
    import stable_baselines3
    import torch

    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at start; torch {torch.__version__}, "
          f"stable-baselines3 {stable_baselines3.__version__}, sb3-contrib "
          f"{sb3_contrib.__version__}; one thread per run")
    best: dict[tuple[str, str], float] = {}
    started = time.perf_counter()
    for repeat in range(args.repeats):
        for pair in args.pairs:
            sides = ("rlzoo", "peer") if repeat % 2 == 0 else ("peer", "rlzoo")
            for side in sides:
                if side == "rlzoo":
                    sps = rlzoo_cli_sps("", args.env, args.warmup, args.steps, args.seed,
                                        (*PAIRS[pair], *ONE_THREAD), settings=True)
                else:
                    sps = peer_sps(pair, args.env, args.warmup, args.steps, args.seed)
                best[(side, pair)] = max(best.get((side, pair), 0.0), sps)
                print(f"# repeat {repeat}: {pair} {side} {sps:.1f} steps/s", flush=True)
    rows = [{"pair": pair, "rlzoo_sps": best[("rlzoo", pair)], "peer_sps": best[("peer", pair)],
             "ratio": best[("rlzoo", pair)] / best[("peer", pair)]} for pair in args.pairs]
    print(f"# {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at "
          "the end")
    print(f"| {args.env} | rlzoo steps/s | peer steps/s | rlzoo / peer |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['pair']} | {r['rlzoo_sps']:.1f} | {r['peer_sps']:.1f} | "
              f"{r['ratio']:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
