"""The training loop, one for every algorithm and env: collect -> store -> update -> evaluate ->
log -> checkpoint.

The loop owns everything that is not the algorithm: the env (``rlzoo.envs``, any kind, built by
``rlzoo.run.build``), the storage, seeding, the schedule, logging and the run directory. What it
stores and when it updates follows the algorithm's contract, not the number of agents:

* **off-policy** (SAC, TD3, REDQ, DSAC-T, MADDPG, HASAC, ...): ``algo.learning_starts`` uniform
  random steps, then the policy's actions (an action chunk of ``H = algo.action_horizon`` steps
  runs open-loop); every step goes to the replay buffer, and ``algo.utd`` updates per env step
  after the warm-up draw batches as ``algo.sampling`` declares (n-step, horizon, discount);
* **on-policy** (COMA, ``examples/ppo.py``): ``algo.explore`` acts, every step goes into a
  rollout of ``algo.rollout_steps`` vector steps per env, and each full rollout is one
  ``update`` and is then cleared. No warm-up, no replay.

Steps are env steps (transitions) summed over the ``num_envs`` parallel envs; the reset calls of
next-step autoreset are not counted, they collect no transition. Returns are team returns (the
env's reward for one agent, the mean over agents for several); multi-agent runs also log each
agent's own return (``train/episode_return/agent_i``, ``eval/return/agent_i``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.buffers.rollout import RolloutStore
from rlzoo.envs.base import VecEnv, run_episodes
from rlzoo.errors import UserError
from rlzoo.run.accel import check_accel, update_fn
from rlzoo.run.build import (
    EVAL_SEED_OFFSET,
    build_algorithm,
    check_spec,
    env_spec,
    make_env,
    make_storage,
)
from rlzoo.run.checkpoint import (
    CheckpointError,
    checkpoint_path,
    describe_nonfinite,
    list_checkpoints,
    load_latest_valid,
    nonfinite_entries,
    prune_checkpoints,
    save_checkpoint,
)
from rlzoo.run.logger import Logger
from rlzoo.run.rundir import write_atomic
from rlzoo.run.settings import read_settings
from rlzoo.run.signals import AlreadyFinished, Interrupted, NonFiniteError, StopSignals
from rlzoo.run.state import (
    POLICY_FILE,
    host_array,
    policy_record,
    restore_rng,
    rng_state,
    seed_everything,
    summary_step,
)


@dataclass(frozen=True)
class Evaluation:
    """What an ``on_eval`` callback receives after each evaluation.

    Attributes:
        step: env steps collected so far.
        mean, std: mean and standard deviation of the episodes' (team) returns.
        returns: ``[eval.episodes]`` the returns.
        run_dir: the run directory.
    """

    step: int
    mean: float
    std: float
    returns: np.ndarray
    run_dir: Path


@dataclass(frozen=True)
class Checkpoint:
    """What an ``on_checkpoint`` callback receives after each checkpoint.

    Attributes:
        step: env steps collected so far.
        path: the checkpoint file (``policy.pt`` beside ``checkpoints/`` was rewritten too).
        run_dir: the run directory.
    """

    step: int
    path: Path
    run_dir: Path


# A callback returns True to stop the run early (it then checkpoints and finishes).
EvalCallback = Callable[[Evaluation], Any]
CheckpointCallback = Callable[[Checkpoint], Any]


class Trainer:
    """Runs one training job into ``run_dir`` from a composed Hydra config.

    Args:
        cfg: the composed config (``rlzoo/conf/config.yaml`` and its groups).
        run_dir: where checkpoints, ``policy.pt``, TensorBoard events and ``summary.json`` go.
        on_eval: called after every evaluation with an :class:`Evaluation`; return True to stop.
        on_checkpoint: called after every checkpoint with a :class:`Checkpoint`; return True to
            stop.
    """

    def __init__(self, cfg: DictConfig, run_dir: Path, on_eval: EvalCallback | None = None,
                 on_checkpoint: CheckpointCallback | None = None) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.on_eval, self.on_checkpoint = on_eval, on_checkpoint
        self.settings = s = read_settings(cfg)
        if s.device.type == "cpu" and cfg.get("torch_threads", 0):
            torch.set_num_threads(int(cfg.torch_threads))
        seed_everything(s.seed)
        self.env: VecEnv = make_env(cfg, s.num_envs, s.seed)
        self.spec = env_spec(self.env)
        self.eval_env: VecEnv | None = None
        try:
            check_spec(self.spec, str(cfg.env.name))
            self.algo = build_algorithm(cfg, self.spec, s.device)
            self.horizon = self.algo.action_horizon
            if s.on_policy and self.horizon != 1:
                raise UserError(f"algo={cfg.algo.name} is on-policy and acts in chunks of "
                                f"{self.horizon} actions; on-policy rollouts need single actions")
            check_accel(s.compile, s.cudagraphs, s.device, type(self.algo), str(cfg.algo.name))
            self.storage = make_storage(s, self.spec, self.algo)
        except BaseException:
            self.env.close()
            raise
        self.update = update_fn(self.algo, s.compile, s.cudagraphs)  # algo.update, accelerated
        self.rng = np.random.default_rng(s.seed)  # warm-up actions
        self.step = 0  # env steps collected
        self.update_credit = 0.0
        self.episodes = 0
        self.last_eval: tuple[float, float] | None = None
        self.last_eval_agents: np.ndarray | None = None
        self.checkpoint_dir = run_dir / "checkpoints"
        self.obs: Any = None  # the observation the next action is taken from
        self.env_state: Any = None  # the global state beside it (multi-agent), else None
        self.wall_time = 0.0  # seconds spent in train(), summed over resumes
        self.restored: Path | None = None  # the checkpoint restore() loaded
        self.stop = StopSignals()
        self.stop_requested = False  # a callback asked to stop
        self.warnings = self.schedule_warnings()

    @property
    def updates(self) -> int:
        """Gradient updates so far: the algorithm's own counter (its update phases use it)."""
        return self.algo.updates

    @property
    def buffer(self) -> Any:
        """The storage (replay or rollout); the name the trainer has always used."""
        return self.storage

    def to_device(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, dtype=torch.float32).to(self.settings.device, non_blocking=True)

    def schedule_warnings(self) -> list[str]:
        """One-line warnings about a schedule that cannot do what the user probably wants,
        printed at start and recorded in summary.json."""
        s = self.settings
        if s.on_policy or s.total_steps > s.learning_starts:
            return []
        return [
            f"total_steps ({s.total_steps}) <= algo.learning_starts ({s.learning_starts}): this "
            "run takes only random actions and makes no gradient update, so its returns are "
            "those of an untrained policy; lower algo.learning_starts or raise total_steps"
        ]

    # ------------------------------------------------------------------ the loop
    def train(self, resume: bool = False) -> dict[str, Any]:
        """Run to ``total_steps`` (or until a callback stops it); with ``resume`` first restore
        the newest valid checkpoint of ``run_dir`` (unless :meth:`restore` already did) and
        continue from it exactly."""
        s = self.settings
        purge_step = None
        if resume:
            path = self.restored or self.restore()
            purge_step = self.step + 1  # drop events a crashed run logged after its checkpoint
        else:
            self.reset_envs()
            self.check_env_output(obs=self.obs, state=self.env_state)
        logger = Logger(self.run_dir, s.total_steps, s.progress, self.step, purge_step,
                        progress_every_s=s.progress_every_s)
        self.logger = logger
        if resume:
            logger.announce(f"resuming {self.run_dir} from {path.name} at step {self.step}")
        else:
            logger.announce(f"run dir {self.run_dir}")
        for line in self.warnings:
            logger.announce(f"warning: {line}")
        start = time.perf_counter() - self.wall_time
        metrics: dict[str, torch.Tensor] = {}
        next_log = self.next_multiple(s.log_every)
        next_eval = self.next_multiple(s.eval_every)
        next_ckpt = self.next_multiple(s.checkpoint_every)
        window_start, window_step, window_updates = time.perf_counter(), self.step, self.updates
        with self.stop as stop:
            # updates a SIGTERM cut short are owed before the next env step
            metrics.update(self.learn(0))
            while self.step < s.total_steps and not self.stop_requested:
                # --- act, step the envs, store the step, count finished episodes
                n_new = self.collect()
                past_warmup = self.step + n_new - max(self.step, s.learning_starts)
                self.step += n_new
                logger.advance(n_new)
                # --- update (stops early, owing the rest, when a signal arrives)
                metrics.update(self.learn(past_warmup))
                # --- log, evaluate, checkpoint
                if self.step >= next_log:
                    self.check_finite(metrics)
                    now = time.perf_counter()
                    seconds = now - window_start
                    perf = {
                        "perf/sps": (self.step - window_step) / seconds,
                        "perf/updates_per_sec": (self.updates - window_updates) / seconds,
                    }
                    logger.scalars({**metrics, **perf}, self.step)
                    logger.postfix(sps=perf["perf/sps"])
                    window_start, window_step, window_updates = now, self.step, self.updates
                    next_log = self.next_multiple(s.log_every)
                last = self.step >= s.total_steps
                if self.step >= next_eval or last:
                    self.evaluate_and_log()
                    next_eval = self.next_multiple(s.eval_every)
                if self.step >= next_ckpt or last or stop.signum or self.stop_requested:
                    self.wall_time = time.perf_counter() - start
                    self.check_finite(metrics)
                    path = self.save()
                    next_ckpt = self.next_multiple(s.checkpoint_every)
                    if stop.signum and not last:
                        logger.close()
                        self.close_envs()
                        raise Interrupted(stop.signum, path, self.run_dir, self.step)
            if self.last_eval is None:  # resumed at the end from a checkpoint without one
                self.evaluate_and_log()
        self.wall_time = time.perf_counter() - start
        summary = self.write_summary(self.wall_time)
        logger.hparams(self.hparams(), {"hparam/final_eval_return": summary["final_eval_return"]})
        logger.close()
        self.close_envs()
        return summary

    def next_multiple(self, every: int) -> int:
        """The next step at which a schedule with period ``every`` fires (0 = only at the end)."""
        if not every:
            return self.settings.total_steps
        return (self.step // every + 1) * every

    def close_envs(self) -> None:
        self.env.close()
        if self.eval_env is not None:
            self.eval_env.close()

    # ------------------------------------------------------------------ collect and learn
    def reset_envs(self) -> None:
        """First reset of the training envs; starts the loop's per-env state."""
        E, H = self.settings.num_envs, self.horizon
        self.chunk = np.zeros((E, H, *self.env.act_shape), dtype=np.float32)
        self.chunk_pos = np.full(E, H)  # H = this env needs a fresh chunk
        self.episode_return = np.zeros(E)
        self.agent_return = np.zeros((E, self.env.n_agents)) if self.env.multi_agent else None
        self.obs, self.env_state = self.env.reset()

    def choose_action(self) -> tuple[np.ndarray, torch.Tensor | None]:
        """The action ``[E, *act_shape]`` in ``[-1, 1]`` for ``self.obs`` (and the policy's
        pre-tanh sample for an on-policy rollout): uniform random during the warm-up, then the
        policy; action chunks run open-loop."""
        s, E, H = self.settings, self.settings.num_envs, self.horizon
        if s.on_policy:
            explore = self.algo.explore  # type: ignore[attr-defined]
            action, pre_tanh = explore(self.to_device(self.obs))
            return action.cpu().numpy(), pre_tanh
        if self.step < s.learning_starts:
            random = self.rng.uniform(-1.0, 1.0, size=(E, *self.env.act_shape))
            return random.astype(np.float32) * self.env.act_mask, None  # padding stays 0
        need = self.chunk_pos >= H
        if need.any():
            fresh = self.algo.act(self.to_device(self.obs)).reshape(E, H, *self.env.act_shape)
            self.chunk[need] = fresh.cpu().numpy()[need]
            self.chunk_pos[need] = 0
        action = self.chunk[np.arange(E), self.chunk_pos]
        self.chunk_pos += 1
        return action, None

    def collect(self) -> int:
        """Act, step the envs, store the step, log finished episodes. Returns the number of
        transitions collected (reset calls are not transitions)."""
        action, pre_tanh = self.choose_action()
        result = self.env.step(action)
        self.check_env_output(reward=result.reward, agent_reward=result.agent_reward,
                              obs=result.obs, state=result.state, action=action)
        extra = {} if pre_tanh is None else {"pre_tanh": pre_tanh}
        self.storage.add(
            self.obs, action, result.reward, result.obs, result.terminated, result.truncated,
            result.reset_step, state=self.env_state, next_state=result.state,
            agent_reward=result.agent_reward, **extra,
        )
        self.chunk_pos[result.reset_step] = self.horizon
        # --- episode bookkeeping
        valid = ~result.reset_step
        n_new = int(valid.sum())
        self.episode_return += np.where(valid, result.reward, 0.0)
        if self.agent_return is not None:
            self.agent_return += np.where(valid[:, None], result.agent_reward, 0.0)
        for e in np.flatnonzero((result.terminated | result.truncated) & valid):
            self.episodes += 1
            step = self.step + n_new
            self.logger.episode(float(self.episode_return[e]), step)
            self.episode_return[e] = 0.0
            if self.agent_return is not None:
                self.logger.scalars({f"train/episode_return/agent_{i}": float(r)
                                     for i, r in enumerate(self.agent_return[e])}, step)
                self.agent_return[e] = 0.0
        self.obs, self.env_state = result.obs, result.state
        return n_new

    def learn(self, past_warmup: int) -> dict[str, torch.Tensor]:
        """The updates owed after ``past_warmup`` new env steps beyond the warm-up; returns the
        last update's metrics.

        On-policy: one update per full rollout, then the rollout is cleared. Off-policy: ``utd``
        updates per env step; a signal ends them early and the rest stay owed in
        ``update_credit`` (checkpointed), made before the next env step of the resumed run.
        """
        if isinstance(self.storage, RolloutStore):
            if not self.storage.full:
                return {}
            metrics = self.update(self.storage.rollout())
            self.storage.clear()
            return metrics
        s, E, H = self.settings, self.settings.num_envs, self.horizon
        metrics: dict[str, torch.Tensor] = {}
        # an H-step window needs H - 1 newer rows: none can start in the newest H - 1
        ready = len(self.storage) > (H - 1) * E
        if past_warmup > 0 and ready:
            self.update_credit += s.utd * past_warmup
        sampling = self.algo.sampling
        while ready and self.update_credit >= 1.0 and not self.stop.signum:
            metrics.update(self.update(self.storage.sample(s.batch_size, sampling)))
            self.update_credit -= 1.0
        return metrics

    # ------------------------------------------------------------------ checks
    def check_finite(self, metrics: dict[str, torch.Tensor]) -> None:
        """Stop with one line naming the quantity if a loss, statistic or parameter is NaN/inf.

        Called at log time and before every checkpoint, so a poisoned state is never saved over
        the last good checkpoint. One device-to-host transfer per call.
        """
        names = [k for k, v in metrics.items() if torch.is_tensor(v)]
        params = dict(self.algo.named_parameters())
        flags = torch.stack(
            [torch.isfinite(metrics[k]).all() for k in names]
            + [torch.isfinite(p).all() for p in params.values()]
        ).tolist() if names or params else []
        for name, ok in zip([*names, *(f"parameter {p}" for p in params)], flags):
            if not ok:
                where = self.last_good_checkpoint_note()
                raise NonFiniteError(
                    f"{name} became NaN or inf by step {self.step}; training stopped and {where} "
                    "(lower the learning rates or check the env's rewards and observations)"
                )

    def check_env_output(self, **arrays: Any) -> None:
        """Stop before storing a NaN/inf reward, observation, state or action (``[E, ...]``
        arrays), with one line naming the quantity, the env, the training env index and the
        step, so poisoned data never reaches the storage or a checkpoint."""
        for name, value in arrays.items():
            if value is None:
                continue
            a = np.asarray(value)
            if a.dtype.kind != "f" or np.isfinite(a).all():
                continue
            bad = ~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1) if a.ndim else [True]
            e = int(np.flatnonzero(bad)[0])
            source = "the policy" if name == "action" else f"env={self.cfg.env.name}"
            where = self.last_good_checkpoint_note()
            raise NonFiniteError(
                f"{source} produced a non-finite {name.replace('_', ' ')} (NaN or inf) in "
                f"training env {e} at step {self.step + 1}; training stopped before storing it "
                f"and {where} (check the env's rewards and observations)"
            )

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int | None = None, deterministic: bool = True) -> np.ndarray:
        """Run ``eval.episodes`` episodes on a separate eval env; returns their (team) returns
        ``[episodes]`` and keeps each agent's mean return in ``last_eval_agents [N]``
        (multi-agent). Episode ``i`` of every evaluation starts from seed ``seed + 10_000 + i``:
        evaluations differ only by the policy, keep no state between them (so resuming cannot
        shift them), and ``rlzoo.evaluate`` reproduces the last one exactly."""
        episodes = episodes or self.settings.eval_episodes
        seed0 = self.settings.seed + EVAL_SEED_OFFSET
        if self.eval_env is None or self.eval_env.num_envs != episodes:
            if self.eval_env is not None:
                self.eval_env.close()
            self.eval_env = make_env(self.cfg, episodes, seed0)
        obs, _ = self.eval_env.reset(seed=seed0)  # the same seeds at every evaluation

        def policy(batch: np.ndarray) -> np.ndarray:
            action = self.algo.act(self.to_device(batch), deterministic=deterministic)
            return action.cpu().numpy()

        result = run_episodes(self.eval_env, obs, policy, self.horizon)
        if result.agent_returns is not None:
            self.last_eval_agents = result.agent_returns.mean(axis=0)
        return result.returns

    def evaluate_and_log(self) -> None:
        returns = self.evaluate()
        if not np.isfinite(returns).all():
            raise NonFiniteError(
                f"evaluation at step {self.step} returned a non-finite return (NaN or inf) on "
                f"env={self.cfg.env.name}; check the env's rewards"
            )
        self.last_eval = (float(returns.mean()), float(returns.std()))
        scalars = {"eval/return": self.last_eval[0], "eval/return_std": self.last_eval[1]}
        if self.last_eval_agents is not None:
            scalars.update({f"eval/return/agent_{i}": float(r)
                            for i, r in enumerate(self.last_eval_agents)})
        self.logger.scalars(scalars, self.step)
        self.logger.flush()
        if self.on_eval is not None and self.on_eval(
                Evaluation(self.step, *self.last_eval, returns, self.run_dir)):
            self.stop_requested = True

    # ------------------------------------------------------------------ outputs
    def save(self) -> Path:
        """Write a checkpoint of this step and ``policy.pt``, only if everything in them is
        finite (so every checkpoint kept is one to go back to), and keep the newest
        ``checkpoint.keep`` checkpoints."""
        path = checkpoint_path(self.checkpoint_dir, self.step)
        state = self.state_dict()
        poisoned = nonfinite_entries(state)
        if poisoned:
            where = self.last_good_checkpoint_note()
            raise NonFiniteError(
                f"NaN or inf in {describe_nonfinite(poisoned)} at step {self.step}; no checkpoint "
                f"was written and {where} (lower the learning rates or check the env)"
            )
        save_checkpoint(path, state)
        save_checkpoint(self.run_dir / POLICY_FILE, policy_record(
            self.algo, state["config"], dataclasses.asdict(self.spec), self.step))
        prune_checkpoints(self.checkpoint_dir, self.settings.checkpoint_keep)
        if self.on_checkpoint is not None and self.on_checkpoint(
                Checkpoint(self.step, path, self.run_dir)):
            self.stop_requested = True
        return path

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically, as tensors and plain data only
        (loadable with ``weights_only=True``)."""
        return {
            "format": 1,
            "algo_name": str(self.cfg.algo.name),
            "env_name": str(self.cfg.env.name),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "algo": self.algo.state_dict(),
            "buffer": self.storage.state_dict(),
            "env": self.env.get_state(),
            "loop": self.loop_state(),
            "counters": {
                "step": self.step, "episodes": self.episodes,
                "update_credit": self.update_credit, "wall_time": self.wall_time,
                "last_eval": list(self.last_eval) if self.last_eval else None,
            },
            "rng": rng_state(self.rng),
        }

    def loop_state(self) -> dict[str, Any]:
        """The loop's own state: the current observation (and global state), the open
        episodes' returns and the action chunks in flight."""
        loop = {"obs": np.asarray(self.obs), "episode_return": self.episode_return,
                "chunk": self.chunk, "chunk_pos": self.chunk_pos}
        if self.env_state is not None:
            loop["env_state"] = np.asarray(self.env_state)
        if self.agent_return is not None:
            loop["agent_return"] = self.agent_return
        return loop

    def load_loop_state(self, loop: dict[str, Any]) -> None:
        """Put back :meth:`loop_state` (also as checkpoints before the one loop wrote it: the
        multi-agent trainer kept per-agent returns in ``episode_return`` and had no chunks)."""
        self.obs = host_array(loop["obs"])
        self.env_state = host_array(loop["env_state"]) if "env_state" in loop else None
        episode_return = host_array(loop["episode_return"])
        if episode_return.ndim == 2:  # [E, N] per agent, written by the multi-agent trainer
            loop = {**loop, "agent_return": episode_return}
            episode_return = episode_return.mean(axis=1)
        self.episode_return = episode_return
        if self.agent_return is not None:
            self.agent_return = host_array(loop["agent_return"])
        if "chunk" in loop:
            self.chunk, self.chunk_pos = host_array(loop["chunk"]), host_array(loop["chunk_pos"])

    def restore(self) -> Path:
        """Load the newest valid checkpoint of ``run_dir`` (older ones on failure, with a
        warning); returns its path. Raises ``UserError`` if none fits this run."""
        try:
            with warnings.catch_warnings(record=True) as skipped:
                warnings.simplefilter("always")
                try:
                    path, state = load_latest_valid(self.checkpoint_dir, self.settings.device)
                finally:
                    for warning in skipped:  # one rlzoo line per checkpoint skipped
                        print(f"rlzoo: warning: {warning.message}", file=sys.stderr, flush=True)
        except CheckpointError as err:
            raise UserError(f"cannot resume: {err}; start a new run instead") from None
        for key, mine in (("algo_name", self.cfg.algo.name), ("env_name", self.cfg.env.name)):
            if state.get(key) != mine:
                raise UserError(
                    f"cannot resume: {path} was written by {key.split('_')[0]}={state.get(key)}, "
                    f"but this run is {key.split('_')[0]}={mine}; point resume= at its own run dir"
                )
        self.reset_envs()  # builds the loop's arrays and gives every env its first reset
        try:
            self.algo.load_state_dict(state["algo"])
            self.storage.load_state_dict(state["buffer"])
            self.env.set_state(state["env"])
            self.load_loop_state(state["loop"])
        except (KeyError, ValueError, RuntimeError) as err:
            raise UserError(
                f"cannot resume from {path}: it does not match this run's config ({err})"
            ) from None
        counters = state["counters"]
        self.step = int(counters["step"])  # the update count comes back with the algorithm
        self.episodes = int(counters["episodes"])
        self.update_credit = float(counters["update_credit"])
        self.wall_time = float(counters["wall_time"])
        last_eval = counters.get("last_eval")
        self.last_eval = (float(last_eval[0]), float(last_eval[1])) if last_eval else None
        restore_rng(state["rng"], self.rng)
        self.restored = path
        return path

    def check_resume_budget(self) -> None:
        """After :meth:`restore`: refuse a budget below the checkpoint's step (``UserError``)
        and report a run that has nothing left to do (``AlreadyFinished``)."""
        s, step = self.settings, self.step
        if s.total_steps < step:
            raise UserError(
                f"total_steps={s.total_steps} is below step {step} of {self.restored}; a run "
                f"cannot go back: pass total_steps above {step} to train further"
            )
        if s.total_steps == step and summary_step(self.run_dir) == step:
            raise AlreadyFinished(
                f"{self.run_dir} already finished at step {step} (total_steps={step}); nothing "
                f"was changed. To train further: python -m rlzoo.train resume={self.run_dir} "
                f"total_steps=N with N > {step}"
            )

    def latest_checkpoint(self) -> Path | None:
        found = list_checkpoints(self.checkpoint_dir)
        return found[-1] if found else None

    def last_good_checkpoint_note(self) -> str:
        """Where a stopped run can go back to, for a NaN/inf message (every checkpoint written
        is finite, so the newest one is good)."""
        last = self.latest_checkpoint()
        return f"the last good checkpoint is {last}" if last else "no checkpoint was saved"

    def hparams(self) -> dict[str, Any]:
        flat: dict[str, Any] = {}

        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    if not str(k).startswith("_"):
                        walk(v, f"{prefix}{k}.")
            elif isinstance(node, (int, float, str, bool)):
                flat[prefix[:-1]] = node
            elif isinstance(node, list):
                flat[prefix[:-1]] = str(node)

        walk(OmegaConf.to_container(self.cfg, resolve=True), "")
        return flat

    def write_summary(self, wall_time: float) -> dict[str, Any]:
        mean, std = self.last_eval if self.last_eval else (float("nan"), float("nan"))
        summary = {
            "algo": str(self.cfg.algo.name),
            "env": str(self.cfg.env.name),
            "seed": self.settings.seed,
            "total_steps": self.step,
            "final_eval_return": mean,
            "final_eval_return_std": std,
            "wall_time_s": wall_time,
            "steps_per_sec": self.step / wall_time if wall_time > 0 else 0.0,
            "buffer_bytes": self.storage.nbytes,
            "updates": self.updates,
            "episodes": self.episodes,
        }
        if self.last_eval_agents is not None:
            summary["final_eval_agent_returns"] = [float(r) for r in self.last_eval_agents]
        if self.stop_requested:
            summary["stopped_early"] = True  # a callback stopped the run before total_steps
        summary["warnings"] = list(self.warnings)
        write_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary
