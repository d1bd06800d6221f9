"""``--label`` rules: ``'KEY=VALUE [KEY=VALUE ...]=NAME'`` (e.g. ``'critic.n=5=REDQ-5'``) or a
format string (``'{algo} n={critic.n}'``) renaming the groups :mod:`rlzoo.analysis.labels` named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlzoo.analysis.config import MISSING, canon, format_value, normalize
from rlzoo.analysis.groups import Group, known_keys, unknown_key_error
from rlzoo.analysis.messages import CompareError
from rlzoo.analysis.runs import FinishedRun

_AUTO_LABEL_FIELDS = ("label", "algo", "env")

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
        return normalize(yaml.safe_load(text))
    except yaml.YAMLError:
        return text


def _term_matches(g: Group, key: str, value: str) -> bool:
    if key == "algo" and (g.algo == value or g.choices.get("algo") == value):
        return True
    if key == "env" and (g.env == value or g.choices.get("env") == value):
        return True
    same, shared = g.shared(key)
    if same and shared is not MISSING:
        return canon(shared) == canon(_parse_value(value))
    if value == "(unset)":
        return same
    return g.choices.get(key) == value


def _fill_template(g: Group, template: str) -> str:
    def field_value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key == "label":
            return g.auto_label
        if key == "algo":
            return g.algo
        if key == "env":
            return g.env
        same, shared = g.shared(key)
        if same and shared is not MISSING:
            return format_value(shared)
        if key in g.choices:
            return g.choices[key]
        return format_value(shared) if same else "*"

    return re.sub(r"\{([^{}]*)\}", field_value, template)


def apply_labels(
    per_env: dict[str, list[Group]], rules: Sequence[LabelRule], runs: Sequence[FinishedRun]
) -> None:
    """Rename groups by the ``--label`` rules: the first rule that applies to a group names it.

    Raises:
        CompareError: a rule names a key no run has, matches no group, or gives two groups of
            one env the same label.
    """
    known = known_keys(runs)
    for rule in rules:
        keys = [k for k, _ in rule.selector] or [
            f.strip() for f in re.findall(r"\{([^{}]*)\}", rule.template)
        ]
        for key in keys:
            if key not in known and key not in _AUTO_LABEL_FIELDS:
                raise unknown_key_error(f"--label {rule.text!r}", key, runs)
    for env, groups in per_env.items():
        for g in groups:
            for rule in rules:
                if rule.template:
                    g.label = _fill_template(g, rule.template)
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
