"""The GPU check's parts for issue 41 (many envs on the device), each one call of at most ten
minutes; ``scripts/gpu_check.py --part envs|humanoid|spread`` runs them.

``envs`` (about six minutes):

1. ``env.backend=warp`` env steps/s, Humanoid-v5 with random actions at 1, 64, 1,024 and 8,192
   worlds (``scripts/bench_mujoco_warp.py speed``; the first row pays Warp's kernel compilation);
2. ``env.backend=batched`` MPE simple_spread env steps/s at 1,024, 8,192 and 65,536 envs, the
   step's tensors left on the device (``scripts/bench_mpe_batched.py``);
3. the trainer on the device backends: ``algo=flashsac_gpu`` on Humanoid-v5 (1,024 warp worlds,
   its batch 2,048 and 2 updates per vector step) and ``algo=maddpg`` on simple_spread (1,024
   batched envs, 2 updates per vector step), env steps/s over 150 vector steps after the warm-up.

``humanoid``: ``algo=flashsac_gpu env=Humanoid env.backend=warp`` for nine minutes of wall time
(from the command's start: imports, compilation and warm-up included), evaluated every 1,024,000
env steps (10 episodes); the row says when an evaluation first reached 5,000, the best one, and the
env steps made. ``spread``: ``algo=maddpg env=mpe/simple_spread env.backend=batched`` with 1,024
envs and 2 updates per vector step for nine minutes; the row says the env steps made (target
10M) and the last evaluation. Both read the run's progress lines as they come (every 10 s and at
each evaluation) and kill it at the deadline.

Issue 41's targets: >= 100,000 Humanoid env steps/s on the device backend; SAC or FlashSAC at a
Humanoid-v5 return of 5,000 inside 9 minutes; MADDPG or HASAC on simple_spread past 10M env steps
inside 9 minutes. ``--dry-run`` runs each part on the CPU at tiny sizes (Hopper on Warp's CPU
device, when the warp extra is installed; 64 MPE envs).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from typing import Any

from gpu_check_rows import REPO, Check, Timeline, deadline_run, last_line, rlzoo_row, run

TARGETS = ("Targets (issue 41): >= 100,000 Humanoid env steps/s on the device backend; SAC or "
           "FlashSAC reaching a Humanoid-v5 return of 5,000 inside 9 minutes of wall time; "
           "MADDPG or HASAC on simple_spread past 10M env steps inside 9 minutes.")
WARP_EXTRA = "pip install rlzoo[warp]"
MINUTES_9 = 540.0  # the targets' wall time, seconds from the command's start
RETURN_TARGET = 5_000.0  # Humanoid-v5 eval return
STEPS_TARGET = 10_000_000  # simple_spread env steps
TWO_PER_VECTOR_STEP = 2 / 1024  # algo.utd of 2 updates per vector step of 1,024 envs
# a markdown row of the bench scripts: | cells | ... | (numbers with thousands commas)
ROW = re.compile(r"^\|(.+)\|\s*$")


def warp_missing() -> bool:
    return (importlib.util.find_spec("mujoco_warp") is None
            or importlib.util.find_spec("warp") is None)


def table_rows(out: str) -> list[list[str]]:
    """The data rows of the markdown tables in ``out`` (header and rule rows left out)."""
    rows = []
    for line in out.splitlines():
        m = ROW.match(line.strip())
        if m:
            cells = [c.strip() for c in m.group(1).split("|")]
            if cells[0] not in ("task", "envs") and not set(cells[0]) <= set("-: "):
                rows.append(cells)
    return rows


def number(cell: str) -> float | None:
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def envs(check: Check) -> None:
    """Device env steps/s (warp Humanoid, batched MPE), then the two trainers' speed."""
    check.targets = TARGETS
    warp_speed(check)
    mpe_speed(check)
    trainers(check)


