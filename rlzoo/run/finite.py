"""NaN and inf: the loop's guards, which stop a run with one line naming the quantity (and the
seed, in a seed group) before poisoned data reaches the storage or a checkpoint
(``NonFiniteError``); finding them in a saved state is ``rlzoo.store.nonfinite``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlzoo.run.signals import NonFiniteError


def seed_note(run_seeds: list[int], seeds: list[int], of: str) -> str:
    """`` in seed 3`` (``of`` = ``"in"``), naming ``seeds``, when the run trains several seeds
    (``run_seeds``); ``""`` for a single run, whose one seed goes without saying."""
    return f" {of} seed {', '.join(map(str, seeds))}" if len(run_seeds) > 1 else ""


def check_finite(metrics: dict[str, torch.Tensor], params: dict[str, torch.Tensor],
                 seeds: list[int], step: int, where: Callable[[], str]) -> None:
    """Stop with one line naming the quantity if a loss, statistic (``metrics``, ``[K]``) or
    parameter (``params``) is NaN/inf in any of the run's ``seeds``. Called at log time and
    before every checkpoint, so a poisoned state is never saved over the last good checkpoint;
    ``where()`` says where the run can go back to. One device-to-host transfer per call."""
    names = [k for k, v in metrics.items() if torch.is_tensor(v)]
    k = len(seeds)

    def finite(v: torch.Tensor) -> torch.Tensor:  # [K]: is each seed's slice finite
        return torch.isfinite(v).reshape(k, -1).all(1)

    flags = torch.stack(
        [finite(metrics[n]) for n in names] + [finite(p) for p in params.values()]
    ).tolist() if names or params else []
    for name, row in zip([*names, *(f"parameter {p}" for p in params)], flags):
        if not all(row):
            bad = [seed for seed, ok in zip(seeds, row) if not ok]
            raise NonFiniteError(
                f"{name} became NaN or inf{seed_note(seeds, bad, 'in')} by step {step}; "
                f"training stopped and {where()} (lower the learning rates or check the env's "
                "rewards and observations)"
            )


def check_env_output(seeds: list[int], rows: list[int], steps: list[int], env_name: str,
                     where: Callable[[], str], **arrays: Any) -> None:
    """Stop before storing a NaN/inf reward, observation, state or action of any seed, with one
    line naming the quantity, the env, the training env index, the seed (in a group) and the
    step, so poisoned data never reaches the storage or a checkpoint.

    Args:
        seeds: the run's seeds.
        rows: the member (index into ``seeds``) of each row of the arrays.
        steps: each row's member's step (the step being taken).
        env_name: the env, for the message.
        where: where the run can go back to.
        arrays: ``[n, E, ...]`` arrays by name (None: absent), checked with one ``isfinite``
            each; the first bad member is named, and its first bad quantity in this order.
    """
    found: tuple[int, str, int] | None = None  # (row, name, env)
    for name, value in _tensors_to_host(arrays).items():
        if value is None:
            continue
        a = np.asarray(value)
        if a.dtype.kind != "f" or np.isfinite(a).all():
            continue
        bad = ~np.isfinite(a.reshape(a.shape[0], a.shape[1], -1)).all(axis=2)  # [n, E]
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        if found is None or row < found[0]:
            found = (row, name, int(np.flatnonzero(bad[row])[0]))
    if found is None:
        return
    row, name, e = found
    source = "the policy" if name == "action" else f"env={env_name}"
    raise NonFiniteError(
        f"{source} produced a non-finite {name.replace('_', ' ')} (NaN or inf) in "
        f"training env {e}{seed_note(seeds, [seeds[rows[row]]], 'of')} at step "
        f"{steps[row]}; training stopped before storing it and {where()} (check the "
        "env's rewards and observations)"
    )


def _tensors_to_host(arrays: dict[str, Any]) -> dict[str, Any]:
    """``arrays`` with each tensor (the observations and state of envs that keep them on their
    device) as numpy: a CPU tensor as a view of its memory (numpy's ``isfinite`` is several
    times faster than torch's on the CPU), the others checked on their device, all in one
    device read, a finite one (or one not of floats) dropped (None), one holding NaN or inf
    copied to the host to be located."""
    arrays = {name: v.detach().numpy() if torch.is_tensor(v) and v.device.type == "cpu" else v
              for name, v in arrays.items()}
    tensors = {name: v for name, v in arrays.items() if torch.is_tensor(v)}
    floats = {name: v for name, v in tensors.items() if v.is_floating_point()}
    device = next(iter(floats.values())).device if floats else None
    ok = torch.stack([torch.isfinite(v).all().to(device) for v in floats.values()]).tolist() \
        if floats else []
    bad = {name: v.cpu() for (name, v), fine in zip(floats.items(), ok) if not fine}
    return {name: bad.get(name) if name in tensors else v for name, v in arrays.items()}
