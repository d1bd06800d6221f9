"""A launch's seed group on disk: the run dir of each seed (``seeds=K``; a single run is a group
of one), locked; for a new group the other members' dirs and ``.hydra`` files, ``group.json``
last; for a resumed group its members checked, and the lost ones rebuilt from the group's
checkpoint (``rebuild_members``).

``rlzoo.store.group`` reads and writes ``group.json``; this module decides which dirs a launch
trains into and cleans up what a launch that never trained made (docs/seeds.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlzoo.config.settings import seed_range
from rlzoo.errors import UserError, one_line, resume_command
from rlzoo.store.bounded import load_yaml, read_text
from rlzoo.store.group import GROUP_FILE, SeedGroup, check_members, member_dir, run_group
from rlzoo.store.rundir import (
    LOCK_NAME,
    RunLock,
    check_run_files,
    claim_new_dir,
    holds_a_run,
    remove_if_created,
)
from rlzoo.store.writer import make_dir, write_atomic


def saved_config(run_dir: Path) -> DictConfig:
    """``run_dir/.hydra/config.yaml`` as saved, read at bounded cost
    (:func:`rlzoo.store.bounded.load_yaml`: a regular file, no link followed, no aliases); a file
    that cannot be read is one ``UserError`` line."""
    path = run_dir / ".hydra" / "config.yaml"
    try:
        config = load_yaml(path)
    except Exception as err:  # noqa: BLE001 - BoundError, OSError, yaml's errors
        raise UserError(f"cannot read {path} ({one_line(err, 160)}); restore the run's "
                        ".hydra files from a copy of it") from None
    if not isinstance(config, DictConfig):
        raise UserError(f"{path} is not a mapping; restore the run's .hydra files")
    return config


def read_saved(path: Path) -> str:
    """A ``.hydra`` file's text (:func:`rlzoo.store.bounded.read_text`), or one ``UserError``
    line."""
    try:
        return read_text(path)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {path} ({one_line(err, 160)}); restore the run's "
                        ".hydra files from a copy of it") from None


def discard_unstarted(run_dir: Path) -> None:
    """Remove the run dir of a launch that failed before training started, if this launch made
    it: a run that never started leaves nothing behind."""
    if not holds_a_run(run_dir):
        remove_if_created(run_dir)


def group_dirs(cfg: DictConfig, run_dir: Path, resume: bool,
               rebuild: bool = False) -> tuple[list[Path], list[Path]]:
    """The run dir of each seed (``seeds=K``), locked, and the members to rebuild once the
    checkpoint is loaded (``rebuild``: resume only). For a new group the other seeds' dirs are
    made beside ``run_dir`` (the first seed's) with their own ``.hydra`` files, and
    ``group.json`` last (``rlzoo.store.group``). A resumed group is checked first: its
    ``group.json`` and every member's config (:func:`rlzoo.store.group.check_members`)."""
    seed0, seeds = seed_range(cfg)
    if resume:
        group = run_group(run_dir)
        check_members(group, (run_dir,))  # a seeds=K member without group.json says so
        if len(group.dirs) != seeds:
            raise UserError(f"{run_dir} has seeds={seeds} but its group.json names "
                            f"{len(group.dirs)} members; restore group.json from another member's "
                            "dir (a single run's naming other dirs is stale: remove it)")
        return resume_members(group, rebuild)
    # a fresh launch into a dir that holds no run: a group.json there is stale (a launch
    # stopped before training); it must not tie this run to another group
    (run_dir / GROUP_FILE).unlink(missing_ok=True)
    dirs = [run_dir]
    try:
        for k in range(1, seeds):
            # a name another launch took (a live run included) is numbered: group.json says
            dirs.append(claim_member_dir(member_dir(run_dir, seed0, seed0 + k)))
            RunLock.acquire(dirs[-1])
        group = SeedGroup(run_dir, tuple(dirs), tuple(seed0 + k for k in range(seeds)))
        for k in range(1, seeds):
            write_member_config(group, k)
        group.write()  # last: a group.json always names members whose configs exist
    except BaseException:
        release_members(dirs[1:], discard=True)
        raise
    return dirs, []


def resume_members(group: SeedGroup, rebuild: bool) -> tuple[list[Path], list[Path]]:
    """A resumed group's dirs, checked and locked, and the lost members to rebuild."""
    lost = [d for d in group.dirs[1:] if not d.exists() and not d.is_symlink()]
    odd = [d for d in group.dirs if d not in lost and not (d / ".hydra" / "config.yaml").is_file()]
    if odd:
        raise UserError(f"the seed group's run dir {odd[0]} has no .hydra/config.yaml; restore it "
                        "from a copy of the run (or remove that dir and resume with "
                        "rebuild_members=true)")
    for d in group.dirs:
        if d not in lost:
            check_run_files(d)  # before anything is written into any member
    check_members(group, tuple(d for d in group.dirs if d not in lost))
    if lost and not rebuild:
        names = ", ".join(str(d) for d in lost)
        raise UserError(
            f"the seed group's run dirs {names} are missing; put them back beside {group.home}, or "
            f"rebuild them from the group's checkpoint, which holds every seed: "
            f"{resume_command(group.home, 'rebuild_members=true')} (their curves before the "
            "checkpoint are lost)")
    for d in group.dirs:
        if d not in lost:
            RunLock.acquire(d)
    return list(group.dirs), lost


def rebuild_members(group: SeedGroup, lost: list[Path]) -> None:
    """Make the lost members' run dirs again (after the checkpoint was loaded): their
    ``.hydra`` files from the home's with their own seed, and ``group.json``; the resumed run
    then writes their ``policy.pt``, events and ``summary.json`` as it writes every member's."""
    for d in lost:
        d.mkdir()
        RunLock.acquire(d)
        write_member_config(group, group.dirs.index(d))
    group.write(tuple(lost))


def write_member_config(group: SeedGroup, k: int) -> None:
    """Member ``k``'s ``.hydra`` files: the home's, with ``seed`` set to its seed."""
    saved, d = group.home / ".hydra", group.dirs[k]
    make_dir(d / ".hydra", root=d)  # never through a link
    config = saved_config(group.home)
    OmegaConf.update(config, "seed", group.seeds[k], merge=False)
    write_atomic(d / ".hydra" / "config.yaml", OmegaConf.to_yaml(config), root=d)
    for name in ("hydra.yaml", "overrides.yaml"):
        if (saved / name).is_file():
            write_atomic(d / ".hydra" / name, read_saved(saved / name), root=d)


def claim_member_dir(path: Path) -> Path:
    """``path`` for a new member, made by this launch; an unstarted leftover there (a launch
    stopped before training: :func:`unstarted_leftover`) is cleared and reused rather than
    numbered around; otherwise a name another run holds is numbered (``claim_new_dir``)."""
    if unstarted_leftover(path):
        shutil.rmtree(path)
    return claim_new_dir(path)


# What a launch writes into a run dir before its first checkpoint.
UNSTARTED_FILES = (".hydra", LOCK_NAME, GROUP_FILE, "train.log", "checkpoints")


def unstarted_leftover(path: Path) -> bool:
    """Whether ``path`` is a folder left by a launch that never trained: not a link, not held
    by a live process, no checkpoint or summary, and nothing in it but what such a launch
    writes (``.hydra/``, the lock, ``group.json``, ``train.log``, TensorBoard events, an empty
    ``checkpoints/``)."""
    if path.is_symlink() or not path.is_dir() or holds_a_run(path):
        return False
    try:
        RunLock.check_free(path)
    except UserError:
        return False
    for entry in path.iterdir():
        if entry.name == "checkpoints" and (entry.is_symlink() or not entry.is_dir()
                                            or any(entry.iterdir())):
            return False
        if entry.name not in UNSTARTED_FILES and not entry.name.startswith("events.out.tfevents."):
            return False
    return True


def release_members(dirs: list[Path], discard: bool = False) -> None:
    """Unlock the other seeds' dirs (and remove them when they hold no run, if ``discard``)."""
    for d in dirs:
        RunLock.release_held(d)
        if discard:
            discard_unstarted(d)
