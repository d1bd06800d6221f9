"""Check the command line's overrides before Hydra starts a run.

``python -m rlzoo.train`` calls :func:`check_overrides` with its arguments before Hydra creates a
run dir. It composes the config exactly as the run will (Hydra's compose API, the same config
module, search path additions such as ``'hydra.searchpath=[pkg://examples.conf]'`` and
``hydra/...`` groups included) and resolves every interpolation, so that a mistyped group choice,
a misspelled key, a malformed override or an unresolvable ``${...}`` becomes one
``rlzoo: error:`` line (exit 2) that names the valid choices or the nearest key, instead of
Hydra's multi-line report and an empty run dir.

With ``-m``/``--multirun`` each swept value is checked: every combination when there are at most
``MAX_COMPOSES`` of them, otherwise each value once (with the first value of the other sweeps).
Interval sweeps (``interval(a,b)``, for sweeper plugins such as Optuna) are left to the sweeper.
Arguments that replace the config or print help (``--config-path``, ``--config-name``,
``--config-dir``, ``--experimental-rerun``, ``--help``, ``--hydra-help``, ``--info``,
``--shell-completion``) skip the check: Hydra handles them on its own.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, QuotedString
from hydra.errors import MissingConfigException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import (
    InterpolationResolutionError,
    InterpolationToMissingValueError,
    MissingMandatoryValue,
)

from rlzoo.errors import UserError
from rlzoo.run.targets import check_buildable

CONFIG_MODULE = "rlzoo.conf"
CONFIG_NAME = "config"
JOB_NAME = "train"  # hydra.job.name of `python -m rlzoo.train` (its log file is train.log)
GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"
MAX_COMPOSES = 16  # multirun: check every combination up to this many, else each value once
SKIP_FLAGS = (
    "help", "hydra_help", "shell_completion", "config_path", "config_name", "config_dir",
    "experimental_rerun", "info",
)
MAX_LISTED = 40  # choices or keys named in one error line


def check_overrides(overrides: list[str]) -> DictConfig | None:
    """Raise ``UserError`` (one line) if the arguments would not compose into a valid config.

    Args:
        overrides: the command line after the program name, Hydra flags included
            (``["-m", "algo=sac,td3", "--cfg", "job", ...]``); flags are separated from the
            ``key=value`` overrides with Hydra's own argument parser.

    Returns the composed config, with its ``hydra`` node, for a single run (about 0.2-0.4 s, one
    composition); ``None`` for a multirun or when Hydra's own flags (``--help``, ...) are given.
    Leaves Hydra's global state as it found it, so ``hydra.main`` can run afterwards.
    """
    args = _parse_args(overrides)
    if args is None or any(getattr(args, flag, None) for flag in SKIP_FLAGS):
        return None  # Hydra reports its own usage errors, and these flags do not start a run
    parser = OverridesParser.create()
    items = [_parse_override(parser, text) for text in args.overrides]
    multirun = bool(args.multirun) or any(
        o.key_or_group == "hydra.mode" and str(o.value()) == "MULTIRUN" for o in items
    )
    for o in items:
        if o.key_or_group == "hydra.searchpath" and not o.is_sweep_override():
            check_searchpath(o.value())
        if o.is_sweep_override() and not multirun:
            raise UserError(
                f"{o.input_line} gives several values; add -m to run one job per value, or write "
                f"a list as {o.key_or_group}=[a,b] or a string as {o.key_or_group}='a,b'"
            )
    with hydra.initialize_config_module(CONFIG_MODULE, version_base="1.3", job_name=JOB_NAME):
        try:
            checker = _Checker(items, multirun)
            for o in items:
                checker.check_value_present(o)
            composed = [checker.check(job) for job in checker.jobs()]
        finally:
            if GlobalHydra.instance().is_initialized():
                GlobalHydra.instance().clear()
    return None if multirun or len(composed) != 1 else composed[0]


def check_searchpath(entries: Any) -> None:
    """Refuse a ``hydra.searchpath`` entry Hydra cannot read (it only warns, and the config
    group it was meant to add then looks missing): ``pkg://module`` must be importable from
    here, ``file://dir`` must exist."""
    for entry in entries if isinstance(entries, list) else [entries]:
        entry = str(entry)
        if entry.startswith("pkg://"):
            module = entry[len("pkg://"):].replace("/", ".")
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UserError(
                    f"hydra.searchpath names {entry}, but Python cannot import {module} from "
                    f"{Path.cwd()}; run from the directory that holds it (for rlzoo's examples: "
                    "the repository root) or add that directory to PYTHONPATH"
                )
        elif entry.startswith("file://") and not Path(entry[len("file://"):]).is_dir():
            raise UserError(f"hydra.searchpath names {entry}, which is not a directory")


