"""Resuming a run: the newest checkpoint of its dir that is this run's and fits it, checked
whole before any of it is loaded (:func:`restore_latest`), and where a stopped run can go back
to (:func:`last_good_note`).

What a checkpoint must satisfy, in order, each failure skipping it for the previous one with one
``rlzoo: warning:`` line: it loads without running code (``rlzoo.store.checkpoint``); it holds no
NaN or inf; it is this run's (algo, env, seeds); its counters are integers in their ranges and
consistent with each other (``rlzoo.run.saved_state.check_run_state``); and every part fits the
live object it goes into (:func:`check_against_live`): the algorithm's weights, buffers, optimizer
moments and step counts (``rlzoo.algos.saved``), each seed's replay or rollout store and open
episodes. Only then is anything loaded; the envs' own state is checked by the envs as it goes
back.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlzoo.algos.base import Algorithm
from rlzoo.config.settings import Settings
from rlzoo.errors import UserError, one_line, resume_command
from rlzoo.run.member import Member
from rlzoo.run.saved_state import (
    Clock,
    check_run_state,
    has_seed_axis,
    load_member_state,
    saved_members,
)
from rlzoo.run.seed_layout import check_saved_state, load_saved_state
from rlzoo.run.signals import AlreadyFinished
from rlzoo.store.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from rlzoo.store.extras import restore_global_rng
from rlzoo.store.nonfinite import describe_nonfinite, nonfinite_entries
from rlzoo.store.state_match import StateMismatch


def _reason(path: Path, err: BaseException) -> str:
    """Why ``path`` was skipped, on one line: a check's own message names the file or entry."""
    if isinstance(err, CheckpointError):
        return one_line(err, 300)
    if isinstance(err, StateMismatch):
        return one_line(f"{path}: {err}", 300)
    return one_line(f"{path}: {type(err).__name__}: {err}", 300)


def restore_latest(checkpoint_dir: Path, algo: Algorithm,
                   members: list[Member], settings: Settings, reset: Callable[[], None],
                   skip: Sequence[Path] = ()) -> tuple[Path, Clock]:
    """Put back the newest checkpoint of ``checkpoint_dir`` (but those in ``skip``) that loads
    onto ``settings.device``, is finite, is this run's (:func:`check_owner`), passes
    ``rlzoo.run.saved_state.check_run_state`` (update credit at most ``utd x num_envs + 1``,
    updates at most :func:`most_updates`) and :func:`check_against_live`; any failure skips it
    with one ``rlzoo: warning:`` line and tries the previous one (``reset()``, the envs' first
    reset, runs before each fit check). Returns the checkpoint and the loop's clock;
    ``UserError`` if none can be used (a checkpoint of another run: that message)."""
    device, credit_limit = settings.device, settings.utd * settings.num_envs + 1.0
    found = [p for p in list_checkpoints(checkpoint_dir) if p not in skip]
    if not found:
        raise UserError(f"cannot resume: no checkpoint in {checkpoint_dir}"
                        + (" but those already tried" if skip else "")
                        + "; start a new run instead")
    first: UserError | None = None
    foreign = unreadable = poisoned = 0
    for path in reversed(found):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                state = load_checkpoint(path, device)
        except (Exception, MemoryError) as err:  # noqa: BLE001 - any failure: try the previous
            unreadable += 1
            print(f"rlzoo: warning: skipping a checkpoint: {_reason(path, err)}; trying the "
                  "previous checkpoint", file=sys.stderr, flush=True)
            continue
        try:
            bad = nonfinite_entries(state)
            if bad:
                poisoned += 1
                raise CheckpointError(f"{path}: NaN or inf in {describe_nonfinite(bad)}")
            check_owner(path, state, settings, members)
            check_run_state(state, members[0].seed, credit_limit,
                            lambda step: most_updates(settings, step), device.type)
            reset()
            check_against_live(state, algo, members)
            return path, load_run_state(state, path, algo, members)
        except UserError as err:  # another run's checkpoint
            first, foreign = first or err, foreign + 1
            reason = str(err).removeprefix("cannot resume: ")
        except (Exception, MemoryError) as err:  # noqa: BLE001 - any failure: try the previous
            reason = _reason(path, err)
        print(f"rlzoo: warning: skipping a checkpoint: {one_line(reason, 300)}; trying the "
              "previous checkpoint", file=sys.stderr, flush=True)
    if first is not None and foreign == len(found):
        raise first
    checked = len(found) - unreadable - poisoned - foreign
    raise UserError(f"cannot resume: none of the {len(found)} checkpoints in {checkpoint_dir} "
                    f"{'left ' if skip else ''}can be used ({unreadable} unreadable, {poisoned} "
                    f"holding NaN or inf, {foreign} of another run, {checked} failing their "
                    "checks; each is named above with its reason); start a new run instead")


