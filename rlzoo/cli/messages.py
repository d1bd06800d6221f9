"""The one-line messages of :func:`rlzoo.cli.check.check_overrides`: Hydra's composition and
interpolation errors turned into ``<override>: <what>; <how to fix>``, naming the nearest group
choice or key (``difflib``), or the override whose removal lets the rest compose.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from rlzoo.cli.groups import ConfigGroups

Compose = Callable[[list[str]], DictConfig]  # overrides -> the composed config (or raises)
MAX_LISTED = 40  # choices or keys named in one error line


def explain(err: Exception, job: list[str], compose: Compose,
            groups: ConfigGroups) -> str | None:
    """The one line for a composition failure that names an override, or ``None``."""
    parsed = [reparse(text) for text in job]
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        return explain_missing_group(err, parsed, groups)
    text = str(err)
    key_error = re.match(
        r"(?:Could not override '([^']+)'|Could not delete from config\. '([^']+)' does not"
        r" exist)", text,
    )
    if key_error:
        key = key_error.group(1) or key_error.group(2)
        if "@" in key:  # a package in the defaults list (algo@pkg=...): Hydra's text says it
            return hydra_message(err)
        return explain_key(key, parsed, compose, groups)
    exists = re.match(r"Could not append to config\. An item is already at '([^']+)'", text)
    if exists:
        key = exists.group(1)
        o = find_override(parsed, key)
        line = o.input_line if o is not None and o.input_line else f"+{key}=..."
        return (
            f"{line}: {key} is already in the config, so '+' cannot add it; drop the '+' to "
            f"change it ({line.lstrip('+')}), or write ++{line.lstrip('+')}"
        )
    group_like = re.match(
        r"Override (\S+) looks like a config group override, but config group '([^']+)'", text
    )
    if group_like:
        return explain_key(group_like.group(2), parsed, compose, groups,
                           line=group_like.group(1))
    merging = re.match(r"Error merging override (.+)", text)
    if merging and err.__cause__ is not None:
        return f"{merging.group(1)}: {first_line(err.__cause__)}"
    return None


def explain_missing_group(
    err: MissingConfigException, parsed: list[Override | None], groups: ConfigGroups
) -> str:
    """``group=choice`` that names no config: the nearest choice and the listing."""
    missing = str(err.missing_cfg_file)
    for o in parsed:
        if o is None or o.is_sweep_override():
            continue
        choice = str(o.value())
        if f"{o.key_or_group}/{choice}" == missing:
            group = o.key_or_group
            choices = groups.choices(group)
            best = difflib.get_close_matches(choice, choices, n=1, cutoff=0.5)
            hint = f"did you mean {group}={best[0]}? " if best else ""
            return (
                f"{group}={choice}: there is no {group} config {choice!r}; {hint}"
                f"choose one of {short_list(choices)}"
            )
    # a missing config named inside a config file's own defaults list
    where = first_line(err)
    options = list(err.options or [])
    return where + (f"; choose one of {short_list(options)}" if options else "")


def explain_key(key: str, parsed: list[Override | None], compose: Compose,
                groups: ConfigGroups, line: str | None = None) -> str:
    """A key the config does not have: the nearest key, or the keys where it was looked for."""
    o = find_override(parsed, key)
    line = line or (o.input_line if o is not None and o.input_line else key)
    rest = [p.input_line or "" for p in parsed if p is not None and p is not o]
    try:
        base: DictConfig | None = compose(rest)
    except Exception:  # noqa: BLE001 - another override is broken too: no suggestion then
        base = None
    top = groups.top()
    if base is None:
        return f"{line}: the config has no key {key!r}; check the spelling"
    found, parent, siblings = walk(base, key)
    if found:  # e.g. a key under a node that is not a section
        return f"{line}: {key} cannot be set this way; check the spelling"
    if not siblings and parent:
        return (
            f"{line}: {'.'.join(parent)} has no keys yet; to add one, prefix it with +: "
            f"+{line.lstrip('+~')}"
        )
    part = key.split(".")[len(parent)]
    candidates = sorted(set(siblings) | (set(top) if not parent else set()))
    best = difflib.get_close_matches(part, candidates, n=1, cutoff=0.6)
    where = ".".join(parent) or "the top level"
    value = o.get_value_element_as_str() if o is not None and o.value_type else None
    if best:
        fixed = ".".join([*parent, best[0], *key.split(".")[len(parent) + 1:]])
        shown = f"{fixed}={value}" if value is not None else fixed
        return f"{line}: the config has no key {key!r}; did you mean {shown}?"
    return (
        f"{line}: the config has no key {key!r}; keys at {where}: {short_list(candidates)} "
        f"(to add a new key, prefix it with +: +{line.lstrip('+~')})"
    )


def culprit(err: Exception, job: list[str], compose: Compose) -> str:
    """An error that names no override: find the one whose removal lets the rest compose."""
    for i in reversed(range(len(job))):
        if job[i].startswith("hydra.searchpath"):
            continue
        try:
            compose(job[:i] + job[i + 1:])
        except Exception:  # noqa: BLE001 - not this one
            continue
        return f"{job[i]}: {hydra_message(err)}; check this override against --cfg job"
    return f"the overrides do not compose ({hydra_message(err)}); check them against --cfg job"


def reparse(text: str) -> Override | None:
    try:
        o = OverridesParser.create().parse_override(text)
    except Exception:  # noqa: BLE001 - only used for messages
        return None
    o.input_line = text
    return o


def find_override(parsed: list[Override | None], key: str) -> Override | None:
    for o in parsed:
        if o is not None and o.key_or_group == key:
            return o
    return None


def walk(cfg: DictConfig, key: str) -> tuple[bool, list[str], list[str]]:
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


def explain_missing(err: Exception, parsed: list[Override | None]) -> str:
    match = re.search(r"Missing mandatory value: (\S+)", str(err))
    missing = match.group(1) if match else getattr(err, "full_key", None) or "a value"
    needed_by = getattr(err, "full_key", None)
    by = f" ({needed_by} refers to it)" if needed_by and needed_by != missing else ""
    return f"{missing} has no value{by}; set it on the command line, e.g. {missing}=<value>"


def explain_interpolation(err: InterpolationResolutionError, parsed: list[Override | None]) -> str:
    key = err.full_key or "a value"
    reason = str(err).splitlines()[0]
    reason = re.sub(r"^\w+ raised while resolving interpolation: ", "", reason).strip().strip('"')
    o = find_override(parsed, key)
    given = f" ({o.input_line})" if o is not None else ""
    return (
        f"cannot resolve {key}{given}: {reason}; fix the ${{...}} expression or what it refers to"
    )


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(err).__name__


def hydra_message(err: BaseException) -> str:
    """Hydra's message up to its search-path listing, as one line."""
    lines: list[str] = []
    for line in str(err).strip().splitlines():
        if line.startswith(("Config search path", "Set the environment variable")):
            break
        if line.strip() and not line.strip().startswith(("full_key:", "object_type=")):
            lines.append(line.strip())
    text = " ".join(" ".join(lines).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def short_list(names: list[str]) -> str:
    """``names`` joined by commas, at most ``MAX_LISTED`` of them (then ``... (N more)``)."""
    if len(names) <= MAX_LISTED:
        return ", ".join(names)
    return ", ".join(names[:MAX_LISTED]) + f", ... ({len(names) - MAX_LISTED} more)"