def _parse_args(argv: list[str]) -> argparse.Namespace | None:
    """Hydra's own argument parser (flags vs overrides); ``None`` when Hydra would reject it."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.exit_on_error = False
    try:
        args, extra = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit):
        return None
    return None if extra else args


def _parse_override(parser: OverridesParser, text: str) -> Override:
    try:
        override = parser.parse_override(text)
    except Exception as err:  # noqa: BLE001 - Hydra raises HydraException for grammar errors
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        reason = reason.split(" expecting ")[0]
        raise UserError(
            f"cannot read the override {text!r} ({reason}); write key=value, e.g. seed=1, "
            f"quoting values with spaces or special characters (grammar: {GRAMMAR_URL})"
        ) from None
    override.input_line = text
    if not override.key_or_group:
        raise UserError(
            f"the override {text!r} has no key before '='; write key=value, e.g. seed=1"
        )
    return override


class _Checker:
    """Composes each job of a run (or multirun) and turns failures into one-line errors."""

    def __init__(self, items: list[Override], multirun: bool) -> None:
        self.items = items
        self.multirun = multirun
        # group listings must see the same search path as the composition
        self.searchpath = [
            o.input_line or "" for o in items if o.key_or_group == "hydra.searchpath"
        ]

    def check_value_present(self, o: Override) -> None:
        """``key=`` with nothing after ``=`` (an empty string to Hydra) is almost always a slip:
        name the default or the choices instead."""
        if o.is_delete() or o.is_sweep_override() or isinstance(o._value, QuotedString):
            return
        if o._value != "":
            return
        key = o.key_or_group
        if key in self.all_groups():
            raise UserError(
                f"{o.input_line!r} names no {key} config; choose one of "
                f"{_listing(self.group_choices(key))}"
            )
        rest = [p.input_line or "" for p in self.items if p is not o and not p.is_sweep_override()]
        try:
            default = OmegaConf.select(self.compose(rest), key, throw_on_missing=False)
        except Exception:  # noqa: BLE001 - the other overrides fail on their own later
            default = None
        now = f" (default: {default})" if isinstance(default, (int, float, str, bool)) else ""
        raise UserError(
            f"{o.input_line!r} has no value after '='{now}; give one, e.g. {key}=<value>, or "
            f"leave {key} out to keep the default"
        )

    # ------------------------------------------------------------------ jobs
    def jobs(self) -> Iterator[list[str]]:
        """Override lists to compose: one for a run; for a multirun, every combination of the
        swept group choices (each choice once when there are more than ``MAX_COMPOSES``) with
        the first value of each swept plain key, plus once each swept value that holds an
        interpolation. Other values of a plain key need no composition of their own: the key
        exists or not whatever its value."""
        loader = GlobalHydra.instance().config_loader()
        values: list[list[str]] = []
        keys: list[str] = []
        for o in self.items:
            if not o.is_sweep_override():
                values.append([o.input_line or ""])
            elif o.is_discrete_sweep():
                o.config_loader = loader  # glob(...) lists the group's options
                key = o.get_key_element()
                swept = [f"{key}={v}" for v in o.sweep_string_iterator()]
                if not swept:
                    continue
                values.append(swept)
            else:
                continue  # interval sweeps belong to a sweeper plugin (e.g. Optuna)
            keys.append(o.key_or_group)
        if all(len(v) == 1 for v in values):
            yield [v[0] for v in values]
            return
        groups = set(self.all_groups())
        is_group = [key in groups for key in keys]
        first = [v[0] for v in values]
        group_lists = [v if g else v[:1] for v, g in zip(values, is_group)]
        if math.prod(len(v) for v in group_lists) <= MAX_COMPOSES:
            yield from (list(job) for job in itertools.product(*group_lists))
        else:
            yield first
            for i, v in enumerate(group_lists):
                for alternative in v[1:]:
                    yield first[:i] + [alternative] + first[i + 1:]
        for i, v in enumerate(values):
            for alternative in v[1:]:
                if not is_group[i] and "${" in alternative:
                    yield first[:i] + [alternative] + first[i + 1:]

    def compose(self, job: list[str]) -> DictConfig:
        return hydra.compose(CONFIG_NAME, overrides=job, return_hydra_config=True)

    def check(self, job: list[str]) -> DictConfig:
        try:
            cfg = self.compose(job)
        except Exception as err:  # noqa: BLE001 - every composition failure is the user's input
            try:
                message = self.explain(err, job)
                message = message or self.culprit(err, job)
            except Exception:  # noqa: BLE001 - never hide the original error behind our own
                message = None
            raise UserError(message or _one_line(err)) from None
        self.resolve(cfg, job)
        check_buildable(cfg)  # every _target_ imports and is a class of its kind
        return cfg

    # ------------------------------------------------------------------ composition errors
    def explain(self, err: Exception, job: list[str]) -> str | None:
        parsed = [_reparse(text) for text in job]
        if isinstance(err, MissingConfigException) and err.missing_cfg_file:
            return self.explain_missing_group(err, parsed)
        text = str(err)
        key_error = re.match(
            r"(?:Could not override '([^']+)'|Could not delete from config\. '([^']+)' does not"
            r" exist)", text,
        )
        if key_error:
            key = key_error.group(1) or key_error.group(2)
            if "@" in key:  # a package in the defaults list (algo@pkg=...): Hydra's text says it
                return _one_line(err)
            return self.explain_key(key, parsed)
        exists = re.match(r"Could not append to config\. An item is already at '([^']+)'", text)
        if exists:
            key = exists.group(1)
            o = _find(parsed, key)
            line = o.input_line if o is not None and o.input_line else f"+{key}=..."
            return (
                f"{line}: {key} is already in the config, so '+' cannot add it; drop the '+' to "
                f"change it ({line.lstrip('+')}), or write ++{line.lstrip('+')}"
            )
        group_like = re.match(
            r"Override (\S+) looks like a config group override, but config group '([^']+)'", text
        )
        if group_like:
            return self.explain_key(group_like.group(2), parsed, line=group_like.group(1))
        merging = re.match(r"Error merging override (.+)", text)
        if merging and err.__cause__ is not None:
            return f"{merging.group(1)}: {_first_line(err.__cause__)}"
        return None

    def explain_missing_group(
        self, err: MissingConfigException, parsed: list[Override | None]
    ) -> str:
        missing = str(err.missing_cfg_file)
        for o in parsed:
            if o is None or o.is_sweep_override():
                continue
            choice = str(o.value())
            if f"{o.key_or_group}/{choice}" == missing:
                group = o.key_or_group
                choices = self.group_choices(group)
                best = difflib.get_close_matches(choice, choices, n=1, cutoff=0.5)
                hint = f"did you mean {group}={best[0]}? " if best else ""
                return (
                    f"{group}={choice}: there is no {group} config {choice!r}; {hint}"
                    f"choose one of {_listing(choices)}"
                )
        # a missing config named inside a config file's own defaults list
        where = _first_line(err)
        options = list(err.options or [])
        return where + (f"; choose one of {_listing(options)}" if options else "")

    def explain_key(self, key: str, parsed: list[Override | None], line: str | None = None) -> str:
        o = _find(parsed, key)
        line = line or (o.input_line if o is not None and o.input_line else key)
        rest = [p.input_line or "" for p in parsed if p is not None and p is not o]
        try:
            base: DictConfig | None = self.compose(rest)
        except Exception:  # noqa: BLE001 - another override is broken too: no suggestion then
            base = None
        groups = self.top_groups()
        if base is None:
            return f"{line}: the config has no key {key!r}; check the spelling"
        found, parent, siblings = _walk(base, key)
        if found:  # e.g. a key under a node that is not a section
            return f"{line}: {key} cannot be set this way; check the spelling"
        if not siblings and parent:
            return (
                f"{line}: {'.'.join(parent)} has no keys yet; to add one, prefix it with +: "
                f"+{line.lstrip('+~')}"
            )
        part = key.split(".")[len(parent)]
        candidates = sorted(set(siblings) | (set(groups) if not parent else set()))
        best = difflib.get_close_matches(part, candidates, n=1, cutoff=0.6)
        where = ".".join(parent) or "the top level"
        value = o.get_value_element_as_str() if o is not None and o.value_type else None
        if best:
            fixed = ".".join([*parent, best[0], *key.split(".")[len(parent) + 1:]])
            shown = f"{fixed}={value}" if value is not None else fixed
            return f"{line}: the config has no key {key!r}; did you mean {shown}?"
        return (
            f"{line}: the config has no key {key!r}; keys at {where}: {_listing(candidates)} "
            f"(to add a new key, prefix it with +: +{line.lstrip('+~')})"
        )

    def group_choices(self, group: str) -> list[str]:
        """Every config of ``group`` and its subgroups (``mpe/simple_spread``), sorted."""
        loader = GlobalHydra.instance().config_loader()

        def options(name: str, kind: ObjectType) -> list[str]:
            return loader.get_group_options(name, results_filter=kind, overrides=self.searchpath)

        found: list[str] = []
        pending = [""]
        while pending:
            sub = pending.pop()
            name = f"{group}/{sub}" if sub else group
            prefix = f"{sub}/" if sub else ""
            found += [prefix + c for c in options(name, ObjectType.CONFIG)]
            pending += [prefix + g for g in options(name, ObjectType.GROUP)]
        return sorted(found, key=lambda c: (c.count("/"), c.lower()))

    def top_groups(self) -> list[str]:
        loader = GlobalHydra.instance().config_loader()
        return loader.get_group_options(
            "", results_filter=ObjectType.GROUP, overrides=self.searchpath
        )

    def all_groups(self) -> list[str]:
        """Every config group, nested ones included (``env/mpe``, ``hydra/launcher``)."""
        loader = GlobalHydra.instance().config_loader()
        found: list[str] = []
        pending = [""]
        while pending:
            parent = pending.pop()
            subs = loader.get_group_options(
                parent, results_filter=ObjectType.GROUP, overrides=self.searchpath
            )
            names = [f"{parent}/{g}" if parent else g for g in subs]
            found += names
            pending += names
        return found

    def culprit(self, err: Exception, job: list[str]) -> str:
        """An error that names no override: find the one whose removal lets the rest compose."""
        for i in reversed(range(len(job))):
            if job[i].startswith("hydra.searchpath"):
                continue
            try:
                self.compose(job[:i] + job[i + 1:])
            except Exception:  # noqa: BLE001 - not this one
                continue
            return f"{job[i]}: {_one_line(err)}; check this override against --cfg job"
        return f"the overrides do not compose ({_one_line(err)}); check them against --cfg job"

    # ------------------------------------------------------------------ interpolations
    def resolve(self, cfg: DictConfig, job: list[str]) -> None:
        """Resolve the job's config (what the run sees) and the run dir Hydra will create."""
        parsed = [_reparse(text) for text in job]
        job_keys = [str(k) for k in cfg.keys() if k != "hydra"]
        try:
            OmegaConf.to_container(OmegaConf.masked_copy(cfg, job_keys), resolve=True)
            if self.multirun:
                with open_dict(cfg):
                    cfg.hydra.job.num = 0  # runtime-only: set by the launcher for each job
                    cfg.hydra.job.id = "0"
                for key in ("hydra.sweep.dir", "hydra.sweep.subdir"):
                    OmegaConf.select(cfg, key, throw_on_missing=True)
            else:
                OmegaConf.select(cfg, "hydra.run.dir", throw_on_missing=True)
        except (InterpolationToMissingValueError, MissingMandatoryValue) as err:
            raise UserError(_explain_missing(err, parsed)) from None
        except InterpolationResolutionError as err:
            raise UserError(_explain_interpolation(err, parsed)) from None
        except Exception as err:  # noqa: BLE001 - e.g. a resolver that raised
            key = getattr(err, "full_key", None)
            where = f"cannot resolve {key}" if key else "cannot resolve the config"
            raise UserError(f"{where}: {_first_line(err)}; fix the ${{...}} expression") from None


