"""Reproduce rlzoo's results page: run a named suite, resumably, then compare and write the page.

    python scripts/reproduce.py SUITE [--seeds K] [--steps N] [--out DIR] [--only TASK/ROW ...]
        [--results DIR] [--page FILE] [--no-sb3] [--report-only]

Suites (:data:`SUITES`; every setting of a suite is declared there once):

* ``mujoco``: SAC, TD3, DSAC-T, SAC with the ensemble critic, SAC with the action-sequence critic,
  SimbaV2, STAC, SAC with the categorical critic and Stable-Baselines3's SAC and TD3 (the peer)
  on Hopper-v5 and HalfCheetah-v5, SAC, TD3 and the peer on Walker2d-v5, 100k env steps (the
  page's headline reads 50k and 100k), 5 seeds, on the CPU.
* ``marl``: MADDPG, HASAC and COMA on MPE simple_spread and simple_speaker_listener, MADDPG and
  HASAC on MaMuJoCo HalfCheetah-2x3, 5 seeds, on the CPU (budgets per task, see the suite).
* ``gpu``: the rlzoo rows of ``mujoco`` at 1M env steps on Hopper-v5, HalfCheetah-v5 and
  Humanoid-v5, 5 seeds, on CUDA.
* ``smoke``: SAC, TD3 and SB3 SAC on Pendulum for a few hundred steps with tiny networks: checks
  the plumbing (tests/test_reproduce.py), learns nothing, and never goes on the repository's page.

A *cell* is one row of one task: ``--seeds`` K seeds (default: the suite's) of one algorithm and
config. An rlzoo cell is one seed group (``seeds=K``) trained by the real command line in a
subprocess, into ``OUT/<suite>/<task>/<row>-s<seed0>`` (the group's home; the other seeds' dirs
beside it, ``<row>-s<seed>``). A Stable-Baselines3 cell is K worker processes (this script,
``--sb3-worker``), one per seed, at most one per core at a time, each into
``OUT/<suite>/<task>/<row>-s<seed>``, written as ``summary.json``, ``eval.csv`` and ``.hydra/``
so that ``rlzoo.compare`` reads it like an rlzoo run. Rerunning the same command:

* skips a finished cell (every seed's ``summary.json`` at the cell's ``total_steps``);
* resumes an rlzoo cell from its newest checkpoint (``python -m rlzoo.train resume=HOME
  total_steps=N``; raising ``--steps`` continues a finished cell the same way), bit-identically
  on the CPU; checkpoints are written every ``checkpoint_every`` steps (a few minutes);
* restarts an SB3 seed that did not finish (SB3 seeds resume at the granularity of a seed: a seed
  is written into ``.<row>-s<seed>.partial`` and renamed into place only when it finished);
* starts the cells that are missing.

A cell is locked (``OUT/<suite>/<task>/.<row>.lock``) while this script works on it: a second
``reproduce.py`` running at the same time skips it with one line and does the other cells, so two
of them share the work (that is how to use both cores with SB3 cells, or to run the rlzoo and the
SB3 cells side by side). Ctrl-C (SIGINT) or SIGTERM stops the running cell after its checkpoint
(forwarded once to the child; a second one stops it at once) and this script without a report.

Afterwards, every finished cell of the suite is exported to ``RESULTS/<suite>/<task>/<row>-s<seed>``
(``summary.json``, ``.hydra/``, ``eval.csv``, the ``eval/*`` curve, and ``provenance.json``, each
training launch's commit, command, package versions, CPU and threads; no checkpoints, no
TensorBoard events), ``rlzoo.compare`` is run over ``RESULTS/<suite>`` into
``RESULTS/<suite>/report/`` (``python -m rlzoo.compare RESULTS/<suite> --out DIR`` regenerates it),
and the page (``--page``) is rewritten from every page suite's results (a suite off the page,
``smoke``, gets a page of its own), with the published seeds (:data:`REFERENCES`) beside rlzoo's
at the same env steps. A cell that did not finish is never exported, so an earlier finished copy
of it stays as it was. This file holds the suites, the runner, the SB3 peer and the export; the
page is rendered by ``scripts/results_page.py``, the references are data in
``scripts/published_references.py`` (their seeds under ``results/published/``), and the shapes of
a suite are in ``scripts/suite_schema.py``.

Defaults: ``--out runs/reproduce`` (relative to the current directory); ``--results`` and
``--page`` are the repository's ``results/`` and ``docs/results.md``, except for ``smoke``, whose
are ``OUT/results`` and ``OUT/results.md``. Exit status: 0 when nothing failed (cells another
process holds are reported and skipped), 1 when a cell failed or was not run because its runs
hold another K or a larger budget than asked, 2 for a usage mistake (one ``reproduce: error:``
line, before anything is trained), 128 + the signal number when stopped by a signal.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import fnmatch
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's rlzoo, wherever the script is run from
    sys.path.insert(0, str(REPO))

if str(Path(__file__).resolve().parent) not in sys.path:  # the page's and the references' modules
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from published_references import REFERENCES, SOURCES, UNPUBLISHED, Reference  # noqa: E402, F401
from results_page import (  # noqa: E402, F401
    PROFILE_FIGURE,
    PROVENANCE_FILE,
    PUBLISHED_SUFFIX,
    REPORT_DIR,
    STATUS_FILE,
    SuiteData,  # noqa: E402
    aggregate_scores,
    first_columns,
    fmt,
    plot_profile,
    plot_published,
    published_figure,
    read_json,
    render_page,
    repo_relative,
    scale_line,
    scale_returns,
    summary_steps,
    updates_by,
    value_at,
    write_text_atomic,
)
from suite_schema import Row, Suite, Task, compose_cell_config  # noqa: E402, F401

import rlzoo  # noqa: E402, F401 - cheap; before torch loads anywhere: rlzoo's OpenMP spin-wait

PROG = "reproduce"
PAGE_SUITES = ("mujoco", "marl", "gpu")  # the suites of the repository's results page, in order
CELL_LOCK_SUFFIX = ".lock"
PARTIAL_SUFFIX = ".partial"


# --------------------------------------------------------------------------- suites

MUJOCO_ROWS = (
    Row("sac", ("algo=sac",)),
    Row("td3", ("algo=td3",)),
    Row("dsac_t", ("algo=dsac_t",)),
    Row("sac-ensemble", ("algo=sac", "critic=ensemble"), against=("sac",),
        note="SAC (rlzoo's SAC defaults, one update per env step) with a 10-member critic "
             "ensemble, targets from the min of a random pair (REDQ's critic, not REDQ's 20 "
             "updates per step; the published ensemble numbers are REDQ's, e.g. SimbaV2's "
             "baselines, so no reference)"),
    Row("sac-action_sequence", ("algo=sac", "critic=action_sequence"),
        against=("sac", "sac-n_step4"),
        note="SAC with a critic of 4-action chunks executed open-loop (Q-chunking's form: "
             "the actor outputs 4 x |A|, targets sum the chunk's 4 discounted rewards and "
             "bootstrap with gamma^4 from the state after it, cut at episode ends; target "
             "entropy -4|A| per chunk, SAC's per step; one update per env step, so four per "
             "chunk; evaluated open-loop too; nothing is published on these tasks at these "
             "budgets, so no reference)"),
    Row("simbav2", ("algo=simbav2",), against=("sac",),
        note="SimbaV2 with the reference's gym-MuJoCo defaults (conf/algo/simbav2.yaml: "
             "hyperspherical 128x1-block actor and 512x2-block twin categorical critic, "
             "observation and reward normalization, 5,000 random steps) at one update per env "
             "step: the setting of the reference's UTD-1 curve; its headline baseline makes 2 "
             "updates per step"),
    Row("stac", ("algo=stac",), against=("sac",),
        note="STAC (arXiv:2601.00737) with `algo=stac`'s defaults: one Gaussian critic, targets "
             "mu' - 0.25 sigma' (the paper's best beta per task, its Table 4: Hopper 0.5, "
             "HalfCheetah 0), LayerNorm and dropout 0.01 in actor and critic (the paper's best "
             "on Hopper; on HalfCheetah none), 10,000 random steps, lr 3e-4"),
    Row("sac-categorical", ("algo=sac", "critic=categorical"), against=("sac",),
        note="SAC (rlzoo's SAC defaults) with the categorical critic of SimbaV2 and FlashSAC: "
             "twin C51 distributions on 101 atoms in [-1000, 1000] (no reward scaling), the "
             "smaller member's distribution as target, cross-entropy loss; not SimbaV2's "
             "networks, normalizers or schedule"),
)
# Controls: each changes a few named settings of a main row, to separate one cause of a gap the
# page reports; run where that gap is (Task.rows), seeds 0..K-1 as every row.
CONTROL_ROWS = (
    Row("sac-n_step4", ("algo=sac", "algo.n_step=4"),
        note="control for `sac-action_sequence`: SAC's row with 4-step returns "
             "(`algo.n_step=4`, cut at episode ends), whose targets, as the chunked critic's, "
             "sum 4 discounted rewards and bootstrap with gamma^4; what `sac-action_sequence` "
             "gains beyond this row comes from the chunked actions and critic",
        against=("sac",)),
    Row("dsac_t-sac_start", ("algo=dsac_t", "tuner.init_alpha=1.0", "tuner.lr=1e-3",
                             "algo.actor_lr=3e-4", "algo.critic_lr=1e-3", "algo.policy_delay=1",
                             "algo.target_delay=1", "algo.learning_starts=5000"),
        note="control for `dsac_t`: DSAC-T with SAC's start (learning rates 3e-4 actor, 1e-3 "
             "critic and temperature; initial temperature 1; no delays; 5,000 random steps), "
             "DSAC-T's networks (3x256 GELU), log-std clamp and distributional critic kept",
        against=("dsac_t", "sac")),
)
# The distributional critics as the multi-agent critics, each against its algorithm's own row at
# the same budget (env steps, updates, batch, warm-up): one change, the critic kind. HASAC's base
# critic is a twin, and so are these (2 members); MADDPG's is one Q per agent, and these rows give
# each agent one distribution too (critic.n=1). The categorical support is fixed (no reward
# scaling) and wide enough for these tasks' early returns; values beyond it are clipped.
CATEGORICAL_SUPPORT = ("critic.v_min=-200", "critic.v_max=200")
MARL_CRITIC_ROWS = (
    Row("hasac-distributional", ("algo=hasac", "critic=distributional"), against=("hasac",),
        note="HASAC with DSAC-T's Gaussian critic (2 members, DSAC-T's loss) as its centralized "
             "critic over the global state and the joint action, otherwise HASAC's row"),
    Row("hasac-categorical", ("algo=hasac", "critic=categorical", *CATEGORICAL_SUPPORT),
        against=("hasac",),
        note="HASAC with a categorical centralized critic (2 members, 101 atoms on [-200, 200], "
             "C51's projected cross-entropy), otherwise HASAC's row"),
    Row("maddpg-distributional", ("algo=maddpg", "critic=distributional", "critic.n=1"),
        against=("maddpg",),
        note="MADDPG with one DSAC-T Gaussian critic per agent (its own reward, DSAC-T's loss), "
             "otherwise MADDPG's row"),
    Row("maddpg-categorical", ("algo=maddpg", "critic=categorical", "critic.n=1",
                               *CATEGORICAL_SUPPORT), against=("maddpg",),
        note="MADDPG with one categorical critic per agent (101 atoms on [-200, 200]), "
             "otherwise MADDPG's row"),
)
MARL_CRITIC_LABELS = tuple(row.label for row in MARL_CRITIC_ROWS)

SB3_ROWS = (
    Row("sb3_sac", ("algo=sac",), peer="sac"),
    Row("sb3_td3", ("algo=td3",), peer="td3"),
)

# what the first evaluation measures where every row's warm-up outlasts it (Suite.first_eval)
WARM_UP_FIRST_EVAL = ("every row's random warm-up lasts until at least the first evaluation, "
                      "so it measures the untrained policy")

SUITES: dict[str, Suite] = {
    "mujoco": Suite(
        name="mujoco",
        title="single-agent MuJoCo on the CPU",
        tasks=(Task("Hopper", "Hopper"),
               Task("HalfCheetah", "HalfCheetah",
                    tuple(r.label for r in MUJOCO_ROWS + SB3_ROWS) + ("sac-n_step4",)),
               Task("Walker2d", "Walker2d", ("sac", "td3", "sb3_sac", "sb3_td3"))),
        rows=MUJOCO_ROWS + CONTROL_ROWS + SB3_ROWS,
        steps=100_000,          # a cell finished at 50k resumes from its checkpoint to this
        headline_steps=(50_000, 100_000),
        seeds=5,
        eval_every=5_000,       # hits the published 25k / 50k / 100k points
        eval_episodes=10,
        checkpoint_every=5_000,  # about 3-4 minutes of a 5-seed SAC group on 2 cores
        checkpoint_keep=1,
        why="100k env steps, where every published source has a point (the headline also "
            "reads each curve at 50k): measured on 2 shared cores, a 5-seed cell of 50k took "
            "TD3 20-34 min, SAC about an hour, DSAC-T about 2 h and the ensemble critic's 10 "
            "members about 4 h (estimated), an SB3 cell 1-3 h of one core per seed "
            "(docs/reproducing.md); 100k takes about twice that, Walker2d about Hopper's",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="not scheduled: on the 2-core machine a DSAC-T cell of 50k takes about 2 h "
                "(Hopper dsac_t: 1.9 h; its control with SAC's start, with no delays, was at 3.7 "
                "steps/s, about 3.5 h) and an ensemble-critic cell about 4 h, and none of these "
                "rows has a published reference; the hours went to the rows that have one, to "
                "the peer and to the action-sequence critic with its control; `simbav2` costs "
                "about 30x SAC per update on this CPU (docs/performance.md), about a day per "
                "5-seed cell: its cells belong to the `gpu` suite; the `stac` and "
                "`sac-categorical` rows were added later (issue 24) and have not been run",
    ),
    "marl": Suite(
        name="marl",
        title="multi-agent MPE and MaMuJoCo on the CPU",
        tasks=(
            Task("mpe-simple_spread", "mpe/simple_spread",
                 ("maddpg", "hasac", "coma", *MARL_CRITIC_LABELS)),
            Task("mpe-simple_speaker_listener", "mpe/simple_speaker_listener",
                 ("maddpg", "hasac", "coma", *MARL_CRITIC_LABELS)),
            Task("mamujoco-HalfCheetah-2x3", "mamujoco/HalfCheetah-2x3",
                 ("maddpg", "hasac", *MARL_CRITIC_LABELS)),
        ),
        rows=(Row("maddpg", ("algo=maddpg",),
                  note="HARL's learning rates, batch, tau and noise, but not its schedule: HARL's "
                       "tuned MPE config makes 50 updates per 1,000 env steps (0.05 per step; "
                       "rlzoo 0.25) after 10,000 random steps (rlzoo 5,000), with 128x128 "
                       "networks on MPE (rlzoo 256x256)"),
              Row("hasac", ("algo=hasac",),
                  note="HARL's learning rates, batch, n-step and networks, but not its schedule "
                       "(0.05 updates per env step after 10,000 random steps in HARL's tuned "
                       "configs; rlzoo 0.25 after 5,000) nor its temperature learning rate "
                       "(HARL 3e-4, rlzoo 1e-3); every temperature starts at 1, as in HARL "
                       "(auto_alpha starts log alpha at 0), and learns with Adam at lr 1e-3 "
                       "(rlzoo's tuner default)"),
              Row("coma", ("algo=coma",),
                  note="on-policy: by 25k env steps COMA has made 129 actor updates "
                       "(summary.json's `updates`: one per rollout of 200 vector steps, reset "
                       "steps included, rlzoo's default), where MADDPG and HASAC make 5,000 (0.25 "
                       "per env step after a 5,000-step warm-up) from replay, so its numbers "
                       "here are the start of its curve"),
              *MARL_CRITIC_ROWS),
        steps=25_000,           # 1,000 MPE episodes; 20,000 steps (5,000 updates) after warm-up
        seeds=5,
        eval_every=2_500,
        eval_episodes=10,
        checkpoint_every=2_500,  # about 5 minutes of a 5-seed MADDPG group on 2 shared cores
        checkpoint_keep=1,
        why="25k env steps per task: measured on 2 shared cores (docs/reproducing.md), a "
            "5-seed cell of 25k took 21-47 minutes for MADDPG, 51-103 for HASAC on MPE and 8-12 "
            "for COMA (on-policy), 33 for MADDPG and 43 for HASAC (alone, 2 threads) on "
            "HalfCheetah-2x3 (on HalfCheetah-2x3, 25 episodes of 1,000 steps)",
        first_eval="at 2,500 steps: for MADDPG and HASAC inside their 5,000-step random warm-up, "
                   "so the untrained policy; COMA, on-policy, has made about 12 updates by then",
        not_run="not run yet: the distributional-critic rows were added after the other cells "
                "ran; each is a 5-seed cell of MADDPG's or HASAC's cost or more (the critic's "
                "loss is heavier), about 0.5-2 h on 2 shared cores",
    ),
    "gpu": Suite(
        name="gpu",
        title="single-agent MuJoCo at 1M steps on a CUDA GPU",
        tasks=(Task("Hopper", "Hopper"), Task("HalfCheetah", "HalfCheetah"),
               Task("Humanoid", "Humanoid")),
        rows=MUJOCO_ROWS,
        steps=1_000_000,
        seeds=5,
        eval_every=5_000,
        eval_episodes=10,
        checkpoint_every=50_000,
        checkpoint_keep=1,
        overrides=("device=cuda",),
        why="1M env steps, the papers' budget; needs a CUDA GPU",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="needs a CUDA GPU for the hours one cell takes: none was available to the "
                "maintainers yet",
    ),
    "smoke": Suite(
        name="smoke",
        title="plumbing check (tiny networks; learns nothing)",
        tasks=(Task("Pendulum", "Pendulum"),),
        rows=(Row("sac", ("algo=sac",)), Row("td3", ("algo=td3",)),
              Row("sb3_sac", ("algo=sac",), peer="sac")),
        steps=300,
        seeds=2,
        eval_every=100,
        eval_episodes=2,
        checkpoint_every=100,
        checkpoint_keep=1,
        overrides=("device=cpu", "algo.learning_starts=100", "algo.actor.hidden=[16]",
                   "critic.hidden=[16]"),
        why="a few hundred steps: a check of the machinery, not a result",
    ),
}


# --------------------------------------------------------------------------- small helpers


class UsageError(Exception):
    """A user mistake: one ``reproduce: error:`` line, exit status 2."""


def fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def say(message: str) -> None:
    print(f"{PROG}: {message}", flush=True)


class Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one ``reproduce: error:`` line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message}; see python scripts/reproduce.py --help")


def launch_record(env: dict[str, str], command: Sequence[str]) -> dict[str, Any]:
    """What a training launch ran on: the time (UTC), this checkout's git commit and whether
    rlzoo/ or scripts/ had uncommitted changes, the command (checkout paths relative), Python
    and package versions, the platform, CPU model and core count, and ``OMP_NUM_THREADS`` of the
    child's environment ``env``. Parts that cannot be read are None."""
    import platform
    from importlib import metadata

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    cpu = None
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in
                    Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), None)
    except OSError:
        pass
    changes = git("status", "--porcelain", "--untracked-files=no", "--", "rlzoo", "scripts")
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": None if changes is None else bool(changes),
        "command": [repo_relative(arg) for arg in command],
        "python": platform.python_version(),
        "packages": {name: version(name) for name in
                     ("torch", "numpy", "gymnasium", "mujoco", "pettingzoo", "mpe2",
                      "gymnasium-robotics", "stable-baselines3")},
        "platform": platform.platform(),
        "cpu": cpu or platform.processor() or None,
        "cores": os.cpu_count(),
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS"),
    }


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Add ``record`` to the JSON list in ``path`` (a cell's launches, oldest first)."""
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        records = []
    records = records if isinstance(records, list) else []
    write_text_atomic(path, json.dumps([*records, record], indent=2) + "\n")


def replace_dir(src: Path, dst: Path) -> None:
    """Put the finished folder ``src`` at ``dst`` (replacing what is there) by renames."""
    old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
    if dst.exists():
        os.rename(dst, old)
    os.rename(src, dst)
    shutil.rmtree(old, ignore_errors=True)


class FileLock:
    """An exclusive ``flock`` on a file for as long as it is held; the kernel drops it when the
    process dies. ``acquire(block=False)`` returns False (and ``owner``, the holder's pid) when
    another process holds it."""

    def __init__(self, path: Path) -> None:
        self.path, self.fd, self.owner = path, -1, ""

    def acquire(self, block: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except OSError:
            self.owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def child_env(threads: int | None = None) -> dict[str, str]:
    """The environment of a child process: this checkout's rlzoo on ``PYTHONPATH``; with
    ``threads``, ``OMP_NUM_THREADS`` set to it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def log_tail(path: Path, lines: int = 1) -> str:
    """The last non-empty line(s) of a log file (for a one-line failure report)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output)"
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) if kept else "(no output)"


