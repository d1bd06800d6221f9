"""K seeds in one process (``seeds=K``) against the alternatives, side by side, in one run.

    python scripts/bench_seeds.py --algos sac td3 --env Hopper --seeds 5 --steps 1000 \\
        --warmup 1000 --repeats 2 [--marl] [--threads N] [--out snippet.md] [--json raw.json]

Every arrangement trains K seeds (``seed .. seed + K - 1``) for ``--warmup`` uniform random steps
(``learning_starts``) and then ``--steps`` more env steps per seed at UTD 1 (one gradient update
per env step and seed), and reports **aggregate seed-steps/s**: K x ``--steps`` divided by the
wall time of the timed phase, which is only the phase after the warm-up:

* rlzoo runs (the real CLI, ``python -m rlzoo.train``): the timed phase of a run goes from the
  TensorBoard wall time of its ``perf/sps`` log at step ``warmup`` to that at step
  ``warmup + steps`` (``log.every`` = gcd(warmup, steps); the log at step ``warmup`` is written
  before the first update, the one at ``warmup + steps`` after the last; the final evaluation,
  1 episode, and the final checkpoint come after it). Each run's ``summary.json`` is checked to
  hold the expected number of updates.
* Stable-Baselines3 runs (a benchmark peer, not a dependency; this script in a worker process):
  ``learn(warmup)``, then a wall-clock-timed ``learn(steps, reset_num_timesteps=False)``; its
  gradient-step count is checked too.
* Concurrent processes: each process first imports (torch, Hydra, gymnasium, MuJoCo, rlzoo or
  SB3), then waits at a barrier; all are released together to build and train. The phase runs
  from the first process entering its timed phase to the last one leaving it (``time.time()``
  in every process), so time when only some of them train counts against the arrangement: a
  lower bound. The JSON also holds the sum of each process's own rate (an upper bound) and the
  overlap of the windows (1 = they trained exactly together). rlzoo runs go through a small
  launcher (this script, ``--launch``) that does the imports, waits, and then runs
  ``rlzoo.train`` as ``python -m rlzoo.train`` would (``runpy``); every rlzoo arrangement uses it.
* K in a row: K x ``--steps`` over the sum of the K timed phases.

Arrangements (``--only`` picks some by name):

* ``group``: rlzoo ``seeds=K`` in one process, default threads;
* ``procs-1t``: K rlzoo processes at once, ``torch_threads=1`` and ``OMP_NUM_THREADS=1`` each;
* ``procs``: K rlzoo processes at once, default threads each;
* ``alone``: one rlzoo run of one seed, default threads (K in a row would run at this rate);
* ``sb3-procs-1t``: K SB3 processes at once, ``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``;
* ``sb3-row``: K SB3 runs one after another, default threads.

SAC and TD3 run with the same settings on both sides: 256x256 MLPs (``--hidden``), batch 256,
UTD 1 (``train_freq=1, gradient_steps=1``), replay 1e6, lr 3e-4 for every optimizer (SAC's
temperature too), ``learning_starts = --warmup``; TD3 with policy delay 2, target noise 0.2
clipped at 0.5, exploration noise 0.1 (SB3: ``NormalActionNoise(0, 0.1)`` in its [-1, 1] action
space, like rlzoo's). ``--marl`` adds MADDPG on ``mpe/simple_spread`` (rlzoo only: ``group``,
``procs-1t``, ``procs``, ``alone``) with its own defaults (batch 1000, UTD 0.25, lrs 5e-4/1e-3,
nets ``--hidden``). "Default threads" means no ``torch_threads`` and the caller's environment
(``OMP_NUM_THREADS`` if set); ``--threads N`` gives those arrangements ``torch_threads=N`` (SB3:
``torch.set_num_threads(N)``) and sets N threads in this process.

In the same run it measures what bounds the update: the best fp32 matmul rate (square n = 256,
512, 1024, 2048 and a batched ``[10, 256, 256]`` bmm; best of 3 windows after a warm-up window,
at the start and again at the end, best kept) and the bf16 rate of the same shapes (reported
as measured, whether or not the CPU has native bf16); the GFLOP of one update
(``torch.utils.flop_counter`` over 20 real updates of a built algorithm, so delayed actor steps
are averaged in; also counted for the K-seed group); and the in-process update rate of one
algorithm and of a K-seed group (``stack_seeds`` of K algorithms built by
``rlzoo.config.build.build_algorithm``, synthetic batches, ``[K, B, ...]`` for the group;
interleaved windows, best of 3). The update roofline is K x GFLOP/update x group updates/s over
the best fp32 rate (K = 1 for one algorithm); the training roofline of an arrangement is GFLOP per
env step x aggregate seed-steps/s over the same rate.

Runs go to a temporary directory, removed as each run is read. A run that fails prints its stderr
tail; the others still run and the script exits 1 at the end. Interference from other tenants
only ever slows a run down, so the best of the interleaved repeats is reported (every repeat is
printed too); the arrangements' order rotates from one repeat to the next.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
ENV_IDS = {"Hopper": "Hopper-v5", "Humanoid": "Humanoid-v5", "HalfCheetah": "HalfCheetah-v5",
           "Walker2d": "Walker2d-v5", "Ant": "Ant-v5", "Swimmer": "Swimmer-v5",
           "Pendulum": "Pendulum-v1"}
MARL_ENV = "mpe/simple_spread"
ARRANGEMENTS = ("group", "procs-1t", "procs", "alone", "sb3-procs-1t", "sb3-row")
DESCRIPTION = {
    "group": "rlzoo seeds=K, 1 process",
    "procs-1t": "rlzoo, K processes at once, 1 thread each",
    "procs": "rlzoo, K processes at once, default threads",
    "alone": "rlzoo, 1 seed alone (= K in a row)",
    "sb3-procs-1t": "SB3, K processes at once, 1 thread each",
    "sb3-row": "SB3, K in a row, default threads",
}
RESULT_TAG = "BENCH_SEEDS_RESULT "
FLOP_PERIOD = 20  # updates averaged for the FLOP count (whole cycles of delayed actor steps)


# --------------------------------------------------------------------------- the machine


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine() -> dict[str, Any]:
    flags = cpu_flags()
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags,
        "python": platform.python_version(), "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def matmul_rates(dtype: torch.dtype, seconds: float) -> dict[str, float | None]:
    """GFLOP/s of square matmuls (n = 256..2048) and a batched [10, 256, 256] bmm in ``dtype``:
    best of 3 timed windows of ``seconds`` after one warm-up window. A window holds at least one
    product; a shape whose one product would take over ``max(3, 4 * seconds)`` s at the best
    rate seen so far (a dtype without native kernels: bf16 on a CPU without AVX-512 BF16 or AMX
    runs at a few GFLOP/s) is skipped (None)."""
    shapes = {f"n{n}": (n, n, n, 1) for n in (256, 512, 1024, 2048)}
    shapes["bmm10x256"] = (256, 256, 256, 10)
    result: dict[str, float | None] = {}
    for name, (m, k, n, batch) in shapes.items():
        flop = 2 * batch * m * k * n
        seen = [r for r in result.values() if r]
        if seen and flop / (max(seen) * 1e9) > max(3.0, 4 * seconds):
            result[name] = None
            continue
        a = torch.randn(batch, m, k).to(dtype).squeeze(0)
        b = torch.randn(batch, k, n).to(dtype).squeeze(0)
        best = 0.0
        for window in range(4):
            reps, start = 0, time.perf_counter()
            while reps == 0 or time.perf_counter() - start < seconds:
                torch.matmul(a, b)
                reps += 1
            elapsed = time.perf_counter() - start
            if window:
                best = max(best, flop * reps / elapsed / 1e9)
            if elapsed > 20 * max(seconds, 0.05):  # far too slow for more windows
                best = max(best, flop * reps / elapsed / 1e9)
                break
        result[name] = best
    return result


def merge_best(*passes: dict[str, float | None]) -> dict[str, float | None]:
    """The best rate of each shape over the passes (None where no pass measured it)."""
    best: dict[str, float | None] = {}
    for k in passes[0]:
        rates = [p[k] for p in passes if p.get(k) is not None]
        best[k] = max(rates) if rates else None  # type: ignore[type-var]
    return best


def peak_of(rates: dict[str, float | None]) -> float:
    return max(r for r in rates.values() if r is not None)


def rates_line(rates: dict[str, float | None]) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in rates.items())


# --------------------------------------------------------------------------- run commands


def hidden_str(hidden: list[int]) -> str:
    return "[" + ",".join(str(h) for h in hidden) + "]"


def rlzoo_overrides(args: argparse.Namespace, algo: str) -> list[str]:
    """The config of one seed's run (without seed, seeds, threads and run dir)."""
    h = hidden_str(args.hidden)
    common = [f"algo={algo}", f"total_steps={args.warmup + args.steps}",
              f"algo.learning_starts={args.warmup}",
              f"log.every={math.gcd(args.warmup, args.steps)}",
              "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
              "device=cpu", f"algo.actor.hidden={h}", f"critic.hidden={h}"]
    if algo == "maddpg":
        return [*common, f"env={MARL_ENV}", f"algo.batch_size={args.marl_batch}"]
    common += [f"env={args.env}", f"algo.batch_size={args.batch}", "algo.utd=1",
               f"algo.buffer_size={args.buffer_size}",
               "algo.actor_lr=3e-4", "algo.critic_lr=3e-4"]
    if algo == "sac":
        return [*common, "tuner.lr=3e-4", "algo.policy_delay=1"]
    if algo == "td3":
        return [*common, "algo.policy_delay=2", "algo.policy_noise=0.2", "algo.noise_clip=0.5",
                "algo.exploration_noise=0.1"]
    raise SystemExit(f"bench_seeds: algo {algo!r} is not benchmarked here (sac, td3; maddpg "
                     "with --marl)")


