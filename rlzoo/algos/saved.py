"""An algorithm's saved state (``Algorithm.state_dict``: ``modules``, ``optimizers``,
``updates``) checked against the algorithm it goes into before any of it is loaded
(:func:`check_algorithm_state`), and loaded with the run's own optimizer settings
(:func:`load_algorithm_state`). ``Algorithm.load_state_dict`` calls these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from rlzoo.optim.adam import initial_state, with_own_settings
from rlzoo.store.state_match import (
    StateMismatch,
    check_count,
    check_optimizer_state,
    match_state,
)

MAX_UPDATES = 2**53  # updates beyond this are no run's
PARTS = ("modules", "optimizers", "updates")


def check_weights(algo: nn.Module, weights: Any, where: str = "algo.modules") -> None:
    """Refuse module weights (``nn.Module.state_dict``'s) unless they have exactly the keys of
    ``algo``'s and every tensor its tensor's shape and dtype, contiguous
    (``rlzoo.store.state_match.match_state``): a half, long or bool weight is refused, never cast.
    Any device: loading copies them onto ``algo``'s (a resume maps a checkpoint onto the run's
    device; the evaluator and ``load_policy`` read it onto the CPU)."""
    match_state(weights, nn.Module.state_dict(algo), where, loaded_on="*")


def check_algorithm_state(algo: Any, state: Any, where: str = "algo") -> int:
    """Refuse ``state`` unless ``algo`` (an ``Algorithm``, a seed group's included) could have
    saved it: :data:`PARTS` and nothing else; ``updates`` an integer in ``[0, 2**53]``; its
    modules' weights :func:`check_weights`; one entry per optimizer of ``algo``, each fitting it
    (``rlzoo.store.state_match.check_optimizer_state``: moments of their parameters' shapes, step
    counts at most ``algo.optimizer_steps(updates)``; the settings are the run's, not read).
    Returns ``updates``; ``StateMismatch`` (a ``ValueError``) names the first entry that does
    not fit."""
    if not isinstance(state, Mapping) or set(state) != set(PARTS):
        raise StateMismatch(f"{where} is not an algorithm's state ({', '.join(PARTS)})")
    updates = check_count(state["updates"], f"{where}.updates", MAX_UPDATES)
    check_weights(algo, state["modules"], f"{where}.modules")
    saved = state["optimizers"]
    if not isinstance(saved, Mapping) or set(saved) != set(algo.optimizers):
        names = sorted(map(str, saved)) if isinstance(saved, Mapping) else saved
        raise StateMismatch(f"{where}.optimizers are {names!r}, this run's are "
                            f"{sorted(algo.optimizers)}")
    limit = algo.optimizer_steps(updates)
    for name, opt in algo.optimizers.items():
        check_optimizer_state(saved[name], initial_state(opt), opt.state_dict()["param_groups"],
                              limit, f"{where}.optimizers.{name}")
    return updates


def load_algorithm_state(algo: Any, state: dict[str, Any]) -> None:
    """Put :func:`check_algorithm_state`-checked ``state`` into ``algo``: nothing is changed
    unless all of it fits. The optimizers keep their own settings (``with_own_settings``); a
    learning-rate schedule is set from the update count."""
    updates = check_algorithm_state(algo, state)
    nn.Module.load_state_dict(algo, state["modules"])
    for name, opt in algo.optimizers.items():
        opt.load_state_dict(with_own_settings(opt, state["optimizers"][name]))
    algo.updates = updates
    if algo.lr_schedule is not None:
        algo.lr_schedule.reset(updates)
