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
(one line; the dirs the launch made are removed) or before a resumed run continued (nothing
was changed). ``train.log`` ends with how the run stopped.

``resume=HOME rebuild_members=true`` continues a seed group one of whose member dirs was
deleted, making that dir again from the group's checkpoint (``docs/seeds.md``).
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import hydra.core.utils as hydra_utils
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli_check import check_overrides
from rlzoo.errors import UserError, exit_with, say, settle_streams
from rlzoo.run.build import check_env_config, read_run_config
from rlzoo.run.group import GROUP_FILE, SeedGroup, check_members, member_dir, read_group
from rlzoo.run.loop import CheckpointCallback, EvalCallback, Trainer
from rlzoo.run.rundir import (
    LOCK_NAME,
    RunLock,
    claim_new_dir,
    discard_created,
    holds_a_run,
    remove_if_created,
    write_atomic,
)
from rlzoo.run.settings import seed_range
from rlzoo.run.signals import (
    AlreadyFinished,
    Interrupted,
    LaunchSignals,
    LaunchStopped,
    NonFiniteError,
)

# What may change when a run is resumed: the budget and how it is shown. Anything else would make
# the continuation a different run.
RESUME_OPTIONS = ("total_steps", "log.progress", "log.progress_every_s")


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
    ``group.json`` last (``rlzoo.run.group``). A resumed group is checked first: its
    ``group.json`` and every member's config (:func:`rlzoo.run.group.check_members`)."""
    seed0, seeds = seed_range(cfg)
    if resume:
        group = read_group(run_dir)
        if seeds == 1 and group is None:
            return [run_dir], []
        if group is None or len(group.dirs) != seeds:
            raise UserError(f"{run_dir} has seeds={seeds} but no {seeds}-member group.json; "
                            "restore group.json from one of the group's other run dirs")
        return resume_members(group, rebuild)
    # a fresh launch into a dir that holds no run: a group.json there is stale (a launch
    # stopped before training); it must not tie this run to another group
    (run_dir / GROUP_FILE).unlink(missing_ok=True)
    if seeds == 1:
        return [run_dir], []
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
    check_members(group, tuple(d for d in group.dirs if d not in lost))
    if lost and not rebuild:
        names = ", ".join(str(d) for d in lost)
        raise UserError(
            f"the seed group's run dirs {names} are missing; put them back beside {group.home}, or "
            f"rebuild them from the group's checkpoint, which holds every seed: python -m "
            f"rlzoo.train resume={group.home} rebuild_members=true (their curves before the "
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
    (d / ".hydra").mkdir(parents=True, exist_ok=True)
    config = OmegaConf.load(saved / "config.yaml")
    OmegaConf.update(config, "seed", group.seeds[k], merge=False)
    write_atomic(d / ".hydra" / "config.yaml", OmegaConf.to_yaml(config))
    for name in ("hydra.yaml", "overrides.yaml"):
        if (saved / name).is_file():
            write_atomic(d / ".hydra" / name, (saved / name).read_text())


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
        try:
            if resume:
                trainer.restore()
                trainer.check_resume_budget()
                if lost:
                    rebuild_members(read_group(run_dir), lost)  # type: ignore[arg-type]
                for d in dirs if resume_overrides else []:  # later resumes use the new budget
                    saved = OmegaConf.load(d / ".hydra" / "config.yaml")
                    for key, value in resume_overrides.items():  # type: ignore[union-attr]
                        OmegaConf.update(saved, key, value, merge=False)
                    write_atomic(d / ".hydra" / "config.yaml", OmegaConf.to_yaml(saved))
            return trainer.train(resume=resume)
        except AlreadyFinished:
            trainer.close_envs()
            raise
        except LaunchStopped:  # before the training loop: a fresh run keeps nothing
            trainer.close_envs()
            if not resume:
                release_members(dirs[1:], discard=True)
                discard_unstarted(run_dir)
            raise
        except (UserError, NonFiniteError) as err:  # train.log says how the run stopped
            trainer.record(f"error: {err}")
            raise
    finally:
        torch.set_num_threads(threads)
        release_members(dirs[1:])
        lock.release()


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
    group = read_group(run_dir) if len(summaries) > 1 else None
    for summary, d in zip(summaries, group.dirs if group else [run_dir]):
        say(
            f"rlzoo: {summary['algo']} on {summary['env']}: final eval return "
            f"{summary['final_eval_return']:.2f} ± {summary['final_eval_return_std']:.2f} after "
            f"{summary['total_steps']} steps ({summary['steps_per_sec']:.1f} steps/s)"
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
    run's config may build (``rlzoo.run.trust``); it is not saved. ``rebuild_members=true``
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


def prepare_resume(
    run_dir: Path, overrides: list[str], trust: tuple[str, ...] = ()
) -> tuple[DictConfig, Path, dict[str, Any]]:
    """Check a resume before anything runs: the overrides (only :data:`RESUME_OPTIONS`), the
    run dir (any seed's dir of a group continues the group, from its first seed's, after this
    member's group.json was checked against the home's), its lock and its config (its
    ``_target_`` keys trusted). Returns the run's config with the resolved overrides merged in,
    the dir to continue and the resolved overrides; raises ``UserError``.
    """
    group = read_group(run_dir) if run_dir.is_dir() else None
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
    RunLock.acquire(run_dir) if run_dir.is_dir() else None
    cfg = OmegaConf.merge(read_run_config(run_dir, trust=trust), OmegaConf.from_dotlist(overrides))
    values = resolved_values(cfg, [item.split("=", 1)[0] for item in overrides])
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
    run_dir = Path(str(OmegaConf.select(cfg, "hydra.run.dir"))).expanduser()
    if any(a.startswith("hydra.run.dir=") for a in args):  # the user's own dir: exactly that
        if run_dir.exists():
            RunLock.check_free(run_dir, option)  # a dir in use by a live run is refused first
        if holds_a_run(run_dir):
            how = (f"rlzoo.resume({str(run_dir)!r})" if option == "run_dir"
                   else f"resume={run_dir}")
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
    """``hydra.run.dir='<run_dir>'``, quoted for Hydra's override grammar."""
    quoted = str(run_dir).replace("\\", "\\\\").replace("'", "\\'")
    return f"hydra.run.dir='{quoted}'"


# --------------------------------------------------------------------------- the Python API


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
        group = read_group(self.dir)
        return [self] if group is None else [Run(d) for d in group.dirs]

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``: final eval return (mean, std), steps, wall time, updates, ... and
        ``stopped_early: true`` when a callback stopped the run."""
        return json.loads((self.dir / "summary.json").read_text())

    def load_policy(self, **kwargs: Any) -> Any:
        """``rlzoo.load_policy(self.dir, **kwargs)``: the trained policy as an ``nn.Module``."""
        from rlzoo.policy import load_policy

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
    Seeds python's, numpy's and torch's global generators (``seed``).
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


def write_hydra_files(cfg: DictConfig, run_dir: Path, overrides: list[str]) -> DictConfig:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` as Hydra's command line
    writes them (the config unresolved, as composed), so every reader of run dirs works.
    Returns the run's config: ``cfg`` without its ``hydra`` node."""
    hydra_dir = run_dir / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    write_atomic(hydra_dir / "config.yaml", OmegaConf.to_yaml(task))
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None)
    hydra_node = {"hydra": {"runtime": {"choices": OmegaConf.to_container(choices)}}} \
        if choices is not None else {"hydra": {}}
    write_atomic(hydra_dir / "hydra.yaml", OmegaConf.to_yaml(OmegaConf.create(hydra_node)))
    task_overrides = [a for a in overrides if not a.startswith("hydra.")]
    write_atomic(hydra_dir / "overrides.yaml", OmegaConf.to_yaml(OmegaConf.create(task_overrides)))
    return task


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
    """Hydra's ``_save_config``, with a failed write turned into :class:`HydraFilesUnwritable`
    (Hydra would print a traceback and exit 1, leaving the run dir)."""
    try:
        _HYDRA_SAVE(cfg, filename, output_dir)
    except OSError as err:
        raise HydraFilesUnwritable(
            f"cannot write {Path(output_dir) / filename} ({err.strerror or err}); free space "
            "there or choose another hydra.run.dir; nothing was kept") from None


_HYDRA_SAVE = hydra_utils._save_config


def main() -> None:
    warn_if_shadowed()
    args = sys.argv[1:]
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
    if resuming:
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