def utd(algo: str) -> float:
    return 0.25 if algo == "maddpg" else 1.0


@dataclass
class Job:
    """One process of an arrangement."""

    label: str
    cmd: list[str]
    env: dict[str, str]
    dirs: list[Path]  # rlzoo: every seed's run dir; SB3: []
    log: Path
    barrier: Path  # the process waits, once started up, until barrier/go exists
    name: str
    proc: subprocess.Popen[bytes] | None = None
    out: Any = None
    started: float = 0.0
    ended: float = 0.0
    windows: list[tuple[float, float]] = field(default_factory=list)  # per seed (t0, t1)


def child_env(single_thread: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    if single_thread:
        env["OMP_NUM_THREADS"] = "1"
    return env


def rlzoo_job(args: argparse.Namespace, algo: str, root: Path, name: str, seed: int, seeds: int,
              threads: int | None) -> Job:
    run_dir = root / f"{name}-s{seed}"
    argv = [*rlzoo_overrides(args, algo), f"seed={seed}", f"hydra.run.dir={run_dir}"]
    if seeds > 1:
        argv.append(f"seeds={seeds}")
    if threads is not None:
        argv.append(f"torch_threads={threads}")
    spec = {"barrier": str(root / "barrier"), "name": name, "argv": argv}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--launch", json.dumps(spec)]
    dirs = [root / f"{name}-s{seed + k}" for k in range(seeds)]
    return Job(f"{algo} {name} seed {seed}", cmd, child_env(threads == 1), dirs,
               root / f"{name}-s{seed}.log", root / "barrier", name)


def sb3_job(args: argparse.Namespace, algo: str, root: Path, name: str, seed: int,
            threads: int | None) -> Job:
    spec = {"algo": algo, "env_id": ENV_IDS[args.env], "warmup": args.warmup,
            "steps": args.steps, "seed": seed, "threads": threads, "hidden": args.hidden,
            "batch": args.batch, "buffer_size": args.buffer_size,
            "barrier": str(root / "barrier"), "name": name}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--sb3-worker", json.dumps(spec)]
    return Job(f"{algo} {name} seed {seed}", cmd, child_env(threads == 1), [],
               root / f"{name}-s{seed}.log", root / "barrier", name)


def start(job: Job) -> None:
    job.barrier.mkdir(exist_ok=True)
    job.out = job.log.open("w")
    job.started = time.time()
    job.proc = subprocess.Popen(job.cmd, cwd=REPO, env=job.env, stdout=job.out,
                                stderr=subprocess.STDOUT)


def finish(job: Job, timeout: float) -> None:
    assert job.proc is not None
    try:
        job.proc.wait(timeout=max(1.0, timeout - (time.time() - job.started)))
    except subprocess.TimeoutExpired:
        job.proc.kill()
        job.proc.wait()
    job.ended = time.time()
    job.out.close()


def release(jobs: list[Job], timeout: float) -> None:
    """Let ``jobs`` go at once, when each has started up (imports done) or exited."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all((job.barrier / f"{job.name}.ready").exists() or
               (job.proc is not None and job.proc.poll() is not None) for job in jobs):
            break
        time.sleep(0.01)
    for job in jobs:
        (job.barrier / "go").touch()


def wait_barrier(spec: dict[str, Any]) -> None:
    """In a child: say it is ready, then wait for the go (see :func:`release`)."""
    barrier = Path(spec["barrier"])
    (barrier / f"{spec['name']}.ready").touch()
    while not (barrier / "go").exists():
        time.sleep(0.005)


def launch(spec: dict[str, Any]) -> None:
    """In a child: ``python -m rlzoo.train ARGV``, started when the barrier opens; the imports
    (torch, Hydra, gymnasium, MuJoCo, rlzoo) happen before, so concurrent runs start together."""
    import runpy

    import rlzoo.train  # noqa: F401
    for module in ("mujoco", "gymnasium.envs.mujoco", "mpe2"):
        try:
            __import__(module)
        except ImportError:
            pass
    wait_barrier(spec)
    sys.argv = ["rlzoo.train", *spec["argv"]]
    runpy.run_module("rlzoo.train", run_name="__main__", alter_sys=True)


def stop_all(jobs: list[Job]) -> None:
    """Terminate this script's own children that still run (on failure or Ctrl-C)."""
    for job in jobs:
        if job.proc is not None and job.proc.poll() is None:
            job.proc.terminate()
    for job in jobs:
        if job.proc is not None:
            try:
                job.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                job.proc.kill()
                job.proc.wait()
        if job.out is not None and not job.out.closed:
            job.out.close()


class RunFailed(Exception):
    pass


def tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no output)"


