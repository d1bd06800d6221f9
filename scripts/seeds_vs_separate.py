"""Does a ``seeds=K`` group learn like K separate runs of the same seeds? Train both, then
compare them with ``rlzoo.compare`` (IQM over seeds with 95% bootstrap CIs).

    python scripts/seeds_vs_separate.py --algo sac --env Pendulum --seeds 5 --steps 6000 \
        --learning-starts 1000 --out /tmp/seeds-vs-separate

The group is one process (``seeds=K``); the separate runs are K processes of ``seeds=1``, run two
at a time with one torch thread each. Both use the same seeds (``--seed`` .. ``--seed`` + K - 1;
``--seed K`` into the same ``--out`` adds K more of each) and the same config;
they differ only in ``seeds``, which is how ``rlzoo.compare`` tells them apart. The report is
``OUT/report/comparison.md``; wall times are printed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def train(args: list[str], threads: int | None = None) -> None:
    cmd = [sys.executable, "-m", "rlzoo.train", *args, "log.progress=false"]
    if threads is not None:
        cmd.append(f"torch_threads={threads}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--env", default="Pendulum")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0,
                        help="first seed; rerun with --seed K into the same --out for K more")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2, help="separate runs at once")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("overrides", nargs="*", help="more key=value overrides for both")
    a = parser.parse_args()
    common = [f"algo={a.algo}", f"env={a.env}", f"total_steps={a.steps}",
              f"algo.learning_starts={a.learning_starts}", f"eval.every={a.eval_every}",
              "checkpoint.every=0", *a.overrides]
    root = a.out / a.env / a.algo
    start = time.perf_counter()
    home = root / f"group-s{a.seed}"
    if not (home / "summary.json").exists():
        train([*common, f"seeds={a.seeds}", f"seed={a.seed}", f"hydra.run.dir={home}"])
    group_s = time.perf_counter() - start
    start = time.perf_counter()
    todo = [s for s in range(a.seed, a.seed + a.seeds)
            if not (root / f"separate-s{s}" / "summary.json").exists()]
    with ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(lambda s: train([*common, f"seed={s}",
                                       f"hydra.run.dir={root / f'separate-s{s}'}"], threads=1),
                      todo))
    separate_s = time.perf_counter() - start
    print(f"group of {a.seeds} seeds: {group_s:.0f} s; {a.seeds} separate runs, {a.jobs} at a "
          f"time: {separate_s:.0f} s (0 s = already there)")
    proc = subprocess.run([sys.executable, "-m", "rlzoo.compare", str(a.out), "--out",
                           str(a.out / "report")], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-2000:])
    print((a.out / "report" / "comparison.md").read_text())


if __name__ == "__main__":
    main()
