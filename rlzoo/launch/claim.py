"""A new run's dir, before Hydra writes anything: the overrides checked
(:func:`rlzoo.cli.check.check_overrides`), the dir picked (numbered when another launch has the
default name), refused when it holds a run or is in use, and locked; and the ``.hydra`` files a
run made from Python gets, as Hydra's command line writes them.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlzoo.cli.check import check_overrides
from rlzoo.config.settings import switch
from rlzoo.errors import UserError, python_str, resume_command
from rlzoo.run import tracking
from rlzoo.store.rundir import (
    RunLock,
    check_run_files,
    claim_new_dir,
    holds_a_run,
    remove_if_created,
)
from rlzoo.store.writer import make_dir, write_atomic


def claim_run_dir(args: list[str]) -> list[str]:
    """Before Hydra writes anything: check the overrides (one line for a mistyped group, key or
    value), pick this launch's run dir, refuse one that holds a run or is in use, lock it, and
    return ``args`` with ``hydra.run.dir`` set to it.

    Launches with Hydra flags (``-m``, ``--cfg``, ``--help``, ...) are checked but their dirs are
    left to Hydra: a multirun job locks its own dir in :func:`run`.
    """
    _, run_dir = claim(args)
    return args if run_dir is None else [*args, run_dir_override(run_dir)]


def claim(
    args: list[str], option: str = "hydra.run.dir"
) -> tuple[DictConfig | None, Path | None]:
    """:func:`claim_run_dir`'s work: the composed config (with its ``hydra`` node) and the run
    dir claimed and locked for it; ``(None, None)`` for a multirun or Hydra's own flags.
    ``option`` is how the messages name the run dir's setting (``run_dir`` for
    :func:`train`)."""
    cfg = check_overrides(args)
    if cfg is None or any(a.startswith("-") for a in args):
        return None, None
    # log.wandb=true: the package, WANDB_* and the login, before any dir
    tracking.wanted(switch(cfg, "log.wandb"))
    run_dir = Path(str(OmegaConf.select(cfg, "hydra.run.dir"))).expanduser()
    if any(a.startswith("hydra.run.dir=") for a in args):  # the user's own dir: exactly that
        if run_dir.exists():
            check_run_files(run_dir)  # a link where a run keeps its files: before Hydra writes
            RunLock.check_free(run_dir, option)  # a dir in use by a live run is refused first
        if holds_a_run(run_dir):
            how = (f"rlzoo.resume({python_str(run_dir)})" if option == "run_dir"
                   else resume_command(run_dir))
            raise UserError(
                f"{run_dir} already holds a run (checkpoints or summary.json); continue it with "
                f"{how} or choose another {option}"
            )
        if not run_dir.exists():
            run_dir = claim_new_dir(run_dir)  # records that this launch made it
    else:  # the default name: numbered when another launch has it
        run_dir = claim_new_dir(run_dir)
    try:
        RunLock.acquire(run_dir)
    except UserError:  # e.g. a full disk: the dir this launch made goes again
        remove_if_created(run_dir)
        raise
    return cfg, run_dir


def run_dir_override(run_dir: Path) -> str:
    """``hydra.run.dir='<run_dir>'``, quoted for Hydra's override grammar, where a backslash
    escapes only a quote or the backslashes before a quote or the closing quote (``a\\b`` stays
    as it is: doubling it would name another dir)."""
    quoted = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", str(run_dir))
    quoted = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, quoted)
    return f"hydra.run.dir='{quoted}'"


def write_hydra_files(cfg: DictConfig, run_dir: Path, overrides: list[str]) -> DictConfig:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` as Hydra's command line
    writes them (the config unresolved, as composed), so every reader of run dirs works.
    Returns the run's config: ``cfg`` without its ``hydra`` node."""
    hydra_dir = make_dir(run_dir / ".hydra", root=run_dir)
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    write_atomic(hydra_dir / "config.yaml", OmegaConf.to_yaml(task), root=run_dir)
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None)
    hydra_node = {"hydra": {"runtime": {"choices": OmegaConf.to_container(choices)}}} \
        if choices is not None else {"hydra": {}}
    write_atomic(hydra_dir / "hydra.yaml", OmegaConf.to_yaml(OmegaConf.create(hydra_node)),
                 root=run_dir)
    task_overrides = [a for a in overrides if not a.startswith("hydra.")]
    write_atomic(hydra_dir / "overrides.yaml",
                 OmegaConf.to_yaml(OmegaConf.create(task_overrides)), root=run_dir)
    return task
