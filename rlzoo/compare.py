"""Compare finished runs: IQM with bootstrap confidence intervals, learning curves, P(X > Y).

Usage::

    python -m rlzoo.compare runs/ [more dirs ...] --out report/ [--poi sac td3]
        [--group-by KEY ...] [--label RULE ...]

A run is any directory holding ``summary.json`` (written by the trainer when a run finishes), at any
depth below the given directories (``runs/<env>/<algo>/<timestamp>-s<seed>/``, Hydra multirun
``multirun/<date>/<time>/<job>/``, ...). Runs are grouped by env and algo name (summary.json) and by
every value of their ``.hydra/config.yaml`` that differs between them, except the bookkeeping keys
of :data:`IGNORED_KEYS`; ``--group-by`` names the keys instead. Runs with a different
``total_steps`` or ``eval.*`` (:data:`MEASUREMENT_KEYS`) are never pooled. Each group is labelled by
its algo and the overrides that tell it apart from the algo's other groups (``sac critic=ensemble``,
``sac algo.utd=5``); ``--label`` renames groups. The config is only read (OmegaConf), never
instantiated.

Writes ``OUT/comparison.md`` (tables), ``OUT/comparison.json`` (the same numbers) and one
``OUT/<env>.png`` per env (IQM learning curves of ``eval/return`` with 95% CI bands).
Statistics are in :mod:`rlzoo.stats` (rliable's definitions, numpy implementation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlzoo import stats

SUMMARY_FILE = "summary.json"
EVENT_PREFIX = "events.out.tfevents."
CURVE_TAG = "eval/return"
# Subfolders of a run dir that never hold runs; not descended into.
_SKIP_DIRS = {"checkpoints", ".hydra", "videos", "__pycache__"}


class CompareError(Exception):
    """A user-facing error: the message is ``<what>; <how to fix>``."""


@dataclass
class Run:
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


@dataclass
class Curve:
    """Aligned curves of one (env, algo) group: ``values[run, point]`` at ``steps[point]``."""

    steps: np.ndarray
    values: np.ndarray
    run_paths: list[str]


def note(message: str) -> None:
    """Print a note on stderr, on one line (newlines in ``message`` become spaces)."""
    print(f"rlzoo: note: {' '.join(message.split())}", file=sys.stderr)


# --------------------------------------------------------------------------- finding runs


def _read_summary(run_dir: Path) -> Run:
    """Parse ``run_dir/summary.json``; raise ValueError with a short reason if it is unusable."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable {SUMMARY_FILE} ({exc})") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{SUMMARY_FILE} is not a JSON object")
    missing = [k for k in ("algo", "env", "seed", "final_eval_return") if k not in summary]
    if missing:
        raise ValueError(f"{SUMMARY_FILE} lacks {', '.join(missing)}")
    try:
        final = float(summary["final_eval_return"])
        seed = int(summary["seed"])
    except (TypeError, ValueError):
        raise ValueError(f"{SUMMARY_FILE} has a non-numeric seed or final_eval_return") from None
    if not math.isfinite(final):
        raise ValueError(f"final_eval_return is {final}")
    steps = summary.get("total_steps")
    total_steps = int(steps) if isinstance(steps, int | float) and math.isfinite(steps) else None
    return Run(
        run_dir, str(summary["env"]), str(summary["algo"]), seed, final, summary, total_steps
    )


def find_runs(roots: Sequence[str | os.PathLike[str]]) -> list[Run]:
    """All runs (dirs with summary.json) at any depth below ``roots``, sorted by path.

    A directory that looks like a run (event files or a ``.hydra`` folder) but has no
    summary.json is still running or crashed: it is skipped with a note on stderr, as is an
    unusable summary.json. A run whose ``.hydra/config.yaml`` cannot be read is kept (with a note)
    and grouped by env, algo and total_steps only. A run dir is not searched for further runs
    below it.
    """
    runs: list[Run] = []
    seen: set[Path] = set()
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
                    run = _read_summary(here)
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
                continue
            has_events = any(f.startswith(EVENT_PREFIX) for f in filenames)
            if has_events or ".hydra" in dirnames:
                note(f"skipping {here}: no {SUMMARY_FILE} (still running or crashed)")
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    runs.sort(key=lambda r: (r.env, r.algo, r.seed, str(r.path)))
    return runs


# --------------------------------------------------------------------------- run configs

IGNORED_KEYS: dict[str, str] = {
    "seed": "the replication axis: runs that differ only in their seed are the samples of a group",
    "resume": "the run dir a run was continued from; a resumed run continues the same experiment",
    "device": "where the tensors live (cpu, cuda); the same algorithm, up to float rounding",
    "torch_threads": "CPU threads of torch; speed only",
    "compile": "torch.compile of the networks; speed only, the same computation",
    "cudagraphs": "the update replayed from a CUDA graph; speed only, the same computation",
    "log.*": "how often scalars are logged and whether a progress bar is shown",
    "checkpoint.*": "how often checkpoints are saved and how many are kept",
    "hydra.*": "Hydra's output dirs and job bookkeeping",
    "env.total_steps": "the env's default budget, copied into total_steps unless overridden; "
    "the budget a run used is total_steps, which is always compared",
}
"""Config keys (``x.*``: every key below ``x``) that never split groups automatically, and why.

None of them changes what is learned or what is measured. ``--group-by`` may still name them.
"""

MEASUREMENT_KEYS = ("total_steps", "eval.*")
"""Keys (``x.*``: every key below ``x``) that change what a score measures: runs that differ in
them are never pooled, even when ``--group-by`` does not name them. ``total_steps`` is read from
summary.json (the steps a run really made)."""

MAX_LABEL_TERMS = 6
"""At most this many ``key=value`` terms in a label; the rest are counted (``(+3)``)."""

_MISSING = object()  # a key a run's config does not have
_AUTO_LABEL_FIELDS = ("label", "algo", "env")


def _under(key: str, pattern: str) -> bool:
    """``key`` is ``pattern`` or a key below it (``critic.n`` is under ``critic`` and ``log.*``
    matches ``log.every``)."""
    pattern = pattern.removesuffix(".*")
    return key == pattern or key.startswith(pattern + ".")