def rlzoo_windows(job: Job, args: argparse.Namespace, algo: str) -> list[tuple[float, float]]:
    """(t0, t1) of every seed's timed phase from its TensorBoard events; checks summary.json."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first, last = args.warmup, args.warmup + args.steps
    expected_updates = round(args.steps * utd(algo))
    windows = []
    for d in job.dirs:
        times: dict[int, float] = {}
        for events in sorted(d.glob("events.out.tfevents.*")):
            acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
            acc.Reload()
            if "perf/sps" in acc.Tags()["scalars"]:
                times.update({e.step: e.wall_time for e in acc.Scalars("perf/sps")})
        if first not in times or last not in times:
            raise RunFailed(f"{job.label}: {d.name} has no perf/sps at steps {first} and {last} "
                            f"(logged: {sorted(times)[:6]}...)")
        summary = json.loads((d / "summary.json").read_text())
        if summary.get("total_steps") != last or summary.get("updates") != expected_updates:
            raise RunFailed(f"{job.label}: {d.name} made {summary.get('updates')} updates in "
                            f"{summary.get('total_steps')} steps, expected {expected_updates} in "
                            f"{last}")
        windows.append((times[first], times[last]))
    return windows


def sb3_window(job: Job, args: argparse.Namespace) -> list[tuple[float, float]]:
    for line in tail(job.log, 100_000).splitlines():
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
            if result["updates"] != args.steps:
                raise RunFailed(f"{job.label}: SB3 made {result['updates']} gradient steps in the "
                                f"timed phase, expected {args.steps}")
            return [(result["t0"], result["t1"])]
    raise RunFailed(f"{job.label}: no result line in its output")


def run_jobs(jobs: list[Job], args: argparse.Namespace, algo: str, concurrent: bool) -> None:
    """Run ``jobs`` (all at once, or one after another), read their timed windows."""
    try:
        if concurrent:
            for job in jobs:
                start(job)
            release(jobs, args.timeout)
            for job in jobs:
                finish(job, args.timeout)
        else:
            for job in jobs:
                start(job)
                release([job], args.timeout)
                finish(job, args.timeout)
                if job.proc is not None and job.proc.returncode != 0:
                    break
    except BaseException:
        stop_all(jobs)
        raise
    for job in jobs:
        if job.proc is None:
            continue
        if job.proc.returncode != 0:
            text = tail(job.log)
            last = ([ln for ln in text.splitlines() if ln.strip()] or ["(no output)"])[-1]
            raise RunFailed(f"{job.label} exited with status {job.proc.returncode}: "
                            f"{last.strip()[:200]}\nits output ends:\n{text}")
        job.windows = rlzoo_windows(job, args, algo) if job.dirs else sb3_window(job, args)


def measure(args: argparse.Namespace, algo: str, arrangement: str, root: Path,
            repeat: int) -> dict[str, Any]:
    """One run of one arrangement: aggregate seed-steps/s and how it was obtained."""
    K, seed0 = args.seeds, args.seed
    where = Path(tempfile.mkdtemp(prefix=f"{algo}-{arrangement}-r{repeat}-", dir=root))
    threads = args.threads  # None: default threads
    if arrangement == "group":
        jobs = [rlzoo_job(args, algo, where, "group", seed0, K, threads)]
    elif arrangement == "procs-1t":
        jobs = [rlzoo_job(args, algo, where, f"p{k}", seed0 + k, 1, 1) for k in range(K)]
    elif arrangement == "procs":
        jobs = [rlzoo_job(args, algo, where, f"p{k}", seed0 + k, 1, threads) for k in range(K)]
    elif arrangement == "alone":
        jobs = [rlzoo_job(args, algo, where, "alone", seed0, 1, threads)]
    elif arrangement == "sb3-procs-1t":
        jobs = [sb3_job(args, algo, where, f"p{k}", seed0 + k, 1) for k in range(K)]
    elif arrangement == "sb3-row":
        jobs = [sb3_job(args, algo, where, f"r{k}", seed0 + k, threads) for k in range(K)]
    else:
        raise ValueError(arrangement)
    concurrent = arrangement not in ("sb3-row",)
    wall_start = time.time()
    try:
        run_jobs(jobs, args, algo, concurrent)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    wall = time.time() - wall_start
    windows = [w for job in jobs for w in job.windows]
    seeds_timed = len(windows)
    durations = [t1 - t0 for t0, t1 in windows]
    if arrangement == "group":
        # one process: every seed's window is the same phase; K x steps over its span
        span = max(t1 for _, t1 in windows) - min(t0 for t0, _ in windows)
        aggregate = K * args.steps / span
        own_sum, overlap = aggregate, 1.0
    elif concurrent:
        span = max(t1 for _, t1 in windows) - min(t0 for t0, _ in windows)
        aggregate = seeds_timed * args.steps / span
        own_sum = sum(args.steps / d for d in durations)
        overlap = (min(t1 for _, t1 in windows) - max(t0 for t0, _ in windows)) / span
    else:  # in a row
        span = sum(durations)
        aggregate = seeds_timed * args.steps / span
        own_sum, overlap = aggregate, None
    return {"algo": algo, "arrangement": arrangement, "repeat": repeat,
            "seeds_timed": seeds_timed, "aggregate": aggregate, "timed_s": span,
            "own_rate_sum": own_sum, "overlap": overlap, "durations_s": durations,
            "wall_s": wall}


# --------------------------------------------------------------------------- SB3 worker


def sb3_worker(spec: dict[str, Any]) -> None:
    """One SB3 run (in its own process): learn(warmup), then a timed learn(steps)."""
    if spec["threads"] is not None:
        torch.set_num_threads(int(spec["threads"]))
    import gymnasium as gym
    import numpy as np
    import stable_baselines3 as sb3
    from stable_baselines3.common.noise import NormalActionNoise

    wait_barrier(spec)  # imports done: start with the others
    env = gym.make(spec["env_id"])
    kwargs: dict[str, Any] = dict(
        learning_rate=3e-4, batch_size=spec["batch"], buffer_size=spec["buffer_size"],
        learning_starts=spec["warmup"], train_freq=1, gradient_steps=1, tau=0.005, gamma=0.99,
        policy_kwargs={"net_arch": list(spec["hidden"])}, seed=spec["seed"], device="cpu",
        verbose=0)
    if spec["algo"] == "td3":
        act = env.action_space.shape[0]
        kwargs.update(policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
                      action_noise=NormalActionNoise(np.zeros(act), 0.1 * np.ones(act)))
        model = sb3.TD3("MlpPolicy", env, **kwargs)
    else:
        model = sb3.SAC("MlpPolicy", env, **kwargs)
    model.learn(total_timesteps=spec["warmup"])
    before = model._n_updates
    t0 = time.time()
    model.learn(total_timesteps=spec["steps"], reset_num_timesteps=False)
    t1 = time.time()
    print(RESULT_TAG + json.dumps({"t0": t0, "t1": t1, "updates": model._n_updates - before,
                                   "threads": torch.get_num_threads()}), flush=True)


def sb3_available() -> str | None:
    """None if SB3 can run here, else why not."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError as err:
        return f"stable_baselines3 is not importable ({err})"
    return None


