"""Reproduce rlzoo's results page: run a named suite, resumably, then compare and write the page.

    python scripts/reproduce.py SUITE [--seeds K] [--steps N] [--out DIR] [--only TASK/ROW ...]
        [--results DIR] [--page FILE] [--no-sb3] [--report-only]

Suites (:data:`SUITES`; every setting of a suite is declared there once):

* ``mujoco``: SAC, TD3, DSAC-T, SAC with the ensemble critic, SAC with the action-sequence critic
  and Stable-Baselines3's SAC and TD3 (the peer) on Hopper-v5 and HalfCheetah-v5, 50k env steps,
  5 seeds, on the CPU.
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
``smoke``, gets a page of its own), with the published reference
returns (:data:`REFERENCES`) beside rlzoo's at the same env steps. A cell that did not finish is
never exported, so an earlier finished copy of it stays as it was.

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
import re
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

import rlzoo  # noqa: E402, F401 - cheap; before torch loads anywhere: rlzoo's OpenMP spin-wait

PROG = "reproduce"
PAGE_SUITES = ("mujoco", "marl", "gpu")  # the suites of the repository's results page, in order
CELL_LOCK_SUFFIX = ".lock"
PARTIAL_SUFFIX = ".partial"
REPORT_DIR = "report"
STATUS_FILE = "status.json"
PROVENANCE_FILE = "provenance.json"  # in an exported run dir: what trained it, on what


# --------------------------------------------------------------------------- suites


@dataclass(frozen=True)
class Task:
    """One environment of a suite.

    Attributes:
        name: the env config's ``env.name`` (what summary.json and the report call it); also the
            task's folder under ``OUT/<suite>/`` and ``RESULTS/<suite>/``.
        env: the env config group option (``env=<env>`` on the command line).
        rows: the labels of the suite's rows run on this task (default: every row).
        steps: this task's default budget in env steps per seed (default: the suite's).
    """

    name: str
    env: str
    rows: tuple[str, ...] | None = None
    steps: int | None = None


@dataclass(frozen=True)
class Row:
    """One algorithm and config of a suite.

    Attributes:
        label: names the row's run dirs (``<label>-s<seed>``) and its cell (``TASK/label``).
        overrides: the rlzoo command-line overrides of the row, besides the suite's. For an SB3
            peer: the rlzoo config whose hyperparameters the peer takes (:func:`peer_settings`).
        peer: ``"sac"`` or ``"td3"`` for a Stable-Baselines3 row; None for an rlzoo row.
        note: what the page says about the row (how it differs from a paper's setting).
        against: the labels of the rows the page sets this row against, seed by seed
            (:func:`pair_lines`): a variant against its base, a control against the rows it
            separates.
    """

    label: str
    overrides: tuple[str, ...]
    peer: str | None = None
    note: str = ""
    against: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    """A named set of cells (tasks x rows) and the settings every run of it shares.

    Attributes:
        name: the suite's name on the command line.
        title: one line for the page.
        tasks: the environments.
        rows: the algorithms and configs.
        steps: default budget per seed, env steps (``--steps`` replaces it for every task).
        seeds: default K, seeds ``0 .. K-1`` (``--seeds``).
        eval_every: env steps between deterministic evaluations (every row, SB3 included).
        eval_episodes: episodes per evaluation (seeds ``seed + 10000 + i``, as rlzoo's).
        checkpoint_every: env steps between checkpoints of an rlzoo cell: a few minutes of
            training, so a stopped cell loses little.
        checkpoint_keep: checkpoints kept per cell. One is enough (a checkpoint is written to
            a temporary file and renamed, so a crash while writing keeps the previous one) and
            each is large: it holds K seeds' whole replay buffers, at their full capacity.
        overrides: rlzoo overrides every row of the suite gets (SB3 peers read them too).
        why: why the budgets are what they are (shown on the page).
        first_eval: what a row's first evaluation measures (shown on the page).
        not_run: why a cell with no result and no recorded outcome has none (on the page).
    """

    name: str
    title: str
    tasks: tuple[Task, ...]
    rows: tuple[Row, ...]
    steps: int
    seeds: int
    eval_every: int
    eval_episodes: int
    checkpoint_every: int
    checkpoint_keep: int
    overrides: tuple[str, ...] = ()
    why: str = ""
    first_eval: str = "the earliest point of each curve"
    not_run: str = "not scheduled yet: the 2-core machine's hours went to the other cells"

    def cells(self) -> list[tuple[Task, Row]]:
        """Every (task, row) of the suite, in the order they run (task by task)."""
        return [(task, row) for task in self.tasks for row in self.rows
                if task.rows is None or row.label in task.rows]


MUJOCO_ROWS = (
    Row("sac", ("algo=sac",)),
    Row("td3", ("algo=td3",)),
    Row("dsac_t", ("algo=dsac_t",)),
    Row("sac-ensemble", ("algo=sac", "critic=ensemble"), against=("sac",),
        note="SAC (rlzoo's SAC defaults, one update per env step) with a 10-member critic "
             "ensemble, targets from the min of a random pair (REDQ's critic, not REDQ's 20 "
             "updates per step)"),
    Row("sac-action_sequence", ("algo=sac", "critic=action_sequence"),
        against=("sac", "sac-n_step4"),
        note="SAC with a critic of 4-action chunks executed open-loop (Q-chunking's form: "
             "the actor outputs 4 x |A|, targets sum the chunk's 4 discounted rewards and "
             "bootstrap with gamma^4 from the state after it, cut at episode ends; target "
             "entropy -4|A| per chunk, SAC's per step; one update per env step, so four per "
             "chunk; evaluated open-loop too)"),
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
                    tuple(r.label for r in MUJOCO_ROWS + SB3_ROWS) + ("sac-n_step4",))),
        rows=MUJOCO_ROWS + CONTROL_ROWS + SB3_ROWS,
        steps=50_000,
        seeds=5,
        eval_every=5_000,       # hits the published 25k / 50k / 100k points
        eval_episodes=10,
        checkpoint_every=5_000,  # about 3-4 minutes of a 5-seed SAC group on 2 cores
        checkpoint_keep=1,
        why="50k env steps, where every published source has a point: measured or estimated "
            "from short runs on 2 shared cores (docs/reproducing.md), the 13 rlzoo cells (three of "
            "them controls) take about 21 h (TD3 20-34 min, SAC about an hour, DSAC-T about 2 h, "
            "the ensemble critic's 10 members about 4 h per task) and the 4 SB3 cells about "
            "2-3 h; 100k would double that",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="not scheduled: on the 2-core machine a DSAC-T cell takes about 2 h (Hopper "
                "dsac_t: 1.9 h; its control with SAC's start, with no delays, was at 3.7 "
                "steps/s, about 3.5 h) and an ensemble-critic cell about 4 h, and none of these "
                "rows has a published reference at this budget; after Hopper dsac_t, the hours "
                "went to the rows that have one, to the peer and to the action-sequence critic "
                "with its control",
    ),
    "marl": Suite(
        name="marl",
        title="multi-agent MPE and MaMuJoCo on the CPU",
        tasks=(
            Task("mpe-simple_spread", "mpe/simple_spread", ("maddpg", "hasac", "coma")),
            Task("mpe-simple_speaker_listener", "mpe/simple_speaker_listener",
                 ("maddpg", "hasac", "coma")),
            Task("mamujoco-HalfCheetah-2x3", "mamujoco/HalfCheetah-2x3", ("maddpg", "hasac")),
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
                       "(HARL 3e-4, rlzoo 1e-3)"),
              Row("coma", ("algo=coma",),
                  note="on-policy: by 25k env steps COMA has made 129 actor updates "
                       "(summary.json's `updates`: one per rollout of 200 vector steps, reset "
                       "steps included, rlzoo's default), where MADDPG and HASAC make 5,000 (0.25 "
                       "per env step after a 5,000-step warm-up) from replay, so its numbers "
                       "here are the start of its curve")),
        steps=25_000,           # 1,000 MPE episodes; 20,000 steps (5,000 updates) after warm-up
        seeds=5,
        eval_every=2_500,
        eval_episodes=10,
        checkpoint_every=2_500,  # about 5 minutes of a 5-seed MADDPG group on 2 shared cores
        checkpoint_keep=1,
        why="25k env steps per task: measured on 2 shared cores (docs/reproducing.md), a "
            "5-seed cell of 25k took 21-47 minutes for MADDPG, 51-103 for HASAC on MPE and 8-12 "
            "for COMA (on-policy), 33 for MADDPG and 43 for HASAC (alone, 2 threads) on "
            "HalfCheetah-2x3; HARL's curves run to 1e7 "
            "steps, so these are early-training numbers (on HalfCheetah-2x3, 25 episodes of "
            "1,000 steps)",
        first_eval="at 2,500 steps: for MADDPG and HASAC inside their 5,000-step random warm-up, "
                   "so the untrained policy; COMA, on-policy, has made about 12 updates by then",
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


# --------------------------------------------------------------------------- published references


@dataclass(frozen=True)
class Source:
    """Where published numbers come from: ``text`` (markdown, with a link a reader can open)."""

    key: str
    text: str


SOURCES = {s.key: s for s in (
    Source("td3-paper",
           "Fujimoto et al. 2018, *Addressing Function Approximation Error in Actor-Critic "
           "Methods* (TD3); mean ± std over its 10 seeds computed from the per-seed evaluation "
           "curves in [github.com/sfujim/TD3](https://github.com/sfujim/TD3), "
           "`learning_curves/<Env>/TD3_<Env>-v1_<seed>.npy` (gym v1 envs; 1,000 random steps, "
           "10,000 on HalfCheetah; batch 100, 400x300, lr 1e-3: rlzoo's TD3 defaults, whose "
           "warm-up is 10,000 on every task)"),
    Source("tianshou",
           "Tianshou's former MuJoCo benchmark, [github.com/thu-ml/tianshou at 39acf20]"
           "(https://github.com/thu-ml/tianshou/tree/39acf2094d96268d92ebb54dcbfc3de76d702567/"
           "examples/mujoco/benchmark), `examples/mujoco/benchmark/<Env>-v3/{sac,td3}/"
           "test_rew_10seeds.csv` (gym v3 envs, 10 seeds; its env steps exclude the random "
           "warm-up and were shifted by it here; its SAC has 10,000 random steps, "
           "`mujoco_sac.py`'s default; its TD3 uses lr 3e-4, 256x256 and 25,000 random steps, "
           "not rlzoo's TD3 defaults)"),
    Source("simbav2",
           "SimbaV2's baseline results, [github.com/dojeon-ai/SimbaV2 at 6f4e162]"
           "(https://github.com/dojeon-ai/SimbaV2/tree/6f4e16241bc59ca0a0a84e3e6977bdd95a65b987/"
           "results), `results/baseline/sac_mujoco.csv` (gym v4 envs, 10 seeds; the CSV does "
           "not say how many random steps came first)"),
    Source("cleanrl",
           "CleanRL's benchmark pages ([docs.cleanrl.dev](https://docs.cleanrl.dev), "
           "rl-algorithms/sac and rl-algorithms/td3; gym v4 envs): mean **training** episode "
           "return at 1M steps, not a deterministic evaluation, so only a scale"),
)}


@dataclass(frozen=True)
class Reference:
    """A published mean return at ``steps`` env steps (random warm-up included).

    Attributes:
        task: the env's name as rlzoo reports it (``Hopper``).
        rows: the labels of the rows it is set beside (same algorithm; see the source for
            differences in settings).
        algo: the algorithm's name in the source.
        steps: env steps per seed.
        mean: mean return over the source's seeds; ``std`` their std as the sources compute it,
            dividing by the number of seeds n (None when not given); the page rescales it to
            rlzoo's n - 1.
        seeds: how many seeds; None when not given.
        source: a key of :data:`SOURCES`.
        warmup: env steps of random actions before the source's first update (one update per
            env step after it), so it had made ``steps - warmup`` updates by ``steps``; None
            when the source does not say.
    """

    task: str
    rows: tuple[str, ...]
    algo: str
    steps: int
    mean: float
    std: float | None
    seeds: int | None
    source: str
    warmup: int | None = None

    @property
    def updates(self) -> int | None:
        """The source's gradient updates by ``steps`` (None when its warm-up is unknown)."""
        return None if self.warmup is None else max(0, self.steps - self.warmup)

    @property
    def spread(self) -> float | None:
        """``std`` rescaled from dividing by the seeds n to dividing by n - 1 (rlzoo's
        measure); as given when n is unknown or 1; None without a std."""
        if self.std is None or self.seeds is None or self.seeds < 2:
            return self.std
        return self.std * math.sqrt(self.seeds / (self.seeds - 1))


def _refs(task: str, rows: tuple[str, ...], algo: str, source: str, seeds: int | None,
          points: Sequence[tuple[int, float, float | None]],
          warmup: int | None = None) -> list[Reference]:
    return [Reference(task, rows, algo, steps, mean, std, seeds, source, warmup)
            for steps, mean, std in points]


SAC_ROWS = ("sac", "sb3_sac")
TD3_ROWS = ("td3", "sb3_td3")
# Read from the raw per-seed data of the sources (mean ± std over seeds, deterministic
# evaluation unless the source says otherwise).
REFERENCES: tuple[Reference, ...] = tuple(
    _refs("HalfCheetah", TD3_ROWS, "TD3 (paper)", "td3-paper", 10,
          [(25_000, 1327, 389), (50_000, 3352, 851), (100_000, 5514, 554),
           (200_000, 6833, 683)], warmup=10_000)
    + _refs("Hopper", TD3_ROWS, "TD3 (paper)", "td3-paper", 10,
            [(25_000, 178, 98), (50_000, 285, 69), (100_000, 660, 752), (200_000, 2441, 746)],
            warmup=1_000)
    + _refs("HalfCheetah", SAC_ROWS, "SAC (Tianshou)", "tianshou", 10,
            [(50_000, 4327, 213), (100_000, 6213, 437)], warmup=10_000)
    + _refs("Hopper", SAC_ROWS, "SAC (Tianshou)", "tianshou", 10,
            [(50_000, 1030, 794), (100_000, 1766, 1036)], warmup=10_000)
    + _refs("HalfCheetah", TD3_ROWS, "TD3 (Tianshou)", "tianshou", 10,
            [(50_000, 2023, 524), (100_000, 4715, 387)], warmup=25_000)
    + _refs("Hopper", TD3_ROWS, "TD3 (Tianshou)", "tianshou", 10,
            [(50_000, 227, 46), (100_000, 336, 81)], warmup=25_000)
    + _refs("HalfCheetah", SAC_ROWS, "SAC (SimbaV2 baseline)", "simbav2", 10,
            [(50_000, 4212, 498), (100_000, 6156, 700)])
    + _refs("Hopper", SAC_ROWS, "SAC (SimbaV2 baseline)", "simbav2", 10,
            [(50_000, 530, 284), (100_000, 1103, 368)])
    + _refs("HalfCheetah", ("sac",), "SAC (CleanRL)", "cleanrl", None, [(1_000_000, 9635, None)])
    + _refs("Hopper", ("sac",), "SAC (CleanRL)", "cleanrl", None, [(1_000_000, 2310, None)])
    + _refs("Humanoid", ("sac",), "SAC (CleanRL)", "cleanrl", None, [(1_000_000, 4996, None)])
    + _refs("HalfCheetah", ("td3",), "TD3 (CleanRL)", "cleanrl", None, [(1_000_000, 9583, None)])
    + _refs("Hopper", ("td3",), "TD3 (CleanRL)", "cleanrl", None, [(1_000_000, 3135, None)])
    + _refs("Humanoid", ("td3",), "TD3 (CleanRL)", "cleanrl", None, [(1_000_000, 5035, None)])
)

# What the page says where nothing comparable is published, and what was found where a row stands
# apart (by row label, TASK/label for one task's section, or the task's family prefix).
UNPUBLISHED = {
    "dsac_t": "DSAC-T: the paper publishes no per-step MuJoCo returns, and the official repository "
              "(github.com/Jingliang-Duan/DSAC-v2) ships Pendulum results only: no reference. "
              "Its official settings (rlzoo's defaults) start slowly, so at this budget it is "
              "not comparable with SAC's row: lr 1e-4 (SAC: 3e-4 actor, 1e-3 critic), policy and "
              "temperature updated every second step, the temperature starting at e (SAC: 1) "
              "with lr 3e-4, and 10,000 random steps (SAC: 5,000). On Hopper seed 0 its "
              "temperature was 2.34 at 11k steps, 0.29 at 26k and 0.065 at 46k: the policy is "
              "pushed towards high entropy for about half of the 50k steps. The control "
              "`dsac_t-sac_start` would test this explanation; it has not been run (status "
              "table).",
    "sac-ensemble": "SAC with the ensemble critic: the published ensemble numbers are REDQ's (20 "
                    "updates per env step; e.g. SimbaV2's baselines), a different setting from "
                    "this row's one update per step: no reference.",
    "sac-action_sequence": "SAC with the action-sequence critic: nothing published on these tasks "
                           "at these budgets: no reference.",
    "Hopper/sac-action_sequence": (
        "On Hopper it is ahead of SAC on every seed pair's mean over evaluations (a measure chosen "
        "after this cell had been seen, so not a fresh test; the control cells below are); its "
        "IQM is above SAC's at every evaluation from the second (10k steps: its seeds at "
        "404-1,108, SAC's at 224-306) on, though not on every seed pair (at 45k its seed 4 was "
        "at 254). On the final return no difference was found, and its curves are uneven too "
        "(seed 0: 1,688 at 35k, 572 at 50k). Its final policies hop forward, they do not stand "
        "still for the healthy reward (1 per step): in each seed's last evaluation the episodes "
        "lasted 180-873 steps on average and 60-69% of the return was forward reward less "
        "control cost (return less episode length; `python -m rlzoo.evaluate` on the runs' "
        "last checkpoints, which prints episode lengths; that output is not stored under "
        "results/). The control `sac-n_step4`, the same 4-step backup without the chunks, shows "
        "no difference from SAC on either measure, and this row is above it on every seed "
        "pair's mean over evaluations (p = 0.01) and on the final return (P = 0.92, p = 0.03): "
        "4-step returns alone do not reproduce this row's lead over SAC on the mean over "
        "evaluations, which points to the chunked actions and critic."),
    "HalfCheetah/sac-action_sequence": (
        "On HalfCheetah it is behind SAC on every seed pair's mean over evaluations (on the final "
        "return no difference was found), and learns unevenly: seed 0 fell from 2,758 at 30k "
        "steps to -165 at 35k, stayed below 200 (185, 12) and was at 3,056 at 50k; without "
        "seed 0 the gap remains (the other seeds' means over evaluations 935-1,466, SAC's "
        "lowest 1,757). The control `sac-n_step4`, the same 4-step backup without the chunks, "
        "is behind SAC the same way (on every seed pair's mean over evaluations; its seeds' "
        "means 952-1,620): 4-step returns alone reproduce the gap, and no further effect of the "
        "chunks (which run open-loop for 0.2 s of HalfCheetah's time, 0.032 s of Hopper's) "
        "was found between the two rows (mean over evaluations P = 0.24, p = 0.22; 5 seeds a "
        "side find only large effects). Why 4-step returns slow SAC here, while no slowdown "
        "was found on Hopper, was not checked; they are taken from replayed actions of older "
        "policies without a correction."),
    "hasac": "HASAC: every temperature starts at 1, as in HARL (auto_alpha starts log alpha at "
             "0), and learns with Adam at lr 1e-3 (rlzoo's tuner default; HARL's tuned MPE and "
             "HalfCheetah-2x3 configs use 3e-4).",
    "mpe-simple_spread/hasac": "On mpe-simple_spread HASAC's agents' alpha was 0.30 "
             "at 10k steps on all five seeds and 0.03-0.17 at 24k, the policies' entropy fell "
             "from 3.2 at 6k to between -4.3 and -5.8 at 24k (target -5): much of this budget "
             "is spent on a near-random policy. A second likely cause there: 20-step returns "
             "(HARL's MPE setting) on 25-step episodes, learned from replay that is mostly the "
             "warm-up's random actions (the HASAC of [multi_agent.md](multi_agent.md#measured) "
             "reached -17.8 at 25k on one seed with 5-step returns, among other changes). "
             "Neither was checked at this budget.",
    "mpe-": "HARL (MADDPG, HASAC) publishes only figures up to 1e7 steps, nothing readable below "
            "200k steps, and no COMA numbers for continuous MPE: no reference. (HARL's MPE reward "
            "gives each agent the sum over agents, rlzoo reports the mean: divide HARL's by the "
            "number of agents to compare.)",
    "mamujoco-": "HARL (MADDPG, HASAC) publishes only figures up to 1e7 steps, nothing readable "
                 "below 200k steps: no reference. Every agent gets the env's one reward, so the "
                 "return is on the scale of the single-agent HalfCheetah rows of the `mujoco` "
                 "suite (25k steps here: 25 episodes of 1,000 steps). By 25k steps MADDPG and "
                 "HASAC have made 5,000 updates (0.25 per env step after 5,000 random steps), "
                 "where the single-agent TD3 row had made 15,000; MADDPG's deterministic actors "
                 "drop to an IQM of -542 at 7,500 steps (full torque on all six joints costs "
                 "about -600 an episode) and end at 25k at 331, 43, 12.5, -9.6 and -125: one "
                 "seed runs forward, the others are around standing still or below it. HASAC's "
                 "seeds end at 241, -44.6, -58.8, -97.6 and -100; the single-agent SAC row of "
                 "the `mujoco` suite, after the same 5,000 updates (at 10k steps), was at 86.9, "
                 "82.9, -43.2, -124 and -181: neither HASAC nor single-agent SAC has begun to "
                 "run after 5,000 updates, except one HASAC seed (241), although HASAC has "
                 "collected 2.5 times the env steps for them.",
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


def read_json(path: Path) -> dict[str, Any] | None:
    """``path`` as a JSON object, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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


def summary_steps(run_dir: Path) -> int | None:
    """``total_steps`` of ``run_dir/summary.json`` (None without a usable one)."""
    summary = read_json(run_dir / "summary.json")
    steps = summary.get("total_steps") if summary else None
    return int(steps) if isinstance(steps, int) else None


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


def compose_cell_config(overrides: Sequence[str]) -> Any:
    """rlzoo's composed config for these overrides (read, never instantiated)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


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


def repo_relative(text: str) -> str:
    """``text`` with this checkout's absolute path written relative to it (``/x/repo/runs/a`` ->
    ``runs/a``, ``/x/repo`` -> ``.``), so exported configs carry no path of this machine."""
    repo = re.escape(str(REPO))
    return re.sub(repo + r"(?![^/\s'\"])", ".", re.sub(repo + "/", "", text))


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


# --------------------------------------------------------------------------- the page


def fmt(x: float | None) -> str:
    """A return in a table: no decimals from 100 up, 1 below, ``—`` when missing."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def run_rows(folder: Path) -> dict[str, list[Path]]:
    """The exported runs of one task folder by row label: ``{label: [run dirs]}``."""
    rows: dict[str, list[Path]] = {}
    for d in sorted(folder.iterdir()) if folder.is_dir() else []:
        if (d / "summary.json").is_file() and "-s" in d.name and not d.name.startswith("."):
            rows.setdefault(d.name.rsplit("-s", 1)[0], []).append(d)
    return rows


def eval_points(run_dir: Path) -> list[tuple[int, float]]:
    """A run's ``eval/return`` curve as (env step, return) pairs in step order; [] when none."""
    from rlzoo.analysis.curves import CURVE_TAG, load_scalars

    points = load_scalars(run_dir, [CURVE_TAG]).get(CURVE_TAG)
    if points is None:
        return []
    return [(int(step), float(value))
            for step, value in zip(points[0].tolist(), points[1].tolist())]


def value_at(run_dir: Path, steps: int, window: int) -> float | None:
    """A run's ``eval/return`` at ``steps``: its first evaluation at a step in
    ``[steps, steps + window)`` (an evaluation lands on the first env step at or after its
    multiple), None when it has none there."""
    return next((v for step, v in eval_points(run_dir) if steps <= step < steps + window), None)


def first_eval(run_dir: Path) -> tuple[int, float] | None:
    """A run's first ``eval/return`` point: (env step, return); None when it has none."""
    return next(iter(eval_points(run_dir)), None)


def first_columns(runs: list[Path]) -> tuple[str, str]:
    """The final-return table's two cells about where the runs started: the IQM over seeds of
    each run's first evaluation with its env step (a range when the seeds differ), and how many
    seeds ended above it (``final_eval_return`` of summary.json against the first evaluation);
    ``—`` for each when no run has a first evaluation."""
    from rlzoo.analysis import stats

    pairs = [(f, read_json(d / "summary.json") or {}) for d in runs
             if (f := first_eval(d)) is not None]
    if not pairs:
        return "—", "—"
    steps = [f[0] for f, _ in pairs]
    at = f"{min(steps):,}" if min(steps) == max(steps) else f"{min(steps):,}-{max(steps):,}"
    finals = [(f[1], summary.get("final_eval_return")) for f, summary in pairs]
    better = sum(1 for first, final in finals if final is not None and final > first)
    return f"{fmt(stats.iqm([f[1] for f, _ in pairs]))} (at {at})", f"{better} of {len(pairs)}"


def updates_by(run_dir: Path, steps: int) -> int | None:
    """Gradient updates a run had made by env step ``steps``, from its config: (steps - warm-up)
    x updates per env step (rlzoo's ``algo.learning_starts`` and ``algo.utd``; an SB3 peer's
    ``learning_starts`` and ``gradient_steps / train_freq``); None when the config lacks them."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    algo = OmegaConf.load(path).get("algo", {}) if path.is_file() else {}
    start = algo.get("learning_starts")
    utd = algo.get("utd")
    if utd is None and algo.get("gradient_steps") and algo.get("train_freq"):
        utd = algo["gradient_steps"] / algo["train_freq"]
    if start is None or utd is None:
        return None
    return int(max(0, steps - int(start)) * float(utd))


def versus(values: list[float], ref: Reference, alpha: float = 0.05) -> str:
    """rlzoo's per-seed ``values`` against a published mean ± std over its seeds: Welch's t-test
    (two-sided, unequal variances) from both samples' means and stds; ``above``/``below`` when
    p < ``alpha``, else ``no difference found``, with p. ``—`` when either side has no spread."""
    from scipy.stats import ttest_ind_from_stats

    if ref.std is None or ref.seeds is None or ref.seeds < 2 or len(values) < 2:
        return "—"
    mean = float(np.mean(values))
    _, p = ttest_ind_from_stats(mean, float(np.std(values, ddof=1)), len(values), ref.mean,
                                ref.spread, ref.seeds, equal_var=False)
    if not math.isfinite(p):
        return "—"
    word = ("above" if mean > ref.mean else "below") if p < alpha else "no difference found"
    return f"{word} (p = {p:.2f})" if p >= 0.01 else f"{word} (p < 0.01)"


PUBLISHED_SUFFIX = "-published.png"  # RESULTS/<suite>/report/<figure stem>-published.png
SOURCE_MARKERS = {"td3-paper": "s", "tianshou": "^", "simbav2": "D", "cleanrl": "*"}


def published_figure(figure: str) -> str:
    """The page figure's name beside rlzoo.compare's ``figure`` (``Hopper.png``)."""
    return Path(figure).stem + PUBLISHED_SUFFIX


def plot_published(env: str, curves: dict[str, dict[str, Any]], path: Path) -> bool:
    """The page's figure of one task: each row's IQM curve and 95% CI band (from
    ``comparison.json``'s ``curves``) and, in the colour of the row they are set beside, the
    published means ± std (over seeds - 1) within the curves' steps, one marker per source.
    False (nothing written) when no reference falls on the curves' steps."""
    refs = [r for r in REFERENCES if r.task == env and any(label in curves for label in r.rows)]
    last = max((max(c["steps"]) for c in curves.values() if c["steps"]), default=0)
    refs = [r for r in refs if r.steps <= last]
    if not refs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    colors = {}
    for label, c in curves.items():
        (line,) = ax.plot(c["steps"], c["iqm"], label=f"rlzoo {label} (n={c['n_runs']})"
                          if not label.startswith("sb3_") else f"{label} (n={c['n_runs']})")
        ax.fill_between(c["steps"], c["ci_low"], c["ci_high"], color=line.get_color(),
                        alpha=0.2, linewidth=0)
        colors[label] = line.get_color()
    shown: set[str] = set()
    for ref in refs:
        label = next(label for label in ref.rows if label in curves)
        spread = ref.spread
        same_step = [r for r in refs if r.steps == ref.steps]  # side by side, not on top
        dodge = (same_step.index(ref) - (len(same_step) - 1) / 2) * 0.015 * last
        name = ref.algo
        ax.errorbar([ref.steps + dodge], [ref.mean],
                    yerr=None if spread is None else [[spread], [spread]],
                    color=colors[label], marker=SOURCE_MARKERS.get(ref.source, "o"),
                    markerfacecolor="white", markersize=7, capsize=4, linestyle="none",
                    label=None if name in shown else name)
        shown.add(name)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("eval/return (IQM over seeds)")
    ax.set_title(f"{env}: IQM and 95% CI over seeds; published mean ± std")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


def mean_over_evaluations(run_dir: Path) -> tuple[tuple[int, ...], float] | None:
    """A run's evaluation steps and the mean of its ``eval/return`` over them (the area under
    its curve divided by its length: it weighs how early a run learns as well as where it
    ends); None when it has no evaluation."""
    points = eval_points(run_dir)
    if not points:
        return None
    return tuple(step for step, _ in points), sum(v for _, v in points) / len(points)


def versus_cells(ours: list[Path], theirs: list[Path]) -> str:
    """Two rows' seeds against each other, as table cells: P(ours > theirs) over seed pairs with
    its 95% bootstrap CI and the two-sided Mann-Whitney U test (``above``/``below`` when
    p < 0.05), first on the final returns (summary.json's ``final_eval_return``), then on each
    run's mean over its evaluations (``—`` unless every run was evaluated at the same steps)."""
    from scipy.stats import mannwhitneyu

    from rlzoo.analysis import stats

    def cells(x: list[float], y: list[float]) -> str:
        point, lo, hi = stats.probability_of_improvement_ci(x, y)
        p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
        word = ("above" if point > 0.5 else "below") if p < 0.05 else "no difference found"
        return f"{point:.2f} [{lo:.2f}, {hi:.2f}] | {word} (p = {p:.2f})"

    finals = ([float((read_json(d / "summary.json") or {})["final_eval_return"]) for d in dirs]
              for dirs in (ours, theirs))
    means = [[mean_over_evaluations(d) for d in dirs] for dirs in (ours, theirs)]
    flat = [m for side in means for m in side]
    if all(m is not None for m in flat) and len({m[0] for m in flat if m}) == 1:
        curve = cells(*([m[1] for m in side if m] for side in means))
    else:
        curve = "— | —"
    return f"{cells(*finals)} | {curve}"


PAIR_HOW = ("P(A > B) = the fraction of seed pairs where A's return is higher, with its 95% "
            "bootstrap CI; A vs B: Mann-Whitney U test, two-sided, `above` or `below` when "
            "p < 0.05; first on the final returns, then on each seed's mean over its "
            "evaluations, which also weighs how early a row learns. With 5 seeds a side, rows "
            "apart on every seed pair show P = 1.00 [1.00, 1.00] or 0.00 [0.00, 0.00] (a "
            "bootstrap of fully separated samples cannot widen) and p = 0.01, the smallest "
            "two-sided p of 5 against 5 seeds (0.008). The mean over evaluations is a second "
            "measure, added after the Hopper action-sequence cell had been seen (cells run later "
            "are fresh tests of it); no p on the page is corrected for the number of "
            "comparisons")


def pair_lines(suite: Suite, rows: dict[str, list[Path]]) -> list[str]:
    """The page's tables setting one task's rows against each other (:func:`versus_cells`):
    each rlzoo row against its Stable-Baselines3 peer, and each row against the rows it is set
    against (``Row.against``); only pairs where both rows have runs."""
    peers = [(str(r.peer), r.label) for r in suite.rows if r.peer]
    against = [(r.label, other) for r in suite.rows for other in r.against]
    lines = []
    for pairs, intro, names in (
            (peers, "Against the peer", "| rlzoo row (A) | peer row (B) |"),
            (against, "Variants and controls against the rows they build on",
             "| row (A) | row (B) |")):
        shown = [f"| {a} | {b} | {versus_cells(rows[a], rows[b])} |" for a, b in pairs
                 if rows.get(a) and rows.get(b)]
        if shown:
            lines += [f"{intro} ({PAIR_HOW}):", "",
                      f"{names} final: P(A > B) [95% CI] | final: A vs B | mean over "
                      "evaluations: P(A > B) [95% CI] | mean over evaluations: A vs B |",
                      "|---|---|---|---|---|---|", *shown, ""]
    return lines


def iqm_ci(values: list[float]) -> tuple[float, float, float]:
    """IQM and its 95% stratified-bootstrap CI (rlzoo.compare's method and defaults)."""
    from rlzoo.analysis import stats

    return stats.stratified_bootstrap_ci(values)


def suite_section(suite: Suite, results: Path, page_dir: Path) -> list[str]:
    """The page's section for one suite: status, per task the table and figure, and the
    published references at equal env steps."""
    root = results / suite.name
    report = read_json(root / REPORT_DIR / "comparison.json")
    status = read_json(root / STATUS_FILE) or {}
    rel = Path(os.path.relpath(root, page_dir))
    here = repo_relative(str(root.resolve()))
    raw = f"[`{here}`]({rel})" if root.is_dir() else f"none yet (they will go to `{here}`)"
    lines = [f"## `{suite.name}`: {suite.title}", ""]
    lines += [f"Command: `python scripts/reproduce.py {suite.name}` ({suite.seeds} seeds; "
              f"{suite.why}). Evaluation: {suite.eval_episodes} deterministic episodes every "
              f"{suite.eval_every:,} env steps. Raw results: {raw}; from the repository's root, "
              f"`python -m rlzoo.compare {here} --out report/` regenerates the final-return "
              f"tables and learning curves, and `python scripts/reproduce.py {suite.name} "
              "--report-only` (which trains nothing) this whole section.", ""]
    if suite.overrides:
        lines += [f"Every rlzoo row of this suite also gets `{' '.join(suite.overrides)}`.", ""]
    if report is None:
        lines += ["**Not run yet**: no finished cell of this suite is in the results.", ""]
    lines += ["| task | row | status |", "|---|---|---|"]
    for task, row in suite.cells():
        runs = run_rows(root / task.name).get(row.label, [])
        if runs:
            steps = sorted({summary_steps(d) for d in runs}, key=lambda s: s or 0)
            state = f"finished: {len(runs)} seeds x {', '.join(f'{s:,}' for s in steps if s)} " \
                    "steps"
        else:
            note = status.get(f"{task.name}/{row.label}")
            state = f"not run ({note or suite.not_run})"
        lines.append(f"| {task.name} | {row.label} | {state} |")
    lines.append("")
    notes = [f"`{r.label}`: {r.note}." for r in suite.rows if r.note]
    peers = [r for r in suite.rows if r.peer]
    if peers:
        notes.append(
            f"{', '.join(f'`{r.label}`' for r in peers)}: Stable-Baselines3's "
            f"{' and '.join(str(r.peer).upper() for r in peers)} (the peer) with rlzoo's "
            "settings for the same algorithm, read from rlzoo's config (networks, batch, buffer, "
            "warm-up, tau, gamma, one update per step, TD3's noises and delay, SAC's initial "
            "temperature and target entropy), each optimizer at rlzoo's learning rate for it "
            "(SB3 has one rate for all: a subclass sets each optimizer's rate before an update, "
            "nothing else is changed). What still differs: SB3's SAC clamps log std to [-20, 2] "
            "(rlzoo's SAC: [-5, 2]).")
    if notes:
        lines += ["Rows: " + " ".join(notes), ""]
    if report is None:
        return lines
    window = suite.eval_every
    order = [t.name for t in suite.tasks]  # the suite's order, not the report's (alphabetical)
    for env, groups in sorted(report["results"].items(),
                              key=lambda item: (order.index(item[0]) if item[0] in order
                                                else len(order), item[0])):
        lines += [f"### {env}", ""]
        rows = run_rows(root / env)
        lines += ["Final return (IQM [95% CI] over seeds of `final_eval_return`, "
                  "rlzoo.compare); beside it, where the row started: the IQM of each seed's "
                  f"first evaluation ({suite.first_eval}) and how many seeds ended "
                  "above their own first evaluation:", "",
                  "| row | seeds | steps | IQM [95% CI] | mean ± std | first evaluation: IQM (at "
                  "env step) | seeds above their first evaluation |",
                  "|---|---:|---:|---|---|---|---:|"]
        for label, g in groups.items():
            steps = ", ".join(f"{s:,}" for s in sorted({int(s) for s in g["total_steps"] if s}))
            lo, hi = g["iqm_ci"]
            names = sorted({Path(r).name.rsplit("-s", 1)[0] for r in g["runs"]})
            row = ", ".join(names) + ("" if names == [label] else f" (`{label}`)")
            first, better = first_columns([d for name in names for d in rows.get(name, [])])
            lines.append(f"| {row} | {g['n_runs']} | {steps} | {fmt(g['iqm'])} "
                         f"[{fmt(lo)}, {fmt(hi)}] | {fmt(g['mean'])} ± {fmt(g['std'])} "
                         f"| {first} | {better} |")
        lines.append("")
        figure = report.get("figures", {}).get(env)
        published = published_figure(figure) if figure else ""
        if figure and (root / REPORT_DIR / published).is_file():
            lines += [f"![{env} learning curves and published returns]"
                      f"({rel / REPORT_DIR / published})", "",
                      "Hollow markers: published mean ± std at that env step (sources below); "
                      f"`python scripts/reproduce.py {suite.name} --report-only` redraws this "
                      f"figure, `rlzoo.compare` draws the curves alone ([{figure}]"
                      f"({rel / REPORT_DIR / figure})).", ""]
        elif figure:
            lines += [f"![{env} learning curves]({rel / REPORT_DIR / figure})", ""]
        refs = [r for r in REFERENCES if r.task == env]
        shown = []
        for ref in refs:
            for label in ref.rows:
                runs = rows.get(label, [])
                values = [v for v in (value_at(d, ref.steps, window) for d in runs)
                          if v is not None]
                if not values:
                    continue
                point, lo, hi = iqm_ci(values)
                std = float(np.std(values, ddof=1)) if len(values) > 1 else None
                published = fmt(ref.mean) + (f" ± {fmt(ref.spread)}" if ref.spread is not None
                                             else "")
                seeds = f" ({ref.seeds} seeds)" if ref.seeds else ""
                where = versus(values, ref)
                ours = updates_by(runs[0], ref.steps)
                updates = " / ".join("?" if n is None else f"{n:,}" for n in (ours, ref.updates))
                shown.append(f"| {ref.steps:,} | {label} | {fmt(point)} [{fmt(lo)}, {fmt(hi)}] "
                             f"| {fmt(float(np.mean(values)))} ± {fmt(std)} ({len(values)}) "
                             f"| {ref.algo}: {published}{seeds} | `{ref.source}` | {updates} "
                             f"| {where} |")
        if shown:
            lines += ["At the published budgets (rlzoo's value: each seed's evaluation at that "
                      "env step; sources at the end of the page):", "",
                      "| env steps | row | rlzoo IQM [95% CI] | rlzoo mean ± std (seeds) | "
                      "published mean ± std (seeds) | source | updates by then: rlzoo / source "
                      "| rlzoo vs published (Welch) |",
                      "|---:|---|---|---|---|---|---:|---|", *shown, ""]
        elif refs:
            lines += ["No run of this task reached a published budget yet.", ""]
        lines += pair_lines(suite, rows)
        scale = scale_line(suite, env, root,
                           {label: g["final_eval_returns"] for label, g in groups.items()})
        if scale:
            lines += [scale, ""]
        unpublished = [UNPUBLISHED[key] for label in rows for key in (label, f"{env}/{label}")
                       if key in UNPUBLISHED]
        unpublished += [UNPUBLISHED[prefix] for prefix in MULTI_AGENT_PREFIXES
                        if env.startswith(prefix)]
        if unpublished:
            lines += [" ".join(unpublished), ""]
    return lines


SCALE_FILE = "scale.json"  # RESULTS/<suite>/: returns of scripted policies, computed once
SCALE_EPISODES = 100       # episodes of each scripted policy (env seeds 10000..10099)
MULTI_AGENT_PREFIXES = ("mpe-", "mamujoco-")  # task names of multi-agent envs


def scripted_policy(kind: str, env: Any, rng: np.random.Generator) -> Any:
    """Actions in ``[-1, 1]`` for ``env``'s observations ``[B, ...]``: uniform random
    (``kind="random"``, from ``rng``) or the env's own zero action (``"zero"``), padding 0."""
    span = np.where(env.act_mask, env.action_high - env.action_low, 1.0)
    zero = np.where(env.act_mask, -1.0 - 2.0 * env.action_low / span, 0.0)

    def policy(batch: np.ndarray) -> np.ndarray:
        shape = (len(batch), *env.act_shape)
        return rng.uniform(-1.0, 1.0, shape) if kind == "random" else np.broadcast_to(zero, shape)

    return policy


def scale_returns(env_option: str, episodes: int = SCALE_EPISODES) -> dict[str, list[float]]:
    """Mean and std over ``episodes`` episodes (env seeds ``EVAL_SEED_OFFSET + i``, which
    include every evaluation's ``seed + EVAL_SEED_OFFSET + i`` for seed + i < episodes) of the
    team return under uniform random actions (``random``) and under the env's zero action
    (``zero``: no force in MPE, no torque in MaMuJoCo), for ``env=<env_option>``."""
    from rlzoo.envs.base import run_episodes
    from rlzoo.run.build import EVAL_SEED_OFFSET, make_env

    cfg = compose_cell_config([f"env={env_option}"])
    out = {}
    for kind in ("random", "zero"):
        env = make_env(cfg, episodes, EVAL_SEED_OFFSET)
        obs, _ = env.reset()
        returns = run_episodes(env, obs, scripted_policy(kind, env, np.random.default_rng(0)))
        env.close()
        out[kind] = [float(returns.returns.mean()), float(returns.returns.std(ddof=1))]
    return out


def scale_line(suite: Suite, task_name: str, root: Path,
               finals: dict[str, list[float]] | None = None) -> str | None:
    """The page's scale sentence for a multi-agent task, from ``root/scale.json`` (computed and
    written there when the task is missing from it), and for each row of ``finals`` (label:
    the seeds' final returns, as in the report) how many beat the zero action's; None for other
    tasks."""
    from rlzoo.run.build import EVAL_SEED_OFFSET

    task = next((t for t in suite.tasks if t.name == task_name), None)
    if task is None or not task.name.startswith(MULTI_AGENT_PREFIXES):
        return None
    cache = read_json(root / SCALE_FILE) or {}
    if task.name not in cache:
        cache[task.name] = {"episodes": SCALE_EPISODES,
                            **scale_returns(task.env, SCALE_EPISODES)}
        (root / SCALE_FILE).write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    entry = cache[task.name]
    (r_mean, r_std), (z_mean, z_std) = entry["random"], entry["zero"]
    first, last = EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + int(entry["episodes"]) - 1
    line = (f"For scale, two scripted policies, {entry['episodes']} episodes each on env seeds "
            f"{first:,}-{last:,} (which hold every evaluation's: seed + {first:,} + i), mean ± std "
            f"over episodes (a {suite.eval_episodes}-episode mean, as each evaluation's, "
            f"varies {suite.eval_episodes ** -0.5:.2f} times as much): uniform random "
            f"actions {fmt(r_mean)} ± {fmt(r_std)}, the env's zero action (no force or torque) "
            f"{fmt(z_mean)} ± {fmt(z_std)}: floors, not marks of skill (beating them says a "
            "policy does better than not acting, not that it does well).")
    beat = [f"{label} {sum(f > z_mean for f in values)} of {len(values)}"
            for label, values in sorted((finals or {}).items()) if values]
    if beat:
        line += f" Seeds whose final return beats the zero action's: {', '.join(beat)}."
    return line


def write_page(results: Path, page: Path, suites: Sequence[str]) -> None:
    """Rewrite the results page from ``RESULTS/<suite>/`` of each of ``suites``."""
    page_dir = page.parent.resolve()
    lines = [
        "# Results: rlzoo against published curves and a peer library, at small budgets",
        "",
        "Generated by `python scripts/reproduce.py SUITE` from the raw results under "
        f"[`{os.path.relpath(results, page_dir)}`]({os.path.relpath(results, page_dir)}) "
        "(every seed's `summary.json` and evaluation curve as `eval.csv`); do not edit by hand. "
        "A table row is one algorithm and config; its seeds are 0..K-1. "
        "IQM = interquartile mean over seeds; the 95% CI is a stratified bootstrap over seeds "
        "(2,000 resamples, rlzoo.compare's method; with 5 seeds the IQM is the mean of the "
        "middle three and the CI is best read as a lower bound on the uncertainty). Returns are "
        "the mean of deterministic evaluation episodes (the policy's "
        "mode), on env seeds `seed + 10000 + i` (so seeds s and s + 1 share 9 of their 10 "
        "evaluation start states; their training runs are independent).",
        "",
        "**Hyperparameters.** Every row runs rlzoo's defaults unchanged but a control row, "
        "which changes the settings its note names (\"control for ...\"); each file under "
        "`rlzoo/conf/algo/` says which paper or reference code each default comes from, and no "
        "run on these tasks chose them. One choice between published settings was made by "
        "looking at returns, on another task: TD3's defaults were switched from CleanRL's (lr "
        "3e-4, 256x256, batch 256) to the TD3 paper's (lr 1e-3, 400x300, batch 100) with 10,000 "
        "random steps (the paper's warm-up on HalfCheetah and Ant; it used 1,000 on Hopper) "
        "after CleanRL's, with 1,000 random steps, did not solve InvertedPendulum-v5 within 15k "
        "steps on seeds 0 and 1 (nor did Stable-Baselines3's TD3 with those settings on the one "
        "seed tried) and the paper's solved it by 25k steps on seeds 0-2 "
        "(`rlzoo/conf/algo/td3.yaml`). "
        "Nothing else was tuned. The Stable-Baselines3 peer takes the same settings as the rlzoo "
        "row of the same algorithm.",
        "",
        "**Published references** are set beside rlzoo's value at the same number of env steps, "
        "random warm-up included; where the warm-ups differ so do the numbers of gradient "
        "updates made by then, which the `updates` column gives for both sides (one per env "
        "step after the warm-up; `?` where the source does not say). They come from older env "
        "versions (gym v1, v3, v4; rlzoo runs v5) and, where the source says so, other "
        "settings: a difference is a prompt to look, not a verdict on the algorithm. Both stds "
        "divide by seeds - 1 (the published ones, computed over seeds, are rescaled). The last "
        "column is Welch's two-sided t-test of rlzoo's seeds against the published mean and "
        "std: `above` or `below` when p < 0.05, else `no difference found`. With 5 and 10 seeds "
        "it finds a true gap of one std only about a third of the time, and 1.75 std about 80% "
        "of the time (simulated, equal stds), so `no difference found` is not evidence that "
        "rlzoo matches the reference, only that no gap of that size showed.",
        "",
    ]
    for name in suites:
        lines += suite_section(SUITES[name], results, page_dir)
    lines += ["## Sources", "", *[f"- `{s.key}`: {s.text}" for s in SOURCES.values()], ""]
    write_text_atomic(page, "\n".join(lines))


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