def _ignored(key: str) -> bool:
    return any(_under(key, pattern) for pattern in IGNORED_KEYS)


def _measurement(key: str) -> bool:
    return any(_under(key, pattern) for pattern in MEASUREMENT_KEYS)


def _normalize(value: Any) -> Any:
    """A config value in a canonical form: integral floats as ints (``5.0`` == ``5``), tuples as
    lists, anything unusual as text."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, list | tuple):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normalize(v) for k, v in value.items()}
    return str(value)


def _canon(value: Any) -> str:
    """A string equal for equal config values (the identity used to group runs)."""
    if value is _MISSING:
        return "\0unset"
    return json.dumps(value, sort_keys=True)


def format_value(value: Any) -> str:
    """A config value written as a Hydra override writes it: ``5``, ``0.0003``, ``[64,64]``,
    ``null``, ``true``; a key a run does not have is ``(unset)``."""
    if value is _MISSING:
        return "(unset)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def flatten_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The leaves of a nested config as ``{dotted key: value}``, in the file's order.

    Mappings are descended into; lists and empty mappings are leaves. Values are normalized
    (:func:`_normalize`).
    """
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten_config(v, key))
        else:
            out[key] = _normalize(v)
    return out


def _override_key(override: str) -> str:
    """The key an override sets: ``+critic.n@pkg=5`` -> ``critic.n``, ``~eval`` -> ``eval``."""
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0].strip()


def read_config(run_dir: Path) -> tuple[dict[str, Any], dict[str, str], list[str] | None]:
    """``(flattened config, config-group choices, override keys)`` of a run dir.

    Raises ValueError with a short reason when ``.hydra/config.yaml`` is missing or unreadable.

    Reads ``RUN_DIR/.hydra/config.yaml`` with OmegaConf (YAML safe loading) and never instantiates
    anything. An interpolation is resolved where it can be (``total_steps: ${env.total_steps}``);
    one that cannot be resolved here (``${now:...}``, a missing environment variable) is kept
    as its text. Choices (``{"critic": "ensemble", "algo": "sac", ...}``) come from
    ``hydra.runtime.choices`` in ``RUN_DIR/.hydra/hydra.yaml`` (``{}`` when absent), the keys the
    command line set from ``RUN_DIR/.hydra/overrides.yaml`` (None when absent).
    """
    from omegaconf import Container, DictConfig, OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        raise ValueError("no .hydra/config.yaml")
    try:
        cfg = OmegaConf.load(path)
        if not isinstance(cfg, DictConfig):
            raise ValueError("not a mapping")
        raw = OmegaConf.to_container(cfg, resolve=False)
    except Exception as exc:  # noqa: BLE001 - yaml/omegaconf raise many kinds
        raise ValueError(f"cannot read .hydra/config.yaml ({type(exc).__name__}: {exc})") from None
    assert isinstance(raw, dict)
    flat = flatten_config(raw)
    for key, value in flat.items():
        if "${" not in json.dumps(value):
            continue
        try:
            resolved = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
            if isinstance(resolved, Container):
                resolved = OmegaConf.to_container(resolved, resolve=True)
            flat[key] = _normalize(resolved)
        except Exception:  # noqa: BLE001, S112 - keep the interpolation's text
            continue
    top = {key.split(".", 1)[0] for key in flat}
    choices: dict[str, str] = {}
    hydra_yaml = run_dir / ".hydra" / "hydra.yaml"
    if hydra_yaml.is_file():
        try:
            node = OmegaConf.select(OmegaConf.load(hydra_yaml), "hydra.runtime.choices")
            recorded = OmegaConf.to_container(node, resolve=False) if node is not None else {}
        except Exception:  # noqa: BLE001 - the labels fall back to config values
            recorded = {}
        if isinstance(recorded, dict):
            choices = {
                str(k): str(v) for k, v in recorded.items()
                if isinstance(v, str) and str(k) in top
            }
    overridden: list[str] | None = None
    overrides_yaml = run_dir / ".hydra" / "overrides.yaml"
    if overrides_yaml.is_file():
        try:
            items = OmegaConf.to_container(OmegaConf.load(overrides_yaml), resolve=False)
        except Exception:  # noqa: BLE001 - the labels then show every differing value
            items = None
        if isinstance(items, list):
            overridden = [_override_key(str(item)) for item in items]
    return flat, choices, overridden


# --------------------------------------------------------------------------- grouping runs


