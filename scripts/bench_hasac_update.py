"""HASAC's update under ``preset=short`` on MPE simple_spread: this checkout's against an older
commit's, in one process, in alternating windows on the same batches (and MADDPG's short update
for scale); checks that both sides end with the same weights, bit for bit.

    python scripts/bench_hasac_update.py [--old COMMIT] [--seeds 1 3] [--windows 15] \\
        [--updates 20] [--no-maddpg] [--out FILE]

For each K in ``--seeds`` it builds the real pipeline twice with the ``preset=short`` command's
config (``algo=hasac env=mpe/simple_spread preset=short seeds=K torch_threads=1``: batch 256,
64x64 networks, 5-step returns; ``seeds=K`` trains K seeds as one group, each its single run bit
for bit) and fills each replay with the same 2,000 random env steps. One copy ("new") runs this
checkout's code; the other ("old") has its algorithm's class swapped for ``HASAC`` as
``rlzoo/algos/hasac.py`` defines it at ``--old`` and its actor optimizer's for ``MemberAdam`` as
``rlzoo/optim/adam.py`` defines it there (the two files this comparison is about; every other
module is this checkout's). Unless ``--no-maddpg``, a third pipeline runs MADDPG's
short update (``algo=maddpg ... preset=short``). Then ``--windows`` rounds: each side makes
``--updates`` updates (``sample`` from the replay plus ``update``, as the loop calls them) on one
list of batches drawn for the round (the warm-up's 5 updates likewise), the sides in an order
that alternates each round, the torch generator put back to one state before each HASAC side (a
single run draws from it; a group from its seeds' generators, equal on both sides). Each round's
ratio new/old is taken between windows seconds apart, so load on a shared machine moves both;
the table gives the median ms/update of each side and the median and range of the ratios. At
the end the old and new weights and optimizer states are compared: "bit-exact: yes" means every
tensor is equal.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_module

from rlzoo.run.loop import Trainer

REPO = Path(__file__).resolve().parents[1]


def old_module(commit: str, path: str, name: str) -> types.ModuleType:
    """``path`` (a module file of rlzoo) as it is at ``commit``, loaded as module ``name``."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{commit}:{path}"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    return module


def pipeline(algo: str, seeds: int, home: Path) -> Trainer:
    """A Trainer of ``algo`` with preset=short on simple_spread, its replay holding the 2,000
    random warm-up steps of each of its ``seeds`` seeds."""
    overrides = [f"algo={algo}", "env=mpe/simple_spread", "preset=short", f"seeds={seeds}",
                 "torch_threads=1", "total_steps=2000", "eval.every=0", "eval.episodes=1",
                 "checkpoint.every=0", "log.progress=false"]
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    dirs = [home / f"s{k}" for k in range(seeds)]
    torch.manual_seed(0)
    trainer = Trainer(cfg, dirs[0], dirs=dirs)
    trainer.train()  # the random warm-up only
    torch.set_num_threads(1)
    return trainer


def window(trainer: Trainer, batches: list[Any]) -> float:
    """Seconds for one update per batch, as the loop calls it."""
    start = time.perf_counter()
    for batch in batches:
        trainer.axis.update(trainer.update, batch)
    return time.perf_counter() - start


def same_state(a: Trainer, b: Trainer) -> bool:
    """Whether the two algorithms' weights, buffers and optimizer states are equal."""
    def flat(x: Any) -> list[torch.Tensor]:
        if torch.is_tensor(x):
            return [x]
        if isinstance(x, dict):
            return [t for k in sorted(x, key=str) for t in flat(x[k])]
        if isinstance(x, (list, tuple)):
            return [t for v in x for t in flat(v)]
        return []

    left, right = flat(a.algo.state_dict()), flat(b.algo.state_dict())
    return len(left) == len(right) and all(torch.equal(x, y) for x, y in zip(left, right))


def measure(seeds: int, args: argparse.Namespace, old_hasac: type, old_adam: type,
            home: Path) -> dict[str, Any]:
    sides = {"hasac old": pipeline("hasac", seeds, home / "old"),
             "hasac new": pipeline("hasac", seeds, home / "new")}
    sides["hasac old"].algo.__class__ = old_hasac
    sides["hasac old"].algo.actor_optimizer.__class__ = old_adam
    sides["hasac old"].update = sides["hasac old"].algo.update  # bound to the old class
    if args.maddpg:
        sides["maddpg"] = pipeline("maddpg", seeds, home / "maddpg")
    names = list(sides)
    size = sides["hasac new"].settings.batch_size
    warm = sides["hasac new"].storage.sample(size, sides["hasac new"].algo.sampling)
    rng = torch.get_rng_state()
    for name, trainer in sides.items():  # warm-up: optimizer state, caches
        if name.startswith("hasac"):
            torch.set_rng_state(rng)
            window(trainer, [warm] * 5)
        else:
            window(trainer, [trainer.storage.sample(size, trainer.algo.sampling)] * 5)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.windows):
        new = sides["hasac new"]
        batches = [new.storage.sample(size, new.algo.sampling) for _ in range(args.updates)]
        rng = torch.get_rng_state()
        for name in names if r % 2 == 0 else names[::-1]:
            if name.startswith("hasac"):
                torch.set_rng_state(rng)
            trainer = sides[name]
            mine = batches if name.startswith("hasac") else [
                trainer.storage.sample(size, trainer.algo.sampling) for _ in batches]
            times[name].append(1e3 * window(trainer, mine) / args.updates)
        print(f"K={seeds} window {r}: " + ", ".join(f"{n} {times[n][-1]:.2f} ms"
                                                   for n in names), file=sys.stderr, flush=True)
    ratios = [n / o for n, o in zip(times["hasac new"], times["hasac old"])]
    return {"times": times, "ratios": ratios,
            "exact": same_state(sides["hasac old"], sides["hasac new"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="HEAD", help="commit of the old hasac.py and adam.py")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 3])
    parser.add_argument("--windows", type=int, default=15)
    parser.add_argument("--updates", type=int, default=20, help="updates per side and window")
    parser.add_argument("--no-maddpg", dest="maddpg", action="store_false")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    old_adam = old_module(args.old, "rlzoo/optim/adam.py", "_old_rlzoo_adam").MemberAdam
    old_hasac = old_module(args.old, "rlzoo/algos/hasac.py", "_old_rlzoo_hasac").HASAC
    with tempfile.TemporaryDirectory() as tmp:
        results = {k: measure(k, args, old_hasac, old_adam, Path(tmp) / f"k{k}")
                   for k in args.seeds}
    lines = [f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, one "
             f"thread; {args.windows} alternating windows of {args.updates} updates per side; "
             f"old = {args.old}", "",
             "| seeds | side | ms/update (median) | vs hasac old (median, range) | bit-exact |",
             "|---|---|---:|---|---|"]
    for k, r in results.items():
        old = r["times"]["hasac old"]
        for name, times in r["times"].items():
            ratios = [t / o for t, o in zip(times, old)]
            vs = ("" if name == "hasac old" else
                  f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
            exact = ("yes" if r["exact"] else "NO") if name == "hasac new" else ""
            lines.append(f"| {k} | {name} | {statistics.median(times):.2f} | {vs} | {exact} |")
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