def warp_speed(check: Check) -> None:
    dry, device = check.args.dry_run, check.device
    task, worlds, steps = ("Hopper-v5", (1, 4), 2) if dry else ("Humanoid-v5",
                                                                (1, 64, 1024, 8192), 100)
    for i, n in enumerate(worlds):
        setting = f"env.backend=warp {task}, {n:,} world{'s' * (n > 1)}, random actions"
        if warp_missing():
            check.add(check="warp env", setting=setting, sps=None,
                      status=f"not run: needs MuJoCo Warp ({WARP_EXTRA})")
            continue
        cmd = [sys.executable, str(REPO / "scripts" / "bench_mujoco_warp.py"), "speed",
               "--device", device, "--tasks", task, "--worlds", str(n), "--steps", str(steps),
               "--warmup", "1" if dry else "5", "--gym-steps", "0"]
        status, out = run(cmd, check.timeout(300 if i == 0 else 120))  # the first compiles
        found = [r for r in table_rows(out) if r[0] == task]
        sps = number(found[-1][3]) if status == 0 and found else None
        check.add(check="warp env", setting=setting, sps=sps, cmd=" ".join(cmd[1:]),
                  relative="" if sps is None or dry else
                  f"{sps / 100_000:.2f}x the 100,000 target",
                  status="ok" if sps is not None else
                  "timed out" if status is None else f"failed: {last_line(out)}")


def mpe_speed(check: Check) -> None:
    dry = check.args.dry_run
    sizes = ("64", "256") if dry else ("1024", "8192", "65536")
    cmd = [sys.executable, str(REPO / "scripts" / "bench_mpe_batched.py"), "--device",
           check.device, "--envs", *sizes, "--seconds", "0.5" if dry else "3",
           "--max-pettingzoo", "0"]
    status, out = run(cmd, check.timeout(90))
    found = {number(r[0]): number(r[3]) for r in table_rows(out) if len(r) == 4}
    for size in sizes:
        sps = found.get(float(size)) if status == 0 else None
        check.add(check="batched env", setting=f"env.backend=batched simple_spread, {int(size):,}"
                  " envs, random actions, tensors", sps=sps, cmd=" ".join(cmd[1:]),
                  status="ok" if sps is not None else
                  "timed out" if status is None else f"failed: {last_line(out)}")


def trainers(check: Check) -> None:
    dry = check.args.dry_run
    E = 4 if dry else 1024
    first = E * (10 if dry else 100)  # learning starts after 100 vector steps (dry: 10)
    last = first + E * (10 if dry else 150)
    common = [f"num_envs={E}", f"total_steps={last}", f"algo.learning_starts={first}",
              f"algo.buffer_size={last}", f"log.every={E * (5 if dry else 50)}"]
    task = "Hopper" if dry else "Humanoid"
    setting = f"algo=flashsac_gpu env={task} env.backend=warp num_envs={E}"
    if warp_missing():
        check.add(check="trainer", setting=setting, sps=None,
                  status=f"not run: needs MuJoCo Warp ({WARP_EXTRA})")
    else:
        small = ["algo.batch_size=32", "algo.utd=0.25"] if dry else []
        rlzoo_row(check, "trainer", setting, ["algo=flashsac_gpu", f"env={task}",
                                              "env.backend=warp", *common, *small],
                  first, last, 240)
    E = 64 if dry else 1024
    first, last = E * 10, E * (20 if dry else 160)
    rlzoo_row(check, "trainer", f"algo=maddpg env=mpe/simple_spread env.backend=batched "
              f"num_envs={E} algo.utd=2/1024",
              ["algo=maddpg", "env=mpe/simple_spread", "env.backend=batched", f"num_envs={E}",
               f"total_steps={last}", f"algo.learning_starts={first}", f"algo.buffer_size={last}",
               f"algo.utd={TWO_PER_VECTOR_STEP}", f"log.every={E * 5}",
               *(["algo.batch_size=32"] if dry else [])], first, last, 120)


def timed(check: Check, name: str, setting: str, overrides: list[str],
          seconds: float) -> Timeline | None:
    """One CLI run for ``seconds`` of wall time (less when the budget is shorter); None when it
    failed (the row says how)."""
    run_dir = check.tmp / name.replace(" ", "-")
    cmd = [sys.executable, "-m", "rlzoo.train", *overrides, f"device={check.device}",
           "checkpoint.every=0", "log.progress=false", "log.progress_every_s=10",
           f"hydra.run.dir={run_dir}"]
    given = min(seconds, check.timeout(seconds + 30.0))
    if given < seconds * 0.5:
        check.add(check=name, setting=setting, sps=None, cmd=" ".join(cmd[1:]),
                  status=f"not run: {given:.0f} s of the budget left for {seconds:.0f}")
        return None
    timeline = deadline_run(cmd, given)
    shutil.rmtree(run_dir, ignore_errors=True)
    if timeline.status not in (None, 0) or timeline.steps_by(given + 1.0) == 0:
        out = "\n".join(line for _, line in timeline.lines)
        what = "failed" if timeline.status not in (None, 0) else "no progress line"
        check.add(check=name, setting=setting, sps=None, cmd=" ".join(cmd[1:]),
                  status=f"{what}: {last_line(out)}")
        return None
    check.rows.append({"check": name, "setting": setting, "cmd": " ".join(cmd[1:])})
    return timeline


