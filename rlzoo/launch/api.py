"""The Python API: ``rlzoo.train(*overrides, run_dir=...) -> Run`` and
``rlzoo.resume(RUN_DIR, ...) -> Run``, doing what ``python -m rlzoo.train`` does, in this process
(docs/api.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlzoo.errors import UserError
from rlzoo.launch.claim import claim, run_dir_override, write_hydra_files
from rlzoo.launch.execute import execute
from rlzoo.launch.resume import prepare_resume
from rlzoo.run.loop import CheckpointCallback, EvalCallback
from rlzoo.run.signals import AlreadyFinished
from rlzoo.store.bounded import load_json
from rlzoo.store.group import run_group
from rlzoo.store.rundir import RunLock


@dataclass(frozen=True)
class Run:
    """A finished (or early-stopped) run made by :func:`train`.

    Attributes:
        dir: the run directory, the same as the command line makes (``.hydra/config.yaml``,
            ``checkpoints/``, ``policy.pt``, TensorBoard events, ``summary.json``), so
            ``resume=``, ``python -m rlzoo.evaluate`` and ``python -m rlzoo.compare`` work on it.
    """

    dir: Path

    @property
    def seeds(self) -> list[Run]:
        """Every seed's run of a ``seeds=K`` group (in seed order; ``[self]`` for one seed)."""
        return [Run(d) for d in run_group(self.dir).dirs]

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``: final eval return (mean, std), steps, wall time, updates, ... and
        ``stopped_early: true`` when a callback stopped the run."""
        return load_json(self.dir / "summary.json")  # a regular file, at most 1 MiB read

    def load_policy(self, **kwargs: Any) -> Any:
        """``rlzoo.load_policy(self.dir, **kwargs)``: the trained policy as an ``nn.Module``."""
        from rlzoo.policy.policy import load_policy

        return load_policy(self.dir, **kwargs)


def train(
    *overrides: str, run_dir: str | Path | None = None, on_eval: EvalCallback | None = None,
    on_checkpoint: CheckpointCallback | None = None,
) -> Run:
    """Train one run in this process, as ``python -m rlzoo.train OVERRIDES...`` would.

    Args:
        overrides: the command line's ``key=value`` overrides (``"algo=sac"``, ``"env=Hopper"``,
            ``"total_steps=20000"``, ``"hydra.searchpath=[pkg://examples.conf]"``, ...).
        run_dir: where to write the run (must not hold a run yet); default: the command line's
            ``runs/<env>/<algo>/<timestamp>-s<seed>``, numbered when taken.
        on_eval: called after every evaluation with an ``rlzoo.run.loop.Evaluation`` (``step``,
            ``mean``, ``std``, ``returns``, ``run_dir``); return True to stop the run early.
        on_checkpoint: called after every checkpoint with an ``rlzoo.run.loop.Checkpoint``
            (``step``, ``path``, ``run_dir``); return True to stop the run early.

    A run stopped early writes a checkpoint, ``policy.pt`` and ``summary.json`` at that step and
    can be continued with ``resume=``. Raises ``rlzoo.errors.UserError`` (one line) for a
    mistake in the overrides, ``rlzoo.run.signals.NonFiniteError`` when training produced NaN or
    inf, and ``rlzoo.run.signals.Interrupted`` after SIGINT/SIGTERM (a checkpoint was written).
    Any other exception after a whole step (a callback's own included) is raised as it is, once a
    checkpoint of that step is written; a note on it (``__notes__``), stderr and ``train.log``
    give the resume command. Seeds python's, numpy's and torch's global generators (``seed``).
    """
    args = [str(item) for item in overrides]
    for item in args:
        if item.startswith("resume="):
            raise UserError(
                f"rlzoo.train starts new runs, so {item!r} cannot be given; continue a run with "
                "rlzoo.resume(RUN_DIR[, \"total_steps=N\"])"
            )
        if item.startswith("hydra.run."):
            raise UserError(f"pass the run dir as rlzoo.train(..., run_dir=...), not {item!r}")
        if item.startswith("-") or "=" not in item:
            raise UserError(
                f"rlzoo.train takes key=value overrides (as strings, e.g. \"algo=sac\"), got "
                f"{item!r}; command-line flags such as -m or --cfg have no Python equivalent"
            )
    if run_dir is not None:
        args.append(run_dir_override(Path(run_dir).expanduser()))
    cfg, path = claim(args, option="run_dir")
    assert cfg is not None and path is not None  # key=value overrides: one run, one config
    try:
        task = write_hydra_files(cfg, path, [a for a in args
                                             if not a.startswith("hydra.run.dir=")])
        execute(task, path, on_eval=on_eval, on_checkpoint=on_checkpoint)
    finally:
        RunLock.release_held(path)  # also when the run never started
    return Run(path)


def resume_run(
    run_dir: str | Path, *overrides: str, trust: str | tuple[str, ...] | list[str] = (),
    on_eval: EvalCallback | None = None, on_checkpoint: CheckpointCallback | None = None,
) -> Run:
    """Continue a run in place from its newest valid checkpoint, as ``python -m rlzoo.train
    resume=RUN_DIR`` does (``rlzoo.resume``); on the CPU bit-identical to a run never stopped.

    Args:
        run_dir: the run to continue (any seed's dir of a ``seeds=K`` group continues the whole
            group).
        overrides: only ``"total_steps=N"`` (a new budget, not below the checkpoint's step),
            ``"log.progress=..."`` and ``"log.progress_every_s=..."``; the run keeps its config.
        trust: modules besides rlzoo whose classes the run's config may build (the command
            line's ``trust=[my_pkg]``).
        on_eval, on_checkpoint: as for :func:`train`.

    Returns the ``Run`` of ``run_dir``; a run that already reached its ``total_steps`` is
    returned as it is, unchanged. Raises ``UserError`` (one line; nothing in the run dir
    changes), ``NonFiniteError`` or ``Interrupted`` as :func:`train` does.
    """
    given = Path(run_dir).expanduser()
    args = [str(item) for item in overrides]
    for item in args:
        if item.startswith(("resume=", "trust=")):
            raise UserError(f"pass the run dir and trust as arguments of rlzoo.resume, not "
                            f"{item!r}: rlzoo.resume(RUN_DIR, trust=['my_pkg'])")
    names = (trust,) if isinstance(trust, str) else tuple(trust)
    home = given
    try:
        cfg, home, values = prepare_resume(given, args, names)
        try:
            execute(cfg, home, resume=True, resume_overrides=values, on_eval=on_eval,
                    on_checkpoint=on_checkpoint)
        except AlreadyFinished:
            pass  # nothing to do: the run is returned as it is
    finally:
        for d in {given, home}:
            RunLock.release_held(d)
    return Run(given)
