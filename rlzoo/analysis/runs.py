"""Finding finished runs and reading what their run dirs say: summary.json and .hydra/ configs.

A run is any directory holding ``summary.json`` (written by the trainer when a run finishes), at
any depth below the given directories (``runs/<env>/<algo>/<timestamp>-s<seed>/``, Hydra multirun
``multirun/<date>/<time>/<job>/``, ...). Run dirs are the only input: nothing here imports
rlzoo's training code, and a config is only read (OmegaConf), never instantiated.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlzoo.analysis.config import fill_added, flatten_config, normalize
from rlzoo.analysis.messages import Progress, note
from rlzoo.store.bounded import check_interpolations, load_json, parse_yaml, read_text

SUMMARY_FILE = "summary.json"
SUMMARY_BYTES_LIMIT = 2**20
"""The largest summary.json read, in bytes (the trainer's are under 1 KiB)."""

RETURN_LIMIT = 1e6
"""The largest magnitude of an episode return that a run dir's files may hold (summary.json's
``final_eval_return``, eval.csv's ``eval/return``): a value beyond it is refused as a corrupt or
edited file, never averaged. Declared once, for rlzoo.compare and the results page alike; no
task rlzoo ships comes near it (the best published MuJoCo returns at 1M steps are below 2e4,
MPE's and MaMuJoCo's at these budgets below 1e4 in magnitude), so it only catches garbage
(``1e308``). A user's env whose returns pass it cannot be compared with these tools."""

STEP_LIMIT = 10**12
"""The largest env step a run dir's files may name (summary.json's ``total_steps``, eval.csv's
steps): far beyond any run, and exact in both int64 and float64."""
EVENT_PREFIX = "events.out.tfevents."
# Subfolders of a run dir that never hold runs; not descended into.
_SKIP_DIRS = {"checkpoints", ".hydra", "videos", "__pycache__"}


@dataclass
class FinishedRun:
    """One finished run: where it is, what its summary.json says and its flattened config.

    ``config`` is ``.hydra/config.yaml`` flattened to dotted keys (``{"critic.n": 10, ...}``,
    interpolations resolved where they can be, integral floats as ints) with ``total_steps`` taken
    from summary.json (the steps the run really made); None when the file is missing or unreadable.
    ``choices`` are the config-group options Hydra recorded (``{"critic": "ensemble", ...}``, from
    ``.hydra/hydra.yaml``) and ``overridden`` the keys of the command-line overrides
    (``["critic", "algo.utd"]``, from ``.hydra/overrides.yaml``; None when absent); both are used
    only to write short labels.
    """

    path: Path
    env: str
    algo: str
    seed: int
    final_eval_return: float
    summary: dict[str, Any] = field(repr=False)
    total_steps: int | None = None
    config: dict[str, Any] | None = field(default=None, repr=False)
    choices: dict[str, str] = field(default_factory=dict, repr=False)
    overridden: list[str] | None = field(default=None, repr=False)


def read_summary(run_dir: Path) -> FinishedRun:
    """Parse ``run_dir/summary.json``; raise ValueError with a short reason if it is unusable.

    The returned run has no config yet (:func:`read_config` reads it).
    """
    path = run_dir / SUMMARY_FILE
    try:  # a regular file, not followed through a link, at most the limit actually read
        summary = load_json(path, SUMMARY_BYTES_LIMIT)
    except (OSError, ValueError) as exc:  # BoundError, JSONDecodeError are ValueErrors
        reason = "empty" if isinstance(exc, json.JSONDecodeError) and not exc.doc.strip() else exc
        raise ValueError(f"unreadable {SUMMARY_FILE} ({reason})") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{SUMMARY_FILE} is not a JSON object")
    missing = [k for k in ("algo", "env", "seed", "final_eval_return") if k not in summary]
    if missing:
        raise ValueError(f"{SUMMARY_FILE} lacks {', '.join(missing)}")
    if isinstance(summary["final_eval_return"], bool | str):  # float() would take them
        raise ValueError(f"{SUMMARY_FILE}'s final_eval_return is not a number")
    try:
        final = float(summary["final_eval_return"])
        seed = int(summary["seed"])
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{SUMMARY_FILE} has a non-numeric seed or final_eval_return") from None
    if not math.isfinite(final) or abs(final) > RETURN_LIMIT:
        raise ValueError(f"{SUMMARY_FILE}'s final_eval_return is {final:.6g}, not a finite "
                         f"return within +-{RETURN_LIMIT:,.0f}")
    steps = summary.get("total_steps")
    total_steps = None
    if steps is not None:
        if not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps <= STEP_LIMIT:
            raise ValueError(f"{SUMMARY_FILE}'s total_steps {str(steps)[:20]} is not an "
                             f"integer from 0 to {STEP_LIMIT:,}")
        total_steps = steps
    return FinishedRun(
        run_dir, str(summary["env"]), str(summary["algo"]), seed, final, summary, total_steps
    )


def find_runs(roots: Sequence[str | os.PathLike[str]]) -> list[FinishedRun]:
    """All runs (dirs with summary.json) at any depth below ``roots``, sorted by env, algo, seed
    and path.

    A directory that looks like a run (event files or a ``.hydra`` folder) but has no
    summary.json is still running or crashed: it is skipped with a note on stderr, as is an
    unusable summary.json. A run whose ``.hydra/config.yaml`` cannot be read is kept (with a note)
    and grouped by env, algo and total_steps only. A run dir is not searched for further runs
    below it; a run reached twice (through a link) counts once. A read that takes more than a
    few seconds shows its progress on stderr (:class:`~rlzoo.analysis.messages.Progress`).
    """
    runs: list[FinishedRun] = []
    seen: set[Path] = set()
    progress = Progress("reading runs, found")
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            if SUMMARY_FILE in filenames:
                dirnames[:] = []
                real = here.resolve()
                if real in seen:
                    continue
                seen.add(real)
                try:
                    run = read_summary(here)
                except ValueError as exc:
                    note(f"skipping {here}: {exc}")
                    continue
                try:
                    run.config, run.choices, run.overridden = read_config(here)
                except ValueError as exc:
                    note(f"{here}: {exc}; grouped by env, algo and total_steps only")
                if run.config is not None and run.total_steps is not None:
                    run.config["total_steps"] = run.total_steps
                runs.append(run)
                progress.advance()
                continue
            has_events = any(f.startswith(EVENT_PREFIX) for f in filenames)
            if has_events or ".hydra" in dirnames:
                note(f"skipping {here}: no {SUMMARY_FILE} (still running or crashed)")
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    progress.close()
    runs.sort(key=lambda r: (r.env, r.algo, r.seed, str(r.path)))
    return runs


def _override_key(override: str) -> str:
    """The key an override sets: ``+critic.n@pkg=5`` -> ``critic.n``, ``~eval`` -> ``eval``."""
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0].strip()