# --------------------------------------------------------------------------- in-process


def build_cfg(args: argparse.Namespace, algo: str) -> Any:
    from hydra import compose, initialize_config_module

    overrides = [o for o in rlzoo_overrides(args, algo) if not o.startswith("hydra.")]
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        return compose("config", overrides=overrides)


def synthetic_batches(spec: Any, batch: int, horizon: int, seeds: int, count: int = 8
                      ) -> list[Any]:
    """``count`` random batches shaped as the replay gives them; ``[seeds, ...]`` when
    ``seeds > 1``."""
    from rlzoo.buffers.batch import Batch

    lead = (seeds,) if seeds > 1 else ()
    B = (*lead, batch)
    out = []
    for _ in range(count):
        if spec.multi_agent:
            N, D, A = spec.n_agents, spec.obs_dim, spec.act_dim
            out.append(Batch(
                obs=torch.randn(*B, N, D), action=torch.rand(*B, N, A) * 2 - 1,
                reward=torch.randn(*B), next_obs=torch.randn(*B, N, D),
                discount=torch.full(B, 0.99), terminated=torch.zeros(B),
                state=torch.randn(*B, spec.state_dim), next_state=torch.randn(*B, spec.state_dim),
                agent_reward=torch.randn(*B, N)))
        else:
            D, A = spec.obs_dim, spec.act_dim * horizon
            out.append(Batch(
                obs=torch.randn(*B, D), action=torch.rand(*B, A) * 2 - 1, reward=torch.randn(*B),
                next_obs=torch.randn(*B, D), discount=torch.full(B, 0.99),
                terminated=torch.zeros(B)))
    return out


