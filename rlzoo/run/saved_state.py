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
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.base import Algorithm
from rlzoo.errors import UserError, one_line
from rlzoo.run.checkpoint import (
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
    load_latest_valid,
)
from rlzoo.run.finite import describe_nonfinite, nonfinite_entries
from rlzoo.run.member import Member
from rlzoo.run.seed_layout import load_saved_state, saved_state
from rlzoo.run.signals import AlreadyFinished, NonFiniteError
from rlzoo.run.state import check_global_rng, global_rng_state, restore_global_rng

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


def read_latest(checkpoint_dir: Path, cfg: DictConfig, members: list[Member],
                device: torch.device) -> tuple[Path, dict[str, Any]]:
    """The newest valid checkpoint of ``checkpoint_dir`` (older ones on failure, with one
    ``rlzoo: warning:`` line each), checked to be this run's: its algo, env, and seeds.
    Raises ``UserError`` if none fits."""
    try:
        with warnings.catch_warnings(record=True) as skipped:
            warnings.simplefilter("always")
            try:
                path, state = load_latest_valid(checkpoint_dir, device)
            finally:
                for warning in skipped:  # one rlzoo line per checkpoint skipped
                    print(f"rlzoo: warning: {warning.message}", file=sys.stderr, flush=True)
    except CheckpointError as err:
        raise UserError(f"cannot resume: {err}; start a new run instead") from None
    for key, mine in (("algo_name", cfg.algo.name), ("env_name", cfg.env.name)):
        if state.get(key) != mine:
            raise UserError(
                f"cannot resume: {path} was written by {key.split('_')[0]}={state.get(key)}, "
                f"but this run is {key.split('_')[0]}={mine}; point resume= at its own run dir"
            )
    parts = saved_members(state, members[0].seed)
    if len(parts) != len(members):
        raise UserError(f"cannot resume: {path} holds {len(parts)} seeds, this run has "
                        f"{len(members)}; point resume= at its own run dir")
    saved = [part.get("seed") if isinstance(part, dict) else None for part in parts]
    if saved != [m.seed for m in members]:
        raise UserError(
            f"cannot resume: {path} holds seed{'s' if len(members) > 1 else ''} "
            f"{', '.join(map(str, saved))}, but this run's config and group.json say "
            f"{', '.join(str(m.seed) for m in members)}; point resume= at the run dir "
            "the checkpoint belongs to")
    return path, state


MAX_STEP = 2**53  # env steps: a counter beyond this is no run's


def _integer(value: Any, name: str, high: int = MAX_STEP) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise ValueError(f"{name}={value!r} is not an integer in [0, {high:,}]")
    return value


def _number(value: Any, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 <= value <= high:
        raise ValueError(f"{name}={value!r} is not a finite number in [0, {high:g}]")
    return float(value)


def check_run_state(state: dict[str, Any], seed: int, credit_limit: float) -> None:
    """Refuse a checkpoint's counters no run could have written, before anything of it is used
    (``ValueError`` naming the first): ``counters.step`` an integer in ``[0, 2**53]`` equal to
    the slowest member's ``step``; ``update_credit`` finite in ``[0, credit_limit]`` (updates
    owed: at most ``utd * num_envs`` plus one); ``wall_time`` finite and non-negative; each
    member's ``episodes`` at most its ``step``, its ``last_eval`` two finite numbers or none,
    its replay buffer's ``head`` (transitions ever stored) at most its ``step``, its ``draws``
    a torch generator state; the global generators' states of their sizes
    (``rlzoo.run.state.check_global_rng``)."""
    counters = state.get("counters")
    if not isinstance(counters, dict):
        raise ValueError("counters is not a mapping")
    step = _integer(counters.get("step"), "counters.step")
    _number(counters.get("update_credit"), "counters.update_credit", credit_limit)
    _number(counters.get("wall_time", 0.0), "counters.wall_time", 1e12)
    steps = []
    for k, part in enumerate(saved_members(state, seed)):
        mine = part.get("counters") if isinstance(part, dict) else None
        if not isinstance(mine, dict):
            raise ValueError(f"members.{k}.counters is not a mapping")
        m_step = _integer(mine.get("step"), f"members.{k}.counters.step")
        _integer(mine.get("episodes"), f"members.{k}.counters.episodes", m_step)
        last = mine.get("last_eval")
        if last is not None and (not isinstance(last, (list, tuple)) or len(last) != 2 or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                for x in last)):
            raise ValueError(f"members.{k}.counters.last_eval={last!r} is not two finite numbers")
        buffer = part.get("buffer")
        if isinstance(buffer, dict) and "head" in buffer:
            _integer(buffer["head"], f"members.{k}.buffer.head", m_step)
        draws = part.get("draws")  # a CPU group's per-seed generator
        if draws is not None and not (torch.is_tensor(draws) and draws.dtype == torch.uint8
                                      and draws.shape == torch.get_rng_state().shape):
            raise ValueError(f"members.{k}.draws is not a torch generator state")
        steps.append(m_step)
    if steps and step != min(steps):
        raise ValueError(f"counters.step={step} is not the slowest member's step {min(steps)}")
    check_global_rng(state.get("rng"))


