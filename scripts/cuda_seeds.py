"""Wall time of K seeds in one process on one GPU: SAC on HalfCheetah-v5, seeds=1 against
seeds=K, with and without CUDA graphs; and the same for SimbaV2 and FlashSAC, timed against SAC.

    python scripts/cuda_seeds.py [--steps 20000] [--learning-starts 5000] [--seeds 10]
                                 [--algos sac simbav2 flashsac]
                                 [--out cuda_seeds.md] [--json cuda_seeds.json] [--dry-run]

``--algos`` (default: ``ALGOS``, SAC first) names the algorithms measured, each with its own
defaults; every number of another algorithm is also given relative to SAC's. An algorithm whose
``rlzoo/conf/algo/<name>.yaml`` is not in this checkout is reported as not run. Adding one to the
default list is one entry in ``ALGOS``.

The goal it checks: training K = 10 seeds together takes at most 1.5x the wall time of one seed
with the same ``--steps`` per seed. It runs the real CLI (``python -m rlzoo.train algo=sac
env=HalfCheetah device=cuda``, SAC's own defaults) for seeds=1 and seeds=K, each with
``cudagraphs=false`` and ``cudagraphs=true`` (a failure, e.g. graphs that cannot capture a seed
group, is one row saying so and exit status 1), and reports for each run:

* ``run wall``: ``summary.json``'s ``wall_time_s``, the whole of ``train()``: random warm-up
  (``--learning-starts`` steps per seed), training, the final evaluation (1 episode per seed) and
  the final checkpoint. The goal is judged on it;
* ``timed phase``: the training after the warm-up only, from the TensorBoard wall time of the
  ``perf/sps`` log at step ``learning_starts`` to that at ``learning_starts + steps`` (no
  evaluation or checkpoint inside), and the per-seed env steps/s over it;
* ``process wall``: launch to exit (adds interpreter, imports and CUDA start-up), split into
  what comes before the timed phase (start-up, building, warm-up) and after it (the final
  evaluation, which runs the K seeds' episodes one seed after another, the checkpoint, exit).

First, the in-process update rate (synthetic batches on the device, ``torch.cuda.synchronize``
around each window, best of 3 interleaved windows) of one algorithm and of a K-seed group
(``stack_seeds`` of K algorithms built by ``rlzoo.config.build.build_algorithm``), eager and with
CUDA graphs (``rlzoo.run.accel.update_fn``), for every algorithm; then the CLI runs, algorithm by
algorithm.

The replay holds every step (``--buffer-size`` defaults to ``learning_starts + steps``, so the
run samples exactly as with a 1e6 buffer, while the final checkpoint, which stores the whole
buffer, stays small); ``--buffer-size 1000000`` for the config's default. Results are rewritten
to ``--json`` and ``--out`` after every run, so a run cut short leaves what was measured; a
``--deadline`` (seconds, default 540) stops starting runs that cannot finish in time.

Without CUDA it refuses in one line (exit 2). ``--dry-run`` runs everything on the CPU at a tiny
size (300 steps after 200 warm-up steps, 32-wide nets, batch 32) to test the script; there
``cudagraphs=true`` is expected to be refused (CUDA graphs need CUDA).
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
from pathlib import Path
from typing import Any

import torch
from bench_seeds import cpu_model  # scripts/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
PROG = "cuda_seeds"
# The algorithms measured by default, each timed against the first. One entry adds one.
ALGOS = ("sac", "simbav2", "flashsac")
# Width keys that --hidden sets, wherever an algorithm's composed config has them: MLP trunks
# (a list of layer sizes) and network-factory trunks such as SimbaV2's (one width).
WIDTH_LISTS = ("algo.actor.hidden", "critic.hidden")
WIDTH_INTS = ("algo.actor.network.hidden_dim", "critic.network.hidden_dim")


def available(algo: str) -> bool:
    """Whether this checkout has ``algo=<algo>``."""
    return (REPO / "rlzoo" / "conf" / "algo" / f"{algo}.yaml").is_file()


def compose_cfg(items: list[str]) -> Any:
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        return compose("config", overrides=items)


def width_overrides(algo: str, hidden: list[int]) -> list[str]:
    """``--hidden`` as overrides of whichever width keys ``algo``'s config has."""
    from omegaconf import OmegaConf

    cfg = compose_cfg([f"algo={algo}"])
    out = []
    for key in WIDTH_LISTS:
        if OmegaConf.select(cfg, key) is not None:
            out.append(f"{key}=[{','.join(map(str, hidden))}]")
    for key in WIDTH_INTS:
        if OmegaConf.select(cfg, key) is not None:
            out.append(f"{key}={hidden[0]}")
    return out


def overrides(args: argparse.Namespace, algo: str = "sac") -> list[str]:
    """One run's config, without seeds, cudagraphs and run dir."""
    total = args.learning_starts + args.steps
    out = [f"algo={algo}", f"env={args.env}", f"total_steps={total}",
           f"algo.learning_starts={args.learning_starts}",
           f"log.every={math.gcd(args.learning_starts, args.steps)}", "eval.every=0",
           "eval.episodes=1", "checkpoint.every=0", "log.progress=false",
           f"device={args.device}", f"seed={args.seed}",
           f"algo.buffer_size={args.buffer_size or total}"]
    if args.hidden:
        out += width_overrides(algo, args.hidden)
    if args.batch:
        out.append(f"algo.batch_size={args.batch}")
    return out


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else "(no output)"


def expected_updates(args: argparse.Namespace, algo: str) -> int:
    """Updates a run of ``algo`` makes in ``args.steps`` steps after its warm-up (its ``utd``)."""
    utd = float(compose_cfg(overrides(args, algo)).algo.get("utd", 1))
    return math.floor(utd * args.steps + 1e-9)


def run_cli(args: argparse.Namespace, seeds: int, cudagraphs: bool, root: Path,
            timeout: float, algo: str = "sac") -> dict[str, Any]:
    """One CLI run; its times, or its failure."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    where = Path(tempfile.mkdtemp(prefix=f"{algo}-k{seeds}-cg{int(cudagraphs)}-", dir=root))
    run_dir = where / f"run-s{args.seed}"
    cmd = [sys.executable, "-m", "rlzoo.train", *overrides(args, algo), f"seeds={seeds}",
           f"cudagraphs={str(cudagraphs).lower()}", f"hydra.run.dir={run_dir}"]
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    row: dict[str, Any] = {"algo": algo, "seeds": seeds, "cudagraphs": cudagraphs,
                           "cmd": " ".join(cmd[1:])}
    log = where / "output.log"
    launched = time.time()
    try:
        with log.open("w") as out:
            proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        exited = time.time()
        row["process_wall_s"] = exited - launched
        text = log.read_text(errors="replace")
        if proc.returncode != 0:
            row.update(ok=False, returncode=proc.returncode, error=last_line(text),
                       output_tail=text[-2000:])
            return row
        first, last = args.learning_starts, args.learning_starts + args.steps
        summary = json.loads((run_dir / "summary.json").read_text())
        times: dict[int, float] = {}
        for events in sorted(run_dir.glob("events.out.tfevents.*")):
            acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
            acc.Reload()
            if "perf/sps" in acc.Tags()["scalars"]:
                times.update({e.step: e.wall_time for e in acc.Scalars("perf/sps")})
        if first not in times or last not in times:
            row.update(ok=False, error=f"no perf/sps logged at steps {first} and {last}")
            return row
        updates = expected_updates(args, algo)
        if summary.get("updates") != updates or summary.get("total_steps") != last:
            row.update(ok=False, error=f"{summary.get('updates')} updates in "
                       f"{summary.get('total_steps')} steps, expected {updates} in {last}")
            return row
        timed = times[last] - times[first]
        row.update(ok=True, run_wall_s=float(summary["wall_time_s"]), timed_s=timed,
                   seed_sps=args.steps / timed, group_seed_sps=seeds * args.steps / timed,
                   before_s=times[first] - launched, after_s=exited - times[last])
        return row
    except subprocess.TimeoutExpired:
        row.update(ok=False, error=f"did not finish within {timeout:.0f} s (killed)",
                   output_tail=log.read_text(errors="replace")[-2000:] if log.exists() else "")
        return row
    finally:
        shutil.rmtree(where, ignore_errors=True)


def update_rates(args: argparse.Namespace, cudagraphs: bool, algo: str = "sac") -> dict[str, Any]:
    """In-process updates/s of one ``algo`` and of a K-seed group (synthetic batches)."""
    from rlzoo.algos.seed_axis import stack_seeds
    from rlzoo.buffers.batch import Batch
    from rlzoo.config.build import build_algorithm, env_spec, make_env
    from rlzoo.run.accel import update_fn

    cfg = compose_cfg(overrides(args, algo))
    probe = make_env(cfg, 1, args.seed)
    spec = env_spec(probe)
    probe.close()
    device = torch.device(args.device)
    B = int(cfg.algo.batch_size)

    def built(k: int) -> Any:
        torch.manual_seed(args.seed + k)
        return build_algorithm(cfg, spec, device)

    def batches(seeds: int) -> list[Any]:
        lead = (seeds,) if seeds > 1 else ()
        return [Batch(obs=torch.randn(*lead, B, spec.obs_dim, device=device),
                      action=torch.rand(*lead, B, spec.act_dim, device=device) * 2 - 1,
                      reward=torch.randn(*lead, B, device=device),
                      next_obs=torch.randn(*lead, B, spec.obs_dim, device=device),
                      discount=torch.full((*lead, B), 0.99, device=device),
                      terminated=torch.zeros(*lead, B, device=device)) for _ in range(8)]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    sides = {"single": (built(0), batches(1)),
             "group": (stack_seeds([built(k) for k in range(args.seeds)]), batches(args.seeds))}
    updates = {name: update_fn(model, compile=False, cudagraphs=cudagraphs)
               for name, (model, _) in sides.items()}
    for name, (_, data) in sides.items():
        for i in range(10):  # eager warm-up and, with graphs, the captures
            updates[name](data[i % 8])
    sync()
    windows: dict[str, list[float]] = {"single": [], "group": []}
    n = args.update_iters
    for _ in range(3):
        for name, (_, data) in sides.items():
            sync()
            start = time.perf_counter()
            for i in range(n):
                updates[name](data[i % 8])
            sync()
            windows[name].append(n / (time.perf_counter() - start))
    single, group = max(windows["single"]), max(windows["group"])
    return {"algo": algo, "cudagraphs": cudagraphs, "ok": True, "single_updates_per_s": single,
            "group_updates_per_s": group, "group_seed_updates_per_s": args.seeds * group,
            "group_time_ratio": single / group, "windows": windows}


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def run_table(result: dict[str, Any], args: argparse.Namespace, algo: str) -> list[str]:
    """``algo``'s CLI runs, seeds=1 and seeds=K, without and with CUDA graphs."""
    K = args.seeds
    lines = [
        "| cudagraphs | seeds | run wall s | vs seeds=1 | timed phase s | vs seeds=1 | steps/s per "
        "seed | seed-steps/s | process wall s | vs seeds=1 | before / after the timed phase s "
        "| status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cg in (False, True):
        rows = {r["seeds"]: r for r in result["runs"]
                if r["cudagraphs"] == cg and r.get("algo", "sac") == algo}
        base = rows.get(1) if rows.get(1, {}).get("ok") else None
        for seeds in (1, K):
            r = rows.get(seeds)
            if r is None:
                lines.append(f"| {str(cg).lower()} | {seeds} | | | | | | | | | | not run |")
                continue
            if not r["ok"]:
                lines.append(f"| {str(cg).lower()} | {seeds} | | | | | | | "
                             f"{fmt(r.get('process_wall_s'))} | | | {r['status']} |")
                continue

            def vs(key: str, r: dict[str, Any] = r, base: dict[str, Any] | None = base,
                   seeds: int = seeds) -> str:
                return f"{r[key] / base[key]:.2f}x" if base and seeds != 1 else ""

            lines.append(
                f"| {str(cg).lower()} | {seeds} | {r['run_wall_s']:.1f} | {vs('run_wall_s')} | "
                f"{r['timed_s']:.1f} | {vs('timed_s')} | {r['seed_sps']:.1f} | "
                f"{r['group_seed_sps']:.1f} | {r['process_wall_s']:.1f} | "
                f"{vs('process_wall_s')} | {r['before_s']:.1f} / {r['after_s']:.1f} | "
                f"{r['status']} |")
    return lines


def update_table(result: dict[str, Any], args: argparse.Namespace, algo: str) -> list[str]:
    """``algo``'s in-process update rates."""
    lines = ["| cudagraphs | updates/s, 1 seed | group updates/s, "
             f"{args.seeds} seeds | seed-updates/s, group | group update time / 1 seed's | "
             "status |", "|---|---:|---:|---:|---:|---|"]
    for u in result["updates"]:
        if u.get("algo", "sac") != algo:
            continue
        if not u["ok"]:
            lines.append(f"| {str(u['cudagraphs']).lower()} | | | | | {u['status']} |")
            continue
        lines.append(f"| {str(u['cudagraphs']).lower()} | {u['single_updates_per_s']:.1f} | "
                     f"{u['group_updates_per_s']:.1f} | {u['group_seed_updates_per_s']:.1f} | "
                     f"{u['group_time_ratio']:.2f}x | ok |")
    return lines


def against_first(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Every other algorithm's time per update and per env step relative to the first's (SAC):
    > 1 costs more."""
    first, K = args.algos[0], args.seeds
    others = [a for a in args.algos[1:] if a not in result["missing"]]
    if not others:
        return []

    def update(algo: str, cg: bool) -> dict[str, Any] | None:
        return next((u for u in result["updates"] if u.get("algo", "sac") == algo
                     and u["cudagraphs"] == cg and u["ok"]), None)

    def run(algo: str, cg: bool, seeds: int) -> dict[str, Any] | None:
        return next((r for r in result["runs"] if r.get("algo", "sac") == algo
                     and r["cudagraphs"] == cg and r["seeds"] == seeds and r["ok"]), None)

    def ratio(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, key: str) -> str:
        return f"{theirs[key] / mine[key]:.2f}x" if mine and theirs else "n/a"

    lines = ["", f"Time relative to {first} (its rate / this algorithm's; > 1 costs more):", "",
             f"| algo | cudagraphs | per update, 1 seed | per update, {K}-seed group | per env "
             f"step, seeds=1 run | per env step, seeds={K} run |",
             "|---|---|---:|---:|---:|---:|"]
    for algo in others:
        for cg in (False, True):
            mine, base = update(algo, cg), update(first, cg)
            lines.append(
                f"| {algo} | {str(cg).lower()} | {ratio(mine, base, 'single_updates_per_s')} | "
                f"{ratio(mine, base, 'group_updates_per_s')} | "
                f"{ratio(run(algo, cg, 1), run(first, cg, 1), 'seed_sps')} | "
                f"{ratio(run(algo, cg, K), run(first, cg, K), 'seed_sps')} |")
    return lines


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    m = result["machine"]
    dry = " DRY RUN on the CPU at a tiny size." if args.dry_run else ""
    lines = [
        f"Machine: {m['gpu']}; CPU {m['cpu']}, {m['cores']} cores; Python {m['python']}, torch "
        f"{m['torch']} (CUDA {m['cuda']}).{dry}",
    ]
    for algo in args.algos:
        lines.append("")
        if algo in result["missing"]:
            lines.append(f"{algo}: not run, this checkout has no rlzoo/conf/algo/{algo}.yaml.")
            continue
        lines += [
            f"{algo} on {args.env}, seeds {args.seed}.. ({args.seeds} for the group), "
            f"{args.learning_starts} random warm-up steps then {args.steps} training steps per "
            f"seed, replay {args.buffer_size or args.learning_starts + args.steps}, final "
            f"evaluation 1 episode per seed, device {args.device}.",
            "", *run_table(result, args, algo), "", *update_table(result, args, algo), "",
            *[f"Goal (seeds={args.seeds} run wall <= 1.5x seeds=1's): {v}"
              for v in result["verdicts"] if v.startswith(f"{algo} ")]]
    lines += against_first(result, args)
    return "\n".join(lines) + "\n"


def verdicts(result: dict[str, Any], K: int) -> list[str]:
    out = []
    algos = list(dict.fromkeys(r.get("algo", "sac") for r in result["runs"]))
    for algo in algos:
        for cg in (False, True):
            rows = {r["seeds"]: r for r in result["runs"]
                    if r["cudagraphs"] == cg and r.get("algo", "sac") == algo}
            one, many = rows.get(1), rows.get(K)
            name = f"{algo} cudagraphs={str(cg).lower()}"
            if not (one and many and one["ok"] and many["ok"]):
                out.append(f"{name}: not measured")
                continue
            ratio = many["run_wall_s"] / one["run_wall_s"]
            out.append(f"{name}: {ratio:.2f}x, {'met' if ratio <= 1.5 else 'NOT met'} (timed "
                       f"phase {many['timed_s'] / one['timed_s']:.2f}x)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, help="training env steps per seed (20000)")
    parser.add_argument("--learning-starts", type=int, help="random warm-up steps (5000)")
    parser.add_argument("--seeds", type=int, default=10, help="K, the group's size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", default="HalfCheetah")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS),
                        help="algorithms to measure, the first the others are timed against "
                        f"(default: {' '.join(ALGOS)})")
    parser.add_argument("--hidden", type=int, nargs="+",
                        help="net sizes (default: each algorithm's own)")
    parser.add_argument("--batch", type=int, help="batch size (default: each algorithm's own)")
    parser.add_argument("--buffer-size", type=int, help="replay (default: every step fits)")
    parser.add_argument("--update-iters", type=int, help="updates per in-process window (200)")
    parser.add_argument("--no-updates", action="store_true", help="skip the in-process rates")
    parser.add_argument("--deadline", type=float, default=540.0,
                        help="seconds after which no run is started, and runs are cut")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    parser.add_argument("--json", type=Path, help="raw numbers (default: --out with .json, "
                        "else cuda_seeds.json)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run everything on the CPU at a tiny size (a test of this script)")
    args = parser.parse_args()
    began = time.perf_counter()
    if not args.dry_run and not torch.cuda.is_available():
        built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"{PROG}: error: CUDA is not available (torch {torch.__version__}, {built}); this "
              "benchmark needs a GPU (--dry-run tests it on the CPU at a tiny size)",
              file=sys.stderr)
        sys.exit(2)
    tiny = args.dry_run
    args.device = "cpu" if tiny else "cuda"
    args.steps = args.steps or (300 if tiny else 20000)
    args.learning_starts = args.learning_starts or (200 if tiny else 5000)
    args.update_iters = args.update_iters or (5 if tiny else 200)
    if tiny:
        args.hidden = args.hidden or [32, 32]
        args.batch = args.batch or 32
    if args.seeds < 2:
        parser.error("--seeds must be at least 2")
    json_path = args.json or (args.out.with_suffix(".json") if args.out else
                              Path("cuda_seeds.json"))
    result: dict[str, Any] = {
        "machine": {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU",
            "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
        },
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runs": [], "updates": [], "verdicts": [],
        "missing": [a for a in args.algos if not available(a)],
    }
    algos = [a for a in args.algos if a not in result["missing"]]

    def write() -> str:
        result["verdicts"] = verdicts(result, args.seeds)
        text = report(result, args)
        json_path.write_text(json.dumps(result, indent=2) + "\n")
        if args.out:
            args.out.write_text(text)
        return text

    def left() -> float:
        return args.deadline - (time.perf_counter() - began)

    print(f"# {result['machine']}", flush=True)
    for algo in result["missing"]:
        print(f"# algo={algo}: not run, this checkout has no rlzoo/conf/algo/{algo}.yaml",
              flush=True)
    failed = False
    if not args.no_updates:
        for algo in algos:
            for cg in (False, True):
                if cg and args.device != "cuda":
                    result["updates"].append({"algo": algo, "cudagraphs": True, "ok": False,
                                              "status": "n/a: CUDA graphs need CUDA (dry run)"})
                    continue
                try:
                    u = update_rates(args, cg, algo)
                    u["status"] = "ok"
                except Exception as err:  # noqa: BLE001 - report it, keep measuring
                    failed = True
                    first = str(err).splitlines()[0][:200] if str(err) else ""
                    u = {"algo": algo, "cudagraphs": cg, "ok": False,
                         "status": f"FAILED: {type(err).__name__}: {first}"}
                result["updates"].append(u)
                print(f"# in-process, {algo}, cudagraphs={cg}: {u}", flush=True)
                write()
    with tempfile.TemporaryDirectory(prefix="cuda_seeds-") as tmp:
        # the graphed pair first: whether graphs work for a group is the first question
        for algo, cg, seeds in ((a, c, k) for a in algos for c in (True, False)
                                for k in (1, args.seeds)):
            if left() < 30:
                print(f"# {algo} cudagraphs={cg} seeds={seeds}: not run (deadline)", flush=True)
                continue
            row = run_cli(args, seeds, cg, Path(tmp), timeout=left(), algo=algo)
            if row["ok"]:
                row["status"] = "ok"
            elif cg and args.device != "cuda":
                row["status"] = f"refused on the CPU, as expected in a dry run: {row['error']}"
            else:
                failed = True
                row["status"] = f"FAILED: {row['error']}"
                print(f"# FAILED {algo} cudagraphs={cg} seeds={seeds}; output ends:\n"
                      f"{row.get('output_tail', '')}", file=sys.stderr, flush=True)
            result["runs"].append(row)
            print(f"# {algo} cudagraphs={cg} seeds={seeds}: " + ", ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in row.items() if k not in ("cmd", "output_tail")), flush=True)
            write()
    print(write())
    print(f"# raw numbers: {json_path}" + (f", table: {args.out}" if args.out else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
