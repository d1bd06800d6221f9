"""The checks of a resume (``resume=RUN_DIR`` or ``rlzoo.resume``) before anything runs, and
the options only a resume takes: which settings may change (:data:`RESUME_OPTIONS`),
``trust=[...]`` and ``rebuild_members=true``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.config.build import read_run_config
from rlzoo.errors import UserError, exit_with
from rlzoo.store.group import check_members, read_group
from rlzoo.store.rundir import RunLock, check_run_files

# What may change when a run is resumed: the budget and how it is shown. Anything else would make
# the continuation a different run.
RESUME_OPTIONS = ("total_steps", "log.progress", "log.progress_every_s")


def prepare_resume(
    run_dir: Path, overrides: list[str], trust: tuple[str, ...] = ()
) -> tuple[DictConfig, Path, dict[str, Any]]:
    """Check a resume before anything runs: the overrides (only :data:`RESUME_OPTIONS`), the
    run dir (any seed's dir of a group continues the group, from its first seed's, after this
    member's group.json was checked against the home's), its lock and its config (its
    ``_target_`` keys trusted). Returns the run's config with the resolved overrides merged in,
    the dir to continue and the resolved overrides; raises ``UserError``.
    """
    if run_dir.is_dir():  # a link where the run keeps its files: refused before any write
        check_run_files(run_dir)
    group = read_group(run_dir) if run_dir.is_dir() else None
    for d in group.dirs if group is not None else ():
        if d.is_dir() and not d.is_symlink():
            check_run_files(d)
    if group is not None and group.home != run_dir:
        check_members(group, (run_dir,))  # this member's group.json is the home's
    if group is not None:  # any seed's dir continues the whole group, from the first seed's
        if not group.home.is_dir():
            raise UserError(f"the seed group's first run dir {group.home}, which holds its "
                            "checkpoints (every seed's), is missing; put it back beside "
                            f"{run_dir} to resume the group")
        run_dir = group.home
    for item in overrides:
        key = item.split("=", 1)[0]
        if "=" not in item or key not in RESUME_OPTIONS:
            raise UserError(
                f"resume continues a run with its own config, so {item!r} cannot be changed; "
                f"only {', '.join(k + '=...' for k in RESUME_OPTIONS)} may be given"
            )
    RunLock.acquire(run_dir, "resume") if run_dir.is_dir() else None
    try:
        cfg = OmegaConf.merge(read_run_config(run_dir, trust=trust),
                              OmegaConf.from_dotlist(overrides))
        values = resolved_values(cfg, [item.split("=", 1)[0] for item in overrides])
    except BaseException:  # refused: the lock goes (its file too), as at the end of a run
        RunLock.release_held(run_dir)
        raise
    for key, value in values.items():  # continue with what was resolved now, not an expression
        OmegaConf.update(cfg, key, value, merge=False)
    return cfg, run_dir, values  # type: ignore[return-value]


REBUILD_OPTION = "rebuild_members"  # resume= only: make a seed group's deleted run dirs again


def parse_rebuild(items: list[str]) -> bool:
    """``rebuild_members=true|false`` (the last one given) -> bool; anything else is one line."""
    value = False
    for item in items:
        text = item.split("=", 1)[1].strip().lower()
        if text not in ("true", "false"):
            exit_with(f"{item!r}: {REBUILD_OPTION} is true or false; e.g. {REBUILD_OPTION}=true")
        value = text == "true"
    return value


def parse_trust(items: list[str]) -> tuple[str, ...]:
    """``trust=[a,b]`` or ``trust=a`` -> ``("a", "b")``; a malformed list is one line."""
    names: list[str] = []
    for item in items:
        try:
            value = OmegaConf.from_dotlist([item]).trust
        except Exception:  # noqa: BLE001 - omegaconf's grammar errors
            exit_with(f"cannot read {item!r}; write trust=[my_pkg] or trust=[pkg_a,pkg_b]")
        values = list(value) if OmegaConf.is_list(value) else [value]
        names += [str(v) for v in values if v is not None]
    return tuple(names)


def resolved_values(cfg: DictConfig, keys: list[str]) -> dict[str, Any]:
    """The resolved value of each override key; ``UserError`` if the config does not resolve."""
    try:
        OmegaConf.to_container(cfg, resolve=True)
        return {key: OmegaConf.select(cfg, key, throw_on_missing=True) for key in keys}
    except Exception as err:  # noqa: BLE001 - omegaconf raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot resume with these overrides ({first})") from None
