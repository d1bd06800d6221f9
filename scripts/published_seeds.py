"""Extract the published per-seed evaluation returns the results page compares against.

    python scripts/published_seeds.py --td3 GIT_DIR --tianshou GIT_DIR --simbav2 GIT_DIR [--out DIR]

Each ``GIT_DIR`` is a clone (or bare mirror) of the source's repository holding the commit named
in :data:`SOURCES`; nothing else is read. Writes ``DIR/<source>.json`` (default
``results/published/``), one file per source: where it came from (repository, commit, path of the
files read) and, per task, the env steps (rlzoo's count: random warm-up included) and each seed's
return at them, ``{"tasks": {task: {"steps": [S], "seeds": [[S] per seed]}}}``. Only the steps the
page can use are kept (up to 300k, and 1M for the normalization), and only the tasks it sets
beside rlzoo's rows (:data:`TASKS`, per source); the tasks added later (:data:`ADDED`) come after
the first three in each file, so that their values stay byte for byte where they were.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIRST = ("Hopper", "HalfCheetah", "Walker2d")  # the page's first tasks
ADDED = ("Ant", "Humanoid")  # issue 52: SAC on Humanoid (the `long` suite), SAC and TD3 on Ant
# the tasks each source's curves are read for: what the page sets beside rlzoo's rows
TASKS = {
    "td3-paper": (*FIRST, "Ant"),  # the paper ran no Humanoid
    "tianshou": (*FIRST, *ADDED),
    "SAC": (*FIRST, *ADDED),       # SimbaV2's SAC baseline
    "SimbaV2 UTD 2": FIRST, "SimbaV2 UTD 1": FIRST, "CrossQ": FIRST,  # the modern rows' tasks
}
TD3_FOLDERS = {"Walker2d": "Walker"}  # learning_curves/<folder>: the env's name otherwise
KEEP = 300_000        # the page's largest budget on the CPU (the long suite)
NORMALIZER = 1_000_000  # the TD3 paper's last point: the normalization's top

SOURCES = {
    "td3-paper": {
        "repo": "github.com/sfujim/TD3",
        "commit": "bc98e6260e4e35e1a2afc1c78b6925251dd0a1e9",
        "path": "learning_curves/<Env>/TD3_<Env>-v1_<seed>.npy (<Env>: Hopper, HalfCheetah, "
                "Walker2d in the folder Walker, Ant)",
        "steps": "evaluation i at about i x 5,000 env steps (main.py evaluates at the first "
                 "episode end after each 5,000 steps); i = 0 is the untrained policy",
    },
    "tianshou": {
        "repo": "github.com/thu-ml/tianshou",
        "commit": "39acf2094d96268d92ebb54dcbfc3de76d702567",
        "path": "examples/mujoco/benchmark/<Env>-v3/{sac,td3}/test_rew_10seeds.csv",
        "steps": "the CSV's env_step plus the random warm-up (mujoco_sac.py: 10,000; "
                 "mujoco_td3.py: 25,000), which the trainer's env_step does not count",
    },
    "simbav2": {
        "repo": "github.com/dojeon-ai/SimbaV2",
        "commit": "358d7246a2934dd9ce56c742a42ceb48a34cce01",
        "path": "results/baseline/sac.csv (rows exp_name sac, env_name <Env>-v4, metric "
                "avg_return); results/baseline/simbaV2_utd2.csv (simbaV2_utd2, 10 seeds), "
                "results/scaling/utd/simbaV2_utd1.csv (simbaV2_utd1, env_name <Env>_v4, 5 "
                "seeds), results/baseline/crossq.csv (CrossQ, 10 seeds)",
        "steps": "the CSV's env_step (sac: 1, 16,666, 33,332, 49,998, ...; simbaV2: every "
                 "50,000; CrossQ: every 2,000)",
    },
}

# SimbaV2's CSVs read into simbav2.json: the page's algorithm key -> (file, exp_name)
SIMBAV2_FILES = {
    "SAC": ("results/baseline/sac.csv", "sac"),
    "SimbaV2 UTD 2": ("results/baseline/simbaV2_utd2.csv", "simbaV2_utd2"),
    "SimbaV2 UTD 1": ("results/scaling/utd/simbaV2_utd1.csv", "simbaV2_utd1"),
    "CrossQ": ("results/baseline/crossq.csv", "CrossQ"),
}


def git_show(git_dir: Path, commit: str, path: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
                          check=True, capture_output=True).stdout


def td3_paper(git_dir: Path) -> dict:
    commit = SOURCES["td3-paper"]["commit"]
    tasks = {}
    for task in TASKS["td3-paper"]:
        folder = TD3_FOLDERS.get(task, task)
        seeds = []
        for seed in range(10):
            raw = git_show(git_dir, commit, f"learning_curves/{folder}/TD3_{task}-v1_{seed}.npy")
            with tempfile.NamedTemporaryFile(suffix=".npy") as f:
                f.write(raw)
                f.flush()
                curve = np.load(f.name)
            seeds.append(curve)
        idx = [i for i in range(len(seeds[0])) if i * 5000 <= KEEP or i * 5000 == NORMALIZER]
        tasks[task] = {"steps": [i * 5000 for i in idx],
                       "seeds": [[round(float(c[i]), 3) for i in idx] for c in seeds]}
    return tasks


def tianshou(git_dir: Path) -> dict:
    commit = SOURCES["tianshou"]["commit"]
    out: dict = {}
    for algo, warmup in (("sac", 10_000), ("td3", 25_000)):
        for task in TASKS["tianshou"]:
            text = git_show(git_dir, commit, f"examples/mujoco/benchmark/{task}-v3/{algo}/"
                            "test_rew_10seeds.csv").decode()
            rows = list(csv.reader(io.StringIO(text)))
            header, body = rows[0], rows[1:]
            cols = [i for i, name in enumerate(header) if name.startswith("rew:seed_")]
            kept = [r for r in body if int(float(r[0])) + warmup <= KEEP]
            out.setdefault(algo.upper(), {})[task] = {
                "steps": [int(float(r[0])) + warmup for r in kept],
                "seeds": [[round(float(r[c]), 3) for r in kept] for c in cols]}
    return out


def simbav2(git_dir: Path, algo: str) -> dict:
    """One of SimbaV2's CSVs (:data:`SIMBAV2_FILES`): each seed's avg_return per task of
    ``TASKS[algo]``, the first tasks in the file's order, then the added ones."""
    path, exp_name = SIMBAV2_FILES[algo]
    commit = SOURCES["simbav2"]["commit"]
    text = git_show(git_dir, commit, path).decode()
    table: dict = {}
    for r in csv.DictReader(io.StringIO(text)):
        task = r["env_name"].removesuffix("-v4").removesuffix("_v4")
        if r["exp_name"] != exp_name or r["metric"] != "avg_return" or task not in TASKS[algo]:
            continue
        step = int(float(r["env_step"]))
        if step <= KEEP + 5000:
            table.setdefault(task, {}).setdefault(int(r["seed"]), {})[step] = float(r["value"])
    tasks = {}
    def order(task: str) -> tuple[bool, int]:  # the file's order, the added tasks after it
        return task in ADDED, ADDED.index(task) if task in ADDED else 0

    for task, by_seed in sorted(table.items(), key=lambda item: order(item[0])):
        steps = sorted(next(iter(by_seed.values())))
        tasks[task] = {"steps": steps, "seeds": [[round(by_seed[s][t], 3) for t in steps]
                                                 for s in sorted(by_seed)]}
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--td3", type=Path, required=True)
    parser.add_argument("--tianshou", type=Path, required=True)
    parser.add_argument("--simbav2", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "published")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"td3-paper": {"TD3": td3_paper(args.td3)}, "tianshou": tianshou(args.tianshou),
            "simbav2": {algo: simbav2(args.simbav2, algo) for algo in SIMBAV2_FILES}}
    for key, algos in data.items():
        record = {**SOURCES[key], "source": key, "algos": algos}
        (args.out / f"{key}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out / (key + '.json')}")


if __name__ == "__main__":
    main()
