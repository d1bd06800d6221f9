"""``log.wandb=true``: the run mirrored to Weights & Biases (the optional extra ``wandb``:
``pip install "rlzoo[wandb]"``), as CleanRL's ``--track`` does.

wandb's TensorBoard sync (``wandb.init(sync_tensorboard=True)``) sends every scalar the run
writes to TensorBoard, at the same env steps, with the resolved config. ``WANDB_MODE=offline``
works without a network (``wandb sync <run dir>/wandb/offline-run-...`` uploads later);
``WANDB_PROJECT`` names the project (default ``rlzoo``). Off by default. Only the first seed of
a seed group is mirrored (TensorBoard has them all).

* The wandb run's id is unique per run dir (:func:`run_id`: its name and a hash of its
  resolved path), so two runs whose dirs share a last name (``.../a/0-s0`` and ``.../b/0-s0``,
  the normal case in sweeps) are two wandb runs, and a resumed run continues its own.
* Before anything is written (:func:`wanted`, when the run is built): the package, a valid
  ``WANDB_MODE`` and ``WANDB_PROJECT``, and, online, a login (an API key from ``wandb login``
  or ``WANDB_API_KEY``) are checked; each failure is one line.
* wandb writes only inside a fresh private folder rlzoo makes in the run dir
  (``rlzoo.store.writer.private_dir``: nobody could have put a link there); when the run ends,
  rlzoo drops wandb's symbolic links (``latest-run``, ``debug.log``) and moves its run folder
  into ``<run dir>/wandb/`` (``rlzoo.store.writer.move_in``, checked as every file of a run dir). A
  folder left by a process that died (SIGKILL) is moved in by the next launch into that dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import re
import shlex
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import UserError, one_line, say
from rlzoo.store.writer import TEMP_PATTERN, host_name, move_in, private_dir

EXTRA = 'pip install "rlzoo[wandb]"'
FOLDER = "wandb"  # <run dir>/wandb: the wandb run folders, moved in when a run ends
OFFLINE_MODES = ("offline", "dryrun", "disabled")  # modes that need no login


def wanted(value: bool) -> bool:
    """``value`` (``log.wandb``: ``Settings.wandb``); UserError when it is on and the ``wandb``
    package cannot be imported, ``WANDB_MODE`` or ``WANDB_PROJECT`` is not a value wandb takes,
    or wandb is online without a login."""
    if value and importlib.util.find_spec("wandb") is None:
        raise UserError(f"log.wandb=true needs the optional extra wandb: {EXTRA} "
                        "(or log.wandb=false)")
    if value and not _CHECKED:
        check_settings(importlib.import_module("wandb"))
        _CHECKED.append(True)  # once a process: the launch checks, then the Trainer
    return value


_CHECKED: list[bool] = []  # check_settings passed in this process


def check_settings(wandb: Any) -> None:
    """One ``UserError`` line for a ``WANDB_MODE`` or ``WANDB_PROJECT`` wandb refuses, and for
    an online mode without a login; writes nothing (no run is started)."""
    mode = os.environ.get("WANDB_MODE")
    project = os.environ.get("WANDB_PROJECT")
    for name, key, value in (("WANDB_MODE", "mode", mode), ("WANDB_PROJECT", "project",
                                                            project)):
        if value is None:
            continue
        try:
            wandb.Settings(**{key: value})
        except Exception as err:  # noqa: BLE001 - pydantic's and wandb's own errors
            errors = getattr(err, "errors", None)  # pydantic's: the first one's message
            reason = one_line(str(errors()[0].get("msg", err)) if callable(errors) else
                              str(err), 160)
            raise UserError(f"{name}={value!r} is not a value wandb takes ({reason}); fix or "
                            f"unset {name} (or log.wandb=false)") from None
    if effective_mode(mode) in OFFLINE_MODES:
        return
    try:
        logged_in = wandb.login(verify=False, prompt=False)
    except Exception as err:  # noqa: BLE001 - wandb's errors (a malformed key, ...)
        raise UserError(f"log.wandb=true cannot log in to W&B ({one_line(str(err), 160)}); "
                        "run `wandb login` (or set WANDB_API_KEY), or WANDB_MODE=offline to "
                        "sync later") from None
    if not logged_in:
        raise UserError("log.wandb=true needs a W&B login: run `wandb login` (or set "
                        "WANDB_API_KEY), or WANDB_MODE=offline to record the run here and "
                        "`wandb sync` it later (or log.wandb=false)")


def effective_mode(mode: str | None) -> str:
    """The mode wandb will run in: ``WANDB_MODE``, else its settings files' (``wandb offline``
    writes one), read without starting wandb's service (``online`` where this wandb has no
    such reader); a settings file wandb refuses is one ``UserError`` line."""
    if mode is not None:
        return mode
    try:
        setup = importlib.import_module("wandb.sdk.wandb_setup")
        return str(setup.singleton().settings.mode)
    except (ImportError, AttributeError):  # another version of wandb: the login decides
        return "online"
    except Exception as err:  # noqa: BLE001 - a malformed settings file
        raise UserError(f"cannot read W&B's settings ({one_line(str(err), 160)}); fix them "
                        "(wandb online / wandb offline) or set WANDB_MODE") from None


def run_id(run_dir: Path) -> str:
    """The wandb run id of ``run_dir``: its name (``[A-Za-z0-9_-]``, at most 48 characters) and
    12 hex digits of the SHA-256 of its resolved path: unique per run dir, the same for every
    resume of it."""
    resolved = run_dir.resolve()
    name = re.sub(r"[^A-Za-z0-9_-]", "-", resolved.name)[:48]
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return f"{name}-{digest}"


class Tracking:
    """A started wandb run and the private folder it writes in (:func:`start`)."""

    def __init__(self, run: Any, run_dir: Path, folder: Path) -> None:
        self.run, self.run_dir, self.folder = run, run_dir, folder

    def finish(self) -> None:
        """Close the wandb run (its last TensorBoard events are sent first), then move its run
        folder into ``<run dir>/wandb/``."""
        try:
            self.run.finish()
        finally:
            adopt(self.run_dir, self.folder)


def adopt(run_dir: Path, folder: Path) -> None:
    """Move what wandb wrote in ``folder`` (a private folder) into ``<run dir>/wandb/``, and
    say where an offline run's folder went (wandb named the private one)."""
    inner = folder / FOLDER
    moved = move_in(inner, run_dir / FOLDER, run_dir) \
        if inner.is_dir() and not inner.is_symlink() else []
    with contextlib.suppress(OSError):
        folder.rmdir()
    for path in moved:
        if path.name.startswith("offline-run-"):
            say(f"rlzoo: W&B's offline run is in {path}; upload it with: wandb sync "
                f"{shlex.quote(str(path))}")


