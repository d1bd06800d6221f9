"""The training loop's cost per env step on a tensor env (``env=vmas/...``, the batched MPE) with
its observations and state kept as tensors on the env's device (``step_device``, the default)
against the numpy path (``keeps_tensors=False``: ``step``, a host copy of everything each step).

    OMP_NUM_THREADS=1 python scripts/bench_tensor_path.py              # vmas/navigation, 1024
    python scripts/bench_tensor_path.py --env env=mpe/simple_spread env.backend=batched
    python scripts/bench_tensor_path.py --other /path/to/older/checkout  # a third leg

Each leg is one ``rlzoo.train`` run in a fresh process (MADDPG, 32x32 networks,
``torch_threads=1``, CPU) whose ``Collector.collect`` calls are timed: one call is one vector
step of the data path (act, step the envs, check, store in the replay, count), in CPU time
(``time.process_time``: steadier than the wall clock on a shared machine), without the
updates (``algo.utd`` is tiny) or the evaluation. ``warm``: the first ``--warm`` vector steps
(uniform random actions); ``acting``: the next ``--acting`` (the policy acts on every env). The
first call of each phase is not counted. ``... loop``: the same less the time in the env's
``step_tensors`` (the simulation, the same on both paths): what the data path around it costs.
The legs run interleaved (rotated), ``--rounds`` times; the median microseconds per env step (one
vector step = ``--envs`` env steps) of each leg and the ratio numpy / device are printed as a
markdown table. ``--other`` runs an older checkout's loop as it is (before ``step_device``: its
numpy path) with this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# the process's CPU seconds: on a shared machine they vary far less than the wall clock (every
# leg runs one torch thread)
clock = time.process_time


def child(leg: str, env: list[str], envs: int, warm: int, acting: int) -> None:
    """One leg: a run whose ``Collector.collect`` calls are timed; prints their microseconds
    per env step, ``{"warm": ..., "acting": ...}``, as JSON."""
    import rlzoo
    from rlzoo.run.collect import Collector

    try:
        from rlzoo.envs.tensor_env import TensorVecEnv

        TensorVecEnv.keeps_tensors = leg == "device"
    except ImportError:  # an older checkout (--other): the numpy path is all it has
        pass
    from rlzoo.envs.mpe_batched import BatchedMPE

    times: list[float] = []  # each collect call's seconds, then its simulation's
    sim: list[float] = []
    collect = Collector.collect

    def timed(self: Collector) -> None:
        sim.append(0.0)
        start = clock()
        collect(self)
        times.append(clock() - start)

    Collector.collect = timed  # type: ignore[method-assign]
    classes: list[Any] = [BatchedMPE]
    try:
        from rlzoo.envs.vmas_batched import VmasVecEnv

        classes.append(VmasVecEnv)
    except ImportError:  # no vmas: the batched MPE only
        pass
    for cls in classes:  # the simulation's share of a collect call: step_tensors
        def simulate(self: Any, *a: Any, _step: Any = cls.step_tensors, **kw: Any) -> Any:
            start = clock()
            out = _step(self, *a, **kw)
            if sim and len(sim) > len(times):  # inside a collect call (not the evaluation)
                sim[-1] += clock() - start
            return out

        cls.step_tensors = simulate
    total = (warm + acting) * envs
    with tempfile.TemporaryDirectory() as tmp:
        rlzoo.train("algo=maddpg", *env, f"num_envs={envs}", f"total_steps={total}",
                    f"algo.learning_starts={warm * envs}", "algo.utd=0.00001",
                    "algo.batch_size=64", f"algo.buffer_size={2 * total}",
                    "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]", "eval.every=0",
                    "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
                    "device=cpu", "torch_threads=1", "seed=0", run_dir=Path(tmp) / "run")
    us = [t * 1e6 / envs for t in times]
    loop = [(t - s) * 1e6 / envs for t, s in zip(times, sim, strict=True)]
    print(json.dumps({"warm": statistics.mean(us[1:warm]),
                      "acting": statistics.mean(us[warm + 1:warm + acting]),
                      "warm loop": statistics.mean(loop[1:warm]),
                      "acting loop": statistics.mean(loop[warm + 1:warm + acting])}))


def run_leg(leg: str, args: argparse.Namespace) -> dict[str, float]:
    """One leg in a fresh process (``--other``'s checkout on its ``PYTHONPATH`` for ``other``)."""
    root = args.other if leg == "other" else str(REPO)
    env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", leg, "--envs", str(args.envs), "--warm",
           str(args.warm), "--acting", str(args.acting), "--env", *args.env]
    out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", nargs="+", default=["env=vmas/navigation"])
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--warm", type=int, default=30, help="vector steps of random actions")
    p.add_argument("--acting", type=int, default=30, help="vector steps the policy acts")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--other", default=None, help="an older checkout, run as a third leg")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.env, args.envs, args.warm, args.acting)
        return
    legs = ["device", "numpy"] + (["other"] if args.other else [])
    got: dict[str, list[dict[str, float]]] = {leg: [] for leg in legs}
    for r in range(args.rounds):
        for leg in legs[r % len(legs):] + legs[:r % len(legs)]:  # rotated: interleaved
            got[leg].append(run_leg(leg, args))
            print(leg, json.dumps(got[leg][-1]), file=sys.stderr)
    print(f"{' '.join(args.env)}, num_envs={args.envs}, CPU us per env step, median of "
          f"{args.rounds} rounds\n")
    print("| phase | " + " | ".join(legs) + " | numpy / device |")
    print("|---|" + "---|" * (len(legs) + 1))
    for phase in ("warm", "acting", "warm loop", "acting loop"):
        med = {leg: statistics.median(x[phase] for x in got[leg]) for leg in legs}
        print(f"| {phase} | " + " | ".join(f"{med[leg]:.2f}" for leg in legs)
              + f" | {med['numpy'] / med['device']:.3f} |")


if __name__ == "__main__":
    main()
