"""The peers: Stable-Baselines3's SAC, TD3 or DDPG, or sb3-contrib's TQC or CrossQ, with the
settings of the rlzoo row of the same algorithm (``tools.reproduce.peer_kinds.peer_settings``),
and one seed of it trained and evaluated as rlzoo evaluates (:func:`sb3_worker`, in its own
process). ``stable_baselines3`` and ``sb3_contrib`` are imported only inside the worker: they are
optional dependencies, and the rest of tools.reproduce works without them.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.analysis.curves import SCALARS_CSV, write_scalars_csv
from tools.reproduce.console import progress
from tools.reproduce.files import PROVENANCE_FILE, replace_dir
from tools.reproduce.peer_kinds import ENTROPY_PEERS, PeerSettings, peer_class, peer_settings
from tools.reproduce.provenance import launch_record
from tools.reproduce.schema import Row, Suite, SuiteTask, compose_cell_config
from tools.reproduce.suites import SUITES


@dataclass(frozen=True)
class PeerJob:
    """One SB3 seed to train, as the runner's spec names it (:func:`sb3_worker`).

    Attributes:
        suite, task, row: the cell's suite, task and row.
        seed: the seed (SB3's ``seed``; evaluations from env seeds ``seed + 10000 + i``).
        steps: the budget in env steps.
        partial: the folder the run is written into.
        final: where ``partial`` is renamed once the run has finished.
        cfg: the composed rlzoo config of the row, whose settings the peer takes.
    """

    suite: Suite
    task: SuiteTask
    row: Row
    seed: int
    steps: int
    partial: Path
    final: Path
    cfg: Any

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> PeerJob:
        suite = SUITES[spec["suite"]]
        task = next(t for t in suite.tasks if t.name == spec["task"])
        row = next(r for r in suite.rows if r.label == spec["row"])
        cfg = compose_cell_config([f"env={task.env}", *row.overrides, *suite.overrides])
        return cls(suite, task, row, int(spec["seed"]), int(spec["steps"]),
                   Path(spec["partial"]), Path(spec["final"]), cfg)

    def make_env(self) -> Any:
        """A gymnasium env of the task, with the env config's kwargs."""
        import gymnasium as gym

        return gym.make(str(self.cfg.env.id), **self.env_kwargs())

    def env_kwargs(self) -> dict[str, Any]:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(self.cfg.env.kwargs, resolve=True) or {}  # type: ignore[return-value]


def matched(base: Any, rates: dict[str, float]) -> Any:
    """SB3's algorithm class ``base`` with each optimizer at rlzoo's learning rate for it (SB3
    has one rate for all): only the rate setting SB3 does before each update is replaced."""

    class Matched(base):  # type: ignore[misc, valid-type]
        base_name = base.__name__  # what the exported config names: SAC, TD3, TQC, ...

        def _update_learning_rate(self, optimizers: Any) -> None:
            by_optimizer = {id(self.actor.optimizer): rates["actor"],
                            id(self.critic.optimizer): rates["critic"]}
            if getattr(self, "ent_coef_optimizer", None) is not None:
                by_optimizer[id(self.ent_coef_optimizer)] = rates["alpha"]
            for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
                for group in optimizer.param_groups:
                    group["lr"] = by_optimizer[id(optimizer)]

    return Matched


def peer_algorithm(job: PeerJob, settings: PeerSettings, env: Any) -> tuple[Any, dict[str, Any]]:
    """The peer's class (:func:`matched`) and its constructor kwargs for ``env``: the target
    entropy in SB3's units (SAC, TQC, CrossQ), the Gaussian action noise of the action's size
    (TD3, DDPG)."""
    from stable_baselines3.common.noise import NormalActionNoise

    kwargs = dict(settings.kwargs)
    space = env.action_space
    act_dim = int(np.prod(space.shape))
    if job.row.peer in ENTROPY_PEERS:
        kwargs["target_entropy"] = settings.sac_target_entropy(space.low, space.high)
    else:
        kwargs["action_noise"] = NormalActionNoise(
            np.zeros(act_dim), settings.exploration_noise * np.ones(act_dim))
    return matched(peer_class(str(job.row.peer)), settings.learning_rates), kwargs


class PeerEvaluation:
    """rlzoo's evaluation of an SB3 model: ``eval_episodes`` deterministic episodes, all at once,
    episode i from env seed ``seed + 10000 + i``; ``points`` holds ``eval/return`` and
    ``eval/return_std`` by env step. Each evaluation prints one progress line (the worker's log,
    ``<row>-s<seed>.log``): step, return, elapsed wall time and the time left at the pace since
    the previous evaluation."""

    def __init__(self, job: PeerJob) -> None:
        self.seed0 = job.seed + 10_000
        self.every = job.suite.eval_every
        self.steps = job.steps
        self.start = time.perf_counter()
        self.last = (0, 0.0)  # the step and elapsed seconds of the last evaluation
        self.envs = [job.make_env() for _ in range(job.suite.eval_episodes)]
        self.points: dict[str, dict[int, float]] = {"eval/return": {}, "eval/return_std": {}}

    def __call__(self, model: Any, step: int) -> None:
        obs = [e.reset(seed=self.seed0 + i)[0] for i, e in enumerate(self.envs)]
        returns = np.zeros(len(self.envs))
        live = list(range(len(self.envs)))
        while live:
            actions, _ = model.predict(np.stack([obs[i] for i in live]), deterministic=True)
            still = []
            for action, i in zip(actions, live):
                obs[i], reward, terminated, truncated, _ = self.envs[i].step(action)
                returns[i] += float(reward)
                if not (terminated or truncated):
                    still.append(i)
            live = still
        self.points["eval/return"][step] = float(returns.mean())
        self.points["eval/return_std"][step] = float(returns.std())
        elapsed = time.perf_counter() - self.start
        # eta from the pace since the last evaluation: the random warm-up's steps are fast
        last_step, last_time = self.last
        left = ((elapsed - last_time) * (self.steps - step) / (step - last_step)
                if step > last_step else 0.0)
        self.last = (step, elapsed)
        print(f"sb3: step {step}/{self.steps} ({100 * step // max(self.steps, 1)}%) | eval return "
              f"{returns.mean():.1f} ± {returns.std():.1f} | elapsed {elapsed / 60:.1f} min, eta "
              f"{left / 60:.1f} min", flush=True)

    def callback(self) -> Any:
        """An SB3 callback that evaluates after the update of every ``eval_every``-th env step
        (as rlzoo does): SB3 updates after a step's rollout ends, so at the start of the next
        rollout."""
        from stable_baselines3.common.callbacks import BaseCallback

        evaluation = self

        class EvalEvery(BaseCallback):
            def _on_rollout_start(self) -> None:
                step = self.num_timesteps
                if step > 0 and step % evaluation.every == 0 \
                        and step not in evaluation.points["eval/return"]:
                    evaluation(self.model, step)

            def _on_step(self) -> bool:
                return True

        return EvalEvery()


def sb3_worker(spec: dict[str, Any]) -> None:
    """One SB3 seed (in its own process): train, evaluate every ``eval_every`` env steps as rlzoo
    does (deterministic, ``eval_episodes`` episodes from seeds ``seed + 10000 + i``), write
    ``summary.json``, ``eval.csv`` and ``.hydra/`` into the partial dir and rename it into place.
    """
    import torch

    torch.set_num_threads(1)
    job = PeerJob.from_spec(spec)
    settings = peer_settings(job.cfg, str(job.row.peer))
    env = job.make_env()
    algorithm, kwargs = peer_algorithm(job, settings, env)
    evaluation = PeerEvaluation(job)
    model = algorithm("MlpPolicy", env, seed=job.seed, device="cpu", verbose=0,
                      **copy.deepcopy(kwargs))  # SB3 adds to policy_kwargs; the config keeps ours
    start = time.perf_counter()
    model.learn(total_timesteps=job.steps, callback=evaluation.callback())
    if job.steps not in evaluation.points["eval/return"]:
        evaluation(model, job.steps)
    wall = time.perf_counter() - start
    if model.num_timesteps != job.steps:
        raise SystemExit(f"SB3 made {model.num_timesteps} steps, not {job.steps}")
    write_peer_run(job, settings, kwargs, model, evaluation.points, wall)


def write_peer_run(job: PeerJob, settings: PeerSettings, kwargs: dict[str, Any], model: Any,
                   points: dict[str, dict[int, float]], wall: float) -> None:
    """Write the finished seed as an rlzoo run dir (``summary.json``, ``.hydra/``, ``eval.csv``,
    ``provenance.json``) into ``job.partial`` and rename it to ``job.final``."""
    import stable_baselines3 as sb3
    from omegaconf import OmegaConf

    row, steps, library = job.row, job.steps, f"stable-baselines3 {sb3.__version__}"
    if row.peer in ("tqc", "crossq"):
        import sb3_contrib

        library += f", sb3-contrib {sb3_contrib.__version__}"
    partial = job.partial
    (partial / ".hydra").mkdir(parents=True, exist_ok=True)
    final_return = points["eval/return"][steps]
    if not math.isfinite(final_return):
        raise SystemExit(f"SB3's final evaluation returned {final_return}")
    summary = {
        "algo": row.label, "env": str(job.cfg.env.name), "seed": job.seed, "total_steps": steps,
        "final_eval_return": final_return,
        "final_eval_return_std": points["eval/return_std"][steps],
        "wall_time_s": wall, "steps_per_sec": steps / wall if wall > 0 else 0.0,
        "updates": int(model._n_updates), "episodes": int(model._episode_num),
        "library": library,
    }
    peer_kwargs = {k: v for k, v in kwargs.items() if k != "action_noise"}
    if row.peer in ("td3", "ddpg"):
        peer_kwargs["exploration_noise"] = settings.exploration_noise
    config = {
        "algo": {"name": row.label, "library": library,
                 "class": model.base_name,
                 "matches": f"rlzoo {' '.join(row.overrides)}",
                 "learning_rates": settings.learning_rates, **peer_kwargs},
        "env": {"name": str(job.cfg.env.name), "id": str(job.cfg.env.id),
                "kwargs": job.env_kwargs()},
        "seed": job.seed, "total_steps": steps,
        "eval": {"every": job.suite.eval_every, "episodes": job.suite.eval_episodes},
    }
    hydra_dir = partial / ".hydra"
    (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    (hydra_dir / "overrides.yaml").write_text("[]\n")
    (hydra_dir / "hydra.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(
        {"hydra": {"runtime": {"choices": {"algo": row.label, "env": job.task.env}}}})))
    write_scalars_csv(partial / SCALARS_CSV, {
        tag: (np.array(sorted(p), dtype=np.int64), np.array([p[s] for s in sorted(p)]))
        for tag, p in points.items()})
    (partial / PROVENANCE_FILE).write_text(json.dumps(
        [{"launch": "started", **launch_record(dict(os.environ), sys.argv)}], indent=2) + "\n")
    (partial / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    replace_dir(partial, job.final)
    progress(f"{row.label} seed {job.seed} on {job.task.name}: final eval return "
        f"{final_return:.2f} after {steps} steps ({summary['steps_per_sec']:.1f} steps/s)")
