"""env.backend=warp: env steps/s of MuJoCo Warp worlds, and how far whole episodes agree with
gymnasium's ``<Task>-v5`` (docs/mujoco_warp.md, docs/performance.md).

    python scripts/bench_mujoco_warp.py speed --tasks Hopper-v5 Humanoid-v5 --worlds 1 64 256
    python scripts/bench_mujoco_warp.py agree --tasks Hopper-v5 HalfCheetah-v5 --max-steps 200

``speed``: random actions in ``[-1, 1]``, ``--warmup`` vector steps first (kernel loading), then
env steps/s = worlds x steps / seconds over ``--steps`` vector steps of ``step_tensors``, on
``--device`` (Warp's CPU device by default); gymnasium's one env stepped alone beside it.
``agree``: Warp and gymnasium from gymnasium's reset state (``reset(seed)``), with the same
uniform random actions, until either episode ends or ``--max-steps``; prints the largest
``|Warp - gymnasium| / (1 + |gymnasium|)`` of the observation and the reward over the first 10
steps and over the whole episode, the first step where the observation error passes 1e-3, and
both episodes' lengths and returns. Needs ``pip install rlzoo[warp]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rlzoo.envs.mujoco_warp import WarpMuJoCo  # noqa: E402
from tests.warp_reference import rel_error  # noqa: E402

TASKS = ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5"]


def speed(env_id: str, worlds: int, steps: int, warmup: int, device: str) -> float:
    """Env steps/s of ``worlds`` Warp worlds (after ``warmup`` vector steps)."""
    env = WarpMuJoCo(env_id, num_envs=worlds, seed=0, device=device)
    env.reset()
    gen = torch.Generator(device=device).manual_seed(0)
    for i in range(warmup + steps):
        if i == warmup:
            if device != "cpu":
                torch.cuda.synchronize()
            start = time.perf_counter()
        a = torch.rand(worlds, env.act_dim, generator=gen, device=device) * 2 - 1
        env.step_tensors(a)
    if device != "cpu":
        torch.cuda.synchronize()
    return worlds * steps / (time.perf_counter() - start)


def gym_speed(env_id: str, steps: int) -> float:
    """Env steps/s of one gymnasium env (random actions, resets included)."""
    env = gym.make(env_id)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - start)


def agree(env_id: str, seed: int, max_steps: int) -> str:
    """One row: how far a whole Warp episode stays on gymnasium's (module docstring)."""
    env = gym.make(env_id)
    u = env.unwrapped
    env.reset(seed=seed)
    warp = WarpMuJoCo(env_id, num_envs=1)
    warp.set_physics(torch.as_tensor(u.data.qpos[None]), torch.as_tensor(u.data.qvel[None]),
                     torch.zeros(1, u.model.nv))  # mj_resetData zeroes the warm start
    rng = np.random.default_rng(seed)
    low, high = u.model.actuator_ctrlrange[:, 0], u.model.actuator_ctrlrange[:, 1]
    obs_err, rew_err, ret, wret, ends = [], [], 0.0, 0.0, [None, None]
    for t in range(max_steps):
        a = rng.uniform(-1, 1, u.model.nu).astype(np.float32)
        o, r, term, _, _ = env.step(low + (a + 1) / 2 * (high - low))
        s = warp.step_tensors(torch.as_tensor(a[None]))
        obs_err.append(rel_error(s.obs[0].numpy(), o).max())
        rew_err.append(float(rel_error(s.reward[0].numpy(), r)))
        ret, wret = ret + r, wret + float(s.reward[0])
        if term and ends[0] is None:
            ends[0] = t + 1
        if bool(s.terminated[0]) and ends[1] is None:
            ends[1] = t + 1
        if ends[0] is not None or ends[1] is not None:
            break
    obs_e, rew_e = np.array(obs_err), np.array(rew_err)
    past = np.flatnonzero(obs_e > 1e-3)
    first = str(past[0] + 1) if len(past) else "never"
    length = [e if e is not None else f">={len(obs_e)}" for e in ends]
    return (f"| {env_id} | {seed} | {obs_e[:10].max():.1e} / {rew_e[:10].max():.1e} | "
            f"{obs_e.max():.1e} / {rew_e.max():.1e} | {first} | {length[0]} / {length[1]} | "
            f"{ret:.1f} / {wret:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["speed", "agree"])
    p.add_argument("--tasks", nargs="+", default=TASKS)
    p.add_argument("--worlds", nargs="+", type=int, default=[1, 64, 256])
    p.add_argument("--steps", type=int, default=5, help="timed vector steps (speed)")
    p.add_argument("--warmup", type=int, default=2, help="untimed vector steps first (speed)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--max-steps", type=int, default=1000, help="episode cap (agree)")
    p.add_argument("--gym-steps", type=int, default=2000,
                   help="steps of gymnasium's one env timed beside it (speed; 0: not timed)")
    args = p.parse_args()
    if args.mode == "speed":
        print("| task | device | worlds | env steps/s | gymnasium, 1 env |")
        print("|---|---|---|---|---|")
        for env_id in args.tasks:
            ref = f"{gym_speed(env_id, args.gym_steps):,.0f}" if args.gym_steps else "-"
            for n in args.worlds:
                sps = speed(env_id, n, args.steps, args.warmup, args.device)
                print(f"| {env_id} | {args.device} | {n} | {sps:,.0f} | {ref} |", flush=True)
        return
    print("| task | seed | first 10 steps: obs / reward error | whole episode | obs error "
          "> 1e-3 from step | length gym / warp | return gym / warp |")
    print("|---|---|---|---|---|---|---|")
    for env_id in args.tasks:
        for seed in args.seeds:
            print(agree(env_id, seed, args.max_steps), flush=True)


if __name__ == "__main__":
    main()