@functools.cache
def normalize_defaults() -> dict[str, Any]:
    """The ``normalize`` section of rlzoo's own conf/config.yaml, flattened
    (``{"normalize.obs": False, ...}``): what a run made before the section existed is read with
    (:func:`rlzoo.analysis.config.fill_added`)."""
    from omegaconf import OmegaConf

    path = Path(__file__).resolve().parent.parent / "conf" / "config.yaml"
    section = OmegaConf.to_container(OmegaConf.load(path).normalize, resolve=True)
    assert isinstance(section, dict)
    return flatten_config({"normalize": section})


def read_config(run_dir: Path) -> tuple[dict[str, Any], dict[str, str], list[str] | None]:
    """``(flattened config, config-group choices, override keys)`` of a run dir.

    Raises ValueError with a short reason when ``.hydra/config.yaml`` is missing or unreadable.

    Each of ``RUN_DIR/.hydra``'s files is read once, by :mod:`rlzoo.store.bounded` (a regular file
    opened without following a link, at most 1 MiB read, no YAML aliases, nesting and
    interpolations bounded; libyaml's parser), and nothing is instantiated. An interpolation is
    resolved where it can be (``total_steps: ${env.total_steps}``; OmegaConf is used only for a
    config that has one); one that cannot be resolved here (``${now:...}``, a missing
    environment variable) is kept as its text. Choices (``{"critic": "ensemble", "net":
    "simbav2", ...}``: every config group of rlzoo's, also those such as ``net`` that write
    elsewhere in the config) come from ``hydra.runtime.choices`` in ``RUN_DIR/.hydra/hydra.yaml``
    (``{}`` when absent), the keys the command line set from ``RUN_DIR/.hydra/overrides.yaml``
    (None when absent).
    """
    path = run_dir / ".hydra" / "config.yaml"
    if not os.path.lexists(path):
        raise ValueError("no .hydra/config.yaml")
    try:
        text = read_text(path)
        raw = parse_yaml(text)
        if not isinstance(raw, dict):
            raise ValueError("not a mapping")
        flat = flatten_config(raw)
        if "${" in text:
            flat = _resolved(raw, flat)
    except Exception as exc:  # noqa: BLE001 - yaml/omegaconf raise many kinds
        raise ValueError(f"cannot read .hydra/config.yaml ({type(exc).__name__}: {exc})") from None
    flat = fill_added(flat, normalize_defaults())
    return flat, read_choices(run_dir / ".hydra" / "hydra.yaml"), \
        read_overridden(run_dir / ".hydra" / "overrides.yaml")


