"""A seed group on disk: one ordinary run dir per seed, tied together by ``group.json``.

Every run is a group: ``seeds=K`` trains seeds ``seed .. seed + K - 1`` in one process
(``rlzoo.algos.seed_axis``), and a single run is a group of one, with the same ``group.json``.
Each seed gets its own run dir, named like a single run of that seed (``<stamp>-s<seed>``),
holding its own ``.hydra/config.yaml`` (with its own ``seed``), TensorBoard events,
``summary.json`` and ``policy.pt``, so every reader of run dirs treats it as a run. The group's
checkpoints (every seed's weights, optimizers, replay and envs: one file) and its ``train.log``
live in the first seed's dir, the group's *home*; every member's ``group.json`` names the home
and the members (paths relative to the parent folder), so ``resume=`` on any member continues
the whole group.
A run dir written before single runs wrote ``group.json`` is read as a group of one
(:func:`run_group`). This module is the one place that knows how many members a group has
(:meth:`SeedGroup.member_state`); its callers never branch on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlzoo.errors import UserError, one_line
from rlzoo.store.bounded import load_json, load_yaml
from rlzoo.store.rundir import write_atomic

GROUP_FILE = "group.json"
GROUP_FORMAT = 1
# A group's bounds, checked by the settings before a run starts and here in a group.json read back
MAX_SEED = 2**31 - 1  # seeds go to numpy, torch, gymnasium and PettingZoo, some of them 32-bit
MAX_SEEDS = 1024  # seeds trained together in one process


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
class SeedGroup:
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

    def record(self) -> dict[str, object]:
        """What ``group.json`` holds."""
        return {"format": GROUP_FORMAT, "home": self.home.name,
                "members": [d.name for d in self.dirs], "seeds": list(self.seeds)}

    def member_state(self, algo_state: dict[str, Any], k: int) -> dict[str, Any]:
        """Member ``k``'s part of the group's checkpointed algorithm state (module weights
        with the seed axis first, ``[K, ...]``, a group of one's too): slice ``k`` of its
        module weights, a single run's state dict."""
        return {name: value[k] for name, value in algo_state["modules"].items()}

    def write(self, dirs: tuple[Path, ...] | None = None) -> None:
        """``group.json`` into every member's dir (or into ``dirs``)."""
        text = json.dumps(self.record(), indent=2) + "\n"
        for d in self.dirs if dirs is None else dirs:
            write_atomic(d / GROUP_FILE, text)


def _plain_name(value: object, what: str) -> str:
    """``value`` if it is the name of a folder beside the group's home (no path parts)."""
    if not isinstance(value, str) or not value or value in (".", "..") \
            or Path(value).name != value or "\0" in value:
        raise ValueError(f"{what} {value!r} is not the name of a folder beside the group's home")
    return value


def member_names(home: str, seed0: int, seed: int) -> re.Pattern[str]:
    """The names the member of ``seed`` may have in a group whose home is named ``home``:
    :func:`member_dir`'s name, or that name numbered by ``claim_new_dir`` (``-<k>`` before its
    ``-s<seed>``) when another launch had taken it."""
    if seed == seed0:
        return re.compile(re.escape(home))
    name = member_dir(Path(home), seed0, seed).name
    stem = name[: -len(f"-s{seed}")]
    return re.compile(rf"{re.escape(stem)}(-[2-9]|-[1-9]\d+)?-s{seed}")


def parse_group(record: object, run_dir: Path) -> SeedGroup:
    """A ``group.json`` record read from ``run_dir`` as a :class:`SeedGroup`, checked as data: a
    dict of exactly ``format`` (1), ``home``, ``members`` and ``seeds``; the home is the first
    member; the seeds are consecutive from the home's (each seed once); each member is a plain
    folder name beside the home (no ``/``, ``..`` or absolute path), named by the group's rule
    (:func:`member_names`), each once; and ``run_dir`` is one of them. A group of one (a single
    run) is ``run_dir`` whatever its name now, so a copied or renamed run dir still resumes.
    ``ValueError`` otherwise."""
    if not isinstance(record, dict):
        raise ValueError("it is not a JSON object")
    if set(record) != {"format", "home", "members", "seeds"}:
        raise ValueError("it must hold exactly format, home, members and seeds")
    if record["format"] != GROUP_FORMAT or isinstance(record["format"], bool):
        raise ValueError(f"format {record['format']!r} is not {GROUP_FORMAT}")
    home = _plain_name(record["home"], "home")
    members, seeds = record["members"], record["seeds"]
    if not isinstance(members, list) or not isinstance(seeds, list):
        raise ValueError("members and seeds must be lists")
    if not 1 <= len(members) <= MAX_SEEDS or len(seeds) != len(members):
        raise ValueError(f"{len(members)} members and {len(seeds)} seeds; a group has 1 to "
                         f"{MAX_SEEDS} members, one seed each")
    if any(not isinstance(s, int) or isinstance(s, bool) for s in seeds):
        raise ValueError("seeds must be integers")
    seed0 = seeds[0]
    if seeds != list(range(seed0, seed0 + len(seeds))) or not \
            0 <= seed0 <= MAX_SEED - len(seeds) + 1:
        raise ValueError(f"seeds {seeds} are not {len(seeds)} consecutive seeds from "
                         f"{seed0} within 0..{MAX_SEED}")
    names = [_plain_name(m, "member") for m in members]
    if len(names) == 1:  # a single run: its dir, whatever it is called now (copied, renamed)
        return SeedGroup(run_dir, (run_dir,), (seed0,))
    if names[0] != home:
        raise ValueError(f"the first member {names[0]!r} is not the home {home!r}")
    if len(set(names)) != len(names):
        raise ValueError("a member is named twice")
    for name, seed in zip(names, seeds):
        if not member_names(home, seed0, seed).fullmatch(name):
            raise ValueError(f"member {name!r} is not the name of seed {seed}'s run dir in a "
                             f"group whose home is {home!r}")
    if run_dir.name not in names:
        raise ValueError(f"{run_dir.name} is not one of its members")
    parent = run_dir.parent
    dirs = tuple(parent / name for name in names)
    linked = [d.name for d in dirs if d.is_symlink()]
    if linked:
        raise ValueError(f"member {linked[0]!r} is a symbolic link, not a folder beside the home")
    return SeedGroup(parent / home, dirs, tuple(seeds))


def read_record(path: Path) -> object:
    """The JSON in ``path`` (``OSError`` or ``ValueError`` when it cannot be read), read by
    :func:`rlzoo.store.bounded.load_json`: a regular file, no link followed, at most 1 MiB read."""
    return load_json(path)


def read_group(run_dir: Path) -> SeedGroup | None:
    """The group ``run_dir``'s ``group.json`` records, or None when it has none (nothing
    written yet, or a single run from before single runs wrote one). ``group.json`` is data
    from a file, so it is checked before it is used (:func:`parse_group`); a damaged or
    altered one is one ``UserError`` line."""
    path = run_dir / GROUP_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        if path.is_symlink():  # never read through a link (a run dir's files are its own)
            raise ValueError("it is a symbolic link, not a file of the run's own")
        return parse_group(read_record(path), run_dir)
    except (OSError, ValueError, RecursionError) as err:
        raise UserError(f"cannot use {path} ({one_line(err, 160)}); it ties this run to its seed "
                        "group: restore it from another member's dir (a single run's: remove it, "
                        "and it is read as a group of one)") from None


def run_group(run_dir: Path) -> SeedGroup:
    """The group the run in ``run_dir`` belongs to: its ``group.json``'s (:func:`read_group`),
    or, for a run dir without one (a single run written before single runs wrote it), a group
    of one whose seed is its ``.hydra/config.yaml``'s. ``UserError`` (one line) when neither
    can be read."""
    from omegaconf import DictConfig

    group = read_group(run_dir)
    if group is not None:
        return group
    config = run_dir / ".hydra" / "config.yaml"
    try:
        cfg = load_yaml(config)  # size, aliases and interpolations bounded
        seed = cfg.get("seed") if isinstance(cfg, DictConfig) else None
    except Exception as err:  # noqa: BLE001 - yaml and omegaconf raise many kinds
        raise UserError(f"cannot read {config} ({type(err).__name__}: {one_line(err, 120)}); "
                        f"{run_dir} is not a run dir rlzoo.train wrote") from None
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise UserError(f"{config} has no integer seed ({seed!r}); restore the file "
                        "rlzoo.train wrote")
    return SeedGroup(run_dir, (run_dir,), (seed,))


def check_members(group: SeedGroup, present: tuple[Path, ...] | None = None) -> None:
    """Check that the members' files agree with ``group`` before anything uses them: each present
    member's ``group.json`` says the same, and its ``.hydra/config.yaml`` parses and has its
    member's ``seed`` and the group's ``seeds``. ``present``: the members to check (default all).
    Raises one ``UserError`` line naming the first member that disagrees; writes nothing."""
    from omegaconf import DictConfig

    want = group.record()
    for d in group.dirs if present is None else present:  # in the caller's order
        k = group.dirs.index(d)
        path = d / GROUP_FILE
        if len(group.dirs) > 1:  # a single run's group.json is the one it was read from
            _check_record(path, want, group)
        config = d / ".hydra" / "config.yaml"
        try:
            cfg = load_yaml(config)  # size, aliases and interpolations bounded
            if not isinstance(cfg, DictConfig):
                raise ValueError("not a mapping")
            seed, seeds = cfg.get("seed"), cfg.get("seeds")
        except Exception as err:  # noqa: BLE001 - yaml and omegaconf raise many kinds
            raise UserError(f"cannot read {config} ({type(err).__name__}: {one_line(err, 120)}); "
                            "restore the file rlzoo.train wrote; nothing was changed") from None
        if seeds in (None, 1) and len(group.dirs) > 1:
            raise UserError(
                f"{config} is a single run's (seeds={seeds}), so {path} is stale (left by a seed "
                f"group's launch stopped before training, or copied in); remove {path}")
        if len(group.dirs) == 1 and seeds not in (None, 1) and not path.exists():
            raise UserError(
                f"{config} has seeds={seeds} but {d} has no {GROUP_FILE}: it is a member of a "
                f"{seeds}-seed group; restore {GROUP_FILE} from another member's dir")
        if seed != group.seeds[k] or (1 if seeds is None else seeds) != len(group.dirs):
            raise UserError(
                f"{config} has seed={seed} seeds={seeds}, but group.json names it seed "
                f"{group.seeds[k]} of {len(group.dirs)}; the group's files disagree: restore them "
                "from the run's own copies; nothing was changed")


def _check_record(path: Path, want: dict[str, object], group: SeedGroup) -> None:
    """``path`` (a member's ``group.json``) says what the home's says (``want``)."""
    try:
        theirs = read_record(path)
    except (OSError, ValueError, RecursionError) as err:
        raise UserError(f"cannot use {path} ({one_line(err, 160)}); every member of a "
                        "seed group holds the same group.json: restore it from the home's"
                        ) from None
    if theirs != want:
        raise UserError(f"{path} differs from the group.json of {group.home}; every member "
                        "of a seed group holds the same one: restore it from the home's")
