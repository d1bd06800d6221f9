"""Names of groups: automatic labels from the overrides that set a group apart, and ``--label``.

An automatic label is the algo and the ``key=value`` overrides that tell a group apart from the
algo's other groups in the same env (``sac``, ``sac critic=ensemble``, ``sac algo.utd=5``);
``--label`` rules rename groups (``'critic.n=5=REDQ-5'`` or ``'{algo} n={critic.n}'``).
"""

from __future__ import annotations

from rlzoo.analysis.config import MISSING, canon, format_value, is_measurement, under
from rlzoo.analysis.groups import Group
from rlzoo.conf import INTERNAL_GROUPS

MAX_LABEL_TERMS = 6
"""At most this many ``key=value`` terms in a label; the rest are counted (``(+3)``)."""

# --------------------------------------------------------------------------- automatic labels


def _natural(text: str) -> tuple[int, float, str]:
    """Sort key of a label value: numbers by value (``2`` before ``10``), then text."""
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def _default(groups: list[Group], key: str, choice: bool) -> str | None:
    """The canonical value of ``key`` in the groups that did not set it on the command line, if
    they agree; None when no group left it at its default or they disagree."""
    values = {
        canon(g.choices.get(key) if choice else g.values.get(key, MISSING))
        for g in groups if g.untouched(key, choice)
    }
    return values.pop() if len(values) == 1 else None


def label_env(groups: list[Group]) -> None:
    """Write ``terms`` and ``auto_label`` of the groups of one env.

    Within each algo, a key is a candidate term when its value differs between the algo's groups
    (a measurement key: when it differs anywhere in the env's table). A config group whose choice
    differs (``critic``, ``net``) is shown as that choice (``critic=ensemble``, ``net=simbav2``)
    in place of the keys it sets (those below it, ``critic.*``; for a group that writes elsewhere
    in the config, such as ``net``, every key whose value it explains), plus those that still
    differ between groups with the same choice (``critic.n=5``) or that the group set on its
    command line (``critic=ensemble critic.n=3``). The groups an algorithm file picks for itself
    (:data:`rlzoo.conf.INTERNAL_GROUPS`) are never terms. A term is left out of a group's label
    when its value is the default, i.e. the value of the groups that did not set the key on their
    command line (``.hydra/overrides.yaml``): the plain ``sac`` next to ``sac critic=ensemble``
    and ``sac algo.utd=5``. Two groups that would still get one label (values that only the
    defaults rule or the term limit hid) are both labelled with every key and choice that sets
    them apart, so a label never falls back to an order-dependent suffix and never names the
    wrong group. Across algorithms, a group also shows every key and choice its own command line
    set (``.hydra/overrides.yaml``) whose value another group of the env does not have, so
    ``hasac algo.n_step=5`` next to ``maddpg`` says what was set by hand where the algo
    alone would hide it. A group whose runs have no readable config is marked ``(no config)``
    next to the algo's other groups. The groups are then sorted in place: by algo, configured first,
    fewer terms first, then by the terms' values.
    """
    position: dict[str, float] = {}
    for g in groups:
        for key in g.values:
            position.setdefault(key, len(position))
    measured = sorted(
        (
            k for k in position
            if is_measurement(k) and len({canon(g.values.get(k, MISSING)) for g in groups}) > 1
        ),
        key=lambda k: position[k],
    )
    for algo in sorted({g.algo for g in groups}):
        mine = [g for g in groups if g.algo == algo]
        configured = [g for g in mine if g.has_config]
        compressed, candidates = _candidate_terms(configured, position)
        for g in mine:
            keys = [*(candidates if g.has_config else []), *measured]
            g.terms = _terms(g, keys, compressed, measured, configured, groups)
            g.terms.update(_set_here(g, groups, {*keys, *compressed}, position))
            _write_label(g, configured)
        _separate_clashes(mine, configured, position)
    seen: dict[str, int] = {}
    ordered = sorted(groups, key=lambda g: (g.label, _value_order(g)))
    for g in ordered:  # unreachable after _separate_clashes; only guards the report's keys
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