def check_owner(path: Path, state: dict[str, Any], settings: Settings,
                members: list[Member]) -> None:
    """``UserError`` unless ``state`` (of ``path``) is this run's: its algo, env and seeds."""
    for key, mine in (("algo_name", settings.algo_name), ("env_name", settings.env_name)):
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


def check_against_live(state: dict[str, Any], algo: Algorithm, members: list[Member]) -> None:
    """Refuse (``StateMismatch`` or ``ValueError``, one line naming the entry) a checkpoint any
    part of which does not fit the live object it goes into, before any of it is loaded: the
    algorithm's state (``rlzoo.run.seed_layout.check_saved_state``: weights, buffers,
    normalizer statistics and tuner of exactly the live shapes and dtypes, optimizer moments
    of their parameters', step counts within the updates), every seed's part of the replay or
    rollout storage (``check_states``) and each seed's open episodes
    (``Member.check_loop_state``). Call after the envs' first reset."""
    check_saved_state(algo, state["algo"], has_seed_axis(state))
    parts = saved_members(state, members[0].seed)
    members[0].storage.check_states([part["buffer"] for part in parts])  # the one storage
    for k, (m, part) in enumerate(zip(members, parts)):
        m.check_loop_state(part["loop"], f"members.{k}.loop")


def load_run_state(state: dict[str, Any], path: Path, algo: Algorithm,
                   members: list[Member]) -> Clock:
    """Put a checked checkpoint (:func:`restore_latest`) back into ``algo`` and ``members``
    (whose envs had their first reset) and the global generators; returns the loop's clock."""
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
            f"was changed. To train further: {resume_command(run_dir)} total_steps=N with "
            f"N > {step}"
        )


def most_updates(settings: Settings, step: int) -> int:
    """The most updates a run of ``settings`` makes by env step ``step`` (of its slowest seed):
    off-policy ``utd`` per env step past the warm-up, on-policy one per full rollout of every
    env (``rollout_steps x num_envs`` env steps)."""
    s = settings
    if s.on_policy:
        return step // max(1, s.rollout_steps * s.num_envs)
    return math.floor(s.utd * max(0, step - s.learning_starts))


def suspect_checkpoint(checkpoint_dir: Path, restored: Path | None, good: Path | None,
                       skip: Sequence[Path] = ()) -> Path | None:
    """After NaN or inf: the checkpoint a resumed run restored (``restored``) when it wrote none
    since (``good`` is still it), so that checkpoint may hold the cause, and a checkpoint
    before it (not in ``skip``) is left to go back to; else ``None``."""
    if restored is None or good != restored:
        return None
    return restored if earlier_checkpoint(checkpoint_dir, restored, skip) is not None else None


def earlier_checkpoint(checkpoint_dir: Path, than: Path, skip: Sequence[Path] = ()) -> Path | None:
    """The newest checkpoint of ``checkpoint_dir`` older than ``than`` and not in ``skip``."""
    found = [p for p in list_checkpoints(checkpoint_dir) if p not in skip]
    older = found[:found.index(than)] if than in found else []
    return older[-1] if older else None


def last_good_note(checkpoint_dir: Path, good: Path | None = None,
                   restored: Path | None = None, skip: Sequence[Path] = ()) -> str:
    """Where a stopped run can go back to, for a NaN/inf message: ``good`` (the checkpoint this
    process restored or wrote last; a newer file it skipped as unusable is not good), else the
    newest in ``checkpoint_dir`` (every checkpoint a run writes is finite). When ``good`` is
    ``restored`` (the run resumed from it and wrote none since), that checkpoint may hold the
    cause: the note names it and the checkpoint before it (``skip``: those already tried), which
    ``rlzoo.launch.execute`` goes back to."""
    if good is not None and good == restored:
        before = earlier_checkpoint(checkpoint_dir, good, skip)
        then = (f"going back to {before}, the checkpoint before it" if before is not None
                else "no checkpoint before it is left to go back to")
        return (f"this run resumed from {good} and wrote no checkpoint since, so that "
                f"checkpoint may hold the cause; {then}")
    if good is not None:
        return f"the last good checkpoint is {good}"
    found = list_checkpoints(checkpoint_dir)
    return f"the last good checkpoint is {found[-1]}" if found else "no checkpoint was saved"
