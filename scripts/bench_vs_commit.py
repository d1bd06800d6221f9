"""A single SAC run of this checkout against a pinned older commit and Stable-Baselines3's
default SAC, timed so that start-up cancels, interleaved, with medians and ranges.

    python scripts/bench_vs_commit.py [--old ce328fd|PATH] [--repeats 8] [--long 3500]
                                      [--short 1500] [--warmup 1000] [--json FILE]
    python scripts/bench_vs_commit.py --tiny --json out.json   # seconds: checks the plumbing

Each side is a fresh process run to completion: ``python -m rlzoo.train algo=sac env=Hopper``
(UTD 1, batch 256, 256x256, ``algo.learning_starts=--warmup``, no evaluation but one episode at
the end, no checkpoint but the last) in this checkout ("new") and in the old tree ("old"), and
SB3's ``SAC("MlpPolicy", env, learning_starts=--warmup)`` with every other setting at its
default ("sb3"). A side's rate is ``(long - short) / (t_long - t_short)``: the start-up (imports,
config, env and network building, the random warm-up, the last evaluation) is the same in both
runs and cancels, leaving the cost of ``long - short`` training steps. Runs see the environment
this script sees minus ``OMP_NUM_THREADS``, ``GOMP_SPINCOUNT`` and ``OMP_WAIT_POLICY``, so every
side uses its own defaults (rlzoo's ``torch_threads``, torch's thread count for SB3) unless
``--new-args`` / ``--old-args`` add overrides.

Every repeat runs each side's short and long run back to back, the sides in an order rotated by
one per repeat, then two "new" runs side by side (their short runs together, then their long
runs together), against the rate of "new" alone in the same repeat: "pair/new alone" for each of
the two, "pair sum/new alone" for both together. Ratios are taken within a repeat (both sides
under the same load) and summarised over repeats as the median and the range: on a shared
machine single pairs of runs mislead.

``--old`` is a directory holding an rlzoo tree, or a commit of this repository, exported with
``git archive`` into a temporary directory; ``--also LABEL=TREE ...`` adds more such sides (at
their own defaults), each with its ratio ``new/LABEL``. ``--no-pair`` and ``--no-sb3`` leave
those runs out. ``--tiny`` swaps in Pendulum, 8-unit networks, a
batch of 8 and a few dozen steps (about a minute; its numbers mean nothing); ``--dry`` runs
``python -c pass`` in place of every run, with made-up run times, and reports the commands it
would have run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PINNED = "ce328fd"  # before the trust checks, the one loop and the seeds axis (issue 26)
DROP_ENV = ("OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
DRY = random.Random(0)  # --dry's made-up run times
COMMANDS: dict[str, list[str]] = {}  # side -> the command of its first run (for the output)

SB3_CODE = """
import sys
import gymnasium as gym
from stable_baselines3 import SAC
env_id, steps, warmup, batch, hidden = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    int(sys.argv[4]), int(sys.argv[5])
kwargs = {} if hidden == 256 else {"policy_kwargs": {"net_arch": [hidden, hidden]}}
model = SAC("MlpPolicy", gym.make(env_id), learning_starts=warmup, batch_size=batch, seed=0,
            device="cpu", verbose=0, **kwargs)
model.learn(total_timesteps=steps)
"""


def machine() -> dict[str, Any]:
    """CPU model (from /proc/cpuinfo where there is one), core count and the 1-minute load."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "load": load()}


