"""The weights ``python -m rlzoo.evaluate`` evaluates: a run's newest checkpoint (or the one
given), refused when it belongs to another run shape, read without running code from it
(memory-mapped, so its replay buffer is never read), its weights checked to be finite, and a seed
group's checkpoint sliced to this seed's weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlzoo.config.settings import seed_range
from rlzoo.errors import UserError, one_line
from rlzoo.run.saved_state import has_seed_axis
from rlzoo.run.seed_layout import with_seed_axis
from rlzoo.run.signals import NonFiniteError
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from rlzoo.store.group import check_members, run_group
from rlzoo.store.nonfinite import describe_nonfinite, nonfinite_entries
from rlzoo.store.rundir import RunLock


def run_weights(run_dir: Path, cfg: DictConfig,
                checkpoint: Path | None) -> tuple[Path, dict[str, Any], int]:
    """The checkpoint to evaluate ``run_dir`` with (``checkpoint``, else the newest of the run's,
    a seed group's in its first seed's dir), this run's ``algo`` state in it (a seed group's
    member: this seed's slice) and its env step; ``UserError`` or ``NonFiniteError``."""
    group = run_group(run_dir)  # the checkpoints are the first seed's dir's
    check_members(group, (run_dir, group.home))
    seeds_in_config = seed_range(cfg)[1]  # read (and checked) as training reads it
    if seeds_in_config != len(group.dirs):
        raise UserError(f"{run_dir / 'group.json'} names a {len(group.dirs)}-seed group, but "
                        f"the run's config has seeds={seeds_in_config}; restore the files "
                        "rlzoo.train wrote")
    ckpt = find_checkpoint(group.home, checkpoint)
    index = group.index(run_dir)
    algo_state, step = load_algo_state(ckpt, cfg, group.seeds, index)
    try:  # this seed's weights of the group's
        algo_state = group.member_state(algo_state, index)
    except (KeyError, IndexError, TypeError, RuntimeError) as err:
        raise UserError(f"checkpoint {ckpt} does not hold this group's weights "
                        f"({type(err).__name__}: {one_line(str(err), 100)}); pass a "
                        "checkpoint of this run with --checkpoint PATH") from None
    return ckpt, algo_state, step


def find_checkpoint(run_dir: Path, checkpoint: Path | None) -> Path:
    """``checkpoint`` if given (must exist), else the newest ``RUN_DIR/checkpoints/step_*.pt``."""
    if checkpoint is not None:
        if checkpoint.exists() and not checkpoint.is_file():
            raise UserError(f"checkpoint {checkpoint} is not a regular file (a directory, FIFO or "
                            "device), so it is not read; pass a checkpoint file with "
                            "--checkpoint PATH")
        if not checkpoint.is_file():
            raise UserError(f"checkpoint {checkpoint} does not exist; check --checkpoint PATH")
        return checkpoint
    found = list_checkpoints(run_dir / "checkpoints")
    owner = RunLock.owner(run_dir)
    if not found and owner is not None:
        raise UserError(
            f"no checkpoint in {run_dir / 'checkpoints'} yet: the run is still training (pid "
            f"{owner}) and writes its first checkpoint after checkpoint.every steps; evaluate it "
            "once that is written")
    if not found:
        raise UserError(
            f"no checkpoint in {run_dir / 'checkpoints'}; a run saves one when it finishes (and "
            "every checkpoint.every steps): let it finish, or pass --checkpoint PATH"
        )
    return found[-1]


def check_fits(state: dict[str, Any], path: Path, cfg: DictConfig, seeds: tuple[int, ...],
               index: int) -> None:
    """Refuse a checkpoint of another run shape before its weights are used: another algo or
    env, or another number of seeds or other seeds than the run's (``seeds``: the group's, or
    the run's one seed; ``index``: this run's place in them)."""
    fix = "pass a checkpoint of this run with --checkpoint PATH"
    for key, mine in (("algo_name", cfg.algo.name), ("env_name", cfg.env.name)):
        if key in state and state[key] != mine:
            what = key.split("_")[0]
            raise UserError(f"checkpoint {path} was written by {what}={state[key]}, but this run "
                            f"is {what}={mine}; {fix}")
    members = state.get("members")
    saved = [part.get("seed") if isinstance(part, dict) else None for part in members] \
        if isinstance(members, list) else [seeds[0]]  # a single run's: any seed may act
    if len(saved) != len(seeds) or saved[index] != seeds[index]:
        held = f"{len(saved)} seeds ({', '.join(map(str, saved))})" if len(saved) > 1 \
            else "one seed"
        mine = f"seed {seeds[index]} of a {len(seeds)}-seed group" if len(seeds) > 1 \
            else "a single run"
        raise UserError(f"checkpoint {path} holds {held}, but this run is {mine}; {fix}")


def load_algo_state(path: Path, cfg: DictConfig | None = None, seeds: tuple[int, ...] = (),
                    index: int = 0) -> tuple[dict[str, Any], int]:
    """The ``algo`` state and the env step of a checkpoint (memory-mapped, CPU tensors),
    checked against the run (:func:`check_fits`) when ``cfg`` is given.

    Raises ``NonFiniteError`` when a float tensor of the algorithm state (networks, optimizers,
    tuner) holds NaN or inf: such weights cannot be evaluated meaningfully."""
    try:
        state = load_checkpoint(path, map_location="cpu", mmap=True)
        if cfg is not None:
            check_fits(state, path, cfg, seeds, index)
        algo_state, step = state["algo"], state.get("counters", {}).get("step")
        if type(step) is not int or not 0 <= step <= 2**53:
            raise ValueError(f"its env step counters.step={step!r} is not an integer in "
                             "[0, 2**53]")
        if not has_seed_axis(state):  # a single run's before format 3: given its axis of 1
            algo_state = with_seed_axis(algo_state)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds on a bad file
        reason = one_line(f"{type(err).__name__}: {err}")
        raise UserError(
            f"cannot read checkpoint {path} ({reason}); pass an intact one with "
            "--checkpoint PATH (checkpoints/ keeps the newest checkpoint.keep files)"
        ) from None
    bad = nonfinite_entries({"algo": algo_state})
    if bad:
        raise NonFiniteError(
            f"the weights of checkpoint {path} (step {step}) are not finite: NaN or inf in "
            f"{describe_nonfinite(bad)}; evaluate an earlier checkpoint of the run with "
            "--checkpoint PATH"
        )
    return algo_state, step
