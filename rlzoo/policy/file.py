"""``policy.pt``, the file a run writes at every checkpoint and at its end, read as data: where
it is (or why a run dir has none), its record checked (loadable without running code, rlzoo's
format, finite weights) and its env spec checked field by field (``rlzoo/policy/policy.py`` loads
it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlzoo.algos.base import EnvSpec
from rlzoo.errors import UserError, one_line, shell_quote
from rlzoo.store.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from rlzoo.store.extras import POLICY_FILE, POLICY_FORMAT
from rlzoo.store.group import read_group
from rlzoo.store.nonfinite import describe_nonfinite, nonfinite_entries
from rlzoo.store.rundir import RunLock

RECORD_KEYS = ("format", "step", "config", "spec", "weights")


SPEC_INTS = {"obs_dim": 1, "act_dim": 1, "n_agents": 1, "state_dim": 0}  # name: least value
MAX_SPEC_SIZE = 1 << 24  # no env rlzoo trains has observations or agents near this


def read_spec(record: Any) -> EnvSpec:
    """The ``spec`` of a ``policy.pt`` as an :class:`EnvSpec`, checked as data: a dict of
    EnvSpec's fields only; sizes are integers in their range (``obs_dim``, ``act_dim``,
    ``n_agents`` >= 1, ``state_dim`` >= 0, all below 2**24); ``act_dims`` one integer in
    ``1..act_dim`` per agent (or none); bounds finite-or-infinite floats with ``low <= high``;
    ``max_episode_steps`` null (or absent) or an integer in ``[1, 2**24)``. ``ValueError``
    naming the field otherwise."""
    if not isinstance(record, dict):
        raise ValueError("the spec is not a mapping")
    unknown = set(record) - {f for f in EnvSpec.__dataclass_fields__}
    if unknown:
        raise ValueError(f"unknown spec fields {sorted(map(str, unknown))}")
    values: dict[str, Any] = {}
    for name, least in SPEC_INTS.items():
        value = record.get(name, least if name in ("n_agents", "state_dim") else None)
        if not isinstance(value, int) or isinstance(value, bool) \
                or not least <= value < MAX_SPEC_SIZE:
            raise ValueError(f"spec {name}={value!r} is not an integer in [{least}, "
                             f"{MAX_SPEC_SIZE})")
        values[name] = value
    dims = record.get("act_dims", ())
    if not isinstance(dims, (list, tuple)) or any(
            not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= values["act_dim"]
            for d in dims) or (dims and len(dims) != values["n_agents"]):
        raise ValueError(f"spec act_dims={dims!r} is not one size in [1, act_dim] per agent")
    values["act_dims"] = tuple(dims)
    for name in ("action_low", "action_high"):
        bound = record.get(name, ())
        if not isinstance(bound, (list, tuple)) or len(bound) > MAX_SPEC_SIZE or any(
                not isinstance(x, (int, float)) or isinstance(x, bool) or math.isnan(x)
                for x in bound):
            raise ValueError(f"spec {name} is not a list of numbers")
        values[name] = tuple(float(x) for x in bound)
    if any(lo > hi for lo, hi in zip(values["action_low"], values["action_high"])):
        raise ValueError("spec action_low exceeds action_high")
    limit = record.get("max_episode_steps")  # absent in files written before it was recorded
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                              or not 1 <= limit < MAX_SPEC_SIZE):
        raise ValueError(f"spec max_episode_steps={limit!r} is not null or an integer in "
                         f"[1, {MAX_SPEC_SIZE})")
    values["max_episode_steps"] = limit
    return EnvSpec(**values)


def policy_path(run_dir: Path) -> Path:
    if run_dir.is_file():
        return run_dir
    if run_dir.exists() and not run_dir.is_dir():  # a FIFO, a device (/dev/zero), a socket
        raise UserError(
            f"{run_dir} is not a regular file or a directory (a FIFO, device or socket), so it "
            "is not read; pass a run directory made by rlzoo.train or the path of its policy.pt"
        )
    if not run_dir.is_dir():
        raise UserError(
            f"run directory {run_dir} does not exist; pass a run directory made by rlzoo.train "
            "(runs/<env>/<algo>/<timestamp>-s<seed>)"
        )
    path = run_dir / POLICY_FILE
    if not path.exists() and not (run_dir / ".hydra" / "config.yaml").is_file():
        raise UserError(
            f"{run_dir} has no .hydra/config.yaml and no {POLICY_FILE}, so it is not an rlzoo run "
            "directory; pass the directory rlzoo.train wrote (it holds .hydra/, checkpoints/ "
            f"and {POLICY_FILE})"
        )
    if not path.exists():
        raise UserError(no_policy(run_dir))
    return path


def no_policy(run_dir: Path) -> str:
    """Why ``run_dir`` has no ``policy.pt``, and what works instead: its run (or its seed
    group, whose checkpoints are in the group's first run dir) is still training towards its
    first checkpoint, or it has checkpoints (``rlzoo.evaluate`` reads them), or neither."""
    try:
        group = read_group(run_dir)
    except UserError:
        group = None
    home = group.home if group is not None else run_dir
    owner = RunLock.owner(home) or RunLock.owner(run_dir)
    if owner is not None:
        return (f"{run_dir} has no {POLICY_FILE} yet: its run is still training (pid {owner}) "
                f"and writes {POLICY_FILE} at its first checkpoint (every checkpoint.every steps) "
                "and at its end; load it again once the first checkpoint is written")
    if list_checkpoints(home / "checkpoints"):
        return (f"{run_dir} has no {POLICY_FILE} (runs made before this rlzoo version have "
                f"none); evaluate its checkpoints with python -m rlzoo.evaluate "
                f"{shell_quote(run_dir)}")
    return (f"{run_dir} has no {POLICY_FILE} and its run has no checkpoint: it stopped before "
            "its first checkpoint, so there is no trained policy; train it again")


def read_policy_record(path: Path) -> dict[str, Any]:
    """``policy.pt``'s contents, checked: loadable, rlzoo's, a known format, finite weights."""
    try:
        record = load_checkpoint(path, map_location="cpu")
    except CheckpointError as err:
        raise UserError(f"{one_line(str(err))}; the file is damaged or was not written by "
                        "rlzoo.train (a run rewrites it at every checkpoint; python -m "
                        "rlzoo.evaluate RUN_DIR reads the checkpoints instead)") from None
    fmt = record.get("format")
    if fmt != POLICY_FORMAT:
        raise UserError(f"{path} has format {fmt!r}, which this rlzoo does not know (it reads "
                        f"format {POLICY_FORMAT}); load it with the rlzoo version that wrote it")
    missing = [k for k in RECORD_KEYS if k not in record]
    step = record.get("step")  # an env step: an integer (no bool) in [0, 2**53]
    bad_types = not (type(step) is int and 0 <= step <= 2**53
                     and isinstance(record.get("config"), dict)
                     and isinstance(record.get("spec"), dict)
                     and isinstance(record.get("weights"), dict))
    if missing or bad_types:
        what = f"no {', '.join(missing)}" if missing else "entries of the wrong type"
        raise UserError(f"{path} is not a policy file written by rlzoo.train ({what}); pass a "
                        "run directory whose policy.pt rlzoo wrote")
    bad = nonfinite_entries({"weights": record["weights"]}, sections=None)
    if bad:
        raise UserError(f"{path} holds NaN or inf in {describe_nonfinite(bad)}; it cannot act; "
                        "evaluate an earlier checkpoint with python -m rlzoo.evaluate RUN_DIR "
                        "--checkpoint PATH")
    return record
