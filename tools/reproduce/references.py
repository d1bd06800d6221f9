"""The published returns the results page sets beside rlzoo's, as data: where each comes from
(:data:`SOURCES`), what it is set beside (:data:`REFERENCES`), its seeds' returns (read from the
small files under ``results/published/``, written by scripts/published_seeds.py from the sources'
repositories), and what the page says where nothing comparable is published (:data:`UNPUBLISHED`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from tools.reproduce.files import CHECKOUT

# The repository's (data of the clone, not of the wheel: a page suite refuses to run without a
# checkout, tools.reproduce.files); outside a checkout, the current directory's.
PUBLISHED_DIR = (CHECKOUT or Path.cwd()) / "results" / "published"


@dataclass(frozen=True)
class Source:
    """Where published numbers come from: ``text`` (markdown, with a link a reader can open) and
    its ``notes`` (settings, warm-ups, updates: one line each on the page), ``name`` as the method
    names it and the env ``version`` its runs used (rlzoo runs v5)."""

    key: str
    text: str
    notes: tuple[str, ...] = ()
    name: str = ""
    version: str = ""


SOURCES = {s.key: s for s in (
    Source("td3-paper",
           "Fujimoto et al. 2018, *Addressing Function Approximation Error in Actor-Critic "
           "Methods* (TD3): its 10 seeds' evaluation curves, [github.com/sfujim/TD3 at bc98e62]"
           "(https://github.com/sfujim/TD3/tree/bc98e6260e4e35e1a2afc1c78b6925251dd0a1e9) (the "
           "camera-ready release), `learning_curves/<Env>/TD3_<Env>-v1_<seed>.npy` (gym v1 "
           "envs, Ant included, no Humanoid; evaluation i at about i x 5,000 env steps)",
           ("Its `run_experiments.sh` starts with 1,000 random steps on Hopper and Walker2d, "
            "10,000 on HalfCheetah and Ant; batch 100, 400x300, lr 1e-3 (rlzoo's TD3 defaults)",
            "Its `main.py` trains at every episode's end once `total_timesteps != 0`, as many "
            "updates as the episode had steps, the warm-up's episodes included: about t updates "
            "by env step t. rlzoo's TD3 makes none during its 10,000 random steps, then one per "
            "env step: 40,000 by 50k where the paper's code had made about 50,000"),
           name="the TD3 paper", version="gym v1"),
    Source("tianshou",
           "Tianshou's former MuJoCo benchmark, [github.com/thu-ml/tianshou at 39acf20]"
           "(https://github.com/thu-ml/tianshou/tree/39acf2094d96268d92ebb54dcbfc3de76d702567/"
           "examples/mujoco), `examples/mujoco/benchmark/<Env>-v3/{sac,td3}/"
           "test_rew_10seeds.csv` (gym v3 envs, Ant and Humanoid included, 10 seeds, "
           "deterministic evaluation)",
           ("The runs were made with the code at [e605bde](https://github.com/thu-ml/tianshou/"
            "tree/e605bdea942b408126ef4fbc740359773259c9ec), the commit the benchmark's README "
            "(`examples/mujoco/README.md`) credits for SAC and TD3 (gym 0.17.3, mujoco 2.0.2.13, "
            "its footnote 3); 39acf20 is where the page read the files",
            "Its env steps exclude the random warm-up, which the page adds back (its TD3 files "
            "of HalfCheetah, Ant and Humanoid start 5,000 steps after the warm-up, at 30k on the "
            "page, the others at its end)",
            "`run_experiments.sh` runs `mujoco_sac.py` / `mujoco_td3.py` at their defaults. "
            "SAC: a **fixed** temperature alpha = 0.2 (rlzoo tunes alpha from 1), actor and "
            "critic lr 1e-3 (rlzoo: 3e-4 actor, 1e-3 critic), 256x256, batch 256, 10,000 random "
            "steps (rlzoo: 5,000). TD3: lr 3e-4, 256x256, batch 256, 25,000 random steps "
            "(rlzoo: lr 1e-3, 400x300, batch 100, 10,000). Both then make one update per env "
            "step"),
           name="Tianshou", version="gym v3"),
    Source("simbav2",
           "SimbaV2's baseline results, [github.com/dojeon-ai/SimbaV2 at 358d724]"
           "(https://github.com/dojeon-ai/SimbaV2/blob/358d7246a2934dd9ce56c742a42ceb48a34cce01/"
           "results/baseline/sac.csv), `results/baseline/sac.csv`, rows `sac` on `<Env>-v4` "
           "(gym v4 envs, Ant and Humanoid included, 10 seeds, evaluated every 16,666 env steps: "
           "49,998 stands for 50k, 99,996 for 100k, 199,992 for 200k, 299,988 for 300k); the "
           "file gives neither the settings nor the warm-up",
           ("From the same commit, SimbaV2's own curves, `results/baseline/simbaV2_utd2.csv` "
            "(10 seeds) and `results/scaling/utd/simbaV2_utd1.csv` (5 seeds), every 50,000 env "
            "steps after 5,000 random steps (its `configs/buffer` `min_length`), and CrossQ's, "
            "`results/baseline/crossq.csv` (10 seeds, every 2,000 env steps)",
            "The update ratios the page gives SimbaV2's curves (UTD 2, the paper's headline "
            "setting; UTD 1, rlzoo's `simbav2` setting) rest on the files' names alone: no "
            "config or log beside them says how they were run"),
           name="SimbaV2's repository", version="gym v4"),
    Source("cleanrl",
           "CleanRL's benchmark pages ([docs.cleanrl.dev](https://docs.cleanrl.dev), "
           "rl-algorithms/sac and rl-algorithms/td3): HalfCheetah, Hopper and Walker2d on gym "
           "**v2** envs (mujoco-py), Humanoid on v4, as their tables name them; mean "
           "**training** episode return at 1M steps, not a deterministic evaluation, so only a "
           "scale", name="CleanRL", version="gym v2 (Humanoid v4)"),
)}


@dataclass(frozen=True)
class Reference:
    """A published curve set beside rlzoo rows of the same algorithm on one task.

    Attributes:
        task: the env's name as rlzoo reports it (``Hopper``).
        rows: the labels of the rows it is set beside.
        algo: the algorithm's name on the page (``TD3 (paper)``).
        source: a key of :data:`SOURCES`; its seeds are in ``results/published/<source>.json``
            under ``data_algo`` (None: no per-seed data, only ``points``).
        data_algo: the algorithm's key in that file.
        first_update: the env step from which the source makes one update per env step (so
            ``steps - first_update`` updates by ``steps``); None when the source does not say.
        updates_approx: the count is approximate (the TD3 paper's code trains at episode ends).
        points: ``(env steps, mean)`` pairs of a source without per-seed data.
        yardstick: a curve of another algorithm (CrossQ), set beside rows that have no curve
            of their own (or have one too): a comparison with another algorithm, never a
            verdict on reproducing it; the headline takes a row's own algorithm's curves first
            (:func:`tools.reproduce.page.data.best_reference`).
    """

    task: str
    rows: tuple[str, ...]
    algo: str
    source: str
    data_algo: str | None = None
    first_update: int | None = None
    updates_approx: bool = False
    points: tuple[tuple[int, float], ...] = ()
    yardstick: bool = False

    def updates(self, steps: int) -> str:
        """The source's gradient updates by env step ``steps``, as the page writes it."""
        if self.first_update is None:
            return "?"
        n = max(0, steps - self.first_update)
        return f"~{n:,}" if self.updates_approx else f"{n:,}"

    def curve(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The seeds' returns: env steps ``[S]`` and returns ``[seeds, S]``; None without
        per-seed data."""
        if self.data_algo is None:
            return None
        entry = published_data(self.source)["algos"][self.data_algo].get(self.task)
        if entry is None:
            return None
        return np.asarray(entry["steps"], dtype=np.int64), np.asarray(entry["seeds"], float)

    def window(self, steps: int, width: int) -> np.ndarray | None:
        """Each seed's mean return over its evaluations at env steps in ``[steps - width,
        steps]`` ``[seeds]``; None when it has none there."""
        curve = self.curve()
        if curve is None:
            return None
        at, values = curve
        inside = (at >= steps - width) & (at <= steps)
        if not inside.any():
            return None
        return values[:, inside].mean(axis=1)


@cache
def published_data(source: str) -> dict:
    """``results/published/<source>.json``: repository, commit, path and per-seed curves."""
    return json.loads((PUBLISHED_DIR / f"{source}.json").read_text())


SAC_ROWS = ("sac", "sb3_sac")
TD3_ROWS = ("td3", "sb3_td3")
# issue 24's family: set beside CrossQ too
MODERN_ROWS = ("simbav2", "stac", "stac-author", "sac-categorical")
MUJOCO_TASKS = ("Hopper", "HalfCheetah", "Walker2d")
# issue 52's tasks: SAC on Humanoid (the `long` suite), SAC and TD3 on Ant (the `mujoco` suite);
# the TD3 paper ran Ant but not Humanoid
SAC_TASKS = (*MUJOCO_TASKS, "Ant", "Humanoid")
TD3_PAPER_TASKS = (*MUJOCO_TASKS, "Ant")

REFERENCES: tuple[Reference, ...] = (
    *(Reference(task, TD3_ROWS, "TD3 (paper)", "td3-paper", "TD3", first_update=0,
                updates_approx=True) for task in TD3_PAPER_TASKS),
    *(Reference(task, SAC_ROWS, "SAC (Tianshou)", "tianshou", "SAC", first_update=10_000)
      for task in SAC_TASKS),
    *(Reference(task, TD3_ROWS, "TD3 (Tianshou)", "tianshou", "TD3", first_update=25_000)
      for task in SAC_TASKS),
    *(Reference(task, SAC_ROWS, "SAC (SimbaV2 baseline)", "simbav2", "SAC")
      for task in SAC_TASKS),
    *(Reference(task, ("simbav2",), "SimbaV2, UTD 1 (SimbaV2 repo)", "simbav2", "SimbaV2 UTD 1",
                first_update=5_000) for task in MUJOCO_TASKS),
    *(Reference(task, ("simbav2",), "SimbaV2, UTD 2 (SimbaV2 repo)", "simbav2", "SimbaV2 UTD 2")
      for task in MUJOCO_TASKS),
    *(Reference(task, MODERN_ROWS, "CrossQ (SimbaV2 repo)", "simbav2", "CrossQ",
                yardstick=True) for task in MUJOCO_TASKS),
    Reference("HalfCheetah", ("sac",), "SAC (CleanRL)", "cleanrl", points=((1_000_000, 9635),)),
    Reference("Hopper", ("sac",), "SAC (CleanRL)", "cleanrl", points=((1_000_000, 2310),)),
    Reference("Humanoid", ("sac",), "SAC (CleanRL)", "cleanrl", points=((1_000_000, 4996),)),
    Reference("HalfCheetah", ("td3",), "TD3 (CleanRL)", "cleanrl", points=((1_000_000, 9583),)),
    Reference("Hopper", ("td3",), "TD3 (CleanRL)", "cleanrl", points=((1_000_000, 3135),)),
    Reference("Humanoid", ("td3",), "TD3 (CleanRL)", "cleanrl", points=((1_000_000, 5035),)),
)

NORMALIZER = "td3-paper"  # the cross-task scores: 0 = its untrained policy, 1 = its mean at 1M


def normalizer(task: str) -> tuple[float, float] | None:
    """The TD3 paper's mean return over its 10 seeds at step 0 (the untrained policy) and at
    1M env steps on ``task``: the cross-task score is ``(return - low) / (high - low)``; None
    for a task the paper did not run."""
    entry = published_data(NORMALIZER)["algos"]["TD3"].get(task)
    if entry is None or 1_000_000 not in entry["steps"]:
        return None
    values = np.asarray(entry["seeds"], float)
    return (float(values[:, entry["steps"].index(0)].mean()),
            float(values[:, entry["steps"].index(1_000_000)].mean()))


# What the page says where nothing comparable is published, and what was measured outside
# results/ where a row stands apart (by row label, TASK/label for one task's section, or the task's
# family prefix). Findings whose numbers results/ holds are computed: page/findings.py.
UNPUBLISHED = {
    "dsac_t": "DSAC-T: no reference (the paper publishes no per-step MuJoCo returns; the "
              "official repository, github.com/Jingliang-Duan/DSAC-v2, ships Pendulum results "
              "only). Its official settings, rlzoo's defaults, start slowly, so at this budget it "
              "is not comparable with SAC's row: lr 1e-4 (SAC: 3e-4 actor, 1e-3 critic), policy "
              "and temperature updated every second step, the temperature from e (SAC: 1) at lr "
              "3e-4, 10,000 random steps (SAC: 5,000); the control `dsac_t-sac_start` was timed, "
              "not run.",
    "mpe-simple_spread/hasac": "On mpe-simple_spread two likely causes hold HASAC back at "
             "this budget, neither checked: the time its policies take to come down to their "
             "entropy target from a temperature of 1 (HARL's start; the numbers follow), and "
             "20-step returns (HARL's MPE setting) on 25-step episodes, learned from replay that "
             "is mostly the warm-up's random actions (the HASAC of "
             "[multi_agent.md](multi_agent.md#measured) reached -17.8 at 25k on one seed with "
             "5-step returns, among other changes).",
    "mamujoco-": "Every agent gets the env's one reward, so returns are on the scale of the "
                 "`mujoco` suite's HalfCheetah rows. By 25k steps (25 episodes) MADDPG and HASAC "
                 "have made 5,000 updates (0.25 per env step after 5,000 random steps). "
                 "MADDPG's deterministic actors drop to an IQM of -542 at 7,500 steps (full "
                 "torque on all six joints costs about -600 an episode) and end at 332, 42.8, "
                 "12.5, -9.6 and -125: one seed runs forward. HASAC's seeds end at 241, -44.6, "
                 "-58.8, -97.6 and -100; the single-agent SAC row, after the same 5,000 updates "
                 "(at 10k), was at 126, 86.9, 82.9, 76.2, 1.9, -43.2, -124, -146, -159 and -181: "
                 "neither has begun to run, but one HASAC seed.",
}
