"""The GPU check, one part per call of at most ten minutes on one GPU: one table, written as it
goes.

    python scripts/gpu_check.py [--part trainer|envs|humanoid|spread] [--out DIR] [--budget S]
                                [--dry-run]

``--part trainer`` (the default; issue 40, at most eight minutes), in order (the most wanted rows
first, so that a run cut short still leaves them):

1. the ``cuda`` tests (``pytest -m cuda``: graphed updates equal eager for every algorithm, the
   capture fix, the CUDA checkpoint and policy round trips);
2. the headline command, ``python -m rlzoo.train algo=sac env=Humanoid device=cuda``, with
   ``cudagraphs=false`` (eager) and at its default (``cudagraphs=auto``: captured);
3. Stable-Baselines3's SAC with the same settings on the same GPU (when it is installed);
4. ``seeds=10`` against ``seeds=1`` (the default, captured): per-seed env steps/s and wall ratio;
5. every algorithm's env steps/s at its defaults (single-agent ones on Hopper, multi-agent ones on
   MPE simple_spread), SimbaV2 and FlashSAC first.

``--part envs``, ``humanoid`` and ``spread`` are issue 41's many envs on the device
(``scripts/gpu_check_envs.py`` says what each runs): device env steps/s and two trainers' speed;
FlashSAC on Humanoid for nine minutes of wall time; MADDPG on simple_spread for nine minutes.
They need the warp extra (``pip install rlzoo[warp]``) for the MuJoCo rows.

Each rlzoo row is the real CLI in a subprocess; its env steps/s is the rate between two logs
(``perf/sps`` in TensorBoard, their wall times), after the random warm-up and the graphs'
capture, as issue 40 measured (steps 1,000-3,000 of SAC on Humanoid, UTD 1, batch 256, 256x256).
The replay holds every step of the run (``algo.buffer_size``), which changes no sample. SB3's
rate is taken over the same steps with a callback. Every command gets a timeout from what is
left of ``--budget`` seconds; a row that fails or times out says so in one line. The table is
rewritten after every row to ``DIR/gpu_check.md`` (and ``gpu_check.json``), ``DIR`` being
``--out``, else ``$OUT``, else ``./gpu_check``.

``--dry-run`` runs a part on the CPU at tiny sizes (Pendulum, 150 steps; the envs parts on Hopper
and a few MPE envs): the test of this script (tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling modules, however loaded
from gpu_check_rows import (  # noqa: E402
    REPO,
    Check,
    last_line,
    pytest_summary,
    rlzoo_row,
    run,
)

__all__ = ["pytest_summary"]

SINGLE = ("sac", "simbav2", "flashsac", "td3", "dsac_t", "redq", "stac")
MULTI = ("maddpg", "hasac", "coma")
TARGETS = ("Targets (issue 40): the headline command >= 1,000 env steps/s and >= 8x SB3; SimbaV2 "
           "and FlashSAC >= 400 env steps/s for one seed; seeds=10 in <= 1.5x the wall of "
           "seeds=1.")
PARTS = ("trainer", "envs", "humanoid", "spread")


SB3_CODE = """
import json, sys, time
import gymnasium as gym
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
env_id, device, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
times = {}
class Clock(BaseCallback):
    def _on_step(self):
        if self.num_timesteps in (first, last):
            if device == "cuda":
                torch.cuda.synchronize()
            times[self.num_timesteps] = time.perf_counter()
        return True
model = SAC("MlpPolicy", gym.make(env_id), learning_starts=first, batch_size=256,
            buffer_size=last, train_freq=1, gradient_steps=1, device=device, seed=0,
            policy_kwargs={"net_arch": [256, 256]})
