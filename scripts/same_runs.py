"""Do short runs of this checkout repeat those of an older commit bit for bit? A check for a
change that must not change behaviour (a refactor).

    python scripts/same_runs.py --old 2422b8a [--only sac-1 td3-1] [--keep DIR]
    python scripts/same_runs.py --old 2422b8a --record DIR     # the old side once, kept in DIR
    python scripts/same_runs.py --against DIR                  # this checkout against DIR

Each case is one ``python -m rlzoo.train`` command (tiny budgets: Pendulum, Hopper, MPE's
simple_spread; a seed group; input normalizers; FlashSAC's repeated noise; on- and off-policy),
run in a fresh process in the old tree (``git archive`` of ``--old``) and in this one, each into
a run dir of its own, with ``OMP_NUM_THREADS=1`` and ``torch_threads=1`` (the numbers must not
hang on a thread count). Then, for every seed of the case, the two sides must agree exactly on:

* ``summary.json``'s ``final_eval_return``, ``final_eval_return_std``, ``total_steps``,
  ``updates``, ``episodes``, ``buffer_bytes`` and ``group_seeds``;
* every tensor and value of the final checkpoint (the algorithm's weights, targets and optimizer
  moments; each seed's replay or rollout, env state, open episodes, counters and generators; the
  global generators), compared leaf by leaf with ``torch.equal``; the wall time and the thread
  record aside;
* every tensor of ``policy.pt``.

Prints one line per case and exits 1 if any differs (naming the first leaf that does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
SHORT = ["eval.every=500", "eval.episodes=3", "log.every=500", "torch_threads=1",
         "log.progress=false"]
CASES: dict[str, list[str]] = {
    "sac-1": ["algo=sac", "env=Pendulum", "total_steps=1500", "algo.learning_starts=500",
              "seed=3"],
    "sac-2": ["algo=sac", "env=Pendulum", "total_steps=1500", "algo.learning_starts=500",
              "seed=3", "seeds=2"],
    "sac-hopper": ["algo=sac", "env=Hopper", "total_steps=1200", "algo.learning_starts=600",
                   "seed=0"],
    "sac-hopper-2": ["algo=sac", "env=Hopper", "total_steps=1200", "algo.learning_starts=600",
                     "seed=0", "seeds=2", "num_envs=2"],
    "sac-norm-2": ["algo=sac", "env=Pendulum", "total_steps=800", "algo.learning_starts=300",
                   "seed=1", "seeds=2", "num_envs=2", "normalize.obs=true",
                   "normalize.reward=true", "algo.n_step=3"],
    "td3-1": ["algo=td3", "env=Pendulum", "total_steps=1500", "algo.learning_starts=500",
              "seed=3"],
    "flashsac-2": ["algo=flashsac", "env=Hopper", "total_steps=600", "algo.learning_starts=200",
                   "seed=2", "seeds=2", "num_envs=2", "algo.actor.network.hidden_dim=32",
                   "critic.network.hidden_dim=32", "algo.batch_size=32"],
    "hasac-1": ["algo=hasac", "env=mpe/simple_spread", "total_steps=800",
                "algo.learning_starts=300", "seed=3"],
    "hasac-2": ["algo=hasac", "env=mpe/simple_spread", "total_steps=800",
                "algo.learning_starts=300", "seed=3", "seeds=2"],
    "coma-1": ["algo=coma", "env=mpe/simple_spread", "total_steps=800", "algo.rollout_steps=50",
               "seed=3"],
    "coma-2": ["algo=coma", "env=mpe/simple_spread", "total_steps=800", "algo.rollout_steps=50",
               "seed=3", "seeds=2"],
}
SUMMARY_KEYS = ("final_eval_return", "final_eval_return_std", "total_steps", "updates",
                "episodes", "buffer_bytes", "group_seeds")
SKIPPED = ("wall_time", "torch_threads")  # timings, and the thread record (its timings)


def old_tree(spec: str, tmp: Path) -> Path:
    """``spec``: a directory holding an rlzoo tree, or a commit of this repository (exported
    with ``git archive`` into ``tmp``)."""
    if Path(spec).is_dir():
        return Path(spec).resolve()
    archive = tmp / "old.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", spec], stdout=f, check=True)
    tree = tmp / "old"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run(tree: Path, name: str, out: Path) -> Path:
    """Case ``name`` trained by the rlzoo of ``tree`` into ``out / name``; its home dir."""
    run_dir = out / name / "run-s0"
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "rlzoo.train", *CASES[name], *SHORT,
           f"hydra.run.dir={run_dir}"]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{name} failed in {tree}:\n{done.stderr[-3000:]}")
    return run_dir


def members(home: Path) -> list[Path]:
    """Every seed's run dir of the group whose home is ``home``."""
    group = json.loads((home / "group.json").read_text())
    return [home.parent / name for name in group["members"]]