def _reparse(text: str) -> Override | None:
    try:
        o = OverridesParser.create().parse_override(text)
    except Exception:  # noqa: BLE001 - only used for messages
        return None
    o.input_line = text
    return o


def _find(parsed: list[Override | None], key: str) -> Override | None:
    for o in parsed:
        if o is not None and o.key_or_group == key:
            return o
    return None


def _walk(cfg: DictConfig, key: str) -> tuple[bool, list[str], list[str]]:
    """Follow ``key`` down ``cfg``: (found, the longest existing parent path, that parent's
    keys). Values are not resolved, so a missing ``???`` still counts as present."""
    node: Any = cfg
    path: list[str] = []
    for part in key.split("."):
        if not isinstance(node, DictConfig) or node._is_missing() or node._is_none():
            return True, path, []
        if node._is_interpolation():
            return True, path, []
        keys = [str(k) for k in node.keys()]
        if part not in keys:
            return False, path, keys
        node = node._get_node(part)
        path.append(part)
    return True, path, []


def _explain_missing(err: Exception, parsed: list[Override | None]) -> str:
    match = re.search(r"Missing mandatory value: (\S+)", str(err))
    missing = match.group(1) if match else getattr(err, "full_key", None) or "a value"
    needed_by = getattr(err, "full_key", None)
    by = f" ({needed_by} refers to it)" if needed_by and needed_by != missing else ""
    return f"{missing} has no value{by}; set it on the command line, e.g. {missing}=<value>"


def _explain_interpolation(err: InterpolationResolutionError, parsed: list[Override | None]) -> str:
    key = err.full_key or "a value"
    reason = str(err).splitlines()[0]
    reason = re.sub(r"^\w+ raised while resolving interpolation: ", "", reason).strip().strip('"')
    o = _find(parsed, key)
    given = f" ({o.input_line})" if o is not None else ""
    return (
        f"cannot resolve {key}{given}: {reason}; fix the ${{...}} expression or what it refers to"
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(err).__name__


def _one_line(err: BaseException) -> str:
    """Hydra's message up to its search-path listing, as one line."""
    lines: list[str] = []
    for line in str(err).strip().splitlines():
        if line.startswith(("Config search path", "Set the environment variable")):
            break
        if line.strip() and not line.strip().startswith(("full_key:", "object_type=")):
            lines.append(line.strip())
    text = " ".join(" ".join(lines).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _listing(names: list[str]) -> str:
    if len(names) <= MAX_LISTED:
        return ", ".join(names)
    return ", ".join(names[:MAX_LISTED]) + f", ... ({len(names) - MAX_LISTED} more)"
