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

from rlzoo.algos.seeds import seed_weights, stack_seeds
from rlzoo.envs.base import run_episodes, run_group_episodes
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
    load_checkpoint,
    load_latest_valid,
    nonfinite_entries,
    prune_checkpoints,
    remove_stale_temps,
    save_checkpoint,
)
from rlzoo.run.logger import Logger
from rlzoo.run.member import Member
from rlzoo.run.normalize import check_observations, fold_collected, pending
from rlzoo.run.rundir import check_run_dir, write_atomic
from rlzoo.run.settings import read_settings
from rlzoo.run.signals import AlreadyFinished, Interrupted, NonFiniteError, StopSignals
from rlzoo.run.state import (
    POLICY_FILE,
    policy_record,
    restore_rng,
    rng_state,
    seed_everything,
    summary_step,
)
from rlzoo.threads import run_threads, thread_tuner


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
        run_dir: where checkpoints, ``policy.pt``, TensorBoard events and ``summary.json`` go;
            with ``seeds=K`` the first seed's dir, the group's home (``rlzoo.run.group``).
        on_eval: called after every evaluation with an :class:`Evaluation` (once per seed);
            return True to stop.
        on_checkpoint: called after every checkpoint with a :class:`Checkpoint`; return True to
            stop.
        dirs: the run dir of each seed (``seeds=K``; default: ``run_dir`` alone).

    With ``seeds=K`` the K seeds ``seed .. seed + K - 1`` are K members (``rlzoo.run.member``):
    each has its own envs, storage, warm-up generator and outputs, and one algorithm group holds
    all their weights with a leading seed axis. The loop's clock (``step``: schedules, updates)
    is the slowest member's step; a member that reaches ``total_steps`` first stops collecting.
    """

    def __init__(self, cfg: DictConfig, run_dir: Path, on_eval: EvalCallback | None = None,
                 on_checkpoint: CheckpointCallback | None = None,
                 dirs: list[Path] | None = None) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.on_eval, self.on_checkpoint = on_eval, on_checkpoint
        self.settings = s = read_settings(cfg)
        threads = run_threads(cfg.get("torch_threads", "auto"), s.seeds)
        # auto, one seed, CPU: the faster of 1 thread and torch's count, timed as it trains
        self.tuner = thread_tuner(cfg.get("torch_threads", "auto"), s.seeds,
                                  s.device.type == "cpu" and not s.on_policy,
                                  torch.get_num_threads(), torch.set_num_threads)
        if s.device.type == "cpu" and threads:
            torch.set_num_threads(threads)
        dirs = dirs or [run_dir]
        if len(dirs) != s.seeds:
            raise ValueError(f"{s.seeds} seeds need {s.seeds} run dirs, got {len(dirs)}")
        seed_everything(s.seed)
        self.members: list[Member] = []
        try:
            algos = []
            for k, member_dir in enumerate(dirs):
                seed = s.seed + k
                member_cfg = with_seed(cfg, seed)
                if k:
                    seed_everything(seed)  # each seed's weights start as its single run's
                env = make_env(member_cfg, s.num_envs, seed)
                member = Member(seed, member_cfg, member_dir, env, None,  # type: ignore[arg-type]
                                np.random.default_rng(seed))
                self.members.append(member)
                self.spec = env_spec(env)
                check_spec(self.spec, str(cfg.env.name))
                check_observations(env, cfg)
                algos.append(build_algorithm(member_cfg, self.spec, s.device))
            if len(algos) > 1 and not type(algos[0]).seed_groups:
                raise UserError(
                    f"algo={cfg.algo.name} ({type(algos[0]).__name__}) cannot train seeds as a "
                    "batch (its class does not set seed_groups = True: its update must read the "
                    "weights through per_seed, docs/seeds.md); use seeds=1 with seed=0,1,2,... "
                    "in a multirun instead")
            self.algo = stack_seeds(algos)
            self.horizon = self.algo.action_horizon
            if s.on_policy and self.horizon != 1:
                raise UserError(f"algo={cfg.algo.name} is on-policy and acts in chunks of "
                                f"{self.horizon} actions; on-policy rollouts need single actions")
            check_accel(s.compile, s.cudagraphs, s.device, type(self.algo), str(cfg.algo.name))
            for member in self.members:
                member.storage = make_storage(dataclasses.replace(s, seed=member.seed),
                                              self.spec, self.algo)
        except BaseException:
            for member in self.members:
                member.env.close()
            raise
        self.update = update_fn(self.algo, s.compile, s.cudagraphs)  # algo.update, accelerated
        self.step = 0  # env steps collected by the slowest member
        self.update_credit = 0.0
        self.checkpoint_dir = run_dir / "checkpoints"
        self.wall_time = 0.0  # seconds spent in train(), summed over resumes
        self.restored: Path | None = None  # the checkpoint restore() loaded
        self.stop = StopSignals()
        self.stop_requested = False  # a callback asked to stop
        self.warnings = self.schedule_warnings()

    # A single run's state, as the loop has always named it (member 0 of a group).
    env = property(lambda self: self.members[0].env)
    storage = property(lambda self: self.members[0].storage)
    buffer = storage
    obs = property(lambda self: self.members[0].obs)
    last_eval = property(lambda self: self.members[0].last_eval)

    @property
    def group(self) -> bool:
        """Whether this run trains several seeds at once."""
        return len(self.members) > 1

    @property
    def updates(self) -> int:
        """Gradient updates so far: the algorithm's own counter (its update phases use it)."""
        return self.algo.updates

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
    def train(self, resume: bool = False) -> list[dict[str, Any]]:
        """Run to ``total_steps`` (or until a callback stops it); with ``resume`` first restore
        the newest valid checkpoint of ``run_dir`` (unless :meth:`restore` already did) and
        continue from it exactly. Returns every seed's summary, first seed first."""
        s = self.settings
        if resume:
            path = self.restored or self.restore()
            for directory in (self.checkpoint_dir, *(m.run_dir for m in self.members)):
                remove_stale_temps(directory)  # of writers that died (SIGKILL, power loss)
        else:
            for member in self.members:
                member.reset_envs(self.horizon)
                self.check_env_output(member, obs=member.obs, state=member.env_state)
        for k, member in enumerate(self.members):
            # resumed: drop the events a crashed run logged after its checkpoint, from this
            # member's own step (a seed ahead of the group's clock keeps its episodes)
            purge_step = member.step + 1 if resume else None
            member.logger = Logger(member.run_dir, s.total_steps, s.progress, member.step,
                                   purge_step, progress_every_s=s.progress_every_s, text=k == 0,
                                   learning_starts=0 if s.on_policy else s.learning_starts)
        logger = self.logger = self.members[0].logger
        assert logger is not None
        if resume:
            logger.announce(f"resuming {self.run_dir} from {path.name} at step {self.step}")
        else:
            logger.announce(f"run dir {self.run_dir}")
        if self.group:
            logger.announce(f"seeds {', '.join(str(m.seed) for m in self.members)} train together"
                            f"; their run dirs: {', '.join(m.run_dir.name for m in self.members)}")
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
                self.collect()
                step = min(m.step for m in self.members)
                past_warmup = step - max(self.step, s.learning_starts)
                logger.advance(step - self.step)
                self.step = step
                # --- update (stops early, owing the rest, when a signal arrives)
                began = time.perf_counter()
                metrics.update(self.learn(past_warmup))
                if self.tuner is not None and past_warmup > 0:
                    self.tuner.tick(self.step, time.perf_counter() - began)
                # --- log, evaluate, checkpoint
                if self.step >= next_log:
                    self.check_finite(metrics)
                    now = time.perf_counter()
                    seconds = now - window_start
                    perf = {
                        "perf/sps": (self.step - window_step) / seconds,
                        "perf/updates_per_sec": (self.updates - window_updates) / seconds,
                    }
                    self.log_scalars(metrics, perf)
                    logger.postfix()  # its sps: the recent window, as the progress lines
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
                        stopped = Interrupted(stop.signum, path, self.run_dir, self.step)
                        logger.record(stopped.line())  # train.log says how to continue
                        self.close_loggers()
                        self.close_envs()
                        raise stopped
            if self.last_eval is None:  # resumed at the end from a checkpoint without one
                self.evaluate_and_log()
            if resume:  # a crash after the last checkpoint may have left policy.pt behind it
                self.write_policies(self.outputs_behind()[0])
            # finishing is a step like the others: a signal now only lets it complete
            self.wall_time = time.perf_counter() - start
            summaries = [self.write_summary(member, self.wall_time) for member in self.members]
            for member, summary in zip(self.members, summaries):
                assert member.logger is not None
                member.logger.hparams(self.hparams(member.cfg),
                                      {"hparam/final_eval_return": summary["final_eval_return"]})
            self.close_loggers()
            self.close_envs()
        return summaries

    def log_scalars(self, metrics: dict[str, torch.Tensor], perf: dict[str, float]) -> None:
        """The update's metrics (``[K]`` for a group: seed k's go to member k) and ``perf``."""
        if not self.group:
            self.logger.scalars({**metrics, **perf}, self.step)
            return
        names = list(metrics)
        values = torch.stack([metrics[n].float() for n in names], 1).cpu().tolist() \
            if names else [[] for _ in self.members]
        for member, row in zip(self.members, values):
            assert member.logger is not None
            member.logger.scalars({**dict(zip(names, row)), **perf}, self.step)

    def next_multiple(self, every: int) -> int:
        """The next step at which a schedule with period ``every`` fires (0 = only at the end)."""
        if not every:
            return self.settings.total_steps
        return (self.step // every + 1) * every

    def close_envs(self) -> None:
        for member in self.members:
            member.close()

    def record(self, line: str) -> None:
        """``line`` into ``train.log`` (not on stderr), once the run's logger exists: how the
        run stopped, for whoever reads the log later."""
        logger = getattr(self, "logger", None)
        if logger is not None:
            logger.record(line)

    def close_loggers(self) -> None:
        for member in reversed(self.members):  # the first member's text handlers last
            if member.logger is not None:
                member.logger.close()

    # ------------------------------------------------------------------ collect and learn
    def reset_envs(self) -> None:
        """First reset of every member's training envs."""
        for member in self.members:
            member.reset_envs(self.horizon)

    def policy_actions(self, members: list[Member], explore: bool = False) -> Any:
        """The policy's actions for ``members``' observations: ``act`` (or on-policy ``explore``,
        which also returns the pre-tanh sample), one call for all seeds. Returns per member."""
        fn = self.algo.explore if explore else self.algo.act  # type: ignore[attr-defined]
        if not self.group:
            return [fn(self.to_device(members[0].obs))]
        obs = self.to_device(np.stack([np.asarray(m.obs) for m in self.members]))
        out = self.algo.per_seed(fn, obs)
        index = {id(m): k for k, m in enumerate(self.members)}
        if explore:
            return [(out[0][index[id(m)]], out[1][index[id(m)]]) for m in members]
        return [out[index[id(m)]] for m in members]

    def choose_actions(self, members: list[Member]) -> list[tuple[np.ndarray, Any]]:
        """Each member's action ``[E, *act_shape]`` in ``[-1, 1]`` (and the policy's pre-tanh
        sample for an on-policy rollout): uniform random during its warm-up, then the policy;
        action chunks run open-loop."""
        s, H = self.settings, self.horizon
        if s.on_policy:
            return [(a.cpu().numpy(), pre) for a, pre in self.policy_actions(members, True)]
        need = [m for m in members if m.step >= s.learning_starts and (m.chunk_pos >= H).any()]
        fresh = dict(zip(map(id, need), self.policy_actions(need))) if need else {}
        chosen = []
        for m in members:
            E = m.env.num_envs
            if m.step < s.learning_starts:
                random = m.rng.uniform(-1.0, 1.0, size=(E, *m.env.act_shape))
                chosen.append((random.astype(np.float32) * m.env.act_mask, None))  # padding 0
                continue
            if id(m) in fresh:
                new = fresh[id(m)].reshape(E, H, *m.env.act_shape).cpu().numpy()
                renew = m.chunk_pos >= H
                m.chunk[renew] = new[renew]
                m.chunk_pos[renew] = 0
            chosen.append((m.chunk[np.arange(E), m.chunk_pos], None))
            m.chunk_pos += 1
        return chosen

    def collect(self) -> None:
        """Act, step the envs, store the step, log finished episodes, for every member that has
        not reached ``total_steps`` (reset calls of next-step autoreset are not transitions)."""
        s = self.settings
        # on-policy rollouts must fill together: every member keeps stepping until the last one
        # is done (a faster seed may pass total_steps by a few steps)
        active = self.members if s.on_policy else [m for m in self.members
                                                    if m.step < s.total_steps]
        for m in active:  # normalize.*: the statistics take in what the last step collected
            fold_collected(self.algo, self.members.index(m) if self.group else None, m.obs,
                           m.env_state, m.pending, s.device)
        for m, (action, pre_tanh) in zip(active, self.choose_actions(active)):
            self.collect_member(m, action, pre_tanh)

    def collect_member(self, m: Member, action: np.ndarray, pre_tanh: Any) -> None:
        result = m.env.step(action)
        # the action first: a policy gone NaN is the cause of the NaN it then gets back
        self.check_env_output(m, action=action, reward=result.reward,
                              agent_reward=result.agent_reward, obs=result.obs,
                              state=result.state)
        extra = {} if pre_tanh is None else {"pre_tanh": pre_tanh}
        m.storage.add(
            m.obs, action, result.reward, result.obs, result.terminated, result.truncated,
            result.reset_step, state=m.env_state, next_state=result.state,
            agent_reward=result.agent_reward, **extra,
        )
        m.chunk_pos[result.reset_step] = self.horizon
        if self.algo.normalizes:
            m.pending = pending(result)  # merged before the next action (rlzoo.run.normalize)
        # --- episode bookkeeping
        valid = ~result.reset_step
        n_new = int(valid.sum())
        m.episode_return += np.where(valid, result.reward, 0.0)
        if m.agent_return is not None:
            m.agent_return += np.where(valid[:, None], result.agent_reward, 0.0)
        assert m.logger is not None
        for e in np.flatnonzero((result.terminated | result.truncated) & valid):
            m.episodes += 1
            step = m.step + n_new
            m.logger.episode(float(m.episode_return[e]), step)
            m.episode_return[e] = 0.0
            if m.agent_return is not None:
                m.logger.scalars({f"train/episode_return/agent_{i}": float(r)
                                  for i, r in enumerate(m.agent_return[e])}, step)
                m.agent_return[e] = 0.0
        m.obs, m.env_state = result.obs, result.state
        m.step += n_new

    def sample(self) -> Any:
        """One update's batch: the storage's (a single run), or every member's stacked along a
        leading seed axis."""
        s = self.settings
        sampling = self.algo.sampling
        if not self.group:
            return self.storage.sample(s.batch_size, sampling)
        return stack_records([m.storage.sample(s.batch_size, sampling) for m in self.members])

    def learn(self, past_warmup: int) -> dict[str, torch.Tensor]:
        """The updates owed after ``past_warmup`` new env steps beyond the warm-up; returns the
        last update's metrics.

        On-policy: one update per full rollout, then the rollout is cleared. Off-policy: ``utd``
        updates per env step; a signal ends them early and the rest stay owed in
        ``update_credit`` (checkpointed), made before the next env step of the resumed run.
        """
        if self.settings.on_policy:
            stores = [m.storage for m in self.members]
            if not all(store.full for store in stores):  # type: ignore[union-attr]
                return {}
            rollouts = [store.rollout() for store in stores]  # type: ignore[union-attr]
            metrics = self.update(rollouts[0] if not self.group else stack_records(rollouts))
            for store in stores:
                store.clear()  # type: ignore[union-attr]
            return metrics
        s, E, H = self.settings, self.settings.num_envs, self.horizon
        metrics: dict[str, torch.Tensor] = {}
        # an H-step window needs H - 1 newer rows: none can start in the newest H - 1
        ready = all(len(m.storage) > (H - 1) * E for m in self.members)
        if past_warmup > 0 and ready:
            self.update_credit += s.utd * past_warmup
        while ready and self.update_credit >= 1.0 and not self.stop.signum:
            metrics.update(self.update(self.sample()))
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
        k = len(self.members)  # a group's metrics are [K] and its parameters [K, ...]

        def finite(v: torch.Tensor) -> torch.Tensor:  # [K] (or [1]): is each seed's slice finite
            return torch.isfinite(v).reshape(k, -1).all(1) if self.group \
                else torch.isfinite(v).all().reshape(1)

        flags = torch.stack(
            [finite(metrics[n]) for n in names] + [finite(p) for p in params.values()]
        ).tolist() if names or params else []
        for name, row in zip([*names, *(f"parameter {p}" for p in params)], flags):
            if not all(row):
                where = self.last_good_checkpoint_note()
                seeds = ", ".join(str(m.seed) for m, ok in zip(self.members, row) if not ok)
                of_seed = f" in seed {seeds}" if self.group else ""
                raise NonFiniteError(
                    f"{name} became NaN or inf{of_seed} by step {self.step}; training stopped and "
                    f"{where} (lower the learning rates or check the env's rewards and "
                    "observations)"
                )

    def check_env_output(self, member: Member, **arrays: Any) -> None:
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
            of_seed = f" of seed {member.seed}" if self.group else ""
            raise NonFiniteError(
                f"{source} produced a non-finite {name.replace('_', ' ')} (NaN or inf) in "
                f"training env {e}{of_seed} at step {member.step + 1}; training stopped before "
                f"storing it and {where} (check the env's rewards and observations)"
            )

    # ------------------------------------------------------------------ evaluation
    def reset_eval_env(self, m: Member, episodes: int) -> np.ndarray:
        """``m``'s eval envs (``episodes`` of them, made once) reset to seeds
        ``m.seed + 10_000 + i``; returns their first observations ``[episodes, ...]``."""
        seed0 = m.seed + EVAL_SEED_OFFSET
        if m.eval_env is None or m.eval_env.num_envs != episodes:
            if m.eval_env is not None:
                m.eval_env.close()
            m.eval_env = make_env(m.cfg, episodes, seed0)
        return m.eval_env.reset(seed=seed0)[0]  # the same seeds at every evaluation

    def evaluate(self, episodes: int | None = None, deterministic: bool = True) -> np.ndarray:
        """Run ``eval.episodes`` episodes on a separate eval env (a single run; a group uses
        :meth:`evaluate_group`); returns their (team) returns ``[episodes]`` and keeps each
        agent's mean return in ``last_eval_agents [N]`` (multi-agent). Episode ``i`` of every
        evaluation starts from seed ``seed + 10_000 + i``: evaluations differ only by the policy,
        keep no state between them (so resuming cannot shift them), and ``rlzoo.evaluate``
        reproduces the last one exactly."""
        m = self.members[0]
        obs = self.reset_eval_env(m, episodes or self.settings.eval_episodes)

        def policy(batch: np.ndarray) -> np.ndarray:
            action = self.algo.act(self.to_device(batch), deterministic=deterministic)
            return action.cpu().numpy()

        result = run_episodes(m.eval_env, obs, policy, self.horizon)  # type: ignore[arg-type]
        if result.agent_returns is not None:
            m.last_eval_agents = result.agent_returns.mean(axis=0)
        return result.returns

    def evaluate_group(self, deterministic: bool = True) -> list[np.ndarray]:
        """Every member's evaluation at once (a seed group): each on its own eval envs with its
        own seeds, all acting through one ``per_seed`` call per step. Returns each member's
        (team) returns ``[eval.episodes]``, as :meth:`evaluate` would one by one."""
        obs = [self.reset_eval_env(m, self.settings.eval_episodes) for m in self.members]

        def policy(batch: np.ndarray) -> np.ndarray:
            action = self.algo.per_seed(self.algo.act, self.to_device(batch), deterministic)
            return action.cpu().numpy()

        results = run_group_episodes([m.eval_env for m in self.members],  # type: ignore[misc]
                                     obs, policy, self.horizon)
        for m, result in zip(self.members, results):
            if result.agent_returns is not None:
                m.last_eval_agents = result.agent_returns.mean(axis=0)
        return [result.returns for result in results]

    def evaluate_and_log(self) -> None:
        every = self.evaluate_group() if self.group else [self.evaluate()]
        for m, returns in zip(self.members, every):
            if not np.isfinite(returns).all():
                raise NonFiniteError(
                    f"evaluation at step {self.step} returned a non-finite return (NaN or inf) on "
                    f"env={self.cfg.env.name}; check the env's rewards"
                )
            m.last_eval = (float(returns.mean()), float(returns.std()))
            scalars = {"eval/return": m.last_eval[0], "eval/return_std": m.last_eval[1]}
            if m.last_eval_agents is not None:
                scalars.update({f"eval/return/agent_{i}": float(r)
                                for i, r in enumerate(m.last_eval_agents)})
            assert m.logger is not None
            m.logger.scalars(scalars, self.step)
            m.logger.flush()
            if self.on_eval is not None and self.on_eval(
                    Evaluation(self.step, *m.last_eval, returns, m.run_dir)):
                self.stop_requested = True

    # ------------------------------------------------------------------ outputs
    def save(self) -> Path:
        """Write a checkpoint of this step and each seed's ``policy.pt``, only if everything in
        them is finite (so every checkpoint kept is one to go back to), and keep the newest
        ``checkpoint.keep`` checkpoints."""
        for m in self.members:  # a checkpoint would recreate a deleted dir without its config
            check_run_dir(m.run_dir, self.step)
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
        self.write_policies(self.members, state["config"])
        prune_checkpoints(self.checkpoint_dir, self.settings.checkpoint_keep)
        if self.on_checkpoint is not None and self.on_checkpoint(
                Checkpoint(self.step, path, self.run_dir)):
            self.stop_requested = True
        return path

    def write_policies(self, members: list[Member], config: dict[str, Any] | None = None) -> None:
        """``policy.pt`` of ``members`` from the weights now (each seed's slice, its config and
        its step); ``config``: the run's resolved config, if the caller has it."""
        if not members:
            return
        if config is None:
            config = OmegaConf.to_container(self.cfg, resolve=True)  # type: ignore[assignment]
        record = policy_record(self.algo, config, dataclasses.asdict(self.spec),  # type: ignore[arg-type]
                               self.step)  # the group's weights, copied to the host once
        for k, m in enumerate(self.members):
            if m not in members:
                continue
            mine = record if not self.group else {  # seed k's slice, config and step
                **record, "step": m.step, "weights": seed_weights(record["weights"], k),
                "config": OmegaConf.to_container(m.cfg, resolve=True)}
            save_checkpoint(m.run_dir / POLICY_FILE, mine)

    def outputs_behind(self) -> tuple[list[Member], list[Member]]:
        """After :meth:`restore`: the members whose ``policy.pt`` is not of the restored
        checkpoint's step (a crash after the checkpoint's rename and before theirs), and those
        whose ``summary.json`` is not at their step (a crash while the summaries were written)."""
        policies, summaries = [], []
        for m in self.members:
            path = m.run_dir / POLICY_FILE
            try:
                step = load_checkpoint(path).get("step") if path.is_file() else None
            except CheckpointError:
                step = None
            if step != m.step:
                policies.append(m)
            if summary_step(m.run_dir) != m.step:
                summaries.append(m)
        return policies, summaries

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically, as tensors and plain data only
        (loadable with ``weights_only=True``). A group's per-seed parts are in ``members``."""
        state: dict[str, Any] = {
            "format": 1,
            "algo_name": str(self.cfg.algo.name),
            "env_name": str(self.cfg.env.name),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "algo": self.algo.state_dict(),
            "counters": {
                "step": self.step, "update_credit": self.update_credit,
                "wall_time": self.wall_time,
            },
        }
        parts = [self.member_state(m) for m in self.members]
        if self.group:
            state["members"] = parts
            state["rng"] = rng_state(np.random.default_rng(0))  # global generators only
        else:
            part = parts[0]
            state.update(buffer=part["buffer"], env=part["env"], loop=part["loop"])
            state["counters"].update(part["counters"])
            state["rng"] = rng_state(self.members[0].rng)
        return state

    @staticmethod
    def member_state(m: Member) -> dict[str, Any]:
        return {
            "seed": m.seed,
            "buffer": m.storage.state_dict(),
            "env": m.env.get_state(),
            "loop": m.loop_state(),
            "counters": {"step": m.step, "episodes": m.episodes,
                         "last_eval": list(m.last_eval) if m.last_eval else None},
            "warmup": m.rng.bit_generator.state,
        }

    def load_member_state(self, m: Member, part: dict[str, Any]) -> None:
        m.storage.load_state_dict(part["buffer"], take=True)  # loaded from disk: kept as is
        m.env.set_state(part["env"])
        m.load_loop_state(part["loop"])
        counters = part["counters"]
        m.step = int(counters["step"])
        m.episodes = int(counters["episodes"])
        last_eval = counters.get("last_eval")
        m.last_eval = (float(last_eval[0]), float(last_eval[1])) if last_eval else None
        if "warmup" in part:
            m.rng.bit_generator.state = part["warmup"]

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
        saved_seeds = len(state.get("members", [None]))
        if saved_seeds != len(self.members):
            raise UserError(f"cannot resume: {path} holds {saved_seeds} seeds, this run has "
                            f"{len(self.members)}; point resume= at its own run dir")
        saved = [part.get("seed") if isinstance(part, dict) else None
                 for part in state["members"]] if self.group else \
            [(state.get("config") or {}).get("seed", self.members[0].seed)]
        if saved != [m.seed for m in self.members]:
            raise UserError(
                f"cannot resume: {path} holds seed{'s' if self.group else ''} "
                f"{', '.join(map(str, saved))}, but this run's config and group.json say "
                f"{', '.join(str(m.seed) for m in self.members)}; point resume= at the run dir "
                "the checkpoint belongs to")
        self.reset_envs()  # builds the loop's arrays and gives every env its first reset
        try:
            self.algo.load_state_dict(state["algo"])
            if self.group:
                for m, part in zip(self.members, state["members"]):
                    self.load_member_state(m, part)
            else:
                counters = state["counters"]
                self.load_member_state(self.members[0], {
                    "buffer": state["buffer"], "env": state["env"], "loop": state["loop"],
                    "counters": counters})
        except (KeyError, ValueError, RuntimeError) as err:
            raise UserError(
                f"cannot resume from {path}: it does not match this run's config ({err})"
            ) from None
        counters = state["counters"]
        self.step = int(counters["step"])  # the update count comes back with the algorithm
        self.update_credit = float(counters["update_credit"])
        self.wall_time = float(counters["wall_time"])
        restore_rng(state["rng"], self.members[0].rng if not self.group
                    else np.random.default_rng(0))
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
        if s.total_steps == step and self.outputs_behind() == ([], []):
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

    def hparams(self, cfg: DictConfig | None = None) -> dict[str, Any]:
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

        walk(OmegaConf.to_container(cfg or self.cfg, resolve=True), "")
        return flat

    def write_summary(self, m: Member, wall_time: float) -> dict[str, Any]:
        mean, std = m.last_eval if m.last_eval else (float("nan"), float("nan"))
        summary = {
            "algo": str(self.cfg.algo.name),
            "env": str(self.cfg.env.name),
            "seed": m.seed,
            "total_steps": m.step,
            "final_eval_return": mean,
            "final_eval_return_std": std,
            "wall_time_s": wall_time,
            "steps_per_sec": m.step / wall_time if wall_time > 0 else 0.0,
            "buffer_bytes": m.storage.nbytes,
            "updates": self.updates,
            "episodes": m.episodes,
        }
        if m.last_eval_agents is not None:
            summary["final_eval_agent_returns"] = [float(r) for r in m.last_eval_agents]
        if self.stop_requested:
            summary["stopped_early"] = True  # a callback stopped the run before total_steps
        if self.group:
            summary["group_seeds"] = [member.seed for member in self.members]
        summary["warnings"] = list(self.warnings)
        write_atomic(m.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary


def with_seed(cfg: DictConfig, seed: int) -> DictConfig:
    """``cfg`` with its ``seed`` set to ``seed`` (a copy; ``cfg`` itself when equal)."""
    if cfg.get("seed") == seed:
        return cfg
    copy = cfg.copy()
    OmegaConf.update(copy, "seed", seed, merge=False)
    return copy


def stack_records(records: list[Any]) -> Any:
    """Dataclasses of tensors (``Batch``, ``Rollout``), one per seed -> one with every tensor
    field stacked along a new leading seed axis."""
    first = records[0]
    return dataclasses.replace(first, **{
        f.name: torch.stack([getattr(r, f.name) for r in records])
        for f in dataclasses.fields(first) if torch.is_tensor(getattr(first, f.name))})
