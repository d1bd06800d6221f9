"""How long ``python -m rlzoo.compare`` takes to read many small finished runs, against another
commit, interleaved (docs/performance.md, "Reading many runs").

One real run (Pendulum, 300 steps, tiny networks) is trained with this checkout and copied N
times into ``ROOT/Pendulum/sac/<k>-s<seed>``: its ``.hydra`` files (``algo.tau`` set to one of 10
values, so there are 10 groups), its event file and a ``summary.json`` with the seed and a
return of its own. Then, for each N and each repeat, ``python -m rlzoo.compare ROOT --out OUT
--reps 200`` runs with this checkout and with the other commit's tree (``git archive`` of
``--old``), in alternating order, and the wall and CPU time of each are printed and written
as JSON (the CPU time stays put on a busy machine; the wall time does not).

    python scripts/bench_compare.py --runs 1000 10000 --repeats 2 --old main
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_ARGS = ["algo=sac", "env=Pendulum", "total_steps=300", "algo.learning_starts=100",
                 "algo.batch_size=32", "eval.every=150", "eval.episodes=1",
                 "checkpoint.every=0", "log.progress=false", "torch_threads=1",
                 "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]"]
TAUS = [f"0.00{k}" for k in range(1, 10)] + ["0.010"]  # 10 groups


def train_template(folder: Path) -> Path:
    """One real finished run in ``folder/template`` (this checkout)."""
    run_dir = folder / "template"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "rlzoo.train", *TEMPLATE_ARGS,
                    f"hydra.run.dir={run_dir}"], check=True, env=env, cwd=REPO,
                   capture_output=True)
    return run_dir


def make_runs(template: Path, root: Path, n: int) -> None:
    """``n`` copies of ``template`` below ``root``: seeds 0.., 10 values of ``algo.tau``."""
    config = (template / ".hydra" / "config.yaml").read_text()
    summary = json.loads((template / "summary.json").read_text())
    events = next(template.glob("events.out.tfevents.*"))
    hydra, overrides = ((template / ".hydra" / name).read_bytes()
                        for name in ("hydra.yaml", "overrides.yaml"))
    tau_line = next(line for line in config.splitlines() if line.strip().startswith("tau:"))
    for k in range(n):
        seed, tau = k // len(TAUS), TAUS[k % len(TAUS)]
        d = root / "Pendulum" / "sac" / f"{k}-s{seed}"
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "config.yaml").write_text(
            config.replace(tau_line, tau_line.split(":")[0] + f": {tau}"))
        (d / ".hydra" / "hydra.yaml").write_bytes(hydra)
        (d / ".hydra" / "overrides.yaml").write_bytes(overrides)
        shutil.copyfile(events, d / events.name)
        (d / "summary.json").write_text(json.dumps(
            {**summary, "seed": seed, "final_eval_return": -1000.0 + k % 97}))


def old_tree(rev: str, folder: Path) -> Path:
    """The tree of commit ``rev`` (``git archive``), or ``rev`` itself when it is a folder."""
    if Path(rev).is_dir():
        return Path(rev)
    tree = folder / "old"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def time_compare(tree: Path, root: Path, out: Path) -> tuple[float, float, int, str]:
    """Wall and CPU (user + system) seconds of ``python -m rlzoo.compare root --out out`` with
    ``tree``'s rlzoo, its exit status and the last lines of its stderr. The CPU time does not
    depend on what else the machine runs; the wall time does."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rlzoo.compare", str(root), "--out", str(out),
                           "--reps", "200"], env=env, cwd=tree, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, proc.returncode, "\n".join(proc.stderr.splitlines()[-3:])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--old", default="main", help="a git revision or a folder (default main)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--only-new", action="store_true",
                        help="time this checkout only (the old tree takes 25 min on 10,000 runs)")
    args = parser.parse_args(argv)
    result: dict = {"machine": {"cpu": os.cpu_count(), "load": os.getloadavg()},
                    "old": args.old, "seconds": {}, "cpu_seconds": {}}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        folder = Path(tmp)
        template = train_template(folder)
        trees = {"new": REPO} if args.only_new else {"new": REPO, "old": old_tree(args.old, folder)}
        for n in args.runs:
            root = folder / f"runs-{n}"
            make_runs(template, root, n)
            times: dict[str, list[float]] = {side: [] for side in trees}
            cpus: dict[str, list[float]] = {side: [] for side in trees}
            for repeat in range(args.repeats):
                order = list(trees) if repeat % 2 == 0 else list(trees)[::-1]
                for side in order:
                    seconds, cpu, status, tail = time_compare(trees[side], root, folder / "out")
                    times[side].append(round(seconds, 2))
                    cpus[side].append(round(cpu, 2))
                    print(f"{n} runs, {side}: {seconds:.1f} s wall, {cpu:.1f} s CPU (exit "
                          f"{status}, load {os.getloadavg()[0]:.1f}); {tail!r}", flush=True)
            result["seconds"][str(n)] = times
            result["cpu_seconds"][str(n)] = cpus
            shutil.rmtree(root)
    result["machine"]["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
