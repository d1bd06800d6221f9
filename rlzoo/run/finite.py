"""The loop's NaN/inf guards: a run stops with one line naming the quantity (and the seed, in a
seed group) before poisoned data reaches the storage or a checkpoint (``NonFiniteError``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlzoo.run.member import Member
from rlzoo.run.signals import NonFiniteError


def seed_note(members: list[Member], seeds: list[int], of: str) -> str:
    """`` in seed 3`` (``of`` = ``"in"``), naming ``seeds``, when the run has several members;
    ``""`` for a single run, whose one seed goes without saying."""
    return f" {of} seed {', '.join(map(str, seeds))}" if len(members) > 1 else ""


def check_finite(metrics: dict[str, torch.Tensor], params: dict[str, torch.Tensor],
                 members: list[Member], step: int, where: Callable[[], str]) -> None:
    """Stop with one line naming the quantity if a loss, statistic (``metrics``, ``[K]``) or
    parameter (``params``) is NaN/inf in any seed. Called at log time and before every
    checkpoint, so a poisoned state is never saved over the last good checkpoint; ``where()``
    says where the run can go back to. One device-to-host transfer per call."""
    names = [k for k, v in metrics.items() if torch.is_tensor(v)]
    k = len(members)

    def finite(v: torch.Tensor) -> torch.Tensor:  # [K]: is each seed's slice finite
        return torch.isfinite(v).reshape(k, -1).all(1)

    flags = torch.stack(
        [finite(metrics[n]) for n in names] + [finite(p) for p in params.values()]
    ).tolist() if names or params else []
    for name, row in zip([*names, *(f"parameter {p}" for p in params)], flags):
        if not all(row):
            bad = [m.seed for m, ok in zip(members, row) if not ok]
            raise NonFiniteError(
                f"{name} became NaN or inf{seed_note(members, bad, 'in')} by step {step}; "
                f"training stopped and {where()} (lower the learning rates or check the env's "
                "rewards and observations)"
            )


def check_env_output(members: list[Member], member: Member, env_name: str,
                     where: Callable[[], str],
                     **arrays: Any) -> None:
    """Stop before storing a NaN/inf reward, observation, state or action of ``member``
    (``[E, ...]`` arrays), with one line naming the quantity, the env, the training env index
    and the step, so poisoned data never reaches the storage or a checkpoint."""
    for name, value in arrays.items():
        if value is None:
            continue
        a = np.asarray(value)
        if a.dtype.kind != "f" or np.isfinite(a).all():
            continue
        bad = ~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1) if a.ndim else [True]
        e = int(np.flatnonzero(bad)[0])
        source = "the policy" if name == "action" else f"env={env_name}"
        raise NonFiniteError(
            f"{source} produced a non-finite {name.replace('_', ' ')} (NaN or inf) in "
            f"training env {e}{seed_note(members, [member.seed], 'of')} at step "
            f"{member.step + 1}; training stopped before storing it and {where()} (check the "
            "env's rewards and observations)"
        )