def leaves(tree: Any, path: str = "") -> dict[str, Any]:
    """``{dotted path: leaf}`` of nested dicts and lists (the skipped keys left out)."""
    if isinstance(tree, dict):
        return {k: v for key in sorted(tree, key=str) if str(key) not in SKIPPED
                for k, v in leaves(tree[key], f"{path}.{key}" if path else str(key)).items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, item in enumerate(tree) for k, v in leaves(item, f"{path}.{i}").items()}
    return {path: tree}


def first_difference(a: Any, b: Any) -> str | None:
    """The first leaf where ``a`` and ``b`` differ (tensors: dtype, shape and bits), else
    None."""
    la, lb = leaves(a), leaves(b)
    if la.keys() != lb.keys():
        return f"keys differ: {sorted(set(la) ^ set(lb))[:5]}"
    for key, x in la.items():
        y = lb[key]
        if torch.is_tensor(x) or torch.is_tensor(y):
            if not (torch.is_tensor(x) and torch.is_tensor(y) and x.dtype == y.dtype
                    and x.shape == y.shape and torch.equal(x, y)):
                return key
        elif hasattr(x, "shape"):  # numpy
            if not (hasattr(y, "shape") and x.shape == y.shape and (x == y).all()):
                return key
        elif x != y and not (x != x and y != y):  # NaN == NaN here
            return key
    return None


def newest_checkpoint(home: Path) -> Path:
    return sorted((home / "checkpoints").glob("step_*.pt"))[-1]


def compare(old: Path, new: Path) -> str | None:
    """The first thing in which the runs whose homes are ``old`` and ``new`` differ."""
    for a, b in zip(members(old), members(new), strict=True):
        sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
        for key in SUMMARY_KEYS:
            if sa[key] != sb[key]:
                return f"{b.name} summary {key}: {sa[key]} != {sb[key]}"
        pa, pb = (torch.load(d / "policy.pt", weights_only=True) for d in (a, b))
        if (where := first_difference(pa["weights"], pb["weights"])) is not None:
            return f"{b.name} policy.pt {where}"
    ca, cb = (newest_checkpoint(d) for d in (old, new))
    if ca.name != cb.name:
        return f"checkpoints {ca.name} != {cb.name}"
    state_a, state_b = (torch.load(c, weights_only=True) for c in (ca, cb))
    if (where := first_difference(state_a, state_b)) is not None:
        return f"checkpoint {ca.name}: {where}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", help="a commit of this repository or an rlzoo tree")
    parser.add_argument("--record", type=Path, help="run the old side only, into this dir")
    parser.add_argument("--against", type=Path, help="a dir --record wrote: the old side")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), help="these cases only")
    parser.add_argument("--keep", type=Path, help="keep this checkout's runs here")
    args = parser.parse_args(argv)
    names = args.only or list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        if args.against is None:
            if args.old is None:
                parser.error("give --old or --against")
            tree = old_tree(args.old, Path(tmp))
            old_out = args.record or Path(tmp) / "old-runs"
            for name in names:
                run(tree, name, old_out)
                print(f"{name}: old side done", flush=True)
            if args.record is not None:
                return 0
        else:
            old_out = args.against
        new_out = args.keep or Path(tmp) / "new-runs"
        failed = 0
        for name in names:
            home = run(REPO, name, new_out)
            why = compare(old_out / name / "run-s0", home)
            failed += why is not None
            print(f"{name}: {'same' if why is None else 'DIFFERENT: ' + why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
