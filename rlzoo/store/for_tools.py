"""Run dirs and envs for tools built on rlzoo: the public API the results tool
(``tools/reproduce``) reaches rlzoo through, with ``rlzoo.analysis`` (reading finished runs),
``rlzoo.errors``, ``rlzoo.store.writer`` and the command lines (``python -m rlzoo.train``). What a
tool
needs to know of a run dir (is it a run, which dirs make its seed group, does a live trainer hold
it) is answered here, so the tool never depends on ``rlzoo.run``'s internals, which may change.

* ``holds_a_run(run_dir) -> bool``: whether ``run_dir`` holds a run's results (a checkpoint or a
  ``summary.json``).
* :func:`recorded_group_dirs`: the dirs a seed group's ``group.json`` names.
* ``member_dir(home, first_seed, seed) -> Path``: the default dir of seed ``seed`` of a group
  whose home (first seed's dir) is ``home``: beside it, ``<name>-s<seed>``.
* :func:`trainer_pid`, :func:`check_free`: the run dir's lock (``.rlzoo.lock``).
* ``make_env(cfg, num_envs, seed) -> VecEnv``: the vectorized env a composed config trains on
  (``num_envs`` envs seeded ``seed + i``); ``run_episodes(envs, obs, policy) -> [Episodes]``: one
  episode per env, as an evaluation runs them; ``EVAL_SEED_OFFSET``: the eval envs' seeds are
  ``seed + EVAL_SEED_OFFSET + i``.
* ``MAX_SEED``: the largest seed rlzoo accepts (``seed + seeds - 1`` at most).

The names in ``_LAZY`` are rlzoo's own objects (``rlzoo.config.build.make_env``,
``rlzoo.envs.base.run_episodes``, ...), imported when first read: their modules import torch, so
a tool's start (``--help``, a usage mistake) stays cheap.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rlzoo.store.rundir import RunLock, holds_a_run

# name -> its module, imported when the name is first read
_LAZY = {"MAX_SEED": "rlzoo.store.group", "EVAL_SEED_OFFSET": "rlzoo.config.build",
         "make_env": "rlzoo.config.build", "run_episodes": "rlzoo.envs.base",
         "member_dir": "rlzoo.store.group"}
__all__ = ["holds_a_run", "recorded_group_dirs", "trainer_pid", "check_free", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlzoo.store.for_tools' has no attribute {name!r}")


def recorded_group_dirs(home: Path) -> list[Path] | None:
    """The run dirs of the seed group whose home (its first seed's dir) is ``home``, in seed
    order (``[home, ...]``; ``[home]`` for a single run), as its ``group.json`` names them;
    None when ``home`` has none (nothing written yet, or a single run written before single
    runs wrote one). A damaged or foreign ``group.json`` is one ``UserError``."""
    from rlzoo.store.group import read_group  # imports torch: read when first called

    group = read_group(home)
    return None if group is None else list(group.dirs)


def trainer_pid(run_dir: Path) -> str | None:
    """The pid (as text) of the live process other than this one that holds ``run_dir``'s lock,
    or None; writes nothing. A link or special file in the lock's place is one ``UserError``."""
    return RunLock.owner(run_dir)


def check_free(run_dir: Path) -> None:
    """Raise the "in use" ``UserError`` when a live process holds ``run_dir``'s lock."""
    RunLock.check_free(run_dir)
