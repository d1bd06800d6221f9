"""What a run saves besides its components: the global random generators, the summary it reads
back, and the small ``policy.pt`` that ``rlzoo.load_policy`` rebuilds a policy from."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlzoo.store.bounded import load_json
from rlzoo.store.state_match import StateMismatch, match_state

POLICY_FILE = "policy.pt"  # beside checkpoints/, rewritten at every checkpoint and at the end
POLICY_FORMAT = 1


def global_rng_state() -> dict[str, Any]:
    """The process's global generators (torch, CUDA, numpy, python), as tensors and plain
    data (loadable with ``weights_only=True``)."""
    rng = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(legacy=False),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


RNG_KEYS = ("torch", "numpy", "python")  # always saved; "cuda" where CUDA is available
LEGACY_RNG_KEYS = ("cuda", "warmup")  # "warmup": a single run's warm-up generator, format 1


def check_global_rng(rng: Any, loaded_on: str | None = None) -> None:
    """Refuse (``StateMismatch``, a ``ValueError``) saved global generator states that are not
    this process's kind: exactly :func:`global_rng_state`'s entries (``cuda`` may be missing
    or extra: a run saved on another machine; ``warmup`` belongs to format 1), each tensor and
    value of this process's shape, dtype and type (``rlzoo.store.state_match.match_state``;
    ``loaded_on``: the device kind the file was mapped to), an MT19937 state with a position in
    ``[0, 624]`` and python's ``random.getstate()`` of 625 words in ``[0, 2**32)``."""
    if not isinstance(rng, dict) or not set(RNG_KEYS) <= set(rng) \
            or not set(rng) <= {*RNG_KEYS, *LEGACY_RNG_KEYS}:
        raise StateMismatch(f"rng holds {sorted(map(str, rng)) if isinstance(rng, dict) else rng!r}"
                            f", not the generators {', '.join(RNG_KEYS)}")
    mine = global_rng_state()
    for key in RNG_KEYS:
        match_state(rng[key], mine[key], f"rng.{key}", loaded_on=loaded_on)
    if "cuda" in rng and "cuda" in mine and len(rng["cuda"]) == len(mine["cuda"]):
        match_state(rng["cuda"], mine["cuda"], "rng.cuda", loaded_on=loaded_on)
    numpy_state = rng["numpy"]
    if numpy_state["bit_generator"] != "MT19937" or not 0 <= numpy_state["state"]["pos"] <= 624:
        raise StateMismatch("rng.numpy is not an MT19937 state at a position in [0, 624]")
    words = rng["python"][1]
    if any(not 0 <= word < 2**32 for word in words) or not 0 <= words[-1] <= 624:
        raise StateMismatch("rng.python is not a random.getstate() of 625 words in [0, 2**32)")


def restore_global_rng(rng: dict[str, Any]) -> None:
    """Put back what :func:`global_rng_state` returned (after a checkpoint round trip; a
    checkpoint's ``rng`` may also hold a ``warmup`` generator, the member's to restore)."""
    torch.set_rng_state(rng["torch"].cpu())
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in rng["cuda"]])
    np.random.set_state(_legacy_numpy_state(rng["numpy"]))
    random.setstate(_python_random_state(rng["python"]))


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def host_array(value: Any) -> np.ndarray:
    """A numpy copy of a checkpointed array (a tensor on any device, or an array)."""
    if torch.is_tensor(value):
        return value.detach().cpu().numpy().copy()
    return np.array(value)


def summary_step(run_dir: Path) -> int | None:
    """``total_steps`` of ``run_dir/summary.json``, or ``None`` when it is absent or unreadable
    (a summary left by an earlier, shorter leg of a resumed run is stale, not final)."""
    try:
        step = load_json(run_dir / "summary.json").get("total_steps")  # bounded, no link
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None


def policy_record(
    algo: torch.nn.Module, config: dict[str, Any], spec: dict[str, Any], step: int
) -> dict[str, Any]:
    """The contents of ``policy.pt``: the algorithm's network weights (``nn.Module`` state: no
    optimizer, no replay), the resolved config and the env spec needed to rebuild it, and the
    env step they were taken at. Tensors and plain data only (``weights_only`` loads it)."""
    weights = {k: v.detach().cpu() for k, v in torch.nn.Module.state_dict(algo).items()}
    return {"format": POLICY_FORMAT, "step": int(step), "config": config, "spec": spec,
            "weights": weights}


def _legacy_numpy_state(state: dict[str, Any]) -> dict[str, Any]:
    """numpy's global RNG state as ``np.random.set_state`` wants it (its key array as uint32)."""
    inner = dict(state["state"])
    inner["key"] = np.asarray(inner["key"], dtype=np.uint32)
    return {**state, "state": inner}


def _python_random_state(state: Any) -> tuple[Any, ...]:
    version, internal, gauss = state
    return version, tuple(int(x) for x in internal), gauss
