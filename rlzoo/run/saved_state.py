"""What a run's checkpoint holds, and how it comes back: one layout for every run.

A checkpoint is ``{format, algo_name, env_name, config, algo, counters, members, rng}``:
``algo`` the algorithm's state (``rlzoo.run.seed_layout.saved_state``: module weights and optimizer
moments with a leading seed axis, ``[K, ...]``, a single run's ``[1, ...]``), ``counters`` the
loop's clock (``step``: the slowest seed's, ``update_credit``, ``wall_time``), ``members`` one
entry per seed (its ``seed``, ``buffer``, ``env``, ``loop`` arrays, ``counters``: ``step``,
``episodes``, ``last_eval``, its ``warmup`` generator and, in a group on the CPU, its ``draws``
generator: ``rlzoo.run.member.Member.draws``) and ``rng`` the process's global generators. A
single run is a group of one.

Checkpoints written before the one layout kept a single run's ``buffer``, ``env`` and ``loop``
at the top, its counters beside the clock and its warm-up generator in ``rng``;
:func:`saved_members` reads them as a group of one. Before format 3 a single run's ``algo`` had
no seed axis (:func:`has_seed_axis`); such checkpoints still resume and evaluate.

What a resume checks before anything of a checkpoint is used, and how it falls back to the
previous checkpoint, is ``rlzoo.run.restore``'s; the counters' checks are here
(:func:`check_run_state`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.base import Algorithm
from rlzoo.run.member import Member
from rlzoo.run.seed_layout import saved_state
from rlzoo.run.signals import NonFiniteError
from rlzoo.store.extras import check_global_rng, global_rng_state
from rlzoo.store.nonfinite import describe_nonfinite, nonfinite_entries
from rlzoo.store.state_match import StateMismatch, check_count, match_tensor

STATE_FORMAT = 3  # 1: a single run's parts at the top (read as a group of one)
# 2: a single run's algorithm state without the seed axis (a group's had it)
SEED_AXIS_FORMAT = 3  # from it on, every run's algorithm state has the seed axis


@dataclass
class Clock:
    """The loop's own counters: ``step`` (env steps of the slowest seed), ``update_credit``
    (updates owed, fractional) and ``wall_time`` (seconds in ``train()``, over resumes)."""

    step: int = 0
    update_credit: float = 0.0
    wall_time: float = 0.0

    def earn(self, utd: float, before: int, after: int) -> None:
        """Add the updates earned from ``before`` to ``after`` env steps past the warm-up
        (summed over envs) at ``utd`` updates per env step, so that a run makes exactly
        ``int(utd x steps past the warm-up)`` updates in all, whatever the vector step: the
        whole part counted as ``floor(utd x after) - floor(utd x before)`` (summing
        ``utd x delta`` in floats drifts: 0.3 x 3 added 70 times makes 62, not 63), the credit
        kept as the owed whole updates plus ``utd x after``'s fraction (the same float as
        ``credit + utd x delta`` when that sum is exact: integer or binary-fraction ``utd``)."""
        # updates a signal cut short (none after steps dropped before an H-step window fits)
        owed = max(0, round(self.update_credit - _fraction(utd * before)))
        self.update_credit = (owed + math.floor(utd * after) - math.floor(utd * before)
                              + _fraction(utd * after))


def _fraction(x: float) -> float:
    """``x - floor(x)``, in ``[0, 1)``."""
    return x - math.floor(x)


def member_state(m: Member) -> dict[str, Any]:
    """One seed's part of a checkpoint (``draws``: its policy's generator, in a CPU group)."""
    part: dict[str, Any] = {
        "seed": m.seed,
        "buffer": m.storage.state_dict(m.index),
        "env": m.env.get_state(),
        "loop": m.loop_state(),
        "counters": {"step": m.step, "episodes": m.episodes,
                     "last_eval": list(m.last_eval) if m.last_eval else None},
        "warmup": m.rng.bit_generator.state,
    }
    if m.draws is not None:
        part["draws"] = m.draws.get_state()
    return part


def run_state(cfg: DictConfig, algo: Algorithm, clock: Clock,
              members: list[Member]) -> dict[str, Any]:
    """Everything needed to continue bit-identically, as tensors and plain data only
    (loadable with ``weights_only=True``); see the module docstring."""
    return {
        "format": STATE_FORMAT,
        "algo_name": str(cfg.algo.name),
        "env_name": str(cfg.env.name),
        "config": OmegaConf.to_container(cfg, resolve=True),
        "algo": saved_state(algo),
        "counters": {"step": clock.step, "update_credit": clock.update_credit,
                     "wall_time": clock.wall_time},
        "members": [member_state(m) for m in members],
        "rng": global_rng_state(),
    }


def checked_state(cfg: DictConfig, algo: Algorithm, clock: Clock, members: list[Member],
                  where: Callable[[], str]) -> dict[str, Any]:
    """:func:`run_state`, refused (``NonFiniteError``, one line; ``where()``: the checkpoint to
    go back to) when anything in it is NaN or inf: every checkpoint kept is one to resume."""
    state = run_state(cfg, algo, clock, members)
    poisoned = nonfinite_entries(state)
    if poisoned:
        raise NonFiniteError(
            f"NaN or inf in {describe_nonfinite(poisoned)} at step {clock.step}; no checkpoint "
            f"was written and {where()} (lower the learning rates or check the env)"
        )
    return state


def saved_members(state: dict[str, Any], seed: int) -> list[Any]:
    """The ``members`` of a checkpoint; one of a checkpoint from before the one layout (a single
    run's parts at the top; ``seed``: its seed when its config has none)."""
    if "members" in state:
        return state["members"]
    return [{"seed": (state.get("config") or {}).get("seed", seed), "buffer": state["buffer"],
             "env": state["env"], "loop": state["loop"], "counters": state["counters"],
             "warmup": state["rng"]["warmup"]}]


def has_seed_axis(state: dict[str, Any]) -> bool:
    """Whether a checkpoint's algorithm state has the seed axis first: every one from format
    3 on, and a seed group's before (a single run's before format 3 did not)."""
    fmt = state.get("format")
    if isinstance(fmt, bool) or not isinstance(fmt, int) or not 1 <= fmt <= STATE_FORMAT:
        raise ValueError(f"checkpoint format {fmt!r} is none this rlzoo reads (1 to "
                         f"{STATE_FORMAT})")
    members = state.get("members")
    return fmt >= SEED_AXIS_FORMAT or (isinstance(members, list) and len(members) > 1)


def load_member_state(m: Member, part: dict[str, Any]) -> None:
    """Put back :func:`member_state` (after the envs' first reset)."""
    m.storage.load_state_dict(part["buffer"], m.index)
    m.env.set_state(part["env"])
    m.load_loop_state(part["loop"])
    counters = part["counters"]
    m.step = int(counters["step"])
    m.episodes = int(counters["episodes"])
    last_eval = counters.get("last_eval")
    m.last_eval = (float(last_eval[0]), float(last_eval[1])) if last_eval else None
    if "warmup" in part:
        m.rng.bit_generator.state = part["warmup"]
    if m.draws is not None and "draws" in part:  # a group's checkpoint from before: as built
        m.draws.set_state(part["draws"])


MAX_STEP = 2**53  # env steps: a counter beyond this is no run's


def _number(value: Any, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 <= value <= high:
        raise StateMismatch(f"{name}={value!r} is not a finite number in [0, {high:g}]")
    return float(value)


def check_run_state(state: dict[str, Any], seed: int, credit_limit: float,
                    update_limit: Callable[[int], int] | None = None,
                    loaded_on: str | None = None) -> None:
    """Refuse a checkpoint's counters no run could have written, before anything of it is used
    (``StateMismatch``, a ``ValueError``, naming the first): ``counters.step`` an integer in
    ``[0, 2**53]`` equal to the slowest member's ``step``; ``update_credit`` finite in
    ``[0, credit_limit]`` (updates owed: at most ``utd * num_envs`` plus one); ``wall_time``
    finite and non-negative; the algorithm's ``updates`` an integer in
    ``[0, update_limit(step)]`` (the most updates a run makes by that env step); each member's
    ``episodes`` at most its ``step``, its ``last_eval`` two finite numbers or none, its replay
    buffer's ``head`` (transitions ever stored) at most its ``step``, its ``draws`` a torch
    generator state; the global generators' states as this process's
    (``rlzoo.store.extras.check_global_rng``; ``loaded_on``: the device kind the file was mapped
    to)."""
    counters = state.get("counters")
    if not isinstance(counters, dict):
        raise StateMismatch("counters is not a mapping")
    step = check_count(counters.get("step"), "counters.step", MAX_STEP)
    _number(counters.get("update_credit"), "counters.update_credit", credit_limit)
    _number(counters.get("wall_time", 0.0), "counters.wall_time", 1e12)
    algo = state.get("algo")
    most = update_limit(step) if update_limit is not None else MAX_STEP
    updates = check_count(algo.get("updates") if isinstance(algo, dict) else None,
                          "algo.updates", MAX_STEP)
    if updates > most:
        raise StateMismatch(f"algo.updates={updates:,} is more than the {most:,} updates this "
                            f"run makes by env step {step:,}")
    steps = []
    for k, part in enumerate(saved_members(state, seed)):
        mine = part.get("counters") if isinstance(part, dict) else None
        if not isinstance(mine, dict):
            raise StateMismatch(f"members.{k}.counters is not a mapping")
        m_step = check_count(mine.get("step"), f"members.{k}.counters.step", MAX_STEP)
        check_count(mine.get("episodes"), f"members.{k}.counters.episodes", m_step)
        last = mine.get("last_eval")
        if last is not None and (not isinstance(last, (list, tuple)) or len(last) != 2 or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                for x in last)):
            raise StateMismatch(f"members.{k}.counters.last_eval={last!r} is not two finite "
                                "numbers")
        buffer = part.get("buffer")
        if isinstance(buffer, dict) and "head" in buffer:
            check_count(buffer["head"], f"members.{k}.buffer.head", m_step)
        if part.get("draws") is not None:  # a CPU group's per-seed generator
            match_tensor(part["draws"], torch.get_rng_state(), f"members.{k}.draws",
                         loaded_on=loaded_on)
        steps.append(m_step)
    if steps and step != min(steps):
        raise StateMismatch(f"counters.step={step} is not the slowest member's step "
                            f"{min(steps)}")
    check_global_rng(state.get("rng"), loaded_on)
