"""Train (or continue) one run, a seed group included, into its run dir: lock it and the
members' dirs, build the :class:`~rlzoo.run.loop.Trainer`, restore a resumed run's checkpoint,
train, and leave nothing behind when a fresh launch stops before training. The command line
(``rlzoo.train``) and the Python API (``rlzoo.launch.api``) both end here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.config.build import check_env_config
from rlzoo.envs.base import EnvError
from rlzoo.errors import UserError, one_line, say
from rlzoo.launch.members import (
    discard_unstarted,
    group_dirs,
    rebuild_members,
    release_members,
    saved_config,
)
from rlzoo.run.loop import CheckpointCallback, EvalCallback, Trainer
from rlzoo.run.restore import suspect_checkpoint
from rlzoo.run.signals import AlreadyFinished, LaunchStopped, NonFiniteError
from rlzoo.store.group import run_group
from rlzoo.store.rundir import RunLock
from rlzoo.store.writer import write_atomic


def execute(
    cfg: DictConfig, run_dir: Path, resume: bool = False,
    resume_overrides: dict[str, Any] | None = None, on_eval: EvalCallback | None = None,
    on_checkpoint: CheckpointCallback | None = None, rebuild: bool = False,
) -> list[dict[str, Any]]:
    """Train (or continue) one run into ``run_dir`` and return its summaries (one per seed,
    first seed first: ``seeds=K`` gives K); raises ``UserError``, ``NonFiniteError``,
    ``AlreadyFinished`` or ``Interrupted``.

    ``resume_overrides`` (resume only) are written into the run's ``.hydra/config.yaml`` (every
    seed's) once the checkpoint is known to continue under them, never before. ``rebuild``
    (resume of a seed group only): make the run dirs of members that were deleted again, from
    the group's checkpoint, instead of refusing.

    A resumed run that meets NaN or inf before writing a checkpoint may have resumed from a
    checkpoint that holds the cause (finite values no check can refuse): it goes back to the
    checkpoint before that one, in a fresh trainer, saying so in one ``rlzoo: warning:`` line
    (``rlzoo.run.restore.suspect_checkpoint``); without one before it, the error names it.
    """
    lock = RunLock.acquire(run_dir)
    dirs: list[Path] = []
    threads = torch.get_num_threads()  # torch_threads applies to this run only
    try:
        try:
            check_env_config(cfg)
            dirs, lost = group_dirs(cfg, run_dir, resume, rebuild)
            trainer = Trainer(cfg, run_dir, on_eval=on_eval, on_checkpoint=on_checkpoint,
                              dirs=dirs)
        except BaseException:  # a mistake, or a signal before training (LaunchStopped)
            if not resume:
                release_members(dirs[1:], discard=True)
                discard_unstarted(run_dir)
            raise
        while True:
            try:
                return attempt(trainer, run_dir, dirs, resume, resume_overrides, lost)
            except NonFiniteError as err:
                back = suspect_checkpoint(trainer.checkpoint_dir, trainer.restored,
                                          trainer.good, trainer.skip) if resume else None
                trainer.record(f"{'warning' if back else 'error'}: {err}")
                if back is None:
                    raise
                say(f"rlzoo: warning: {one_line(err, 600)}")
                trainer.close_loggers()
                trainer.close_envs()
                skip = (*trainer.skip, back)
                trainer = Trainer(cfg, run_dir, on_eval=on_eval, on_checkpoint=on_checkpoint,
                                  dirs=dirs)
                trainer.skip, lost, resume_overrides = skip, [], None
    finally:
        torch.set_num_threads(threads)
        release_members(dirs[1:])
        lock.release()


def attempt(trainer: Trainer, run_dir: Path, dirs: list[Path], resume: bool,
            resume_overrides: dict[str, Any] | None, lost: list[Path]) -> list[dict[str, Any]]:
    """Restore (``resume``) and train ``trainer`` (see :func:`execute`), rebuilding the ``lost``
    members' dirs and writing ``resume_overrides`` once the checkpoint is known."""
    try:
        if resume:
            trainer.restore()
            trainer.check_resume_budget()
            if lost:
                rebuild_members(run_group(run_dir), lost)
            for d in dirs if resume_overrides else []:  # later resumes use the new budget
                saved = saved_config(d)
                for key, value in resume_overrides.items():  # type: ignore[union-attr]
                    OmegaConf.update(saved, key, value, merge=False)
                write_atomic(d / ".hydra" / "config.yaml", OmegaConf.to_yaml(saved), root=d)
        return trainer.train(resume=resume)
    except AlreadyFinished:
        trainer.close_envs()
        raise
    except LaunchStopped:  # before the training loop: a fresh run keeps nothing
        trainer.close_loggers()
        trainer.close_envs()
        if not resume:
            release_members(dirs[1:], discard=True)
            discard_unstarted(run_dir)
        raise
    except EnvError as err:  # an env's fault: where the run can continue from, one line
        stopped = trainer.env_stopped(err)
        trainer.record(f"error: {stopped}")
        raise stopped from None
    except UserError as err:  # train.log says how the run stopped
        trainer.record(f"error: {err}")
        raise