def _set_here(g: Group, groups: list[Group], shown: set[str],
              position: dict[str, float]) -> dict[str, str]:
    """The keys and choices ``g``'s command line set, not among ``shown`` (its algo's candidate
    terms), whose value some other configured group of the env does not share: choices first
    (``critic=ensemble``; not ``algo``, ``env`` nor :data:`rlzoo.conf.INTERNAL_GROUPS`), then
    keys in config order."""
    if not g.has_config or any(r.overridden is None for r in g.runs):  # unknown: not shown
        return {}
    others = [h for h in groups if h is not g and h.has_config]
    found = {}
    for name, choice in g.choices.items():
        if (name not in shown and name not in ("algo", "env", *INTERNAL_GROUPS)
                and "|" not in choice  # its runs chose differently: pooled (--group-by)
                and not g.untouched(name, True)
                and any(h.choices.get(name) != choice for h in others)):
            found[name] = choice
    for key in sorted(g.values, key=lambda k: position.get(k, 0.0)):
        value = canon(g.values[key])
        if (key not in shown and key not in ("algo", "env") and not is_measurement(key)
                and not g.untouched(key, False)
                and any(canon(h.values.get(key, MISSING)) != value for h in others)):
            found[key] = format_value(g.values[key])
    return found


def _value_order(g: Group) -> list[tuple[str, str]]:
    """A sort key of a group that depends only on its values and choices (never on the order
    its runs were found in)."""
    return sorted(
        [(k, canon(v)) for k, v in g.values.items()] + [(f"={k}", v) for k, v in g.choices.items()]
    )


def _write_label(g: Group, configured: list[Group], limit: int | None = MAX_LABEL_TERMS) -> None:
    """``g.auto_label`` (and ``g.label``) from ``g.algo`` and ``g.terms``; beyond ``limit``
    terms the rest are counted (``(+3)``; all of them are in comparison.json's differs_by)."""
    mark = " (no config)" if not g.has_config and configured else ""
    shown = [f"{k}={v}" for k, v in g.terms.items()]
    if limit is not None and len(shown) > limit:
        shown = [*shown[: limit - 1], f"(+{len(shown) - limit + 1})"]
    g.auto_label = g.algo + mark + "".join(f" {term}" for term in shown)
    g.label = g.auto_label


def _separate_clashes(mine: list[Group], configured: list[Group],
                      position: dict[str, float]) -> None:
    """Give groups of one algo that share a label every key and choice that tells them apart.

    Each such key (choices first, then config keys in config order) is added to the terms of
    every group of the clash, default values included, and the labels are written without the
    term limit: ``sac net=mlp`` against ``sac net=simbav2`` rather than two ``sac``.
    """
    by_label: dict[str, list[Group]] = {}
    for g in mine:
        by_label.setdefault(g.label, []).append(g)
    for clash in by_label.values():
        if len(clash) < 2:
            continue
        choices = [
            name for name in sorted(set().union(*(set(g.choices) for g in clash)))
            if name not in INTERNAL_GROUPS
            and len({g.choices.get(name, "(unset)") for g in clash}) > 1
        ]
        keys = sorted(
            {k for g in clash for k in g.values
             if len({canon(h.values.get(k, MISSING)) for h in clash}) > 1},
            key=lambda k: position.get(k, 0.0),
        )
        for g in clash:
            terms = {name: g.choices.get(name, "(unset)") for name in choices}
            terms.update(g.terms)
            terms.update({k: format_value(g.values.get(k, MISSING)) for k in keys})
            g.terms = terms
            _write_label(g, configured, limit=None)