def load() -> float | None:
    """The 1-minute load average, or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def old_tree(spec: str, tmp: Path) -> Path:
    """The old rlzoo tree: ``spec`` itself when it is a directory holding ``rlzoo/``, else the
    commit ``spec`` of this repository exported into ``tmp``."""
    path = Path(spec)
    if (path / "rlzoo" / "__init__.py").is_file():
        return path.resolve()
    out = tmp / f"tree-{spec}"
    out.mkdir()
    archive = tmp / "old.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", spec], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    return out


def rlzoo_cmd(args: argparse.Namespace, steps: int, run_dir: Path, extra: list[str]) -> list[str]:
    size = [f"algo.batch_size={args.batch}", f"algo.actor.hidden=[{args.hidden},{args.hidden}]",
            f"critic.hidden=[{args.hidden},{args.hidden}]"]
    return [sys.executable, "-m", "rlzoo.train", "algo=sac", f"env={args.env}",
            f"total_steps={steps}", f"algo.learning_starts={args.warmup}", "algo.utd=1", *size,
            "eval.every=0", "eval.episodes=1", "checkpoint.every=0", f"log.every={args.warmup}",
            "log.progress=false", f"hydra.run.dir={run_dir}", *extra]


def launch(args: argparse.Namespace, side: str, trees: dict[str, Path], steps: int,
           tmp: Path) -> subprocess.Popen[bytes]:
    """Start one run of ``side`` (new, old or sb3) for ``steps`` env steps."""
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV}
    if side == "sb3":
        cmd = [sys.executable, "-c", SB3_CODE, args.env_id, str(steps), str(args.warmup),
               str(args.batch), str(args.hidden)]
        cwd = tmp
    else:
        run_dir = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{side}-{steps}-"))
        extra = {"new": args.new_args, "old": args.old_args}.get(side, [])
        cmd = rlzoo_cmd(args, steps, run_dir, extra)
        cwd = trees[side]
        env["PYTHONPATH"] = str(cwd)
    COMMANDS.setdefault(side, cmd)
    if args.dry:  # the plumbing without the runs
        cmd = [sys.executable, "-c", "pass"]
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def timed(args: argparse.Namespace, sides: list[str], trees: dict[str, Path], steps: int,
          tmp: Path) -> list[float]:
    """Wall seconds of runs of ``sides`` started together, each until its own exit."""
    start = time.perf_counter()
    procs = [launch(args, side, trees, steps, tmp) for side in sides]
    took = []
    for side, proc in zip(sides, procs):
        _, err = proc.communicate()
        # --dry: made-up seconds (a run's start-up of 5 s, then 50-150 steps/s)
        took.append(5 + steps / DRY.uniform(50, 150) if args.dry else
                    time.perf_counter() - start)
        if proc.returncode:
            sys.exit(f"bench_vs_commit: the {side} run of {steps} steps failed:\n"
                     f"{err.decode()[-2000:]}")
    return took


def rates(args: argparse.Namespace, sides: list[str], trees: dict[str, Path],
          tmp: Path) -> list[float]:
    """Steps/s of each run of ``sides`` (started together) over ``long - short`` steps."""
    short = timed(args, sides, trees, args.short, tmp)
    long = timed(args, sides, trees, args.long, tmp)
    return [(args.long - args.short) / max(t_long - t_short, 1e-9)
            for t_long, t_short in zip(long, short)]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(args: argparse.Namespace, trees: dict[str, Path], tmp: Path) -> dict[str, Any]:
    """The raw per-repeat rates and their medians / ranges (see the module docstring)."""
    sides = ["new", "old", *(label for label, _ in args.also), *(["sb3"] if args.sb3 else [])]
    raw: dict[str, list[float]] = {s: [] for s in sides}
    if args.pair:
        raw |= {"pair_a": [], "pair_b": []}
    loads = []
    for repeat in range(args.repeats):
        order = sides[repeat % len(sides):] + sides[:repeat % len(sides)]
        loads.append(load())
        for side in order:
            raw[side].append(rates(args, [side], trees, tmp)[0])
        if args.pair:
            a, b = rates(args, ["new", "new"], trees, tmp)
            raw["pair_a"].append(a)
            raw["pair_b"].append(b)
        print(f"repeat {repeat + 1}/{args.repeats} (load {loads[-1]}): "
              + ", ".join(f"{k} {v[-1]:.1f}" for k, v in raw.items()) + " steps/s",
              file=sys.stderr, flush=True)
    ratios = {f"new/{s}": [n / o for n, o in zip(raw["new"], raw[s])] for s in sides[1:]}
    if args.pair:
        pairs = list(zip(raw["new"], raw["pair_a"], raw["pair_b"]))
        ratios["pair/new alone"] = [x / n for n, a, b in pairs for x in (a, b)]  # each one
        ratios["pair sum/new alone"] = [(a + b) / n for n, a, b in pairs]  # both together
    return {"steps_per_s": {k: summary(v) for k, v in raw.items()},
            "ratios": {k: summary(v) for k, v in ratios.items()},
            "raw": raw, "loads": loads}


def table(result: dict[str, Any]) -> str:
    """The result as a markdown table: medians and ranges of rates, then of ratios."""
    lines = ["| measure | median | range |", "|---|---:|---:|"]
    for kind, unit in (("steps_per_s", " steps/s"), ("ratios", "x")):
        for name, s in result[kind].items():
            lines.append(f"| {name}{unit} | {s['median']:.2f} | {s['min']:.2f}-{s['max']:.2f} |")
    return "\n".join(lines)


def labelled(text: str) -> tuple[str, str]:
    """``LABEL=TREE`` of ``--also`` as ``(label, tree)``."""
    label, sep, tree = text.partition("=")
    if not sep or not label or not tree or label in ("new", "old", "sb3"):
        raise argparse.ArgumentTypeError(f"want LABEL=TREE (a label other than new, old and "
                                         f"sb3), got {text!r}")
    return label, tree


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=PINNED, help="an rlzoo tree or a commit of this repo")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--long", type=int, default=3500, help="env steps of the long runs")
    parser.add_argument("--short", type=int, default=1500, help="env steps of the short runs")
    parser.add_argument("--warmup", type=int, default=1000, help="random steps before learning")
    parser.add_argument("--env", default="Hopper", help="rlzoo env config name")
    parser.add_argument("--env-id", default="Hopper-v5", help="the same env for SB3")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256, help="units of both hidden layers")
    parser.add_argument("--new-args", nargs="*", default=[], help="overrides for this checkout")
    parser.add_argument("--old-args", nargs="*", default=[], help="overrides for the old tree")
    parser.add_argument("--also", nargs="*", default=[], type=labelled, metavar="LABEL=TREE",
                        help="more rlzoo sides at their defaults: a tree or a commit each")
    parser.add_argument("--no-sb3", dest="sb3", action="store_false", help="skip SB3")
    parser.add_argument("--no-pair", dest="pair", action="store_false",
                        help="skip the two runs side by side")
    parser.add_argument("--tiny", action="store_true", help="seconds-long plumbing check")
    parser.add_argument("--dry", action="store_true",
                        help="run 'python -c pass' instead of each run (tests the plumbing)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.tiny:
        args.env, args.env_id, args.batch, args.hidden = "Pendulum", "Pendulum-v1", 8, 8
        args.long, args.short, args.warmup, args.repeats = 60, 40, 20, 1
    if not 0 <= args.warmup < args.short < args.long:
        parser.error("need 0 <= --warmup < --short < --long")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"new": REPO, "old": old_tree(args.old, Path(tmp))}
        trees |= {label: old_tree(spec, Path(tmp)) for label, spec in args.also}
        result = {"machine": machine(), "old": args.old,
                  "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
                  **measure(args, trees, Path(tmp)), "commands": COMMANDS}
    result["machine"]["load_after"] = load()
    print(f"# {result['command']}\n# {result['machine']}\n{table(result)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
