"""A seed group on disk: one ordinary run dir per seed, tied together by ``group.json``.

``seeds=K`` trains seeds ``seed .. seed + K - 1`` in one process (``rlzoo.algos.seeds``). Each seed
gets its own run dir, named like a single run of that seed (``<stamp>-s<seed>``), holding its
own ``.hydra/config.yaml`` (with its own ``seed``), TensorBoard events, ``summary.json`` and
``policy.pt``, so every reader of run dirs treats it as a run. The group's checkpoints (every
seed's weights, optimizers, replay and envs: one file) and its ``train.log`` live in the first
seed's dir, the group's *home*; every member's ``group.json`` names the home and the members
(paths relative to the parent folder), so ``resume=`` on any member continues the whole group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlzoo.errors import UserError
from rlzoo.run.rundir import write_atomic

GROUP_FILE = "group.json"
GROUP_FORMAT = 1


def member_dir(home: Path, seed0: int, seed: int) -> Path:
    """The run dir of ``seed`` in a group whose first seed ``seed0`` trains in ``home``:
    ``home``'s name with its ``-s<seed0>`` suffix replaced by ``-s<seed>`` (Hydra's default
    names end so), or ``-s<seed>`` appended to a name without it."""
    if seed == seed0:
        return home
    suffix = f"-s{seed0}"
    name = home.name[: -len(suffix)] if home.name.endswith(suffix) else home.name
    return home.with_name(f"{name}-s{seed}")


@dataclass(frozen=True)
class Group:
    """The members of a seed group.

    Attributes:
        home: the first seed's run dir, which holds the group's checkpoints.
        dirs: every member's run dir, in seed order (``dirs[0] == home``).
        seeds: each member's seed.
    """

    home: Path
    dirs: tuple[Path, ...]
    seeds: tuple[int, ...]

    def index(self, run_dir: Path) -> int:
        """Which member ``run_dir`` is."""
        resolved = [d.resolve() for d in self.dirs]
        return resolved.index(run_dir.resolve())

    def write(self) -> None:
        """``group.json`` into every member's dir."""
        record = {"format": GROUP_FORMAT, "home": self.home.name,
                  "members": [d.name for d in self.dirs], "seeds": list(self.seeds)}
        text = json.dumps(record, indent=2) + "\n"
        for d in self.dirs:
            write_atomic(d / GROUP_FILE, text)


def read_group(run_dir: Path) -> Group | None:
    """The group ``run_dir`` belongs to, or None for a single run; a damaged ``group.json`` is
    one ``UserError`` line."""
    path = run_dir / GROUP_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        home = run_dir.parent / str(record["home"])
        dirs = tuple(run_dir.parent / str(name) for name in record["members"])
        seeds = tuple(int(s) for s in record["seeds"])
        if len(dirs) != len(seeds) or not dirs or any("/" in d.name or d.name in ("", ".", "..")
                                                      for d in dirs):
            raise ValueError("members and seeds differ")
        if run_dir.name not in {d.name for d in dirs}:
            raise ValueError(f"{run_dir.name} is not one of its members")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"cannot read {path} ({err}); it ties this run to its seed group: "
                        "restore it from the group's other run dirs") from None
    return Group(home, dirs, seeds)
