"""The training loop, one for every algorithm and env: collect -> store -> update -> evaluate ->
log -> checkpoint.

The loop owns everything that is not the algorithm: the env (``rlzoo.envs``, built by
``rlzoo.config.build``), storage, seeding, the schedule, logging and the run directory. What it
stores and when it updates follows the algorithm's contract, not the number of agents:

* **off-policy** (SAC, TD3, REDQ, DSAC-T, MADDPG, HASAC, ...): ``algo.learning_starts`` uniform
  random steps, then the policy's actions (an action chunk of ``H = algo.action_horizon`` steps
  runs open-loop); every step goes to the replay buffer, and ``algo.utd`` updates per env step
  after the warm-up draw batches as ``algo.sampling`` declares (n-step, horizon, discount);
* **on-policy** (COMA, ``examples/ppo.py``): ``algo.explore`` acts into a rollout of
  ``algo.rollout_steps`` vector steps per env; each full rollout is one ``update``, then cleared.

Steps are env steps summed over the ``num_envs`` envs (autoreset's reset calls collect nothing
and are not counted). Returns are team returns (the mean over agents for several); multi-agent
runs also log each agent's own (``train/episode_return/agent_i``, ``eval/return/agent_i``).

The loop's parts, one job each: ``assemble`` builds the members and the algorithm,
``evaluation`` evaluates, ``finite`` guards against NaN/inf, ``saved_state`` is what a
checkpoint holds and ``outputs`` what the run writes for its readers.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from rlzoo.config.advice import schedule_warnings
from rlzoo.config.settings import read_settings
from rlzoo.run import tracking
from rlzoo.run.accel import GraphedAct, resolve_accel, update_fn
from rlzoo.run.assemble import (
    build_members,
    enter_threads,
    set_threads,
    thread_tuner_for,
    threads_record,
)
from rlzoo.run.callbacks import (  # noqa: F401 - rlzoo.run.loop.Evaluation is the API's name
    Checkpoint,
    CheckpointCallback,
    EvalCallback,
    Evaluation,
)
from rlzoo.run.collect import Collector
from rlzoo.run.cost import cost_note
from rlzoo.run.evaluation import evaluate, log_evaluation
from rlzoo.run.filming import Filming
from rlzoo.run.finite import check_finite
from rlzoo.run.logger import Logger
from rlzoo.run.outputs import (
    drop_stale_summaries,
    hparams,
    log_scalars,
    outputs_behind,
    summary_record,
    write_policies,
    write_summary,
)
from rlzoo.run.restore import check_budget, restore_latest
from rlzoo.run.saved_state import Clock, checked_state
from rlzoo.run.signals import Interrupted, StopSignals
from rlzoo.run.stopping import Stopping
from rlzoo.store.checkpoint import (
    checkpoint_path,
    prune_checkpoints,
    remove_stale_temps,
    save_checkpoint,
)
from rlzoo.store.rundir import check_run_dir


class Trainer(Stopping):
    """Runs one training job into ``run_dir`` from a composed Hydra config.

    Args:
        cfg: the composed config (``rlzoo/conf/config.yaml`` and its groups).
        run_dir: where checkpoints, ``policy.pt``, TensorBoard events and ``summary.json`` go;
            with ``seeds=K`` the first seed's dir, the group's home (``rlzoo.store.group``).
        on_eval: called after every evaluation with an :class:`Evaluation` (once per seed);
            return True to stop.
        on_checkpoint: called after every checkpoint with a :class:`Checkpoint`; return True to
            stop.
        dirs: the run dir of each seed (``seeds=K``; default: ``run_dir`` alone).

    The K seeds ``seed .. seed + K - 1`` (K = 1 for a single run) are K members
    (``rlzoo.run.member``): each has its own envs, warm-up generator and outputs, one storage
    holds their data and one algorithm all their weights; the loop speaks to it through its
    :class:`~rlzoo.algos.seed_axis.SeedAxis`, every tensor with the seed axis first. The loop's
    clock (``clock.step``: schedules, updates) is the slowest member's step; a member that
    reaches ``total_steps`` first stops collecting.
    """

    def __init__(self, cfg: DictConfig, run_dir: Path, on_eval: EvalCallback | None = None,
                 on_checkpoint: CheckpointCallback | None = None,
                 dirs: list[Path] | None = None) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.on_eval, self.on_checkpoint = on_eval, on_checkpoint
        self.settings = s = read_settings(cfg)
        self.wandb: Any = tracking.wanted(s.wandb)  # log.wandb: then its wandb run (start)
        self.filming = Filming(s.eval_video_every, cfg)  # eval.video_every (checked now)
        self.threads = thread_tuner_for(s)  # before set_threads: it reads torch's own count
        set_threads(s)
        self.members, self.algo, self.spec, self.storage = build_members(cfg, s,
                                                                         dirs or [run_dir])
        self.seeds = [m.seed for m in self.members]
        self.axis = self.algo.seed_axis
        self.horizon = self.algo.action_horizon
        self.collector = Collector(self.members, self.algo, self.storage, s,
                                   s.env_name, self.last_good_checkpoint_note)
        accel = resolve_accel(s.compile, s.cudagraphs, s.device, type(self.algo), s.algo_name)
        self.update = update_fn(self.algo, accel.compile, accel.cudagraphs,  # algo.update,
                                accel.fallback)                             # accelerated
        if accel.cudagraphs and not s.on_policy:  # the acting step too
            self.collector.policy_call = GraphedAct(self.collector.policy_call, accel.fallback)
        self.clock = Clock()
        self.checkpoint_dir = run_dir / "checkpoints"
        self.restored: Path | None = None  # the checkpoint restore() loaded
        self.skip: tuple[Path, ...] = ()  # checkpoints restore() must not load (tried before)
        self.good: Path | None = None  # the checkpoint restored or written last
        self.stop = StopSignals()
        self.stop_requested = False  # a callback asked to stop
        self.warnings = schedule_warnings(s, cfg) + list(accel.notes) + [note for note in [
            cost_note(self.algo, s.device, self.spec.obs_dim, self.spec.act_dim, s.batch_size,
                      s.utd * (not s.on_policy), s.total_steps, s.learning_starts,
                      s.algo_name)] if note]
        self.logger: Logger | None = None  # the first member's, which writes train.log

    # ------------------------------------------------------------------ the loop
    def train(self, resume: bool = False) -> list[dict[str, Any]]:
        """Run to ``total_steps`` (or until a callback stops it); with ``resume`` first restore
        the newest valid checkpoint of ``run_dir`` (unless :meth:`restore` already did) and
        continue from it exactly. Returns every seed's summary, first seed first."""
        s, clock = self.settings, self.clock
        logger = self.start(resume)
        start = time.perf_counter() - clock.wall_time
        metrics: dict[str, torch.Tensor] = {}
        next_log = self.next_multiple(s.log_every)
        next_eval = self.next_multiple(s.eval_every)
        next_ckpt = self.next_multiple(s.checkpoint_every)
        self.filming.start(clock.step)
        window = (time.perf_counter(), clock.step, self.algo.updates)
        with self.stop as stop:
            # updates a SIGTERM cut short are owed before the next env step
            metrics.update(self.learn(0))
            while clock.step < s.total_steps and not self.stop_requested:
                # --- act, step the envs, store the step, count finished episodes
                self.collector.collect()
                step = min(m.step for m in self.members)
                past_warmup = step - max(clock.step, s.learning_starts)
                logger.advance(step - clock.step)
                clock.step = step
                # --- update (stops early, owing the rest, when a signal arrives)
                metrics.update(self.learn(past_warmup))
                # --- log, evaluate, checkpoint; the step is whole: an exception from here on
                # (a callback's, an evaluation's) is checkpointed at it before it goes up
                try:
                    if step >= next_log:
                        window = self.log(metrics, window)
                        next_log = self.next_multiple(s.log_every)
                    last = step >= s.total_steps
                    if step >= next_eval or last:
                        self.evaluate_and_log()
                        next_eval = self.next_multiple(s.eval_every)
                    if step >= next_ckpt or last or stop.signum or self.stop_requested:
                        clock.wall_time = time.perf_counter() - start
                        self.check_finite(metrics)
                        path = self.save()
                        next_ckpt = self.next_multiple(s.checkpoint_every)
                except Exception as err:
                    self.stopped_by(err, metrics, start)
                    raise
                if stop.signum and not last:
                    stopped = Interrupted(stop.signum, path, self.run_dir, step)
                    logger.record(stopped.line())  # train.log says how to continue
                    self.close_loggers()
                    self.close_envs()
                    raise stopped
            return self.finish(resume, start)

    def start(self, resume: bool) -> Logger:
        """Restore (``resume``) or give every env its first reset, then open each member's
        logger and announce the run; returns the first member's (train.log's) logger."""
        s = self.settings
        if resume:
            path = self.restored or self.restore()
            for directory in (self.checkpoint_dir, *(m.run_dir for m in self.members)):
                remove_stale_temps(directory)  # of writers that died (SIGKILL, power loss)
            for m in self.members:  # ffmpeg's private folders of a video being filmed then
                remove_stale_temps(m.run_dir / "videos", folders=True)
        else:
            self.collector.reset()
        self.wandb = self.wandb and tracking.start(self.cfg, self.members[0].run_dir)
        for k, member in enumerate(self.members):
            # resumed: drop the events a crashed run logged after its checkpoint, from this
            # member's own step (a seed ahead of the group's clock keeps its episodes)
            purge_step = member.step + 1 if resume else None
            member.logger = Logger(member.run_dir, s.total_steps, s.progress, member.step,
                                   purge_step, progress_every_s=s.progress_every_s, text=k == 0,
                                   learning_starts=0 if s.on_policy else s.learning_starts)
        logger = self.logger = self.members[0].logger
        assert logger is not None
        logger.announce(f"resuming {self.run_dir} from {path.name} at step {self.clock.step}"
                        if resume else f"run dir {self.run_dir}")
        if len(self.members) > 1:
            logger.announce(f"seeds {', '.join(str(m.seed) for m in self.members)} train together"
                            f"; their run dirs: {', '.join(m.run_dir.name for m in self.members)}")
        for line in self.warnings:
            logger.announce(f"warning: {line}")
        return logger

    def finish(self, resume: bool, start: float) -> list[dict[str, Any]]:
        """The end of a run (a signal now only lets it complete): the last evaluation if the
        checkpoint resumed at the end had none, the outputs a crash left behind, every
        member's HPARAMS; closes the loggers and envs; writes every member's summary.json last.
        Returns the summaries."""
        if self.members[0].last_eval is None:  # resumed at the end from a checkpoint without one
            self.evaluate_and_log()
        if resume:  # a crash after the last checkpoint may have left policy.pt behind it
            write_policies(outputs_behind(self.members)[0], self.members, self.algo,
                           dataclasses.asdict(self.spec))
        self.clock.wall_time = time.perf_counter() - start
        summaries = [summary_record(m, self.members, self.settings, self.clock.wall_time,
                                    self.algo.updates, self.stop_requested, self.warnings,
                                    {"torch_threads": threads_record(self.threads, self.settings)})
                     for m in self.members]
        for member, summary in zip(self.members, summaries):
            assert member.logger is not None
            member.logger.hparams(hparams(member.cfg),
                                  {"hparam/final_eval_return": summary["final_eval_return"]})
        self.close_loggers()
        self.close_envs()
        for member, summary in zip(self.members, summaries):  # last: an error before it
            write_summary(member, summary)  # leaves no summary.json saying the run ended well
        return summaries

    def log(self, metrics: dict[str, torch.Tensor],
            window: tuple[float, int, int]) -> tuple[float, int, int]:
        """Log the last update's metrics and the speed over ``window`` (its start time, step and
        update count); returns the next window, starting now."""
        self.check_finite(metrics)
        now = time.perf_counter()
        seconds = now - window[0]
        perf = {"perf/sps": (self.clock.step - window[1]) / seconds,
                "perf/updates_per_sec": (self.algo.updates - window[2]) / seconds}
        log_scalars(self.members, metrics, perf, self.clock.step)
        assert self.logger is not None
        self.logger.postfix()  # its sps: the recent window, as the progress lines
        return now, self.clock.step, self.algo.updates

    def next_multiple(self, every: int) -> int:
        """The next step at which a schedule with period ``every`` fires (0 = only at the end)."""
        if not every:
            return self.settings.total_steps
        return (self.clock.step // every + 1) * every

    # ------------------------------------------------------------------ learn
    def learn(self, past_warmup: int) -> dict[str, torch.Tensor]:
        """The updates owed after ``past_warmup`` new env steps beyond the warm-up; returns the
        last update's metrics (``[K]`` each).

        On-policy: one update per full rollout (every seed's, ``[K, ...]``), then the rollouts
        are cleared. Off-policy: ``utd`` updates per env step, each on one batch ``[K, B, ...]``
        drawn from every seed's replay in one call; a signal ends them early and the rest stay
        owed in ``clock.update_credit`` (checkpointed), made before the next env step of the
        resumed run.
        """
        storage: Any = self.storage
        if self.settings.on_policy:
            if not storage.full:
                return {}
            metrics = self.axis.update(self.update, storage.rollout())
            storage.clear()
            return metrics
        s, E, H, clock = self.settings, self.settings.num_envs, self.horizon, self.clock
        metrics: dict[str, torch.Tensor] = {}
        # an H-step window needs H - 1 newer rows: none can start in the newest H - 1
        ready = bool(storage.lengths().min() > (H - 1) * E)
        if past_warmup > 0 and ready:
            clock.earn(s.utd, clock.step - past_warmup - s.learning_starts,
                       clock.step - s.learning_starts)  # int(utd x steps) in all
        began = time.perf_counter()  # the thread tuner times the updates (torch_threads=auto)
        while ready and clock.update_credit >= 1.0 and not self.stop.signum:
            batch = self.storage.sample(s.batch_size, self.algo.sampling)  # [K, B, ...]
            if self.threads is not None and enter_threads(
                    self.threads, self.algo, lambda b: self.axis.update(self.update, b), batch,
                    self.logger, self.settings.compile is True):
                began = time.perf_counter()  # the check is not the update's time
            metrics.update(self.axis.update(self.update, batch))
            clock.update_credit -= 1.0
        if self.threads is not None:
            if past_warmup > 0:
                self.threads.tick(clock.step, time.perf_counter() - began)
            self.threads.leave()  # acting, env steps, evaluation: one thread
        return metrics

    # ------------------------------------------------------------------ checks
    def check_finite(self, metrics: dict[str, torch.Tensor]) -> None:
        """Stop with one line if a metric or parameter is NaN/inf (``rlzoo.run.finite``)."""
        check_finite(metrics, dict(self.algo.named_parameters()), self.seeds, self.clock.step,
                     self.last_good_checkpoint_note)

    # ------------------------------------------------------------------ evaluation
    def evaluate_and_log(self) -> None:
        """Evaluate every seed at once, log it, call ``on_eval`` (``rlzoo.run.evaluation``)."""
        s = self.settings
        # a policy that samples in evaluation (STAC's mean of sampled actions) draws from a copy
        # of the global generators: when and whether a run evaluates never changes its training
        cuda = [s.device] if s.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            try:
                every = evaluate(self.members, self.algo, self.horizon, s.eval_episodes, s.device)
            except BaseException:  # this step has no evaluation: a resume must not reuse one
                for m in self.members:  # of an earlier step as this step's (summary.json)
                    m.last_eval = m.last_eval_agents = None
                raise
        if log_evaluation(self.members, every, self.clock.step, s.env_name,
                          self.on_eval):
            self.stop_requested = True
        self.filming.after_eval(self.members[0], self.algo, self.horizon, s.device, self.clock.step)

    # ------------------------------------------------------------------ checkpoints
    def save(self, notify: bool = True) -> Path:
        """Write a checkpoint of this step and each seed's ``policy.pt``, only if everything in
        them is finite (so every checkpoint kept is one to go back to), and keep the newest
        ``checkpoint.keep`` checkpoints; then call ``on_checkpoint`` (if ``notify``)."""
        step = self.clock.step
        for m in self.members:  # a checkpoint would recreate a deleted dir without its config
            check_run_dir(m.run_dir, step)
        path = checkpoint_path(self.checkpoint_dir, step)
        state = checked_state(self.cfg, self.algo, self.clock, self.members,
                              self.last_good_checkpoint_note)
        state["torch_threads"] = threads_record(self.threads, self.settings)  # to read only
        save_checkpoint(path, state)
        if self.restored is not None and self.good == self.restored:  # the leg's first
            drop_stale_summaries(self.members)  # an earlier leg's summary.json: gone past it
        write_policies(self.members, self.members, self.algo, dataclasses.asdict(self.spec))
        self.good = path  # written from a checked state: the newest to go back to
        prune_checkpoints(self.checkpoint_dir, self.settings.checkpoint_keep, newest=path)
        if notify and self.on_checkpoint is not None and self.on_checkpoint(
                Checkpoint(step, path, self.run_dir)):
            self.stop_requested = True
        return path

    def restore(self) -> Path:
        """Load the newest valid checkpoint of ``run_dir`` (older ones on failure, with a
        warning); returns its path. Raises ``UserError`` if none fits this run."""
        def reset() -> None:  # the loop's arrays, and every env's first reset (before each try)
            for member in self.members:
                member.reset_envs(self.horizon)

        path, self.clock = restore_latest(self.checkpoint_dir, self.algo, self.members,
                                          self.settings, reset, self.skip)
        self.collector.gather()
        self.restored = self.good = path
        return path

    def check_resume_budget(self) -> None:
        """After :meth:`restore`: refuse a budget below the checkpoint's step (``UserError``)
        and report a run that has nothing left to do (``AlreadyFinished``)."""
        check_budget(self.settings.total_steps, self.clock.step, self.restored, self.run_dir,
                     outputs_behind(self.members) == ([], []))