def update_profile(args: argparse.Namespace, algo: str) -> dict[str, Any]:
    """GFLOP per update (counted) and in-process updates/s of one algorithm and a K-seed group."""
    from torch.utils.flop_counter import FlopCounterMode

    from rlzoo.algos.seed_axis import stack_seeds
    from rlzoo.config.build import build_algorithm, env_spec, make_env

    cfg = build_cfg(args, algo)
    probe = make_env(cfg, 1, args.seed)
    spec = env_spec(probe)
    probe.close()
    cpu = torch.device("cpu")
    batch = int(cfg.algo.batch_size)

    def built(k: int) -> Any:
        torch.manual_seed(args.seed + k)
        return build_algorithm(cfg, spec, cpu)

    single = built(0)
    group = stack_seeds([built(k) for k in range(args.seeds)])
    single_batches = synthetic_batches(spec, batch, single.action_horizon, 1)
    group_batches = synthetic_batches(spec, batch, group.action_horizon, args.seeds)

    def count(model: Any, batches: list[Any]) -> float | None:
        try:
            with FlopCounterMode(display=False) as counter:
                for i in range(FLOP_PERIOD):
                    model.update(batches[i % len(batches)])
        except Exception as err:  # noqa: BLE001 - a counter failure must not end the benchmark
            print(f"# flop count failed for {algo} ({type(err).__name__}: {err})", flush=True)
            return None
        return counter.get_total_flops() / FLOP_PERIOD / 1e9

    gflop = count(single, single_batches)
    group_gflop = count(group, group_batches)
    n = args.update_iters
    for i in range(5):  # warm-up
        single.update(single_batches[i % 8])
        group.update(group_batches[i % 8])
    rates: dict[str, list[float]] = {"single": [], "group": []}
    for _ in range(3):  # interleaved windows, best of three
        for name, model, batches in (("single", single, single_batches),
                                     ("group", group, group_batches)):
            start_t = time.perf_counter()
            for i in range(n):
                model.update(batches[i % 8])
            rates[name].append(n / (time.perf_counter() - start_t))
    return {"algo": algo, "gflop_per_update": gflop, "group_gflop_per_update": group_gflop,
            "single_updates_per_s": max(rates["single"]),
            "group_updates_per_s": max(rates["group"]), "windows": rates, "batch": batch,
            "obs_dim": spec.obs_dim, "act_dim": spec.act_dim, "n_agents": spec.n_agents}