def restore_latest(checkpoint_dir: Path, cfg: DictConfig, algo: Algorithm,
                   members: list[Member], device: torch.device, credit_limit: float,
                   reset: Callable[[], None]) -> tuple[Path, Clock]:
    """Put back the newest checkpoint of ``checkpoint_dir`` that loads, is finite, is this
    run's (:func:`read_latest`'s checks), passes :func:`check_run_state` and every component's
    own checks while loading; any failure skips it with one ``rlzoo: warning:`` line and tries
    the previous one (``reset()``, the envs' first reset, runs before each try). Returns the
    checkpoint and the loop's clock; ``UserError`` if none can be used (a checkpoint of another
    run: that message)."""
    found = list_checkpoints(checkpoint_dir)
    if not found:
        raise UserError(f"cannot resume: no checkpoint in {checkpoint_dir}; start a new run "
                        "instead")
    first: UserError | None = None
    foreign = unreadable = poisoned = 0
    for path in reversed(found):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                state = load_checkpoint(path, device)
        except (Exception, MemoryError) as err:  # noqa: BLE001 - any failure: try the previous
            unreadable += 1
            reason = f"{err}" if isinstance(err, CheckpointError) \
                else f"{path}: {type(err).__name__}: {err}"
            print(f"rlzoo: warning: skipping {one_line(reason, 300)}; trying the previous "
                  "checkpoint", file=sys.stderr, flush=True)
            continue
        try:
            bad = nonfinite_entries(state)
            if bad:
                poisoned += 1
                raise CheckpointError(f"{path}: NaN or inf in {describe_nonfinite(bad)}")
            check_owner(path, state, cfg, members)
            check_run_state(state, members[0].seed, credit_limit)
            reset()
            return path, load_run_state(state, path, algo, members)
        except UserError as err:  # another run's checkpoint
            first, foreign = first or err, foreign + 1
            reason = str(err).removeprefix("cannot resume: ")
        except (Exception, MemoryError) as err:  # noqa: BLE001 - any failure: try the previous
            reason = one_line(f"{err}" if isinstance(err, CheckpointError)
                              else f"{path}: {type(err).__name__}: {err}", 300)
        print(f"rlzoo: warning: skipping {one_line(reason, 300)}; trying the previous "
              "checkpoint", file=sys.stderr, flush=True)
    if first is not None and foreign == len(found):
        raise first
    checked = len(found) - unreadable - poisoned - foreign
    raise UserError(f"cannot resume: none of the {len(found)} checkpoints in {checkpoint_dir} "
                    f"can be used ({unreadable} unreadable, {poisoned} holding NaN or inf, "
                    f"{foreign} of another run, {checked} failing their checks; each is named "
                    "above with its reason); start a new run instead")


def check_owner(path: Path, state: dict[str, Any], cfg: DictConfig,
                members: list[Member]) -> None:
    """``UserError`` unless ``state`` (of ``path``) is this run's: its algo, env and seeds."""
    for key, mine in (("algo_name", cfg.algo.name), ("env_name", cfg.env.name)):
        if state.get(key) != mine:
            raise UserError(
                f"cannot resume: {path} was written by {key.split('_')[0]}={state.get(key)}, "
                f"but this run is {key.split('_')[0]}={mine}; point resume= at its own run dir"
            )
    parts = saved_members(state, members[0].seed)
    if len(parts) != len(members):
        raise UserError(f"cannot resume: {path} holds {len(parts)} seeds, this run has "
                        f"{len(members)}; point resume= at its own run dir")
    saved = [part.get("seed") if isinstance(part, dict) else None for part in parts]
    if saved != [m.seed for m in members]:
        raise UserError(
            f"cannot resume: {path} holds seed{'s' if len(members) > 1 else ''} "
            f"{', '.join(map(str, saved))}, but this run's config and group.json say "
            f"{', '.join(str(m.seed) for m in members)}; point resume= at the run dir "
            "the checkpoint belongs to")


def load_run_state(state: dict[str, Any], path: Path, algo: Algorithm,
                   members: list[Member]) -> Clock:
    """Put a checkpoint (:func:`read_latest`) back into ``algo`` and ``members`` (whose envs
    had their first reset) and the global generators; returns the loop's clock."""
    try:
        load_saved_state(algo, state["algo"], has_seed_axis(state))
        for m, part in zip(members, saved_members(state, members[0].seed)):
            load_member_state(m, part)
    except (KeyError, ValueError, RuntimeError) as err:
        raise UserError(
            f"cannot resume from {path}: it does not match this run's config ({err})"
        ) from None
    counters = state["counters"]
    restore_global_rng(state["rng"])
    # the update count comes back with the algorithm
    return Clock(int(counters["step"]), float(counters["update_credit"]),
                 float(counters["wall_time"]))


def check_budget(total_steps: int, step: int, restored: Path | None, run_dir: Path,
                 outputs_current: bool) -> None:
    """After a restore at ``step``: refuse a ``total_steps`` below it (``UserError``) and report
    a run that has nothing left to do (``AlreadyFinished``: at its budget with every output of
    its step written, ``outputs_current``)."""
    if total_steps < step:
        raise UserError(
            f"total_steps={total_steps} is below step {step} of {restored}; a run "
            f"cannot go back: pass total_steps above {step} to train further"
        )
    if total_steps == step and outputs_current:
        raise AlreadyFinished(
            f"{run_dir} already finished at step {step} (total_steps={step}); nothing "
            f"was changed. To train further: python -m rlzoo.train resume={run_dir} "
            f"total_steps=N with N > {step}"
        )


def last_good_note(checkpoint_dir: Path, good: Path | None = None) -> str:
    """Where a stopped run can go back to, for a NaN/inf message: ``good`` (the checkpoint this
    process restored or wrote last; a newer file it skipped as unusable is not good), else the
    newest in ``checkpoint_dir`` (every checkpoint a run writes is finite)."""
    if good is not None:
        return f"the last good checkpoint is {good}"
    found = list_checkpoints(checkpoint_dir)
    return f"the last good checkpoint is {found[-1]}" if found else "no checkpoint was saved"
