"""Which torch ops of SAC's update give different bits on 1 and 2 threads, on this machine.

    python scripts/thread_ops.py [--obs 11] [--batch 256] [--hidden 256] [--updates 3]
    MKL_CBWR= python scripts/thread_ops.py      # without the strict mode rlzoo sets
    python scripts/thread_ops.py --mm-grid      # 360 matrix products instead
    python scripts/thread_ops.py --speed        # updates per CPU-second on 1 thread instead

Every aten op of ``--updates`` SAC updates (Hopper's sizes by default: 11 observations, 3
actions) runs twice under a ``TorchDispatchMode``: on copies of its inputs on 2 threads, then
for real on 1 thread; the script prints the ops whose outputs (or in-place results) differ, with
their input shapes, and how many ops it saw. Random-number ops always differ here (they draw
twice) and ``new_empty_strided`` returns uninitialised memory: both are left out. ``import
rlzoo`` sets ``MKL_CBWR=AUTO,STRICT`` unless the environment sets ``MKL_CBWR`` (an empty value
leaves oneMKL's default); see rlzoo/config/threads.py and docs/performance.md. ``--mm-grid``
compares ``a @ b`` on 1 and 2 threads for M in (1, 3, 11, 17, 64, 256), K in (8, 32, 256, 1024,
4096), N in (3, 11, 64, 256), with a, b or neither transposed, and prints the shapes that differ.
``--speed`` times 4 rounds of 40 updates on 1 thread by CPU time (best round; a loaded machine
slows the wall clock, less the CPU time of one thread): run it with and without ``MKL_CBWR=``,
alternating, to see what the strict mode costs.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

from rlzoo.algos import SAC, EnvSpec  # noqa: E402
from rlzoo.buffers import Batch  # noqa: E402
from rlzoo.nets import TanhGaussianActor, TwinCritic  # noqa: E402
from rlzoo.optim.entropy import AutoAlpha  # noqa: E402
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args  # noqa: E402

SKIP = ("rand", "randn", "randn_like", "normal", "uniform", "new_empty_strided", "empty")


class Compare(TorchDispatchMode):
    """Runs each op on 2 threads (on copies) and on 1 thread, and counts those that differ."""

    def __init__(self) -> None:
        super().__init__()
        self.differ: collections.Counter[str] = collections.Counter()
        self.seen: collections.Counter[str] = collections.Counter()
        self.shapes: dict[str, list[tuple[int, ...]]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        copy = partial(tree_map, lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x)
        c_args, c_kwargs = copy(args), copy(kwargs)
        torch.set_num_threads(2)
        out2 = func(*c_args, **c_kwargs)
        torch.set_num_threads(1)
        out1 = func(*args, **kwargs)
        name = str(func)
        self.seen[name] += 1
        if name.split(".")[1] in SKIP:
            return out1
        mine = [t for t in tree_flatten((out1, args, kwargs))[0] if isinstance(t, torch.Tensor)]
        theirs = [t for t in tree_flatten((out2, c_args, c_kwargs))[0]
                  if isinstance(t, torch.Tensor)]
        for x, y in zip(mine, theirs):
            if x.dtype.is_floating_point and x.shape == y.shape and not torch.equal(x, y):
                self.differ[name] += 1
                self.shapes.setdefault(name, [tuple(t.shape) for t in tree_flatten(args)[0]
                                              if isinstance(t, torch.Tensor)])
                break
        return out1


def mm_grid() -> None:
    """Print the ``(M, K, N, a transposed, b transposed)`` whose product differs by count."""
    differ, total = [], 0
    for m, k, n in itertools.product([1, 3, 11, 17, 64, 256], [8, 32, 256, 1024, 4096],
                                     [3, 11, 64, 256]):
        for ta, tb in [(False, False), (True, False), (False, True)]:
            a = torch.randn(k, m).t() if ta else torch.randn(m, k)
            b = torch.randn(n, k).t() if tb else torch.randn(k, n)
            torch.set_num_threads(1)
            one = a @ b
            torch.set_num_threads(2)
            total += 1
            if not torch.equal(one, a @ b):
                differ.append((m, k, n, ta, tb))
    print(f"MKL_CBWR={os.environ.get('MKL_CBWR', '')!r}: {len(differ)} of {total} products "
          f"differ on 1 and 2 threads: {differ}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--obs", type=int, default=11)
    parser.add_argument("--act", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--mm-grid", action="store_true", help="matrix products instead")
    parser.add_argument("--speed", action="store_true", help="time updates on 1 thread instead")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.mm_grid:
        return mm_grid()
    spec = EnvSpec(obs_dim=args.obs, act_dim=args.act, action_low=(-1.0,) * args.act,
                   action_high=(1.0,) * args.act)
    hidden = [args.hidden, args.hidden]
    sac = SAC(spec, actor=partial(TanhGaussianActor, **actor_args("sac", hidden=hidden)),
              critic=partial(TwinCritic, **critic_args("twin", hidden=hidden)),
              tuner=partial(AutoAlpha, **tuner_args("auto")), **algo_args("sac"))
    b = args.batch
    batch = Batch(obs=torch.randn(b, args.obs), action=torch.rand(b, args.act) * 2 - 1,
                  reward=torch.randn(b), next_obs=torch.randn(b, args.obs),
                  discount=torch.full((b,), 0.99), terminated=torch.zeros(b))
    if args.speed:
        torch.set_num_threads(1)
        sac.update(batch)
        best = 0.0
        for _ in range(4):
            began = time.process_time()
            for _ in range(40):
                sac.update(batch)
            best = max(best, 40 / (time.process_time() - began))
        print(f"MKL_CBWR={os.environ.get('MKL_CBWR', '')!r}: {best:.1f} updates per CPU-second "
              "on 1 thread (best of 4 x 40)")
        return None
    mode = Compare()
    for _ in range(args.updates):
        with mode:
            sac.update(batch)
    print(f"MKL_CBWR={os.environ.get('MKL_CBWR', '')!r}: {sum(mode.seen.values())} ops of "
          f"{len(mode.seen)} kinds; differing on 1 and 2 threads: {dict(mode.differ) or 'none'}")
    for name, shapes in mode.shapes.items():
        print(f"  {name}: inputs {shapes}")


if __name__ == "__main__":
    main()