# --------------------------------------------------------------------------- report


def fmt(x: float | None, spec: str = ".1f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


def pct(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.1f}%"


def wall_ratios(runs: list[dict[str, Any]], K: int) -> list[str]:
    """Per repeat, the wall time of ``seeds=K`` over that of one seed alone for the same timed
    steps per seed (K x the alone rate over the group's seed-steps/s), from the two runs of the
    same repeat (measured one after the other): interleaved ratios, less exposed to the load of
    other tenants than the ratio of two bests."""
    lines = []
    for algo in dict.fromkeys(r["algo"] for r in runs):
        pairs = []
        for repeat in sorted({r["repeat"] for r in runs}):
            got = {r["arrangement"]: r["aggregate"] for r in runs
                   if r["algo"] == algo and r["repeat"] == repeat}
            if got.get("group") and got.get("alone"):
                pairs.append(K * got["alone"] / got["group"])
        if pairs:
            lines.append(f"- {algo}: wall of seeds={K} / wall of seeds=1, per repeat: "
                         + ", ".join(f"{x:.2f}x" for x in pairs)
                         + f" (median {sorted(pairs)[len(pairs) // 2]:.2f}x)")
    return ["", *lines] if lines else []


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    m, K = result["machine"], args.seeds
    fp32, bf16 = result["sgemm_fp32"], result["sgemm_bf16"]
    peak = peak_of(fp32)
    threads = f"{args.threads}" if args.threads else f"default ({m['torch_threads']})"
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), "
        f"avx512_bf16={m['avx512_bf16']}, amx_bf16={m['amx_bf16']}; Python {m['python']}, "
        f"torch {m['torch']}, {m['torch_threads']} torch threads in this process "
        f"(OMP_NUM_THREADS={m['OMP_NUM_THREADS']}); load average {m['loadavg_start']} at the "
        f"start, {m['loadavg_end']} at the end.",
        "",
        f"{args.env}{f' (MADDPG: {MARL_ENV})' if args.marl else ''}, K = {K} seeds "
        f"({args.seed}..{args.seed + K - 1}), {args.warmup} random warm-up steps then "
        f"{args.steps} timed env steps per seed, nets {args.hidden}, batch {args.batch}"
        f"{f' (MADDPG {args.marl_batch})' if args.marl else ''}, "
        f"{args.repeats} interleaved repeats, best kept; default threads = {threads}.",
        "",
        "| shape | fp32 GFLOP/s | bf16 GFLOP/s |",
        "|---|---:|---:|",
        *[f"| {k} | {fmt(fp32[k])} | {fmt(bf16[k], none='skipped (too slow)')} |"
          for k in fp32],
        f"| **best** | **{peak:.1f}** | **{peak_of(bf16):.1f}** |",
        "",
    ]
    profiles = {p["algo"]: p for p in result["profiles"]}
    lines += [
        "| algo | arrangement | seed-steps/s (best) | per seed | group / this | training "
        "roofline | every repeat | overlap |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for algo, rows in result["best"].items():
        group = rows.get("group", {}).get("aggregate")
        prof = profiles.get(algo, {})
        gflop = prof.get("gflop_per_update")
        for arrangement, row in rows.items():
            if row.get("aggregate") is None:
                lines.append(f"| {algo} | {DESCRIPTION[arrangement]} | {row['note']} | | | | | |")
                continue
            agg = row["aggregate"]
            per_seed = agg / K if arrangement not in ("alone",) else agg
            ratio = f"{group / agg:.2f}x" if group else "n/a"
            roof = pct(gflop * utd(algo) * agg / peak) if gflop else "n/a"
            every = ", ".join(f"{x:.1f}" for x in row["all"])
            overlaps = [o for o in row["overlaps"] if o is not None]
            overlap = ", ".join(f"{o:.2f}" for o in overlaps) if overlaps else "-"
            lines.append(f"| {algo} | {DESCRIPTION[arrangement]} | {agg:.1f} | {per_seed:.1f} | "
                         f"{ratio} | {roof} | {every} | {overlap} |")
    lines += wall_ratios(result["runs"], K)
    lines += [
        "",
        f"In-process updates (synthetic batches, {args.update_iters} updates per window, "
        f"interleaved, best of 3), roofline against the best fp32 rate ({peak:.1f} GFLOP/s):",
        "",
        "| algo | GFLOP/update | group GFLOP/update (counted) | updates/s, 1 seed | group "
        "updates/s, K seeds | seed-updates/s, group | group speed-up | roofline, 1 seed | "
        "roofline, group |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in result["profiles"]:
        g, s1, gk = p["gflop_per_update"], p["single_updates_per_s"], p["group_updates_per_s"]
        lines.append(
            f"| {p['algo']} | {fmt(g, '.4g')} | {fmt(p['group_gflop_per_update'], '.4g')} | "
            f"{s1:.1f} | {gk:.1f} | {K * gk:.1f} | {K * gk / s1:.2f}x | "
            f"{pct(g and g * s1 / peak)} | {pct(g and K * g * gk / peak)} |")
    lines += ["", "seed-steps/s: K x timed steps over the timed phase (group: one process; "
              "processes at once: first start to last end of their timed phases; in a row: the "
              "sum of the phases). 'group / this': the seeds=K rate over this one. 'overlap': "
              "how much the concurrent processes' timed phases coincided (1 = exactly). Training "
              "roofline: GFLOP per env step x seed-steps/s over the best fp32 rate."]
    if result["notes"]:
        lines += ["", *[f"Note: {n}" for n in result["notes"]]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="*", default=["sac", "td3"], choices=["sac", "td3"])
    parser.add_argument("--env", default="Hopper", choices=sorted(ENV_IDS))
    parser.add_argument("--seeds", type=int, default=5, help="K")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--steps", type=int, default=1000, help="timed env steps per seed")
    parser.add_argument("--warmup", type=int, default=1000,
                        help="random warm-up env steps per seed (learning_starts)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--marl", action="store_true", help=f"also MADDPG on {MARL_ENV}")
    parser.add_argument("--threads", type=int, help="threads of the 'default threads' runs")
    parser.add_argument("--only", nargs="+", choices=ARRANGEMENTS, help="arrangements to run")
    parser.add_argument("--no-sb3", action="store_true", help="skip Stable-Baselines3")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256],
                        help="hidden sizes of every network (small ones for smoke tests)")
    parser.add_argument("--batch", type=int, default=256, help="batch size (SAC, TD3)")
    parser.add_argument("--marl-batch", type=int, default=1000, help="batch size (MADDPG)")
    parser.add_argument("--buffer-size", type=int, default=1_000_000, help="replay (SAC, TD3)")
    parser.add_argument("--update-iters", type=int, default=100,
                        help="updates per in-process timing window")
    parser.add_argument("--sgemm-seconds", type=float, default=0.5,
                        help="seconds per matmul timing window")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    parser.add_argument("--json", type=Path, help="raw numbers (default: --out with .json, "
                        "else bench_seeds.json)")
    parser.add_argument("--sb3-worker", help=argparse.SUPPRESS)
    parser.add_argument("--launch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_worker:
        sb3_worker(json.loads(args.sb3_worker))
        return
    if args.launch:
        launch(json.loads(args.launch))
        return
    if args.seeds < 2:
        parser.error("--seeds must be at least 2")
    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be positive")
    if args.env not in ENV_IDS:
        parser.error(f"--env must be one of {sorted(ENV_IDS)}")
    json_path = args.json or (args.out.with_suffix(".json") if args.out else
                              Path("bench_seeds.json"))
    if args.threads:
        torch.set_num_threads(args.threads)

    notes: list[str] = []
    arrangements = list(args.only or ARRANGEMENTS)
    why_no_sb3 = "skipped (--no-sb3)" if args.no_sb3 else sb3_available()
    if why_no_sb3 and any(a.startswith("sb3") for a in arrangements):
        notes.append(f"SB3 {why_no_sb3}: its arrangements were not run.")
        arrangements = [a for a in arrangements if not a.startswith("sb3")]
    plan = [(algo, arrangements) for algo in args.algos]
    if args.marl:
        plan.append(("maddpg", [a for a in arrangements if not a.startswith("sb3")]))
    plan = [(algo, arrs) for algo, arrs in plan if arrs]
    if not plan:
        parser.error("nothing to run (check --algos, --marl and --only)")

    info = machine()
    print(f"# machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, "
          f"{info['torch_threads']} threads (OMP_NUM_THREADS={info['OMP_NUM_THREADS']}), "
          f"load {info['loadavg_start']}", flush=True)
    fp32_passes = [matmul_rates(torch.float32, args.sgemm_seconds)]
    bf16_passes = [matmul_rates(torch.bfloat16, args.sgemm_seconds)]
    print(f"# fp32 GFLOP/s: {rates_line(fp32_passes[0])}", flush=True)
    print(f"# bf16 GFLOP/s: {rates_line(bf16_passes[0])}", flush=True)

    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    failed: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="bench_seeds-") as tmp:
        for repeat in range(args.repeats):
            for algo, arrs in plan:
                shift = repeat % len(arrs)
                for arrangement in arrs[shift:] + arrs[:shift]:
                    if (algo, arrangement) in failed:
                        continue
                    try:
                        run = measure(args, algo, arrangement, Path(tmp), repeat)
                    except RunFailed as err:
                        failed.add((algo, arrangement))
                        failures.append(f"{algo} {arrangement}: {err}")
                        print(f"# FAILED {algo} {arrangement} (repeat {repeat}): {err}",
                              file=sys.stderr, flush=True)
                        continue
                    runs.append(run)
                    overlap = run["overlap"]
                    print(f"# repeat {repeat} {algo:6s} {arrangement:13s} "
                          f"{run['aggregate']:9.1f} seed-steps/s  timed {run['timed_s']:.1f} s, "
                          f"wall {run['wall_s']:.1f} s, own-rate sum "
                          f"{run['own_rate_sum']:.1f}, overlap "
                          f"{'-' if overlap is None else f'{overlap:.2f}'}", flush=True)

    profiles = []
    for algo, _ in plan:
        try:
            profiles.append(update_profile(args, algo))
        except Exception as err:  # noqa: BLE001 - report it, keep the rest
            failures.append(f"{algo} in-process update: {type(err).__name__}: {err}")
            print(f"# FAILED {algo} in-process update: {err}", file=sys.stderr, flush=True)
    fp32_passes.append(matmul_rates(torch.float32, args.sgemm_seconds))
    bf16_passes.append(matmul_rates(torch.bfloat16, args.sgemm_seconds))
    info["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None

    best: dict[str, dict[str, Any]] = {}
    for algo, arrs in plan:
        best[algo] = {}
        for arrangement in arrs:
            mine = [r for r in runs if r["algo"] == algo and r["arrangement"] == arrangement]
            if not mine:
                best[algo][arrangement] = {"aggregate": None, "note": "failed" if (
                    algo, arrangement) in failed else "not run"}
                continue
            top = max(mine, key=lambda r: r["aggregate"])
            best[algo][arrangement] = {"aggregate": top["aggregate"],
                                       "all": [r["aggregate"] for r in mine],
                                       "overlaps": [r["overlap"] for r in mine]}
    if failures:
        notes.append(f"{len(failures)} failure(s): " + "; ".join(
            f.splitlines()[0][:200] for f in failures))
    hidden_flags = ("sb3_worker", "launch")
    result = {"machine": info, "args": {k: (str(v) if isinstance(v, Path) else v)
                                        for k, v in vars(args).items() if k not in hidden_flags},
              "sgemm_fp32": merge_best(*fp32_passes), "sgemm_bf16": merge_best(*bf16_passes),
              "sgemm_passes": {"fp32": fp32_passes, "bf16": bf16_passes},
              "runs": runs, "best": best, "profiles": profiles, "failures": failures,
              "notes": notes}
    text = report(result, args)
    print(text)
    if args.out:
        args.out.write_text(text)
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"# raw numbers: {json_path}" + (f", table: {args.out}" if args.out else ""))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