def ran_for(timeline: Timeline) -> tuple[float, str]:
    """The seconds the run had (its deadline, or when it finished) and how to say it."""
    if timeline.status is None:
        return timeline.deadline, f"stopped at {timeline.deadline:.0f} s"
    end = timeline.lines[-1][0] if timeline.lines else timeline.deadline
    return end, f"finished at {end:.0f} s"


def humanoid(check: Check) -> None:
    """FlashSAC on Humanoid-v5 on the warp backend for nine minutes: when it reaches 5,000."""
    check.targets = TARGETS
    dry = check.args.dry_run
    if warp_missing():
        check.add(check="humanoid 9 min", setting="algo=flashsac_gpu env=Humanoid "
                  "env.backend=warp", sps=None, status=f"not run: needs MuJoCo Warp ({WARP_EXTRA})")
        return
    overrides = (["env=Hopper", "num_envs=4", "total_steps=200", "algo.learning_starts=80",
                  "algo.batch_size=32", "algo.utd=0.25", "eval.every=100", "eval.episodes=2",
                  "log.every=100"] if dry else
                 ["env=Humanoid", "total_steps=50000896", "eval.every=1024000",
                  "eval.episodes=10", "log.every=102400"])
    setting = f"algo=flashsac_gpu env={'Hopper' if dry else 'Humanoid'} env.backend=warp, " \
              f"{'4' if dry else '1,024'} envs, nine minutes"
    timeline = timed(check, "humanoid 9 min", setting,
                     ["algo=flashsac_gpu", "env.backend=warp", *overrides],
                     60.0 if dry else MINUTES_9)
    if timeline is not None:
        say_humanoid(check, timeline)


def say_humanoid(check: Check, timeline: Timeline) -> None:
    seconds, how = ran_for(timeline)
    steps = timeline.steps_by(seconds + 1.0)
    evals = timeline.evals()
    hit = timeline.first_at_least(RETURN_TARGET)
    best = max(evals, key=lambda e: e[2], default=None)
    parts = [how, f"{steps:,} env steps by the last progress line"]
    if hit is not None:
        parts.append(f"eval return {hit[2]:,.1f} >= 5,000 at {hit[0]:.0f} s (step {hit[1]:,})")
    if best is not None:
        parts.append(f"best eval return {best[2]:,.1f} at {best[0]:.0f} s (step {best[1]:,})")
    row: dict[str, Any] = check.rows[-1]
    row.update(sps=steps / seconds if seconds > 0 else None, status="ok: " + "; ".join(parts),
               relative="target met" if hit is not None and hit[0] <= MINUTES_9 else
               "target not met", best=best, first_at_target=hit, steps=steps)
    check.write()


def spread(check: Check) -> None:
    """MADDPG on simple_spread with 1,024 batched envs for nine minutes: the env steps made."""
    check.targets = TARGETS
    dry = check.args.dry_run
    E = 64 if dry else 1024
    overrides = ["algo=maddpg", "env=mpe/simple_spread", "env.backend=batched", f"num_envs={E}",
                 f"algo.utd={TWO_PER_VECTOR_STEP}", f"algo.learning_starts={E * 100}",
                 f"eval.every={E * (50 if dry else 1024)}", "eval.episodes=10",
                 f"log.every={E * (50 if dry else 1024)}",
                 f"total_steps={E * 200 if dry else 100_000_000}",
                 *(["algo.batch_size=32"] if dry else [])]
    timeline = timed(check, "spread 9 min", f"algo=maddpg env=mpe/simple_spread "
                     f"env.backend=batched, {E:,} envs, algo.utd=2/1024, nine minutes",
                     overrides, 60.0 if dry else MINUTES_9)
    if timeline is None:
        return
    seconds, how = ran_for(timeline)
    steps = timeline.steps_by(seconds + 1.0)
    evals = timeline.evals()
    parts = [how, f"{steps:,} env steps by the last progress line"]
    if evals:
        parts.append(f"last eval return {evals[-1][2]:,.1f} at step {evals[-1][1]:,}")
    row = check.rows[-1]
    row.update(sps=steps / seconds if seconds > 0 else None, status="ok: " + "; ".join(parts),
               relative="target met" if steps >= STEPS_TARGET and seconds <= MINUTES_9 + 1
               else "target not met", steps=steps)
    check.write()
