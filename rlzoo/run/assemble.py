"""Build a run's parts from its config: one :class:`~rlzoo.run.member.Member` per seed (its envs
and warm-up generator), the one storage of them all (``[K, ...]``) and the one algorithm that
trains them all (``seeds=K``: K seeds stacked by ``rlzoo.algos.seed_axis.stack_seeds``; one
seed: the algorithm as built)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutBuffer
from rlzoo.config.build import (
    build_algorithm,
    check_spec,
    env_spec,
    make_train_env,
)
from rlzoo.config.normalization import check_observations
from rlzoo.config.settings import Settings
from rlzoo.config.storage import make_storage
from rlzoo.config.threads import ThreadTuner, run_threads, same_on_counts, thread_tuner
from rlzoo.errors import UserError
from rlzoo.run.accel import check_accel
from rlzoo.run.logger import Logger
from rlzoo.run.member import Member
from rlzoo.store.extras import seed_everything


def set_threads(s: Settings) -> None:
    """Apply ``torch_threads`` (CPU runs; ``rlzoo.config.threads.run_threads``)."""
    threads = run_threads(s.torch_threads)
    if s.device.type == "cpu" and threads:
        torch.set_num_threads(threads)


def thread_tuner_for(s: Settings) -> ThreadTuner | None:
    """``torch_threads=auto``, off-policy, on CPU: a tuner that keeps the faster of 1 thread and
    torch's own count as the run trains (``rlzoo.config.threads.ThreadTuner``); else None."""
    return thread_tuner(s.torch_threads, s.device.type == "cpu" and not s.on_policy,
                        torch.get_num_threads(), torch.set_num_threads)


def enter_threads(tuner: ThreadTuner, algo: Algorithm, update: Callable[[Any], Any],
                  batch: Any, logger: Logger | None, compiled: bool) -> bool:
    """Before an update under ``torch_threads=auto``: the first time in this process, whether
    ``update(batch)`` (an update of ``algo``; ``batch`` ``[K, B, ...]``) gives the same numbers
    on every count ``tuner`` may pick (``rlzoo.config.threads.same_on_counts``, ``algo`` put back
    after; not checked when ``compiled``: one thread then), with a one-line note on
    ``logger`` when not; then the update's count (``ThreadTuner.enter``). Returns whether it
    checked now."""
    checked = tuner.same is None
    if checked:
        same = not compiled and same_on_counts(update, algo, batch, tuner.choices,
                                               forked=algo.seed_axis.forked)
        tuner.decide(same)
        if not same and logger is not None:
            logger.announce(
                "note: torch_threads=auto: this run's updates are not bit-identical on 1 and "
                f"{tuner.choices[1]} threads here, so they run on 1 thread "
                "(rlzoo/config/threads.py); "
                "torch_threads=N sets a fixed count")
    tuner.enter()
    return checked


def threads_record(tuner: ThreadTuner | None, s: Settings) -> dict[str, Any]:
    """The torch threads of this process's updates, for summary.json and checkpoints
    (``ThreadTuner.record``; a fixed count: torch's count now)."""
    if tuner is not None:
        return tuner.record()
    return {"setting": s.torch_threads, "updates_on": [torch.get_num_threads()]}


def with_seed(cfg: DictConfig, seed: int) -> DictConfig:
    """``cfg`` with its ``seed`` set to ``seed`` (a copy; ``cfg`` itself when equal)."""
    if cfg.get("seed") == seed:
        return cfg
    copy = cfg.copy()
    OmegaConf.update(copy, "seed", seed, merge=False)
    return copy


def build_members(cfg: DictConfig, s: Settings, dirs: list[Path]
                  ) -> tuple[list[Member], Algorithm, EnvSpec, ReplayBuffer | RolloutBuffer]:
    """The members of seeds ``s.seed .. s.seed + K - 1`` (run dir ``dirs[k]`` each), the
    algorithm that trains them (every seed's weights initialised as its single run's), the
    env spec and the storage of them all (member k's part: its buffer k).
    Closes every env built when anything fails (a ``UserError`` for a mistake)."""
    if len(dirs) != s.seeds:
        raise ValueError(f"{s.seeds} seeds need {s.seeds} run dirs, got {len(dirs)}")
    seed_everything(s.seed)
    members: list[Member] = []
    try:
        algos, spec = [], None
        for k, member_dir in enumerate(dirs):
            seed = s.seed + k
            member_cfg = with_seed(cfg, seed)
            if k:
                seed_everything(seed)  # each seed's weights start as its single run's
            env = make_train_env(member_cfg, s, seed)
            members.append(Member(seed, member_cfg, member_dir, env, k,
                                  None, np.random.default_rng(seed)))  # type: ignore[arg-type]
            spec = env_spec(env)
            check_spec(spec, s.env_name)
            check_observations(env, s.normalize, s.env_name)
            algos.append(build_algorithm(member_cfg, spec, s.device, s.normalize))
            if s.seeds > 1 and s.device.type == "cpu" and s.seed_kernels == "exact":
                # its single run draws on from here
                members[-1].draws = torch.Generator().set_state(torch.get_rng_state())
        draws = [m.draws for m in members if m.draws is not None]
        algo = stack_seeds(check_algorithm(algos, s), draws or None)
        storage = make_storage(s, spec, algo, [m.seed for m in members])
        for member in members:
            member.storage = storage
    except BaseException:
        for member in members:
            member.env.close()
        raise
    assert spec is not None
    return members, algo, spec, storage


def check_algorithm(algos: list[Any], s: Settings) -> list[Any]:
    """Refuse what the loop cannot train (one ``UserError`` line): on-policy action chunks, an
    acceleration the run cannot use."""
    horizon = algos[0].action_horizon
    if s.on_policy and horizon != 1:
        raise UserError(f"algo={s.algo_name} is on-policy and acts in chunks of "
                        f"{horizon} actions; on-policy rollouts need single actions")
    check_accel(s.compile, s.cudagraphs, s.device, type(algos[0]), s.algo_name)
    return algos