def adopt_leftovers(run_dir: Path) -> None:
    """Move in the private folders of earlier processes on this host that died before they
    finished their wandb run (this process holds the run dir's lock: nobody else writes)."""
    for entry in run_dir.iterdir():
        match = TEMP_PATTERN.match(entry.name)
        if (match and match.group("name") == FOLDER and match.group("host") == host_name()
                and int(match.group("pid")) != os.getpid() and entry.is_dir()
                and not entry.is_symlink()):
            adopt(run_dir, entry)


def start(cfg: DictConfig, run_dir: Path) -> Tracking:
    """Start the wandb run of ``run_dir`` (before its TensorBoard writer exists, so that wandb's
    sync sees it) in a fresh private folder; returns it, for :func:`finish`."""
    wandb = importlib.import_module("wandb")
    adopt_leftovers(run_dir)
    folder = private_dir(run_dir / FOLDER, run_dir)
    try:
        run = wandb.init(project=os.environ.get("WANDB_PROJECT", "rlzoo"), id=run_id(run_dir),
                         name=run_dir.name, resume="allow", dir=str(folder),
                         config=OmegaConf.to_container(cfg, resolve=True),
                         sync_tensorboard=True)
    except BaseException:
        adopt(run_dir, folder)
        raise
    return Tracking(run, run_dir, folder)


def finish(run: Any) -> None:
    """Close the wandb run of :func:`start` and move its files into ``<run dir>/wandb/``;
    anything else (no run: ``None``, ``False``) is left alone."""
    if isinstance(run, Tracking):
        run.finish()