def _resolved(raw: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """``flat`` (``raw`` flattened) with each value that holds an interpolation resolved where
    it can be, its text kept where it cannot; ``raw``'s interpolations costed first."""
    from omegaconf import Container, OmegaConf

    check_interpolations(raw)
    cfg = OmegaConf.create(raw)
    for key, value in flat.items():
        if "${" not in json.dumps(value):
            continue
        try:
            resolved = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
            if isinstance(resolved, Container):
                resolved = OmegaConf.to_container(resolved, resolve=True)
            flat[key] = normalize(resolved)
        except Exception:  # noqa: BLE001, S112 - keep the interpolation's text
            continue
    return flat


# ``hydra.runtime.choices`` as Hydra writes it; each line is consumed one way only (linear time)
_CHOICES = re.compile(r"^  runtime:\n(?:    .*\n)*?    choices:\n((?:      .*\n)*)", re.MULTILINE)


def read_choices(path: Path) -> dict[str, str]:
    """``hydra.runtime.choices`` of a run's ``hydra.yaml`` (rlzoo's groups only, not Hydra's
    own ``hydra/...``); ``{}`` when absent or unreadable (the labels fall back to config values).
    Hydra writes the block at a fixed indentation: that block alone is parsed when found."""
    if not os.path.lexists(path):
        return {}
    try:
        text = read_text(path)
        block = _CHOICES.search(text)
        if block is not None:
            recorded = parse_yaml(textwrap.dedent(block.group(1)))
        else:
            recorded = parse_yaml(text)
            for key in ("hydra", "runtime", "choices"):
                recorded = recorded.get(key) if isinstance(recorded, dict) else None
    except Exception:  # noqa: BLE001 - the labels fall back to config values
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {str(k): str(v) for k, v in recorded.items()
            if isinstance(v, str) and "/" not in str(k)}  # not Hydra's own (hydra/launcher)


def read_overridden(path: Path) -> list[str] | None:
    """The keys the command line set (``RUN_DIR/.hydra/overrides.yaml``); None when absent or
    unreadable (the labels then show every differing value)."""
    if not os.path.lexists(path):
        return None
    try:
        items = parse_yaml(read_text(path))
    except Exception:  # noqa: BLE001 - the labels then show every differing value
        return None
    return [_override_key(str(item)) for item in items] if isinstance(items, list) else None