model.learn(last, callback=Clock())
print(json.dumps({"sps": (last - first) / (times[last] - times[first])}))
"""


def sb3_row(check: Check, env_id: str, first: int, last: int, cap: float) -> dict[str, Any]:
    setting = f"Stable-Baselines3 SAC, {env_id}, same settings"
    try:
        import stable_baselines3  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure is a row
        return check.add(check="sb3", setting=setting, sps=None,
                         status=f"not run: stable_baselines3 is not importable ({err})")
    status, out = run([sys.executable, "-c", SB3_CODE, env_id, check.device, str(first),
                       str(last)], check.timeout(cap))
    if status != 0:
        return check.add(check="sb3", setting=setting, sps=None,
                         status="timed out" if status is None else f"failed: {last_line(out)}")
    sps = json.loads(out.strip().splitlines()[-1])["sps"]
    return check.add(check="sb3", setting=setting, sps=sps, status="ok")


def cuda_tests(check: Check) -> None:
    files = [str(REPO / "tests" / f) for f in ("test_accel.py", "test_capture.py",
                                               "test_cuda_runs.py")]
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
           "-m", "cuda", *[f for f in files if Path(f).exists()]]
    status, out = run(cmd, check.timeout(180 if not check.args.dry_run else 120))
    summary = pytest_summary(out)
    failed = [line.split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED")]
    check.add(check="cuda tests", setting="pytest -m cuda", sps=None,
              status={None: "timed out: ", 0: "ok: "}.get(status, "failed: ") + summary
              + (f" ({', '.join(failed[:6])})" if failed else ""), failed=failed)


def trainer(check: Check) -> None:
    """Issue 40's rows: the cuda tests, the headline eager and captured, SB3, a seed group,
    every algorithm."""
    args, dry = check.args, check.args.dry_run
    check.targets = TARGETS
    # the window: steps [first, last] after the random warm-up (first = learning_starts)
    first, last = (50, 150) if dry else (1000, 3000)
    env = "Pendulum" if dry else "Humanoid"
    small = ["algo.batch_size=32", "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]"] \
        if dry else []
    common = [f"total_steps={last}", f"algo.learning_starts={first}", f"algo.buffer_size={last}",
              f"log.every={(last - first) // 2}", *small]
    if not args.skip_tests:
        cuda_tests(check)
    head = ["algo=sac", f"env={env}", *common]
    eager = rlzoo_row(check, "headline", f"algo=sac env={env} cudagraphs=false (eager)",
                      [*head, "cudagraphs=false"], first, last, 90)
    graphed = rlzoo_row(check, "headline", f"algo=sac env={env} (default: cudagraphs=auto)",
                        head, first, last, 90)
    sb3 = sb3_row(check, "Pendulum-v1" if dry else "Humanoid-v5", first, last, 120)
    for row in (eager, graphed):
        if row.get("sps") and sb3.get("sps"):
            row["relative"] = f"{row['sps'] / sb3['sps']:.2f}x SB3"
    seeds = 2 if dry else 10
    group = rlzoo_row(check, "seeds", f"algo=sac env={env} seeds={seeds} (per seed)",
                      [*head, f"seeds={seeds}"], first, last, 150)
    if group.get("sps") and graphed.get("sps"):
        group["relative"] = f"wall {graphed['sps'] / group['sps']:.2f}x seeds=1"
    check.write()
    algorithms(check)


def algorithms(check: Check) -> None:
    """Every algorithm of ``--algos`` at its defaults, one window each."""
    dry = check.args.dry_run
    single_env, multi_env = ("Pendulum", "mpe/simple_spread") if dry else \
        ("Hopper", "mpe/simple_spread")
    for algo in check.args.algos:
        # the window starts after the warm-up (multi-agent: at least one batch of 1,000)
        a_first, a_last = (50, 150) if dry else (1000, 2000) if algo in MULTI else (500, 1500)
        env_name = multi_env if algo in MULTI else single_env
        overrides = [f"algo={algo}", f"env={env_name}", f"total_steps={a_last}",
                     f"++algo.learning_starts={a_first}", f"++algo.buffer_size={a_last}",
                     f"log.every={(a_last - a_first) // 2}"]
        if dry:
            overrides.append("++algo.batch_size=32")
        rlzoo_row(check, "algorithm", f"algo={algo} env={env_name}", overrides, a_first, a_last,
                  60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=PARTS, default="trainer",
                        help="which check (default trainer: issue 40's)")
    parser.add_argument("--out", default=None, help="directory of the table (default $OUT)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds in all (default 470; humanoid and spread: 580)")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (a test)")
    parser.add_argument("--skip-tests", action="store_true", help="no pytest row")
    parser.add_argument("--algos", nargs="*", default=[*SINGLE, *MULTI],
                        help="algorithms of the trainer part's last section (default: all)")
    args = parser.parse_args()
    if args.budget is None:
        args.budget = 580.0 if args.part in ("humanoid", "spread") else 470.0
    check = Check(args)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        check.add(check="setup", setting="", sps=None, status="no CUDA device: nothing measured")
        sys.exit(1)
    if args.part == "trainer":
        trainer(check)
    else:
        import gpu_check_envs

        getattr(gpu_check_envs, args.part)(check)
    shutil.rmtree(check.tmp, ignore_errors=True)
    failed = [r for r in check.rows if not str(r["status"]).startswith("ok")
              and r["check"] != "sb3"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