def _added_later(configured: list[Group], key: str) -> bool:
    """``key`` is absent from some groups' configs, and every group that has it holds the same
    value without setting it on its command line: a setting that came into the config after
    the older runs were made, at its default, not a difference between the groups."""
    having = [g for g in configured if key in g.values]
    return (len(having) < len(configured)
            and len({canon(g.values[key]) for g in having}) == 1
            and all(g.untouched(key, False) for g in having))


def _label_choices(configured: list[Group]) -> list[str]:
    """The config groups whose choice may label ``configured`` groups: recorded by every group,
    one choice per group (not ``a|b``), not one of :data:`rlzoo.conf.INTERNAL_GROUPS`, and not
    the same in all groups."""
    choices = [g.choices for g in configured]
    names = set.intersection(*(set(c) for c in choices)) if choices else set()
    return [
        name for name in sorted(names)
        if name not in INTERNAL_GROUPS
        and not any("|" in c[name] for c in choices)
        and len({c[name] for c in choices}) > 1
    ]


def _owners(key: str, compressed: list[str], tops: set[str]) -> list[str]:
    """The compressed choices that may set ``key``: the one it is under (``critic`` for
    ``critic.n``) and every group that writes elsewhere in the config (``net``, not a key)."""
    return [c for c in compressed if under(key, c) or c not in tops]


def _explains(name: str, key: str, configured: list[Group]) -> bool:
    """Groups with the same choice of ``name`` agree on ``key``."""
    seen: dict[str, str] = {}
    for g in configured:
        value = canon(g.values.get(key, MISSING))
        if seen.setdefault(g.choices[name], value) != value:
            return False
    return True


def _candidate_terms(configured: list[Group],
                     position: dict[str, float]) -> tuple[list[str], list[str]]:
    """The candidate terms of one algo's configured groups, in config order: the config groups
    whose choice differs and which set some differing key (``compressed``: shown as the choice;
    each placed just before the first differing key it sets in ``position``), and every key
    that differs, the compressed choices included."""
    keys = {k for g in configured for k in g.values}
    tops = {k.split(".", 1)[0] for k in keys}
    all_differ = {
        k for k in keys
        if not is_measurement(k)
        and len({canon(g.values.get(k, MISSING)) for g in configured}) > 1
    }
    differ = {k for k in all_differ if not _added_later(configured, k)}
    compressed = []
    for name in _label_choices(configured):
        # a group such as net writes keys that may be new to the other groups (added_later)
        owned = sorted(
            (k for k in all_differ
             if under(k, name) or (name not in tops and _explains(name, k, configured))),
            key=lambda k: position[k],
        )
        if owned:
            compressed.append(name)
            position[name] = position[owned[0]] - 0.5
    return compressed, sorted(differ | set(compressed), key=lambda k: position[k])


def _terms(g: Group, keys: list[str], compressed: list[str], measured: list[str],
           configured: list[Group], groups: list[Group]) -> dict[str, str]:
    """Group ``g``'s label terms among ``keys``: each whose value is not its peers' default
    (``g.defaults`` gets the others)."""
    terms: dict[str, str] = {}
    tops = {k.split(".", 1)[0] for h in configured for k in h.values}
    for key in keys:
        if key in compressed:
            if canon(g.choices[key]) != _default(configured, key, True):
                terms[key] = g.choices[key]
            else:
                g.defaults[key] = g.choices[key]
            continue
        if key in measured:
            if key not in g.values:
                continue
            peers = groups
        else:
            owners = _owners(key, compressed, tops)
            peers = [h for h in configured
                     if all(h.choices[c] == g.choices[c] for c in owners)]
            if len({canon(h.values.get(key, MISSING)) for h in peers}) < 2:
                # the only group with its choice: shown if its command line set it
                if not g.untouched(key, False):
                    terms[key] = format_value(g.values.get(key, MISSING))
                continue
        value = g.values.get(key, MISSING)
        if canon(value) != _default(peers, key, False):
            terms[key] = format_value(value)
        else:
            g.defaults[key] = format_value(value)
    return terms
