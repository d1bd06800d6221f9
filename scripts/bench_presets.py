"""The multi-agent presets (``preset=short``) against their paired floors: minutes and returns.

    python scripts/bench_presets.py --out /tmp/presets                  # 3 algos x 3 MPE tasks
    python scripts/bench_presets.py --out /tmp/presets --algos hasac --tasks simple_spread

Each (algo, task) cell is one command, the README's with ``preset=short``::

    python -m rlzoo.train algo=ALGO env=mpe/TASK preset=short seeds=3 torch_threads=1

(``seeds=3``: seeds 0-2 in one process, each seed its single run ``seed=k`` bit for bit on the
CPU, docs/seeds.md; so a single-seed run takes about a third of the cell's wall time). Then each
seed's final return (10 deterministic episodes) is set against its paired floors, the zero action
and uniform random actions on that seed's own evaluation episodes (rlzoo/policy/floors.py). Prints
one
markdown table: per cell the wall time, and per seed the final return, the zero action's and the
random policy's 10-episode means. A cell whose dir holds a finished group is not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rlzoo.policy.floors import run_floors
from rlzoo.store import for_tools

ALGOS = ("maddpg", "hasac", "coma")
TASKS = ("simple_spread", "simple_speaker_listener", "simple_reference")


def run_cell(algo: str, task: str, home: Path, seeds: int, extra: list[str]) -> float | None:
    """Train one cell into ``home`` (and its members beside it); its wall time in s, None when
    it had finished before."""
    if (home / "summary.json").is_file():
        return None
    cmd = [sys.executable, "-m", "rlzoo.train", f"algo={algo}", f"env=mpe/{task}",
           "preset=short", f"seeds={seeds}", "torch_threads=1", "log.progress=false",
           f"hydra.run.dir={home}", *extra]
    print("$", " ".join(cmd[1:]), file=sys.stderr, flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--algos", nargs="+", default=list(ALGOS))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="more overrides for every cell")
    args = parser.parse_args()
    times_file = args.out / "wall_times.json"
    times = json.loads(times_file.read_text()) if times_file.is_file() else {}
    print("| task | algo | minutes (3 seeds, one process) | seed: final / zero action / random "
          "| lowest margin over the higher floor |")
    print("|---|---|---:|---|---:|")
    for task in args.tasks:
        for algo in args.algos:
            home = args.out / task / f"{algo}-s0"
            wall = run_cell(algo, task, home, args.seeds, args.extra)
            if wall is not None:
                times[f"{task}/{algo}"] = wall
                args.out.mkdir(parents=True, exist_ok=True)
                times_file.write_text(json.dumps(times, indent=1) + "\n")
            dirs = for_tools.recorded_group_dirs(home) or [home]
            finals = [json.loads((d / "summary.json").read_text()) for d in dirs]
            floors = run_floors([(d, int(s["seed"])) for d, s in zip(dirs, finals)],
                                args.out / "floors.json")
            cells, margins = [], []
            for d, s in zip(dirs, finals):
                zero = float(np.mean(floors[str(d)]["zero"]))
                rand = float(np.mean(floors[str(d)]["random"]))
                final = float(s["final_eval_return"])
                margins.append(final - max(zero, rand))
                cells.append(f"{s['seed']}: {final:.1f} / {zero:.1f} / {rand:.1f}")
            minutes = times.get(f"{task}/{algo}")
            shown = "?" if minutes is None else f"{minutes / 60:.1f}"
            print(f"| {task} | {algo} | {shown} | {'; '.join(cells)} | {min(margins):+.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