@dataclass
class Group:
    """Runs pooled into one row: same env, algo name and grouping values; seeds differ.

    ``values`` are the grouping keys' values (equal in every run of the group). ``terms`` are the
    ``key=value`` pairs of its label that tell it apart from the other groups of its algo (a
    config group such as ``critic`` by its choice, ``ensemble``), ``defaults`` those left out of
    the label because the group has the default value there, ``auto_label`` the label they
    make (``sac critic=ensemble``), ``label`` the one shown (``auto_label`` unless ``--label``
    renamed it).
    """

    env: str
    algo: str
    has_config: bool
    values: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    terms: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    auto_label: str = ""
    label: str = ""

    @property
    def choices(self) -> dict[str, str]:
        """Config-group choices shared by all runs (``a|b`` where runs recorded different ones)."""
        names = set.intersection(*(set(r.choices) for r in self.runs))
        return {
            n: "|".join(sorted({r.choices[n] for r in self.runs})) for n in sorted(names)
        }

    def shared(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if every run has the same value of ``key`` (``_MISSING`` when none
        has it), else ``(False, None)``."""
        values = [_run_value(r, key) for r in self.runs]
        if len({_canon(v) for v in values}) == 1:
            return True, values[0]
        return False, None

    def untouched(self, key: str, choice: bool) -> bool:
        """No run of the group set ``key`` on its command line (so its value is the default).

        A choice (``critic``) is set only by ``critic=...``; a config value (``critic.n``) by an
        override of it or of a node above it, but not by choosing its config group's file. False
        when a run's overrides are unknown.
        """
        for run in self.runs:
            if run.overridden is None:
                return False
            for key_set in run.overridden:
                if key_set == key if choice else (
                    _under(key, key_set) and key_set not in run.choices
                ):
                    return False
        return True


def _run_value(run: Run, key: str) -> Any:
    """A run's value of a config key (``_MISSING`` when it has none)."""
    if run.config is None:
        if key == "total_steps" and run.total_steps is not None:
            return run.total_steps
        return _MISSING
    return run.config.get(key, _MISSING)


def _grouping_values(run: Run, group_by: Sequence[str] | None) -> dict[str, Any]:
    """The values a run is grouped by: every key but the ignored ones (``group_by`` None), or the
    keys at or below ``group_by`` plus the measurement keys."""
    if run.config is None:
        return {} if run.total_steps is None else {"total_steps": run.total_steps}
    if group_by is None:
        return {k: v for k, v in run.config.items() if not _ignored(k)}
    return {
        k: v for k, v in run.config.items()
        if _measurement(k) or any(_under(k, key) for key in group_by)
    }


def _known_keys(runs: Sequence[Run]) -> set[str]:
    """Every key a label rule or ``--group-by`` may name: leaves, the nodes above them, choices."""
    known = {"algo", "env", "total_steps"}
    for run in runs:
        for key in run.config or {}:
            parts = key.split(".")
            known.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        known.update(run.choices)
    return known


def _unknown_key_error(what: str, key: str, runs: Sequence[Run]) -> CompareError:
    import difflib

    known = _known_keys(runs)
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "keys are dotted config paths"
    return CompareError(
        f"{what} names {key!r}, which is in no run's .hydra/config.yaml; {hint} "
        "(e.g. critic, algo.utd, total_steps)"
    )


def _natural(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def _default(groups: list[Group], key: str, choice: bool) -> str | None:
    """The canonical value of ``key`` in the groups that did not set it on the command line, if
    they agree; None when no group left it at its default or they disagree."""
    values = {
        _canon(g.choices.get(key) if choice else g.values.get(key, _MISSING))
        for g in groups if g.untouched(key, choice)
    }
    return values.pop() if len(values) == 1 else None


def _label_env(groups: list[Group]) -> None:
    """Write ``terms`` and ``auto_label`` of the groups of one env.

    Within each algo, a key is a candidate term when its value differs between the algo's groups
    (a measurement key: when it differs anywhere in the env's table). Keys under a config group
    whose choice differs (``critic``) are shown as that choice (``critic=ensemble``), plus those
    that still differ between groups with the same choice (``critic.n=5``) or that the group set
    on its command line (``critic=ensemble critic.n=3``). A term is left out
    of a group's label when its value is the default, i.e. the value of the groups that did not
    set the key on their command line (``.hydra/overrides.yaml``): the plain ``sac`` next to
    ``sac critic=ensemble`` and ``sac algo.utd=5``. Labels stay unique: two groups differ in some
    key, and at most one of them has its default value. A group whose runs have no readable
    config is marked ``(no config)`` next to the algo's other groups.
    """
    position: dict[str, float] = {}
    for g in groups:
        for key in g.values:
            position.setdefault(key, len(position))
    measured = sorted(
        (
            k for k in position
            if _measurement(k) and len({_canon(g.values.get(k, _MISSING)) for g in groups}) > 1
        ),
        key=lambda k: position[k],
    )
    for algo in sorted({g.algo for g in groups}):
        mine = [g for g in groups if g.algo == algo]
        configured = [g for g in mine if g.has_config]
        keys = {k for g in configured for k in g.values}
        differ = {
            k for k in keys
            if not _measurement(k)
            and len({_canon(g.values.get(k, _MISSING)) for g in configured}) > 1
        }
        choices = [g.choices for g in configured]
        compressed = []
        for name in sorted(set().union(*choices)) if choices else []:
            if not all(name in c for c in choices) or len({c[name] for c in choices}) < 2:
                continue
            if any(_under(k, name) for k in differ):
                compressed.append(name)
                position[name] = min(position[k] for k in differ if _under(k, name)) - 0.5
        candidates = sorted(differ | set(compressed), key=lambda k: position[k])
        for g in mine:
            terms: dict[str, str] = {}
            for key in [*(candidates if g.has_config else []), *measured]:
                if key in compressed:
                    if _canon(g.choices[key]) != _default(configured, key, True):
                        terms[key] = g.choices[key]
                    else:
                        g.defaults[key] = g.choices[key]
                    continue
                if key in measured:
                    if key not in g.values:
                        continue
                    peers = groups
                else:
                    owner = next((c for c in compressed if _under(key, c)), None)
                    peers = configured if owner is None else [
                        h for h in configured if h.choices[owner] == g.choices[owner]
                    ]
                    if len({_canon(h.values.get(key, _MISSING)) for h in peers}) < 2:
                        # the only group with its choice: shown if its command line set it
                        if not g.untouched(key, False):
                            terms[key] = format_value(g.values.get(key, _MISSING))
                        continue
                value = g.values.get(key, _MISSING)
                if _canon(value) != _default(peers, key, False):
                    terms[key] = format_value(value)
                else:
                    g.defaults[key] = format_value(value)
            g.terms = terms
            mark = " (no config)" if not g.has_config and configured else ""
            shown = [f"{k}={v}" for k, v in terms.items()]
            if len(shown) > MAX_LABEL_TERMS:  # all of them are in comparison.json's differs_by
                shown = [*shown[: MAX_LABEL_TERMS - 1], f"(+{len(shown) - MAX_LABEL_TERMS + 1})"]
            g.auto_label = algo + mark + "".join(f" {term}" for term in shown)
            g.label = g.auto_label
    seen: dict[str, int] = {}
    for g in groups:  # labels are unique by construction; this only guards the report's keys
        if g.label in seen:
            seen[g.label] += 1
            g.label = g.auto_label = f"{g.label} [{seen[g.label]}]"
        else:
            seen[g.label] = 1
    groups.sort(
        key=lambda g: (
            g.algo,
            not g.has_config,
            len(g.terms),
            [(position.get(k, 0.0), _natural(v)) for k, v in g.terms.items()],
        )
    )


@dataclass
class LabelRule:
    """One ``--label``: ``KEY=VALUE [KEY=VALUE ...]=NAME`` (``selector``, ``name``) or a format
    string with ``{KEY}`` fields (``template``)."""

    text: str
    selector: list[tuple[str, str]] = field(default_factory=list)
    name: str = ""
    template: str = ""
    used: bool = False


def _split_terms(text: str) -> list[str]:
    """Split on whitespace outside brackets: ``'a=[1, 2] b=3'`` -> ``['a=[1, 2]', 'b=3']``."""
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[{("
        depth -= ch in "]})"
        if ch.isspace() and depth <= 0:
            if current:
                terms.append(current)
            current = ""
        else:
            current += ch
    if current:
        terms.append(current)
    return terms


_USAGE = (
    "write --label 'KEY=VALUE=NAME' (e.g. 'critic.n=5=REDQ-5', several KEY=VALUE separated by "
    "spaces) or a format string such as '{algo} n={critic.n}'"
)


def parse_label(text: str) -> LabelRule:
    """Parse one ``--label`` argument; CompareError when it is neither form."""
    if "{" in text or "}" in text:
        fields = re.findall(r"\{([^{}]*)\}", text)
        if not fields or any(not f.strip() for f in fields) or re.sub(
            r"\{[^{}]*\}", "", text
        ).count("{") + re.sub(r"\{[^{}]*\}", "", text).count("}"):
            raise CompareError(f"--label {text!r} has an empty or unbalanced {{}} field; {_USAGE}")
        return LabelRule(text, template=text)
    selector, _, name = text.rpartition("=")
    terms = _split_terms(selector)
    pairs = [term.split("=", 1) for term in terms]
    if not name.strip() or not pairs or any(len(p) != 2 or not p[0] for p in pairs):
        raise CompareError(f"--label {text!r} is not KEY=VALUE=NAME; {_USAGE}")
    return LabelRule(text, selector=[(k, v) for k, v in pairs], name=name.strip())


def _parse_value(text: str) -> Any:
    """A selector's value as the config would hold it (``5`` -> 5, ``[64,64]`` -> a list)."""
    import yaml

    try:
        return _normalize(yaml.safe_load(text))
    except yaml.YAMLError:
        return text


def _term_matches(g: Group, key: str, value: str) -> bool:
    if key == "algo" and (g.algo == value or g.choices.get("algo") == value):
        return True
    if key == "env" and (g.env == value or g.choices.get("env") == value):
        return True
    same, shared = g.shared(key)
    if same and shared is not _MISSING:
        return _canon(shared) == _canon(_parse_value(value))
    if value == "(unset)":
        return same
    return g.choices.get(key) == value


def _render(g: Group, template: str) -> str:
    def field_value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key == "label":
            return g.auto_label
        if key == "algo":
            return g.algo
        if key == "env":
            return g.env
        same, shared = g.shared(key)
        if same and shared is not _MISSING:
            return format_value(shared)
        if key in g.choices:
            return g.choices[key]
        return format_value(shared) if same else "*"

    return re.sub(r"\{([^{}]*)\}", field_value, template)


def _apply_labels(per_env: dict[str, list[Group]], rules: list[LabelRule], runs: list[Run]) -> None:
    """Rename groups by the ``--label`` rules: the first rule that applies to a group names it."""
    known = _known_keys(runs)
    for rule in rules:
        keys = [k for k, _ in rule.selector] or [
            f.strip() for f in re.findall(r"\{([^{}]*)\}", rule.template)
        ]
        for key in keys:
            if key not in known and key not in _AUTO_LABEL_FIELDS:
                raise _unknown_key_error(f"--label {rule.text!r}", key, runs)
    for env, groups in per_env.items():
        for g in groups:
            for rule in rules:
                if rule.template:
                    g.label = _render(g, rule.template)
                elif all(_term_matches(g, k, v) for k, v in rule.selector):
                    g.label = rule.name
                else:
                    continue
                rule.used = True
                break
        by_label: dict[str, list[str]] = {}
        for g in groups:
            by_label.setdefault(g.label, []).append(g.auto_label)
        for label, autos in by_label.items():
            if len(autos) > 1:
                raise CompareError(
                    f"--label gives {len(autos)} groups of {env} the label {label!r} "
                    f"({'; '.join(autos)}); make the rules more specific so each group keeps "
                    "its own name"
                )
    for rule in rules:
        if not rule.used:
            labels = sorted({g.auto_label for groups in per_env.values() for g in groups})
            raise CompareError(
                f"--label {rule.text!r} matches no group; the groups are: {'; '.join(labels)}"
            )


def _pool_notes(per_env: dict[str, list[Group]], group_by: Sequence[str] | None) -> None:
    """One-line notes on what a group pools: with ``--group-by``, config keys its runs differ
    in; automatically, ignored keys that differ (once for all groups)."""
    ignored_differ: set[str] = set()
    for env, groups in per_env.items():
        for g in groups:
            configs = [r.config for r in g.runs if r.config is not None]
            keys = sorted({k for c in configs for k in c}, key=str)
            differ = [
                k for k in keys if len({_canon(c.get(k, _MISSING)) for c in configs}) > 1
            ]
            if group_by is None:
                ignored_differ.update(
                    k for k in differ if not any(_under(k, p) for p in ("seed", "resume"))
                )
                continue
            pooled = [k for k in differ if not _ignored(k)]
            if pooled:
                shown = ", ".join(pooled[:6]) + (f" and {len(pooled) - 6} more" if len(pooled) > 6
                                                  else "")
                note(
                    f"{env}/{g.label} pools runs that differ in {shown}; add them to --group-by "
                    "to keep them apart"
                )
    if ignored_differ:
        note(
            f"runs that differ only in {', '.join(sorted(ignored_differ))} are pooled (bookkeeping "
            "keys that do not change what is learned; --group-by KEY to split on one)"
        )


def group_runs(
    runs: Sequence[Run],
    group_by: Sequence[str] | None = None,
    labels: Sequence[str] = (),
) -> dict[str, list[Group]]:
    """Group runs per env; label the groups.

    Args:
        runs: finished runs (:func:`find_runs`).
        group_by: None = the automatic rule (env, algo name and every config value that differs
            between runs, except :data:`IGNORED_KEYS`); otherwise env, algo name and the values at
            or below these keys (config paths such as ``critic`` or ``algo.utd``). Either way runs
            that differ in a :data:`MEASUREMENT_KEYS` value are never pooled; when ``group_by``
            does not name one that splits groups, a one-line note says so.
        labels: ``--label`` rules (:func:`parse_label`), applied in order.

    Returns:
        ``{env: [Group, ...]}``, envs and groups sorted (algo, then the label's values).

    Raises:
        CompareError: a ``group_by`` key or label key that no run has, a label that matches no
            group, or labels that give two groups of one env the same name.
    """
    if group_by is not None:
        known = _known_keys(runs)
        for key in group_by:
            if key not in known:
                raise _unknown_key_error("--group-by", key, runs)
    rules = [parse_label(text) for text in labels]
    index: dict[tuple[Any, ...], Group] = {}
    unsplit: dict[tuple[Any, ...], set[str]] = {}
    for run in runs:
        values = _grouping_values(run, group_by)
        identity = (run.env, run.algo, run.config is not None,
                    frozenset((k, _canon(v)) for k, v in values.items()))
        group = index.get(identity)
        if group is None:
            group = index[identity] = Group(run.env, run.algo, run.config is not None, values)
        group.runs.append(run)
        if group_by is not None:  # what the user's keys alone would pool
            own = frozenset(
                (k, _canon(v)) for k, v in values.items()
                if any(_under(k, key) for key in group_by)
            )
            unsplit.setdefault((run.env, run.algo, run.config is not None, own), set()).add(
                _canon({k: v for k, v in values.items() if _measurement(k)})
            )
    if group_by is not None and any(len(v) > 1 for v in unsplit.values()):
        named = [
            k for g in index.values() for k in g.values
            if _measurement(k) and not any(_under(k, key) for key in group_by)
        ]
        differing = sorted({
            k for k in named
            if len({_canon(g.values.get(k, _MISSING)) for g in index.values()}) > 1
        })
        note(
            f"--group-by does not name {', '.join(differing) or 'total_steps or eval.*'}, but "
            "runs differ there; runs with a different budget or evaluation are never pooled, so "
            "they stay in separate groups (labelled by those values)"
        )
    per_env: dict[str, list[Group]] = {}
    for group in index.values():
        per_env.setdefault(group.env, []).append(group)
    per_env = {env: per_env[env] for env in sorted(per_env)}
    for groups in per_env.values():
        _label_env(groups)
    _apply_labels(per_env, rules, list(runs))
    _pool_notes(per_env, group_by)
    return per_env


# --------------------------------------------------------------------------- reading TensorBoard


def _name_order(path: Path) -> tuple[int, int, str]:
    """Sort key from ``events.out.tfevents.<unix time>.<host>.<pid>.<counter>[suffix]``."""
    parts = path.name[len(EVENT_PREFIX) :].split(".")
    created = int(parts[0]) if parts and parts[0].isdigit() else 0
    counter = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 0
    return created, counter, path.name


def event_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Event files directly in ``run_dir``, ordered by the creation time in their names."""
    directory = Path(run_dir)
    files = [p for p in directory.iterdir() if p.name.startswith(EVENT_PREFIX) and p.is_file()]
    return sorted(files, key=_name_order)


def _read_event_file(
    path: Path, tags: set[str] | None
) -> tuple[float, dict[str, dict[int, float]]]:
    """One event file: ``(wall time of its first event, {tag: {step: value}})``.

    Within a file, the last value logged at a step wins.
    """
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.util import tensor_util

    first_wall_time = math.inf
    out: dict[str, dict[int, float]] = {}
    for event in LegacyEventFileLoader(str(path)).Load():
        if first_wall_time == math.inf:
            first_wall_time = float(event.wall_time)
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if tags is not None and value.tag not in tags:
                continue
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalar = float(value.simple_value)
            elif kind == "tensor":  # scalars written in the newer tensor format
                array = tensor_util.make_ndarray(value.tensor)
                if array.size != 1:
                    continue
                scalar = float(array.reshape(()))
            else:
                continue
            out.setdefault(value.tag, {})[int(event.step)] = scalar
    return first_wall_time, out


def load_scalars(
    run_dir: str | os.PathLike[str], tags: Iterable[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """All points of the scalar ``tags`` (default: every scalar tag) logged in a run dir.

    Every point is kept (no reservoir sampling, unlike TensorBoard's default of 10,000 per tag).
    The event files directly in ``run_dir`` are merged oldest first (by the wall time of a file's
    first event, then by the creation time in its name), so a later file wins on a step present
    in both (a resumed run). Files are read with tensorboard's event-file loader, keeping only
    the wanted tags in memory.

    Returns:
        ``{tag: (steps [n] int64, values [n] float64)}``, steps sorted ascending.
    """
    wanted = None if tags is None else set(tags)
    loaded = []
    for path in event_files(run_dir):
        first_wall_time, points = _read_event_file(path, wanted)
        loaded.append(((first_wall_time, *_name_order(path)), points))
    loaded.sort(key=lambda item: item[0])
    merged: dict[str, dict[int, float]] = {}
    for _, per_tag in loaded:
        for tag, points in per_tag.items():
            merged.setdefault(tag, {}).update(points)
    result: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for tag, points in merged.items():
        steps = np.array(sorted(points), dtype=np.int64)
        values = np.array([points[s] for s in steps.tolist()], dtype=np.float64)
        result[tag] = (steps, values)
    return result


# --------------------------------------------------------------------------- curves


def align_curves(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], max_points: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """Put curves evaluated at different steps on one grid of steps.

    The grid is the union of all runs' steps, restricted to where every run has started and not
    yet ended (``max`` of first steps to ``min`` of last steps), thinned evenly to at most
    ``max_points`` points. A run's value at a grid step is its last value at or before that step.

    Args:
        curves: per run ``(steps [n_r], values [n_r])``, steps ascending.

    Returns:
        ``(grid [points], values [runs, points])``; ``points`` may be 0 if the runs do not overlap.
    """
    start = max(int(s[0]) for s, _ in curves)
    end = min(int(s[-1]) for s, _ in curves)
    grid = np.unique(np.concatenate([s for s, _ in curves]))
    grid = grid[(grid >= start) & (grid <= end)]
    if len(grid) > max_points:
        keep = np.unique(np.round(np.linspace(0, len(grid) - 1, max_points)).astype(np.int64))
        grid = grid[keep]
    values = np.empty((len(curves), len(grid)))
    for i, (steps, vals) in enumerate(curves):
        values[i] = vals[np.searchsorted(steps, grid, side="right") - 1]
    return grid, values


def _group_curve(
    runs: Sequence[Run], tag: str, max_points: int, name: str = ""
) -> Curve | None:
    """Aligned ``tag`` curves of a group's runs; runs without the tag are noted and left out."""
    curves, paths = [], []
    for run in runs:
        try:
            scalars = load_scalars(run.path, [tag])
        except Exception as exc:  # a corrupt event file must not sink the whole report
            note(f"{run.path}: cannot read event files ({type(exc).__name__}: {exc}); no curve")
            continue
        points = scalars.get(tag)
        if points is None or len(points[0]) == 0:
            note(f"{run.path}: no '{tag}' scalars in its event files; left out of the curve")
            continue
        curves.append(points)
        paths.append(str(run.path))
    if not curves:
        return None
    steps, values = align_curves(curves, max_points)
    if len(steps) == 0:
        name = name or f"{runs[0].env}/{runs[0].algo}"
        note(f"{name}: runs' '{tag}' step ranges do not overlap; no curve")
        return None
    return Curve(steps, values, paths)


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "env"


def plot_env(
    env: str,
    curves: dict[str, tuple[Curve, np.ndarray, np.ndarray, np.ndarray]],
    path: Path,
    tag: str,
    confidence: float,
) -> None:
    """Write the learning-curve figure of one env: IQM line and CI band per group (label)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for label, (curve, point, low, high) in curves.items():
        n = curve.values.shape[0]
        (line,) = ax.plot(curve.steps, point, label=f"{label} (n={n})")
        ax.fill_between(curve.steps, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"{tag} (IQM over seeds)")
    ax.set_title(f"{env}: IQM and {confidence:.0%} bootstrap CI")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    with warnings.catch_warnings():  # long labels: a squeezed layout beats a warning on stderr
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------- the report


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.4g}"


def _resolve_poi(name: str, env: str, groups: list[Group]) -> Group | None:
    """The group ``name`` means in one env: a label, an automatic label, or an algo name that has
    exactly one group there; None when the env has none. CompareError when ambiguous."""
    for attr in ("label", "auto_label"):
        found = [g for g in groups if getattr(g, attr) == name]
        if found:
            return found[0]
    found = [g for g in groups if g.algo == name]
    if len(found) > 1:
        labels = "; ".join(g.label for g in found)
        raise CompareError(
            f"--poi {name!r} is ambiguous in {env}, which has {len(found)} {name} groups "
            f"({labels}); pass a group's label, e.g. --poi '{found[-1].label}' "
            f"'{found[0].label}'"
        )
    return found[0] if found else None


def compare(
    runs: Sequence[Run],
    out: Path,
    poi: tuple[str, str] | None = None,
    reps: int = stats.DEFAULT_REPS,
    seed: int = 0,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    tag: str = CURVE_TAG,
    max_points: int = 500,
    plots: bool = True,
    group_by: Sequence[str] | None = None,
    labels: Sequence[str] = (),
) -> dict[str, Any]:
    """Compute the comparison, write ``comparison.md/json`` and the PNGs into ``out``.

    Runs are grouped by :func:`group_runs` (``group_by``, ``labels``); ``poi`` names two groups by
    label (or an algo name with one group per env). Nothing is written when an argument is
    wrong (CompareError). Returns the dict written to ``comparison.json``.
    """
    per_env = group_runs(runs, group_by, labels)
    poi_groups: dict[str, tuple[Group | None, Group | None]] = {}
    if poi is not None:
        for env, groups in per_env.items():
            poi_groups[env] = (
                _resolve_poi(poi[0], env, groups), _resolve_poi(poi[1], env, groups)
            )
        for i, name in enumerate(poi):
            if all(pair[i] is None for pair in poi_groups.values()):
                choices = sorted({g.label for gs in per_env.values() for g in gs})
                raise CompareError(
                    f"--poi group {name!r} not among the runs found; choose from "
                    f"{'; '.join(choices)}"
                )

    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    curves_json: dict[str, Any] = {}
    figures: dict[str, str] = {}
    used_names: set[str] = set()
    for env, groups in per_env.items():
        results[env] = {}
        env_curves: dict[str, tuple[Curve, np.ndarray, np.ndarray, np.ndarray]] = {}
        for g in groups:
            group = g.runs
            scores = np.array([r.final_eval_return for r in group])
            point, low, high = stats.stratified_bootstrap_ci(
                scores, stats.iqm, reps=reps, confidence=confidence, seed=seed
            )
            seeds = [r.seed for r in group]
            dupes = sorted({s for s in seeds if seeds.count(s) > 1})
            if dupes:
                note(
                    f"{env}/{g.label}: seed(s) {dupes} appear in more than one run; all are counted"
                )
            steps_done = [r.summary.get("total_steps") for r in group]
            settings = {}
            for key in sorted({k for r in group for k in (r.config or {}) if _measurement(k)}):
                same, value = g.shared(key)
                if same and value is not _MISSING:
                    settings[key] = value
            results[env][g.label] = {
                "algo": g.algo,
                "auto_label": g.auto_label,
                "differs_by": g.terms,
                "defaults": g.defaults,
                "settings": settings,
                "n_runs": len(group),
                "seeds": seeds,
                "iqm": point,
                "iqm_ci": [low, high],
                "mean": float(scores.mean()),
                "std": float(scores.std(ddof=1)) if len(group) > 1 else None,
                "min": float(scores.min()),
                "max": float(scores.max()),
                "final_eval_returns": scores.tolist(),
                "total_steps": steps_done,
                "runs": [str(r.path) for r in group],
            }
            curve = _group_curve(group, tag, max_points, f"{env}/{g.label}")
            if curve is not None:
                c_point, c_low, c_high = stats.iqm_curve_ci(
                    curve.values, reps=reps, confidence=confidence, seed=seed
                )
                env_curves[g.label] = (curve, c_point, c_low, c_high)
                curves_json.setdefault(env, {})[g.label] = {
                    "n_runs": curve.values.shape[0],
                    "runs": curve.run_paths,
                    "steps": curve.steps.tolist(),
                    "iqm": c_point.tolist(),
                    "ci_low": c_low.tolist(),
                    "ci_high": c_high.tolist(),
                }
        if env_curves and plots:
            name = _safe_filename(env)
            while name in used_names:
                name += "_"
            used_names.add(name)
            figures[env] = f"{name}.png"
            plot_env(env, env_curves, out / figures[env], tag, confidence)

    poi_json: dict[str, Any] | None = None
    if poi is not None:
        x_name, y_name = poi
        per_env_poi: dict[str, Any] = {}
        pairs = []
        for env, (gx, gy) in poi_groups.items():
            if gx is not None and gy is not None and gx is not gy:
                x = np.array([r.final_eval_return for r in gx.runs])
                y = np.array([r.final_eval_return for r in gy.runs])
                pairs.append((x, y))
                p, lo, hi = stats.probability_of_improvement_ci(
                    x, y, reps=reps, confidence=confidence, seed=seed
                )
                per_env_poi[env] = {
                    "p": p, "ci": [lo, hi], "n_x": len(x), "n_y": len(y),
                    "x_group": gx.label, "y_group": gy.label,
                }
            else:
                per_env_poi[env] = None
        average = None
        if pairs:
            p, lo, hi = stats.average_probability_of_improvement_ci(
                pairs, reps=reps, confidence=confidence, seed=seed
            )
            average = {"p": p, "ci": [lo, hi], "n_envs": len(pairs)}
        poi_json = {
            "x": x_name, "y": y_name, "per_env": per_env_poi, "average_over_envs": average
        }

    method = {
        "score": "final_eval_return from each run's summary.json",
        "aggregate": "IQM = 25% trimmed mean over runs (scipy.stats.trim_mean(x, 0.25))",
        "interval": "percentile CI from a stratified bootstrap over runs (rliable definitions)",
        "confidence": confidence,
        "bootstrap_reps": reps,
        "bootstrap_rng": f"numpy.random.default_rng({seed})",
        "std": "sample standard deviation (ddof=1)",
        "curve_tag": tag,
        "curve_max_points": max_points,
        "curve_alignment": (
            "union of the runs' eval steps within the range every run covers "
            f"(thinned to at most {max_points} points); each run's value at a step is its last "
            "value at or before that step; IQM and bootstrap CI computed at each step"
        ),
        "probability_of_improvement": (
            "P(X > Y) = Mann-Whitney U / (n_x * n_y), ties count 1/2; X and Y resampled "
            "independently; average over envs where both ran"
        ),
        "grouping": {
            "rule": "automatic" if group_by is None else "group-by",
            "group_by": None if group_by is None else list(group_by),
            "always_split_on": list(MEASUREMENT_KEYS),
            "ignored_keys": dict(IGNORED_KEYS) if group_by is None else {},
            "labels": list(labels),
        },
    }
    report = {
        "method": method,
        "results": results,
        "probability_of_improvement": poi_json,
        "curves": curves_json,
        "figures": figures,
    }
    (out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "comparison.md").write_text(_markdown(report, runs))
    return report


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def _grouping_text(grouping: dict[str, Any]) -> str:
    always = ", ".join(f"`{k}`" for k in grouping["always_split_on"])
    if grouping["rule"] == "automatic":
        ignored = ", ".join(f"`{k}`" for k in grouping["ignored_keys"])
        rule = (
            "by env, algo and every value of `.hydra/config.yaml` that differs between runs, "
            f"except bookkeeping keys that do not change what is learned ({ignored})"
        )
    else:
        keys = ", ".join(f"`{k}`" for k in grouping["group_by"]) or "nothing else"
        rule = f"by env, algo and {keys} (`--group-by`)"
    return (
        f"**Groups.** Runs are grouped {rule}; runs with different {always} are never pooled. "
        "A group is labelled by its algo and the overrides that set it apart from the algo's "
        "other groups."
    )


def _env_notes(per_group: dict[str, Any]) -> list[str]:
    """Lines under an env's heading: renamed groups and the settings every group shares."""
    lines = []
    renamed = [(k, r["auto_label"]) for k, r in per_group.items() if k != r["auto_label"]]
    if renamed:
        lines += ["Labels: " + "; ".join(f"{a} = `{b}`" for a, b in renamed) + ".", ""]
    left_out: dict[str, dict[str, list[str]]] = {}
    for r in per_group.values():
        for k, v in r["defaults"].items():
            values = left_out.setdefault(r["algo"], {}).setdefault(k, [])
            if v not in values:
                values.append(v)
    if left_out:
        per_algo = [
            f"{algo} `" + " ".join(f"{k}={'/'.join(v)}" for k, v in values.items()) + "`"
            for algo, values in left_out.items()
        ]
        lines += [
            "A label leaves out the values a group shares with the runs that did not set them "
            f"on the command line (the defaults): {'; '.join(per_algo)}.",
            "",
        ]
    settings = [r["settings"] for r in per_group.values()]
    common = {
        k: v for k, v in settings[0].items()
        if all(k in s and _canon(s[k]) == _canon(v) for s in settings)
    }
    if common:
        shown = ", ".join(f"`{k}={format_value(v)}`" for k, v in common.items())
        lines += [f"Every group here: {shown}.", ""]
    return lines


def _markdown(report: dict[str, Any], runs: Sequence[Run]) -> str:
    m = report["method"]
    conf = f"{m['confidence']:.0%}"
    lines = [
        "# Run comparison",
        "",
        f"{len(runs)} finished runs. Score of a run: `final_eval_return` from its `summary.json`.",
        "",
        _grouping_text(m["grouping"]),
        "",
        f"**Method.** Per group: IQM (interquartile mean: the mean of the middle 50% of "
        f"seeds, `scipy.stats.trim_mean(x, 0.25)`) with a {conf} percentile confidence interval "
        f"from a stratified bootstrap over seeds (rliable's definitions, Agarwal et al. 2021), "
        f"{m['bootstrap_reps']} bootstrap resamples, RNG `{m['bootstrap_rng']}`. "
        "Mean ± std (sample std, ddof=1) for reference. "
        "With fewer than 4 seeds the IQM trims nothing and equals the mean; with few seeds the "
        "bootstrap interval is too narrow (it cannot see values the seeds did not reach) — "
        "read it as a lower bound on the uncertainty. Raw returns of different envs are on "
        "different scales, so no aggregate over envs is given.",
        "",
    ]
    for env, per_group in report["results"].items():
        lines += [f"## {env}", ""]
        lines += _env_notes(per_group)
        lines += [
            f"| group | seeds | IQM [{conf} CI] | mean ± std | min | max |",
            "|---|---:|---|---|---:|---:|",
        ]
        for label, r in per_group.items():
            seeds = ", ".join(str(s) for s in r["seeds"])
            lo, hi = r["iqm_ci"]
            lines.append(
                f"| {_cell(label)} | {r['n_runs']} ({seeds}) "
                f"| {_num(r['iqm'])} [{_num(lo)}, {_num(hi)}] "
                f"| {_num(r['mean'])} ± {_num(r['std'])} | {_num(r['min'])} | {_num(r['max'])} |"
            )
        lines.append("")
        if env in report["figures"]:
            fig = report["figures"][env]
            lines += [f"![{env} learning curves]({fig})", ""]
        else:
            lines += [f"No learning curve for {env}: no run has `{m['curve_tag']}` scalars.", ""]
    poi = report["probability_of_improvement"]
    if poi is not None:
        x, y = poi["x"], poi["y"]
        lines += [
            f"## Probability of improvement P({x} > {y})",
            "",
            "Probability that a run of "
            f"{x} ends with a higher final eval return than a run of {y} (Mann-Whitney U / "
            f"(n_x · n_y), ties count 1/2), with a {conf} CI from resampling both groups' "
            "seeds independently. 0.5 = no difference.",
            "",
            f"| env | P({x} > {y}) [{conf} CI] | n {x} | n {y} |",
            "|---|---|---:|---:|",
        ]
        for env, r in poi["per_env"].items():
            if r is None:
                lines.append(f"| {env} | n/a (not both groups ran) | | |")
            else:
                lo, hi = r["ci"]
                lines.append(
                    f"| {env} | {r['p']:.3f} [{lo:.3f}, {hi:.3f}] | {r['n_x']} | {r['n_y']} |"
                )
        avg = poi["average_over_envs"]
        if avg is not None and avg["n_envs"] > 1:
            lo, hi = avg["ci"]
            lines.append(
                f"| average over {avg['n_envs']} envs | {avg['p']:.3f} [{lo:.3f}, {hi:.3f}] | | |"
            )
        lines.append("")
    lines += [
        "## Learning curves",
        "",
        f"`{m['curve_tag']}` against env steps; line = IQM over seeds, band = {conf} bootstrap CI "
        "at each step (each step resampled independently, as rliable does for sample-efficiency "
        "curves). Runs evaluated at different steps are aligned on the union of their eval "
        "steps within the range every run of the group covers (a curve ends at its shortest "
        "run's last evaluation), each run contributing its last value at or before that step"
        f"; at most {m['curve_max_points']} points per curve.",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"rlzoo: error: {message}; see python -m rlzoo.compare --help", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m rlzoo.compare",
        description="Compare finished runs: per env and group of runs (same algo and config, "
        "seeds differ) the IQM of the final eval return with a stratified-bootstrap CI, learning "
        "curves, optional probability of improvement.",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="directories searched for runs")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--poi",
        nargs=2,
        metavar=("X", "Y"),
        help="also report the probability of improvement P(X > Y) per env; X and Y are group "
        "labels (an algo name works where it has one group)",
    )
    parser.add_argument(
        "--group-by",
        nargs="*",
        metavar="KEY",
        help="group runs by env, algo and these config keys (e.g. critic algo.utd) instead of "
        "every key that differs; put it after the DIRs. total_steps and eval.* always split",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="RULE",
        help="rename groups: 'KEY=VALUE [KEY=VALUE ...]=NAME' (e.g. 'critic.n=5=REDQ-5') or a "
        "format string ('{algo} N={critic.n}', fields: any config key, label, algo, env); "
        "repeatable, the first rule that applies to a group names it",
    )
    parser.add_argument(
        "--reps", type=int, default=stats.DEFAULT_REPS, help="bootstrap resamples (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap RNG seed (default 0)")
    parser.add_argument(
        "--confidence", type=float, default=stats.DEFAULT_CONFIDENCE, help="CI level (0.95)"
    )
    parser.add_argument("--tag", default=CURVE_TAG, help=f"curve scalar tag ({CURVE_TAG})")
    parser.add_argument(
        "--max-curve-points", type=int, default=500, help="points per curve at most (500)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (2 on a user error)."""
    args = build_parser().parse_args(argv)
    try:
        if args.reps < 1:
            raise CompareError(f"--reps must be >= 1, got {args.reps}; pass e.g. --reps 2000")
        if not 0.0 < args.confidence < 1.0:
            raise CompareError(f"--confidence must be in (0, 1), got {args.confidence}; e.g. 0.95")
        if args.max_curve_points < 2:
            raise CompareError("--max-curve-points must be >= 2; pass e.g. 500")
        for d in args.dirs:
            if not Path(d).is_dir():
                raise CompareError(f"{d} is not a directory; pass a directory that holds runs")
        runs = find_runs(args.dirs)
        if not runs:
            raise CompareError(
                f"no runs found under {', '.join(args.dirs)} (a run is a directory with "
                f"{SUMMARY_FILE}); point at the runs/ or multirun/ directory of finished runs"
            )
        poi = tuple(args.poi) if args.poi else None
        compare(
            runs,
            args.out,
            poi=poi,
            reps=args.reps,
            seed=args.seed,
            confidence=args.confidence,
            tag=args.tag,
            max_points=args.max_curve_points,
            group_by=args.group_by,
            labels=args.label,
        )
    except CompareError as exc:
        print(f"rlzoo: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rlzoo: error: {exc}; check the paths and permissions", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'comparison.md'} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