def sb3_missing() -> str | None:
    """None when ``import stable_baselines3`` works here, else why not (one line)."""
    try:
        import stable_baselines3  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure means: no peer
        return f"{type(err).__name__}: {err}".splitlines()[0]
    return None


# --------------------------------------------------------------------------- signals


class Stop:
    """SIGINT/SIGTERM: remember the first signal and forward each one to the running children
    (started in their own sessions, so a terminal's Ctrl-C reaches them only through here, once;
    rlzoo checkpoints on the first and exits at once on a second)."""

    def __init__(self) -> None:
        self.signum = 0
        self.children: set[subprocess.Popen[bytes]] = set()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle)

    def handle(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        for child in list(self.children):
            if child.poll() is None:
                try:
                    child.send_signal(signum)
                except OSError:
                    pass


STOP = Stop()


def run_child(cmd: list[str], log: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` from the repository root, output appended to ``log``; its exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        STOP.children.add(proc)
        if STOP.signum:  # a signal that came before the child was in the set
            proc.send_signal(STOP.signum)
        try:
            return proc.wait()
        finally:
            STOP.children.discard(proc)


# --------------------------------------------------------------------------- cells


@dataclass
class Plan:
    """What this invocation runs: the suite, K, the budget and the folders."""

    suite: Suite
    seeds: int
    steps: int | None  # --steps (None: each task's default)
    out: Path
    results: Path
    page: Path
    sb3: str | None  # None when SB3 can run, else why not

    def budget(self, task: Task) -> int:
        return self.steps or task.steps or self.suite.steps

    def task_dir(self, task: Task) -> Path:
        return self.out / self.suite.name / task.name


@dataclass
class Outcome:
    """What happened to one cell: ``state`` is ``finished`` (was or is now), ``unfinished``,
    ``locked``, ``skipped`` or ``failed``; ``note`` says more in one line."""

    task: str
    row: str
    state: str
    note: str = ""
    dirs: list[Path] = field(default_factory=list)
    mistake: bool = False  # skipped because its runs do not match this invocation's K or budget


def group_steps(members: list[Path]) -> int | None:
    """The env steps a finished group made: the least ``total_steps`` of its members'
    summaries (an on-policy group's faster seeds may pass it by a few steps); None while a
    member has no summary."""
    steps = [summary_steps(d) for d in members]
    return None if any(s is None for s in steps) else min(steps)  # type: ignore[type-var]


def group_members(home: Path, seeds: int) -> list[Path] | str:
    """The run dirs of the rlzoo seed group whose home is ``home`` (``[home]`` for K = 1), or
    why they cannot be used (a one-line reason)."""
    from rlzoo.errors import UserError
    from rlzoo.run.group import read_group

    try:
        group = read_group(home)
    except UserError as err:
        return str(err)
    if group is None:
        if seeds == 1:
            return [home]
        return f"{home} holds a 1-seed run, not a {seeds}-seed group"
    if len(group.dirs) != seeds:
        return f"{home} holds a {len(group.dirs)}-seed group, not {seeds} (pass --seeds " \
               f"{len(group.dirs)} or another --out)"
    return list(group.dirs)


def rlzoo_overrides(plan: Plan, task: Task, row: Row) -> list[str]:
    """The command line of a new rlzoo cell (without its run dir)."""
    s = plan.suite
    return [f"env={task.env}", *row.overrides, *s.overrides, f"total_steps={plan.budget(task)}",
            "seed=0", f"seeds={plan.seeds}", f"eval.every={s.eval_every}",
            f"eval.episodes={s.eval_episodes}", f"checkpoint.every={s.checkpoint_every}",
            f"checkpoint.keep={s.checkpoint_keep}", "log.progress=false"]


def discard_unstarted(dirs: list[Path]) -> None:
    """Remove the dirs of a group that never wrote a checkpoint or a summary (a crash before
    its first checkpoint), so the cell starts again; a dir a live rlzoo process holds is kept."""
    from rlzoo.run.rundir import RunLock, holds_a_run

    for d in dirs:
        if d.is_dir() and not holds_a_run(d):
            RunLock.check_free(d)
            shutil.rmtree(d)


def unstarted_group(home: Path, seeds: int) -> list[Path]:
    """The dirs a group that never started may have left: ``home``, the members its group.json
    names and the default member names (``<row>-s<seed>``)."""
    from rlzoo.errors import UserError
    from rlzoo.run.group import member_dir, read_group

    dirs = [home, *(member_dir(home, 0, seed) for seed in range(1, seeds))]
    try:
        group = read_group(home)
    except UserError:
        group = None
    return list(dict.fromkeys([*dirs, *(group.dirs if group else ())]))


def live_trainer(home: Path, seeds: int) -> str:
    """Why the cell whose home is ``home`` cannot be run now: a live ``rlzoo.train`` holds one
    of its run dirs (a trainer an earlier reproduce.py left running when it was killed); ``""``
    when none does."""
    from rlzoo.run.rundir import RunLock

    for d in unstarted_group(home, seeds) if home.exists() else []:
        owner = RunLock.owner(d)
        if owner is not None:
            return (f"locked by a live trainer: rlzoo.train (pid {owner}) still runs in "
                    f"{repo_relative(str(d))}; wait for it to finish or stop it (kill {owner}), "
                    "then run the command again")
    return ""


def cell_lock(plan: Plan, task: Task, row: Row) -> FileLock:
    return FileLock(plan.task_dir(task) / f".{row.label}{CELL_LOCK_SUFFIX}")


def still_locked(plan: Plan, outcome: Outcome) -> str | None:
    """At report time, the state a cell reported ``locked`` earlier has now: ``None`` once it
    is finished; its note while another reproduce.py or a trainer still holds it; else
    ``unfinished``, as the holder has exited since (status.json never names a dead pid)."""
    cell = next(((t, r) for t, r in plan.suite.cells()
                 if t.name == outcome.task and r.label == outcome.row), None)
    if cell is None:
        return f"locked: {outcome.note}"
    task, row = cell
    if finished_dirs(plan, task, row) is not None:
        return None
    lock = cell_lock(plan, task, row)
    if not lock.acquire():
        return f"locked: another reproduce.py (pid {lock.owner}) is running this cell"
    lock.release()
    trainer = "" if row.peer else live_trainer(plan.task_dir(task) / f"{row.label}-s0",
                                                plan.seeds)
    if trainer:
        return f"locked: {trainer}"
    return ("unfinished: it was locked by another process, which has exited since; run the "
            "command again to continue it")


def cell_provenance(plan: Plan, task: Task, row: Row) -> Path:
    """Where an rlzoo cell's launches are recorded (beside its log; exported with each seed)."""
    return plan.task_dir(task) / f"{row.label}.{PROVENANCE_FILE}"


def rlzoo_cell(plan: Plan, task: Task, row: Row) -> Outcome:
    """Skip, resume or start one rlzoo cell (the caller holds the cell's lock)."""
    from rlzoo.errors import UserError
    from rlzoo.run.rundir import holds_a_run

    steps = plan.budget(task)
    home = plan.task_dir(task) / f"{row.label}-s0"
    log = plan.task_dir(task) / f"{row.label}.log"
    cmd = [sys.executable, "-m", "rlzoo.train"]
    what = "started"
    trainer = live_trainer(home, plan.seeds)
    if trainer:
        return Outcome(task.name, row.label, "locked", trainer)
    if home.exists():
        members = group_members(home, plan.seeds) if holds_a_run(home) else [home]
        if isinstance(members, str):
            return Outcome(task.name, row.label, "skipped", members, mistake=True)
        reached = group_steps(members)
        if reached == steps:
            return Outcome(task.name, row.label, "finished", "already finished", members)
        if reached is not None and reached > steps:
            return Outcome(task.name, row.label, "skipped", f"holds a run of {reached} steps, "
                           f"more than {steps}; left as it is", mistake=True)
        if holds_a_run(home):
            cmd += [f"resume={home}", f"total_steps={steps}", "log.progress=false"]
            what = "resumed"
        else:
            try:
                discard_unstarted(unstarted_group(home, plan.seeds))
            except UserError as err:
                return Outcome(task.name, row.label, "locked", str(err))
    if what == "started":
        cmd += [*rlzoo_overrides(plan, task, row), f"hydra.run.dir={home}"]
    say(f"{task.name}/{row.label}: {what} ({plan.seeds} seeds to {steps} steps; log {log})")
    env = child_env()
    append_record(cell_provenance(plan, task, row), {"launch": what, **launch_record(env, cmd)})
    status = run_child(cmd, log, env)
    members = group_members(home, plan.seeds) if home.exists() else "no run dir"
    if isinstance(members, list) and group_steps(members) == steps:
        return Outcome(task.name, row.label, "finished", what, members)
    last = repo_relative(log_tail(log))
    if status == 2 and "in use by a running rlzoo process" in last:
        return Outcome(task.name, row.label, "locked", last)
    if STOP.signum or status == 0:
        # rlzoo.train exits 0 short of its budget only when a signal (to this script, or to the
        # trainer alone) stopped it after a checkpoint: resumable either way
        return Outcome(task.name, row.label, "unfinished", f"stopped ({last})")
    return Outcome(task.name, row.label, "failed", f"exit status {status}: {last}")


def sb3_cell(plan: Plan, task: Task, row: Row) -> Outcome:
    """Skip the finished seeds of an SB3 cell and train the others, at most one worker process
    per core at a time (the caller holds the cell's lock)."""
    steps = plan.budget(task)
    folder = plan.task_dir(task)
    dirs = [folder / f"{row.label}-s{seed}" for seed in range(plan.seeds)]
    if plan.sb3 is not None:
        return Outcome(task.name, row.label, "skipped", f"stable_baselines3 is not importable "
                       f"({plan.sb3})")
    todo = [seed for seed, d in enumerate(dirs) if summary_steps(d) != steps]
    if any((summary_steps(d) or 0) > steps for d in dirs):
        return Outcome(task.name, row.label, "skipped",
                       f"holds runs of more than {steps} steps; left as they are", mistake=True)
    if not todo:
        return Outcome(task.name, row.label, "finished", "already finished", dirs)
    jobs = max(1, min(len(todo), os.cpu_count() or 1))
    say(f"{task.name}/{row.label}: seeds {', '.join(map(str, todo))} of Stable-Baselines3 "
        f"{row.peer} to {steps} steps, {jobs} at a time (logs {folder / row.label}-s<seed>.log)")
    running: list[tuple[int, subprocess.Popen[bytes], Any]] = []
    failures: list[str] = []
    queue = list(todo)
    folder.mkdir(parents=True, exist_ok=True)
    while (queue or running) and not STOP.signum:
        while queue and len(running) < jobs and not STOP.signum:
            seed = queue.pop(0)
            partial = folder / f".{row.label}-s{seed}{PARTIAL_SUFFIX}"
            shutil.rmtree(partial, ignore_errors=True)  # a seed stopped earlier starts again
            spec = {"suite": plan.suite.name, "task": task.name, "row": row.label,
                    "seed": seed, "steps": steps, "partial": str(partial),
                    "final": str(dirs[seed])}
            out = open(folder / f"{row.label}-s{seed}.log", "ab")
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--sb3-worker", json.dumps(spec)],
                cwd=REPO, env=child_env(threads=1), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
            STOP.children.add(proc)
            running.append((seed, proc, out))
        time.sleep(0.2)
        for item in list(running):
            seed, proc, out = item
            if proc.poll() is None:
                continue
            running.remove(item)
            STOP.children.discard(proc)
            out.close()
            if proc.returncode != 0 and not STOP.signum:
                failures.append(f"seed {seed}: exit status {proc.returncode}: "
                                f"{log_tail(folder / f'{row.label}-s{seed}.log')}")
    for _, proc, out in running:  # stopped: wait for the children the signal reached
        proc.wait()
        STOP.children.discard(proc)
        out.close()
    if all(summary_steps(d) == steps for d in dirs):
        return Outcome(task.name, row.label, "finished", "trained", dirs)
    if failures:
        return Outcome(task.name, row.label, "failed", "; ".join(failures))
    return Outcome(task.name, row.label, "unfinished", "stopped (finished seeds are kept)")


def run_cell(plan: Plan, task: Task, row: Row) -> Outcome:
    """One cell under its lock; a cell another process holds is reported and skipped."""
    lock = cell_lock(plan, task, row)
    if not lock.acquire():
        return Outcome(task.name, row.label, "locked",
                       f"another reproduce.py (pid {lock.owner}) is running this cell")
    try:
        return sb3_cell(plan, task, row) if row.peer else rlzoo_cell(plan, task, row)
    finally:
        lock.release()


def finished_dirs(plan: Plan, task: Task, row: Row) -> list[Path] | None:
    """The seeds' run dirs of a cell that is finished at its budget, else None."""
    steps = plan.budget(task)
    folder = plan.task_dir(task)
    if row.peer:
        dirs = [folder / f"{row.label}-s{seed}" for seed in range(plan.seeds)]
    else:
        home = folder / f"{row.label}-s0"
        if not (home / "summary.json").is_file():
            return None
        members = group_members(home, plan.seeds)
        if isinstance(members, str):
            return None
        return members if group_steps(members) == steps else None
    return dirs if all(summary_steps(d) == steps for d in dirs) else None


# --------------------------------------------------------------------------- SB3 peer


@dataclass(frozen=True)
class PeerSettings:
    """Stable-Baselines3 settings equal to an rlzoo config's (:func:`peer_settings`).

    Attributes:
        kwargs: constructor keyword arguments of ``SAC``/``TD3`` (without env, seed, device and,
            for TD3, the action noise, which needs the action size).
        learning_rates: rlzoo's Adam rate of each optimizer: ``actor``, ``critic`` and, for SAC,
            ``alpha`` (SB3 has one rate for all; :func:`sb3_worker` sets each).
        target_entropy: SAC's target entropy in rlzoo's units, None for ``-scale * |A|``.
        target_entropy_scale: that ``scale``.
        entropy_env_units: whether rlzoo's target is of the env's action (``tuner.entropy_units
            =env``) rather than of the [-1, 1] action SB3's log-probs are of.
        exploration_noise: TD3's Gaussian exploration std in the [-1, 1] action space.
    """

    kwargs: dict[str, Any]
    learning_rates: dict[str, float]
    target_entropy: float | None = None
    target_entropy_scale: float = 1.0
    entropy_env_units: bool = False
    exploration_noise: float = 0.0

    def sac_target_entropy(self, low: Any, high: Any) -> float:
        """SAC's target entropy in SB3's units for an env with action bounds ``low``, ``high``
        ``[A]``: log pi(env action) = log pi([-1, 1] action) - sum log(half range)."""
        target = (-self.target_entropy_scale * int(np.size(low)) if self.target_entropy is None
                  else self.target_entropy)
        if self.entropy_env_units:
            target -= float(np.sum(np.log((np.asarray(high) - np.asarray(low)) / 2.0)))
        return float(target)


def peer_settings(cfg: Any, peer: str) -> PeerSettings:
    """Stable-Baselines3 settings equal to the composed rlzoo config ``cfg`` of ``algo=<peer>``
    (``"sac"`` or ``"td3"``). Raises ValueError naming what SB3 cannot take as it is (the peer
    would then not be the same algorithm)."""
    algo, critic = cfg.algo, cfg.critic
    problems = []
    if float(algo.utd) != 1.0 or int(algo.n_step) != 1:
        problems.append("utd and n_step must be 1")
    if not str(critic._target_).endswith("TwinCritic") or critic.layer_norm:
        problems.append("the critic must be the twin critic without layer norm")
    if algo.actor.activation != "relu" or critic.activation != "relu":
        problems.append("activations must be relu")
    delay = int(algo.policy_delay)
    target_delay = algo.get("target_delay")
    if target_delay is not None and int(target_delay) != delay:
        problems.append("target_delay must equal policy_delay")
    if peer == "sac" and (delay != 1 or critic.actor_reduce != "min"):
        problems.append("SAC needs policy_delay 1 and actor_reduce min")
    if peer == "td3" and critic.actor_reduce != "first":
        problems.append("TD3 needs actor_reduce first")
    if problems:
        raise ValueError(f"the SB3 {peer} peer cannot match this config: {'; '.join(problems)}")
    kwargs: dict[str, Any] = {
        "learning_rate": float(algo.actor_lr), "buffer_size": int(algo.buffer_size),
        "learning_starts": int(algo.learning_starts), "batch_size": int(algo.batch_size),
        "tau": float(algo.tau), "gamma": float(algo.gamma), "train_freq": 1, "gradient_steps": 1,
        "policy_kwargs": {"net_arch": {"pi": [int(h) for h in algo.actor.hidden],
                                       "qf": [int(h) for h in critic.hidden]}},
    }
    rates = {"actor": float(algo.actor_lr), "critic": float(algo.critic_lr)}
    if peer == "sac":
        tuner = cfg.tuner
        rates["alpha"] = float(tuner.lr)
        kwargs["ent_coef"] = f"auto_{float(tuner.init_alpha)}"
        return PeerSettings(
            kwargs, rates,
            target_entropy=None if tuner.target_entropy is None else float(tuner.target_entropy),
            target_entropy_scale=float(tuner.target_entropy_scale),
            entropy_env_units=tuner.entropy_units == "env")
    kwargs.update(policy_delay=delay, target_policy_noise=float(algo.policy_noise),
                  target_noise_clip=float(algo.noise_clip))
    return PeerSettings(kwargs, rates, exploration_noise=float(algo.exploration_noise))


def sb3_worker(spec: dict[str, Any]) -> None:
    """One SB3 seed (in its own process): train, evaluate every ``eval_every`` env steps as rlzoo
    does (deterministic, ``eval_episodes`` episodes from seeds ``seed + 10000 + i``), write
    ``summary.json``, ``eval.csv`` and ``.hydra/`` into the partial dir and rename it into place.
    """
    import gymnasium as gym
    import stable_baselines3 as sb3
    import torch
    from omegaconf import OmegaConf
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    from rlzoo.analysis.curves import SCALARS_CSV, write_scalars_csv

    torch.set_num_threads(1)
    suite = SUITES[spec["suite"]]
    task = next(t for t in suite.tasks if t.name == spec["task"])
    row = next(r for r in suite.rows if r.label == spec["row"])
    seed, steps = int(spec["seed"]), int(spec["steps"])
    cfg = compose_cell_config([f"env={task.env}", *row.overrides, *suite.overrides])
    settings = peer_settings(cfg, str(row.peer))
    kwargs = dict(settings.kwargs)
    rates = settings.learning_rates
    env_kwargs = OmegaConf.to_container(cfg.env.kwargs, resolve=True) or {}
    env = gym.make(str(cfg.env.id), **env_kwargs)  # type: ignore[arg-type]
    space = env.action_space
    act_dim = int(np.prod(space.shape))  # type: ignore[arg-type]
    if row.peer == "sac":
        kwargs["target_entropy"] = settings.sac_target_entropy(space.low, space.high)  # type: ignore[attr-defined]
        base: Any = sb3.SAC
    else:
        kwargs["action_noise"] = NormalActionNoise(
            np.zeros(act_dim), settings.exploration_noise * np.ones(act_dim))
        base = sb3.TD3

    class Matched(base):  # type: ignore[misc, valid-type]
        """SB3's algorithm with each optimizer at rlzoo's learning rate for it (SB3 has one rate
        for all): only the rate setting SB3 does before each update is replaced."""

        def _update_learning_rate(self, optimizers: Any) -> None:
            by_optimizer = {id(self.actor.optimizer): rates["actor"],
                            id(self.critic.optimizer): rates["critic"]}
            if getattr(self, "ent_coef_optimizer", None) is not None:
                by_optimizer[id(self.ent_coef_optimizer)] = rates["alpha"]
            for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
                for group in optimizer.param_groups:
                    group["lr"] = by_optimizer[id(optimizer)]

    eval_seed0 = seed + 10_000
    eval_envs = [gym.make(str(cfg.env.id), **env_kwargs)  # type: ignore[arg-type]
                 for _ in range(suite.eval_episodes)]
    points: dict[str, dict[int, float]] = {"eval/return": {}, "eval/return_std": {}}

    def evaluate(model: Any, step: int) -> None:
        """All episodes at once, each from its own seed; the policy's deterministic action."""
        obs = [e.reset(seed=eval_seed0 + i)[0] for i, e in enumerate(eval_envs)]
        returns = np.zeros(len(eval_envs))
        live = list(range(len(eval_envs)))
        while live:
            actions, _ = model.predict(np.stack([obs[i] for i in live]), deterministic=True)
            still = []
            for action, i in zip(actions, live):
                obs[i], reward, terminated, truncated, _ = eval_envs[i].step(action)
                returns[i] += float(reward)
                if not (terminated or truncated):
                    still.append(i)
            live = still
        points["eval/return"][step] = float(returns.mean())
        points["eval/return_std"][step] = float(returns.std())

    class EvalEvery(BaseCallback):
        """Evaluate after the update of every ``eval_every``-th env step (as rlzoo does): SB3
        updates after a step's rollout ends, so at the start of the next rollout."""

        def _on_rollout_start(self) -> None:
            step = self.num_timesteps
            if step > 0 and step % suite.eval_every == 0 and step not in points["eval/return"]:
                evaluate(self.model, step)

        def _on_step(self) -> bool:
            return True

    model = Matched("MlpPolicy", env, seed=seed, device="cpu", verbose=0,
                    **copy.deepcopy(kwargs))  # SB3 adds to policy_kwargs; the config keeps ours
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=EvalEvery())
    if steps not in points["eval/return"]:
        evaluate(model, steps)
    wall = time.perf_counter() - start
    if model.num_timesteps != steps:
        raise SystemExit(f"SB3 made {model.num_timesteps} steps, not {steps}")

    partial, final = Path(spec["partial"]), Path(spec["final"])
    (partial / ".hydra").mkdir(parents=True, exist_ok=True)
    final_return = points["eval/return"][steps]
    if not math.isfinite(final_return):
        raise SystemExit(f"SB3's final evaluation returned {final_return}")
    summary = {
        "algo": row.label, "env": str(cfg.env.name), "seed": seed, "total_steps": steps,
        "final_eval_return": final_return,
        "final_eval_return_std": points["eval/return_std"][steps],
        "wall_time_s": wall, "steps_per_sec": steps / wall if wall > 0 else 0.0,
        "updates": int(model._n_updates), "episodes": int(model._episode_num),
        "library": f"stable-baselines3 {sb3.__version__}",
    }
    peer_kwargs = {k: v for k, v in kwargs.items() if k != "action_noise"}
    if row.peer == "td3":
        peer_kwargs["exploration_noise"] = settings.exploration_noise
    config = {
        "algo": {"name": row.label, "library": f"stable-baselines3 {sb3.__version__}",
                 "class": base.__name__, "matches": f"rlzoo {' '.join(row.overrides)}",
                 "learning_rates": rates, **peer_kwargs},
        "env": {"name": str(cfg.env.name), "id": str(cfg.env.id), "kwargs": env_kwargs},
        "seed": seed, "total_steps": steps,
        "eval": {"every": suite.eval_every, "episodes": suite.eval_episodes},
    }
    hydra_dir = partial / ".hydra"
    (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    (hydra_dir / "overrides.yaml").write_text("[]\n")
    (hydra_dir / "hydra.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(
        {"hydra": {"runtime": {"choices": {"algo": row.label, "env": task.env}}}})))
    write_scalars_csv(partial / SCALARS_CSV, {
        tag: (np.array(sorted(p), dtype=np.int64), np.array([p[s] for s in sorted(p)]))
        for tag, p in points.items()})
    (partial / PROVENANCE_FILE).write_text(json.dumps(
        [{"launch": "started", **launch_record(dict(os.environ), sys.argv)}], indent=2) + "\n")
    (partial / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    replace_dir(partial, final)
    print(f"{PROG}: {row.label} seed {seed} on {task.name}: final eval return "
          f"{final_return:.2f} after {steps} steps ({summary['steps_per_sec']:.1f} steps/s)",
          flush=True)


# --------------------------------------------------------------------------- export

def export_run(run_dir: Path, dest: Path, provenance: Path | None = None) -> bool:
    """Copy one finished run into ``dest``: summary.json, ``.hydra/*.yaml``, its ``eval/*``
    curve as ``eval.csv`` (from TensorBoard events, or its own eval.csv) and ``provenance.json``
    (the run's own, else ``provenance``: its cell's launches). Nothing else: no checkpoints, no
    events, no weights. Returns False (nothing written) when ``dest`` already holds this
    summary.json and provenance."""
    from rlzoo.analysis.curves import SCALARS_CSV, load_scalars, write_scalars_csv

    summary = (run_dir / "summary.json").read_bytes()
    source = run_dir / PROVENANCE_FILE
    source = source if source.is_file() else provenance
    record = source.read_bytes() if source is not None and source.is_file() else None
    old_record = dest / PROVENANCE_FILE
    if ((dest / "summary.json").is_file() and (dest / "summary.json").read_bytes() == summary
            and (old_record.read_bytes() if old_record.is_file() else None) == record):
        return False
    tmp = dest.with_name(f".{dest.name}.export-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / ".hydra").mkdir(parents=True)
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        if (run_dir / ".hydra" / name).is_file():
            text = (run_dir / ".hydra" / name).read_text()
            (tmp / ".hydra" / name).write_text(repo_relative(text))
    scalars = {tag: points for tag, points in load_scalars(run_dir).items()
               if tag.startswith("eval/")}
    write_scalars_csv(tmp / SCALARS_CSV, scalars)
    if record is not None:
        (tmp / PROVENANCE_FILE).write_bytes(record)
    (tmp / "summary.json").write_bytes(summary)  # last: a run is a dir with summary.json
    replace_dir(tmp, dest)
    return True


def export_suite(plan: Plan) -> tuple[int, int]:
    """Export every finished cell of the suite (at this invocation's budgets and K) to
    ``RESULTS/<suite>/<task>/<row>-s<seed>``; returns (cells exported, run dirs written)."""
    cells = written = 0
    for task, row in plan.suite.cells():
        dirs = finished_dirs(plan, task, row)
        if dirs is None:
            continue
        cells += 1
        for seed, d in enumerate(dirs):
            dest = plan.results / plan.suite.name / task.name / f"{row.label}-s{seed}"
            written += export_run(d, dest, None if row.peer else cell_provenance(plan, task, row))
    return cells, written


# --------------------------------------------------------------------------- the report


# the first sentence of a suite's section on the page
LEADS = {"marl": "At 25k env steps this section shows that the multi-agent runs run, not how "
                 "well the algorithms do: HARL (MADDPG, HASAC) publishes only figures up to 1e7 "
                 "steps, nothing readable below 200k and no COMA numbers for continuous MPE, so "
                 "there is no reference, and HARL's MPE settings were not run here. (HARL's MPE "
                 "reward gives each agent the sum over agents, rlzoo reports the mean: divide "
                 "HARL's by the number of agents to compare.)"}


def write_page(results: Path, page: Path, suites: Sequence[str]) -> None:
    """Rewrite ``page`` from ``RESULTS/<suite>/`` of each of ``suites`` (:func:`render_page`)."""
    write_text_atomic(page, render_page(results, page.parent, [SUITES[s] for s in suites],
                                        LEADS))


def report(plan: Plan, outcomes: list[Outcome]) -> None:
    """Export, compare and rewrite the page (under a lock, so two invocations never write the
    same report at once)."""
    from rlzoo.analysis import compare, find_runs
    from rlzoo.analysis.messages import CompareError

    key = hashlib.sha1(str(plan.results.resolve()).encode()).hexdigest()[:16]
    lock = FileLock(Path(tempfile.gettempdir()) / f"rlzoo-reproduce-{key}.lock")
    lock.acquire(block=True)  # outside the results, which are committed
    try:
        cells, written = export_suite(plan)
        root = plan.results / plan.suite.name
        status_path = root / STATUS_FILE
        status = read_json(status_path) or {}
        for o in outcomes:
            if o.mistake:  # says nothing about the cell, only about this invocation
                continue
            cell = f"{o.task}/{o.row}"
            state = (f"{o.state}: {o.note}" if o.note else o.state) if o.state != "locked" \
                else still_locked(plan, o)  # the holder may have finished it meanwhile
            if o.state == "finished" or state is None:
                status.pop(cell, None)
            else:
                status[cell] = state
        if status or status_path.exists():
            write_text_atomic(status_path, json.dumps(status, indent=2, sort_keys=True) + "\n")
        say(f"exported {cells} finished cells ({written} run dirs written) to {root}")
        runs = find_runs([root]) if root.is_dir() else []
        if runs:
            try:
                kept = compare(runs, root / REPORT_DIR)
                for path in (root / REPORT_DIR).glob("*.json"):  # no path of this machine
                    path.write_text(repo_relative(path.read_text()))
                for path in (root / REPORT_DIR).glob(f"*{PUBLISHED_SUFFIX}"):
                    path.unlink()
                for env, by_label in kept.get("curves", {}).items():
                    plot_published(env, by_label, root / REPORT_DIR / published_figure(
                        kept["figures"][env]))
                for path in (root / REPORT_DIR).glob(PROFILE_FIGURE.format(k="*")):
                    path.unlink()
                data = SuiteData.read(plan.suite, plan.results)
                for steps in plan.suite.headline_steps:
                    plot_profile(*aggregate_scores(data, steps), steps,
                                 root / REPORT_DIR / PROFILE_FIGURE.format(k=steps // 1000))
            except CompareError as err:
                say(f"rlzoo.compare failed: {err}")
            say(f"compared {len(runs)} runs into {root / REPORT_DIR}")
        on_page = plan.suite.name in PAGE_SUITES
        write_page(plan.results, plan.page, PAGE_SUITES if on_page else [plan.suite.name])
        say(f"wrote {plan.page}")
    finally:
        lock.release()


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python scripts/reproduce.py",
                    description="Run a suite of rlzoo (and Stable-Baselines3) cells resumably, "
                    "then compare them and write the results page.")
    parser.add_argument("suite", metavar="SUITE", nargs="?", help=f"one of {', '.join(SUITES)}")
    parser.add_argument("--seeds", type=int, help="K, seeds 0..K-1 (default: the suite's, 5)")
    parser.add_argument("--steps", type=int, help="env steps per seed (default: the suite's)")
    parser.add_argument("--out", type=Path, default=Path("runs/reproduce"),
                        help="where the run dirs go (default runs/reproduce)")
    parser.add_argument("--only", nargs="+", metavar="TASK/ROW",
                        help="run only these cells (shell patterns, e.g. 'Hopper/sac*')")
    parser.add_argument("--results", type=Path, help="raw results folder (default: the "
                        "repository's results/; smoke: OUT/results)")
    parser.add_argument("--page", type=Path, help="the page to write (default: the repository's "
                        "docs/results.md; smoke: OUT/results.md)")
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 rows")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: export finished cells and rewrite the report")
    parser.add_argument("--sb3-worker", help=argparse.SUPPRESS)
    return parser


def check_folder(path: Path, what: str) -> None:
    """``UsageError`` unless ``path`` is a folder this process can write, or can be created as
    one (its nearest existing ancestor is a writable folder)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{what} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot write in {existing}")


def make_plan(args: argparse.Namespace) -> Plan:
    """Check the arguments (``UsageError`` for a mistake) and fix the folders."""
    if args.suite is None:
        raise UsageError("the following arguments are required: SUITE (one of "
                         f"{', '.join(SUITES)}); see python scripts/reproduce.py --help")
    if args.suite not in SUITES:
        raise UsageError(f"unknown suite {args.suite!r}; choose one of {', '.join(SUITES)}")
    suite = SUITES[args.suite]
    if args.seeds is not None and args.seeds < 1:
        raise UsageError(f"--seeds must be a positive number of seeds, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be a positive number of env steps, got {args.steps}")
    out = args.out.expanduser().absolute()
    check_folder(out, "--out")
    on_page = suite.name in PAGE_SUITES
    results = (args.results or (REPO / "results" if on_page else out / "results")).absolute()
    check_folder(results, "--results")
    page = (args.page or (REPO / "docs" / "results.md" if on_page else out / "results.md"))
    page = page.expanduser().absolute()
    if page.is_dir():
        raise UsageError(f"--page {page} is a directory; name the page's file, e.g. "
                         f"{page / 'results.md'}")
    check_folder(page.parent, "--page's folder")
    if args.only:
        names = [f"{t.name}/{r.label}" for t, r in suite.cells()]
        for pattern in args.only:
            if not fnmatch.filter(names, pattern):
                raise UsageError(f"--only {pattern!r} matches no cell of {suite.name}; its cells: "
                                 f"{', '.join(names)}")
    sb3 = None
    if any(r.peer for r in suite.rows) and not args.no_sb3 and not args.report_only:
        sb3 = sb3_missing()
    elif args.no_sb3:
        sb3 = "--no-sb3"
    return Plan(suite, args.seeds or suite.seeds, args.steps, out, results, page, sb3)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.sb3_worker:
        sb3_worker(json.loads(args.sb3_worker))
        return 0
    try:
        plan = make_plan(args)
    except UsageError as err:
        fail(str(err))
    suite = plan.suite
    cells = [(t, r) for t, r in suite.cells()
             if not args.only or any(fnmatch.fnmatch(f"{t.name}/{r.label}", p) for p in args.only)]
    if plan.sb3 is not None and plan.sb3 != "--no-sb3" and any(r.peer for _, r in cells):
        say(f"Stable-Baselines3 is not available ({plan.sb3}): its rows are not run; the page "
            "says so")
    outcomes: list[Outcome] = []
    if not args.report_only:
        if "device=cuda" in suite.overrides:
            import torch

            if not torch.cuda.is_available():
                fail(f"the {suite.name} suite needs a CUDA GPU and torch sees none here")
        STOP.install()
        for i, (task, row) in enumerate(cells, start=1):
            if row.peer and plan.sb3 == "--no-sb3":
                continue
            if STOP.signum:
                break
            outcome = run_cell(plan, task, row)
            outcomes.append(outcome)
            say(f"[{i}/{len(cells)}] {task.name}/{row.label}: {outcome.state}"
                + (f" ({outcome.note})" if outcome.note else ""))
        if STOP.signum:
            say(f"stopped by {signal.Signals(STOP.signum).name}; run the same command again to "
                "continue (finished cells are skipped, unfinished ones resume)")
            return 128 + STOP.signum
    report(plan, outcomes)
    failed = [o for o in outcomes if o.state == "failed"]
    mistakes = [o for o in outcomes if o.mistake]
    open_cells = [o for o in outcomes if o.state in ("locked", "unfinished", "skipped")
                  and not o.mistake]
    if open_cells:
        say(f"{len(open_cells)} cell(s) not finished by this run: "
            + "; ".join(f"{o.task}/{o.row} {o.state}" for o in open_cells))
    if mistakes:
        say(f"{len(mistakes)} cell(s) not run: their runs do not match --seeds/--steps: "
            + "; ".join(f"{o.task}/{o.row}: {o.note}" for o in mistakes))
    if failed:
        say(f"{len(failed)} cell(s) failed: " + "; ".join(f"{o.task}/{o.row}" for o in failed))
    return 1 if failed or mistakes else 0


if __name__ == "__main__":
    sys.exit(main())
