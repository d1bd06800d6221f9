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
import functools
import importlib.util
import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, QuotedString
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import (
    InterpolationResolutionError,
    InterpolationToMissingValueError,
    MissingMandatoryValue,
)

from rlzoo.cli.groups import ConfigGroups
from rlzoo.cli.messages import (
    culprit,
    explain,
    explain_interpolation,
    explain_missing,
    first_line,
    hydra_message,
    reparse,
    short_list,
)
from rlzoo.config.targets import check_buildable
from rlzoo.errors import UserError

CONFIG_MODULE = "rlzoo.conf"
CONFIG_NAME = "config"
JOB_NAME = "train"  # hydra.job.name of `python -m rlzoo.train` (its log file is train.log)
GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"
MAX_COMPOSES = 16  # multirun: check every combination up to this many, else each value once
SKIP_FLAGS = (
    "help", "hydra_help", "shell_completion", "config_path", "config_name", "config_dir",
    "experimental_rerun", "info",
)


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
            jobs = list(checker.jobs())
            composed = [checker.check(job) for job in jobs]
            if multirun and jobs:
                checker.check_swept_switches(jobs[0])
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


@functools.cache
def switch_names() -> frozenset[str]:
    """The last names of the keys that default to true/false in rlzoo's own YAML (``obs``,
    ``layer_norm``, ``share_actor``, ``compile``, ...), read once."""
    root = Path(__file__).resolve().parents[1] / "conf"  # rlzoo/conf
    pattern = re.compile(r"^\s*([A-Za-z_]\w*):\s*(?:true|false)\b", re.M)
    return frozenset(name for path in root.rglob("*.yaml")
                     for name in pattern.findall(path.read_text()))


class _Checker:
    """Composes each job of a run (or multirun) and turns failures into one-line errors."""

    def __init__(self, items: list[Override], multirun: bool) -> None:
        self.items = items
        self.multirun = multirun
        # group listings must see the same search path as the composition
        self.groups = ConfigGroups([
            o.input_line or "" for o in items if o.key_or_group == "hydra.searchpath"
        ])

    def check_value_present(self, o: Override) -> None:
        """``key=`` with nothing after ``=`` (an empty string to Hydra) is almost always a slip:
        name the default or the choices instead."""
        if o.is_delete() or o.is_sweep_override() or isinstance(o._value, QuotedString):
            return
        if o._value != "":
            return
        key = o.key_or_group
        if key in self.groups.all():
            raise UserError(
                f"{o.input_line!r} names no {key} config; choose one of "
                f"{short_list(self.groups.choices(key))}"
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
        groups = set(self.groups.all())
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
                message = explain(err, job, self.compose, self.groups)
                message = message or culprit(err, job, self.compose)
            except Exception:  # noqa: BLE001 - never hide the original error behind our own
                message = None
            raise UserError(message or hydra_message(err)) from None
        self.resolve(cfg, job)
        self.check_switches(cfg, job)
        check_buildable(cfg)  # every _target_ imports and is a class of its kind
        return cfg

    def check_switches(self, cfg: DictConfig, job: list[str]) -> None:
        """A key whose default is ``true``/``false`` takes only a truth value: a word or a
        number such as ``normalize.obs=maybe``, ``=off`` or ``=0.5`` would be read as on by
        Python's truth test. Only overrides of a key named like one of rlzoo's switches
        (:func:`switch_names`) whose value is not a truth value are looked at; one more
        composition, without them, gives their defaults."""
        suspects = [(text, o) for text in job if (o := reparse(text)) is not None
                    and self.may_be_switch(o)
                    and not isinstance(OmegaConf.select(cfg, o.key_or_group, default=None),
                                       bool)]
        self.refuse_switch_values(job, [(t, o, OmegaConf.select(cfg, o.key_or_group))
                                        for t, o in suspects])

    def check_swept_switches(self, job: list[str]) -> None:
        """:meth:`check_switches` for the values of a multirun's swept keys beyond the first
        (``jobs`` composes a plain key's first value only)."""
        suspects = []
        for o in self.items:
            if o.is_discrete_sweep() and self.may_be_switch(o):
                wrong = [v for v in o.sweep_iterator() if not isinstance(v, bool)]
                if wrong:
                    suspects.append((o.input_line or "", o, wrong[0]))
        self.refuse_switch_values(job, suspects)

    def may_be_switch(self, o: Override) -> bool:
        key = o.key_or_group
        return (not o.is_delete() and not key.startswith("hydra")
                and key.rsplit(".", 1)[-1] in switch_names()
                and key not in set(self.groups.all()))

    def refuse_switch_values(self, job: list[str],
                             suspects: list[tuple[str, Override, Any]]) -> None:
        """``UserError`` for the first suspect whose key defaults to true/false without it."""
        if not suspects:
            return
        keys = {o.key_or_group for _, o, _ in suspects}
        others = [text for text in job
                  if (o := reparse(text)) is None or o.key_or_group not in keys]
        try:
            defaults = self.compose(others)
        except Exception:  # noqa: BLE001 - the other overrides were composed with these above
            return
        for _, o, value in suspects:
            key = o.key_or_group
            if isinstance(OmegaConf.select(defaults, key, default=None), bool):
                raise UserError(f"{key} is a switch, true or false, not {value!r}; write "
                                f"{key}=true or {key}=false")


    # ------------------------------------------------------------------ interpolations
    def resolve(self, cfg: DictConfig, job: list[str]) -> None:
        """Resolve the job's config (what the run sees) and the run dir Hydra will create."""
        parsed = [reparse(text) for text in job]
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
            raise UserError(explain_missing(err, parsed)) from None
        except InterpolationResolutionError as err:
            raise UserError(explain_interpolation(err, parsed)) from None
        except Exception as err:  # noqa: BLE001 - e.g. a resolver that raised
            key = getattr(err, "full_key", None)
            where = f"cannot resolve {key}" if key else "cannot resolve the config"
            raise UserError(f"{where}: {first_line(err)}; fix the ${{...}} expression") from None
