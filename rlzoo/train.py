"""Command line: ``python -m rlzoo.train algo=sac env=Humanoid [key=value ...]``.

Every key is documented in ``rlzoo/conf/config.yaml`` and the group files beside it.
``python -m rlzoo.train resume=RUN_DIR [total_steps=N]`` continues a run in place from its newest
valid checkpoint, with the config it was started with.

Every launch gets a run dir of its own: two launches that resolve the same default name (same env,
algo, seed and second) get ``<stamp>-s<seed>`` and ``<stamp>-2-s<seed>``. A run dir is locked
by the process that trains into it; another launch into it (``resume=`` included) is refused,
and a fresh run into a dir that already holds a run's results is refused too.

Exit status: 0 when the run finished, was stopped by SIGTERM/SIGINT after writing a checkpoint
(also when stdout/stderr went to a pipe whose reader is gone), or was already finished
(``resume=``); 2 for a user mistake or a run that cannot write its outputs (one ``rlzoo: error:``
line: e.g. a full disk, the run dir deleted while training); 3 when training, the env or the
weights produced NaN/inf; 128 + the signal when SIGTERM/SIGINT came before training started
(one line; the dirs the launch made are removed; env workers starting included) or before a
resumed run continued (nothing was changed), or between the jobs of a multirun (the next does
not start). A signal once training began stops the run with a checkpoint (0), or, as it ends,
lets it finish; an error after training (the final evaluation, summary.json) is never 0.
``train.log`` ends with how the run stopped.

``resume=HOME rebuild_members=true`` continues a seed group one of whose member dirs was
deleted, making that dir again from the group's checkpoint (``docs/seeds.md``).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import hydra
import hydra.core.utils as hydra_utils
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlzoo.conf.keys import FLAGS as KEY_FLAGS
from rlzoo.conf.keys import print_keys
from rlzoo.errors import UserError, exit_with, say, settle_streams
from rlzoo.launch.api import Run, resume_run, train
from rlzoo.launch.claim import claim_run_dir
from rlzoo.launch.execute import execute
from rlzoo.launch.resume import REBUILD_OPTION, parse_rebuild, parse_trust, prepare_resume
from rlzoo.run.progress import speed_words
from rlzoo.run.signals import (
    AlreadyFinished,
    Interrupted,
    LaunchSignals,
    LaunchStopped,
    NonFiniteError,
)
from rlzoo.store.group import run_group
from rlzoo.store.rundir import discard_created
from rlzoo.store.writer import make_dir, write_atomic

__all__ = ["Run", "main", "resume_run", "train"]  # rlzoo.train(...) calls train (below)


def run(cfg: DictConfig, run_dir: Path, resume: bool = False,
        resume_overrides: dict[str, Any] | None = None,
        rebuild: bool = False) -> list[dict[str, Any]]:
    """:func:`execute` for the command line: the outcome on stdout/stderr and the exit status
    (see the module docstring); one line per seed."""
    LAUNCH.arm()
    try:
        summaries = execute(cfg, run_dir, resume, resume_overrides, rebuild=rebuild)
    except AlreadyFinished as done:
        say(f"rlzoo: {done}")
        settle_streams()
        sys.exit(0)
    except UserError as err:
        exit_with(str(err))
    except NonFiniteError as err:
        exit_with(str(err), status=3)
    except Interrupted as stop:  # the same line is in train.log
        say(f"rlzoo: {stop.line()}")
        settle_streams()  # a pipe closed by the same Ctrl-C (`| tee log`) keeps the status 0
        sys.exit(0)
    LAUNCH.done()  # finished: a signal now changes nothing
    for summary, d in zip(summaries, run_group(run_dir).dirs):
        say(
            f"rlzoo: {summary['algo']} on {summary['env']}: final eval return "
            f"{summary['final_eval_return']:.2f} ± {summary['final_eval_return_std']:.2f} after "
            f"{summary['total_steps']} steps ({speed_words(summary)})"
            f"; run dir {d}", sys.stdout,
        )
    settle_streams()
    return summaries


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def hydra_main(cfg: DictConfig) -> float:
    """Train one run into Hydra's run dir; returns the final eval return (for sweepers), the
    mean over seeds for ``seeds=K``."""
    if cfg.get("resume"):
        exit_with("resume=RUN_DIR cannot be part of a multirun (-m); resume one run at a time")
    summaries = run(cfg, Path(HydraConfig.get().runtime.output_dir))
    return sum(float(s["final_eval_return"]) for s in summaries) / len(summaries)


def resume(args: list[str]) -> None:
    """``resume=RUN_DIR [total_steps=N] [log.progress=...] [trust=[my_pkg]]
    [rebuild_members=true]``: continue a run in place.

    Nothing in the run dir changes before the overrides are validated, every member of a seed
    group is checked and the checkpoint is loaded; a finished run is reported as such and left
    untouched (a run whose last checkpoint is newer than a ``policy.pt`` or a missing summary is
    not finished: it is completed). ``trust`` names modules besides rlzoo whose components the
    run's config may build (``rlzoo.config.trust``); it is not saved. ``rebuild_members=true``
    makes a seed group's deleted member dirs again from its checkpoint (``docs/seeds.md``).
    """
    run_dir = Path(next(a for a in args if a.startswith("resume=")).split("=", 1)[1]).expanduser()
    trust = parse_trust([a for a in args if a.startswith("trust=")])
    rebuild = parse_rebuild([a for a in args if a.startswith(f"{REBUILD_OPTION}=")])
    overrides = [a for a in args if not a.startswith(("resume=", "trust=", f"{REBUILD_OPTION}="))]
    try:
        cfg, run_dir, values = prepare_resume(run_dir, overrides, trust)
    except UserError as err:
        exit_with(str(err))
    run(cfg, run_dir, resume=True, resume_overrides=values, rebuild=rebuild)


def warn_if_shadowed() -> None:
    """One warning line when ``rlzoo`` is a bare folder (a namespace package: a folder named
    ``rlzoo`` in the current directory, e.g. a clone, hides an editable install's package);
    docs/extending.md, "The import trap"."""
    package = sys.modules.get("rlzoo")
    if package is not None and getattr(package, "__file__", None) is None:
        where = ", ".join(str(p) for p in getattr(package, "__path__", [])) or "a folder"
        say(f"rlzoo: warning: 'rlzoo' is the folder {where} here, not the installed package "
            "(a folder named rlzoo in the current directory hides it); run from another "
            "folder (docs/extending.md, \"The import trap\")")


LAUNCH = LaunchSignals()  # the command line's handler outside the training loop


class HydraFilesUnwritable(BaseException):  # noqa: N818 - passes Hydra's `except Exception`
    """Hydra could not write the run dir's ``.hydra`` files (a full disk, a read-only file
    system); carries the one-line message."""


def save_hydra_file(cfg: DictConfig, filename: str, output_dir: Path) -> None:
    """Hydra's ``_save_config`` written as every file of a run dir is (``rlzoo.store.writer``: no
    link followed, a temporary file renamed into place), a failed or refused write turned into
    :class:`HydraFilesUnwritable` (Hydra would print a traceback and exit 1, leaving the run
    dir)."""
    folder = Path(output_dir)
    try:
        make_dir(folder, root=folder.parent)
        write_atomic(folder / filename, OmegaConf.to_yaml(cfg), root=folder.parent)
    except UserError as err:
        raise HydraFilesUnwritable(str(err)) from None


def main() -> None:
    warn_if_shadowed()
    args = sys.argv[1:]
    if any(a in KEY_FLAGS for a in args):  # every user key with its documentation
        print_keys(args)
        return
    resuming = any(a.startswith("resume=") and a != "resume=null" for a in args)
    with LAUNCH:
        try:
            if resuming:
                resume(args)
                return
            try:
                sys.argv[1:] = claim_run_dir(args)
            except UserError as err:
                exit_with(str(err))
            hydra_utils._save_config = save_hydra_file
            hydra_main()
        except LaunchStopped as stop:
            stopped_before_training(stop, resuming)
        except HydraFilesUnwritable as err:
            discard_created()
            exit_with(str(err))


def stopped_before_training(stop: LaunchStopped, resuming: bool) -> None:
    """The one line (and exit status 128 + the signal) for a launch stopped before training
    started: the run dirs it made are removed, so nothing is left that a later run could take
    for its own; a resume that had not continued yet left its run as it was."""
    made = discard_created()
    if LAUNCH.finished:  # a multirun (-m): the signal came after a job, the next one did not start
        what = "after a job of the multirun finished; the next one did not start"
    elif resuming:
        what = ("before the run continued; nothing was changed: continue it with the same "
                "command")
    else:
        where = f" ({', '.join(str(p) for p in made)} removed)" if made else ""
        what = f"before training started; nothing was kept{where}: launch it again"
    print(f"rlzoo: stopped by {stop} {what}", file=sys.stderr, flush=True)
    sys.exit(128 + stop.signum)


class _CallableModule(types.ModuleType):
    """``rlzoo.train`` is this module (``python -m rlzoo.train``) and the function ``train``:
    ``import rlzoo; rlzoo.train("algo=sac", ...)`` calls :func:`train`."""

    def __call__(self, *overrides: str, **kwargs: Any) -> Run:
        return train(*overrides, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    main()
