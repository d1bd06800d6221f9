"""Which runs pool into one group: the automatic rule (every config value that differs) or
``--group-by``, then labels; one-line notes say what a group pools.

Runs are grouped by env and algo name (summary.json) and by every value of their
``.hydra/config.yaml`` that differs between them, except the bookkeeping keys of
:data:`~rlzoo.analysis.config.IGNORED_KEYS`; ``--group-by`` names the keys instead. Runs with a
different ``total_steps`` or ``eval.*`` (:data:`~rlzoo.analysis.config.MEASUREMENT_KEYS`) are
never pooled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlzoo.analysis.config import MISSING, canon, is_ignored, is_measurement, under
from rlzoo.analysis.groups import Group, known_keys, unknown_key_error
from rlzoo.analysis.label_rules import apply_labels, parse_label
from rlzoo.analysis.labels import label_env
from rlzoo.analysis.messages import note
from rlzoo.analysis.runs import FinishedRun


def grouping_values(run: FinishedRun, group_by: Sequence[str] | None) -> dict[str, Any]:
    """The values a run is grouped by: every key but the ignored ones (``group_by`` None), or the
    keys at or below ``group_by`` plus the measurement keys."""
    if run.config is None:
        return {} if run.total_steps is None else {"total_steps": run.total_steps}
    if group_by is None:
        return {k: v for k, v in run.config.items() if not is_ignored(k)}
    return {
        k: v for k, v in run.config.items()
        if is_measurement(k) or any(under(k, key) for key in group_by)
    }


def pool_notes(per_env: dict[str, list[Group]], group_by: Sequence[str] | None) -> None:
    """One-line notes on what a group pools: with ``--group-by``, config keys its runs differ
    in; automatically, ignored keys that differ (once for all groups)."""
    ignored_differ: set[str] = set()
    for env, groups in per_env.items():
        for g in groups:
            configs = [r.config for r in g.runs if r.config is not None]
            keys = sorted({k for c in configs for k in c}, key=str)
            differ = [
                k for k in keys if len({canon(c.get(k, MISSING)) for c in configs}) > 1
            ]
            if group_by is None:
                ignored_differ.update(
                    k for k in differ if not any(under(k, p) for p in ("seed", "resume"))
                )
                continue
            pooled = [k for k in differ if not is_ignored(k)]
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
    runs: Sequence[FinishedRun],
    group_by: Sequence[str] | None = None,
    labels: Sequence[str] = (),
) -> dict[str, list[Group]]:
    """Group runs per env; label the groups (:mod:`rlzoo.analysis.labels`).

    Notes on stderr say what a group pools that may matter (:func:`pool_notes`).

    Args:
        runs: finished runs (:func:`~rlzoo.analysis.runs.find_runs`).
        group_by: None = the automatic rule (env, algo name and every config value that differs
            between runs, except :data:`~rlzoo.analysis.config.IGNORED_KEYS`); otherwise env,
            algo name and the values at or below these keys (config paths such as ``critic`` or
            ``algo.utd``). Either way runs that differ in a
            :data:`~rlzoo.analysis.config.MEASUREMENT_KEYS` value are never pooled; when
            ``group_by`` does not name one that splits groups, a one-line note says so.
        labels: ``--label`` rules (:func:`~rlzoo.analysis.label_rules.parse_label`), applied
            in order.

    Returns:
        ``{env: [Group, ...]}``, envs and groups sorted (algo, then the label's values).

    Raises:
        CompareError: a ``group_by`` key or label key that no run has, a label that matches no
            group, or labels that give two groups of one env the same name.
    """
    if group_by is not None:
        known = known_keys(runs)
        for key in group_by:
            if key not in known:
                raise unknown_key_error("--group-by", key, runs)
    rules = [parse_label(text) for text in labels]
    index: dict[tuple[Any, ...], Group] = {}
    unsplit: dict[tuple[Any, ...], set[str]] = {}
    for run in runs:
        values = grouping_values(run, group_by)
        identity = (run.env, run.algo, run.config is not None,
                    frozenset((k, canon(v)) for k, v in values.items()))
        group = index.get(identity)
        if group is None:
            group = index[identity] = Group(run.env, run.algo, run.config is not None, values)
        group.runs.append(run)
        if group_by is not None:  # what the user's keys alone would pool
            own = frozenset(
                (k, canon(v)) for k, v in values.items()
                if any(under(k, key) for key in group_by)
            )
            unsplit.setdefault((run.env, run.algo, run.config is not None, own), set()).add(
                canon({k: v for k, v in values.items() if is_measurement(k)})
            )
    if group_by is not None and any(len(v) > 1 for v in unsplit.values()):
        named = [
            k for g in index.values() for k in g.values
            if is_measurement(k) and not any(under(k, key) for key in group_by)
        ]
        differing = sorted({
            k for k in named
            if len({canon(g.values.get(k, MISSING)) for g in index.values()}) > 1
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
        label_env(groups)
    apply_labels(per_env, rules, list(runs))
    pool_notes(per_env, group_by)
    return per_env
