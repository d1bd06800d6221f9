"""Config values of runs: which keys split groups, a canonical form, and how values are written.

Pure functions on already-read values (:mod:`rlzoo.analysis.runs` reads the files). A run's config
is ``.hydra/config.yaml`` flattened to dotted keys (``{"critic.n": 10, "algo.utd": 5, ...}``).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from rlzoo.conf.history import ADDED, BACKEND_BEFORE, current_target

IGNORED_KEYS: dict[str, str] = {
    "seed": "the replication axis: runs that differ only in their seed are the samples of a group",
    "seeds": "how many seeds one process trained together (docs/seeds.md): each seed is its "
    "single run (bit for bit on the CPU), so the replication axis too",
    "seed_kernels": "how a seed group computes its seeds (each in turn, or one batched call); "
    "speed only, the same algorithm",
    "resume": "the run dir a run was continued from; a resumed run continues the same experiment",
    "device": "where the tensors live (cpu, cuda); the same algorithm, up to float rounding",
    "torch_threads": "CPU threads of torch; speed only",
    "compile": "torch.compile of the networks; speed only, the same computation",
    "cudagraphs": "the update replayed from a CUDA graph; speed only, the same computation",
    "log.*": "how often scalars are logged and whether a progress bar is shown",
    "checkpoint.*": "how often checkpoints are saved and how many are kept",
    "hydra.*": "Hydra's output dirs and job bookkeeping",
    "env.total_steps": "the env's default budget, copied into total_steps unless overridden; "
    "the budget a run used is total_steps, which is always compared",
    "eval.video_every": "how often an evaluation is filmed; the run's numbers are the same",
    "env_workers": "worker processes stepping the training envs; speed only, the same numbers",
    "env_timeout_s": "how long an env worker may take before the run ends; no number changes",
}
"""Config keys (``x.*``: every key below ``x``) that never split groups automatically, and why.

None of them changes what is learned or what is measured. ``--group-by`` may still name them.
"""

MEASUREMENT_KEYS = ("total_steps", "eval.*")
"""Keys (``x.*``: every key below ``x``) that change what a score measures: runs that differ in
them are never pooled, even when ``--group-by`` does not name them. ``total_steps`` is read from
summary.json (the steps a run really made)."""


def fill_added(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``config`` (flattened, an rlzoo run's: it has ``algo._target_``) with the keys rlzoo added
    after runs were made without them set to what such a run did, so that it pools with today's
    runs at that value (``rlzoo.compare`` over cells trained months apart); other configs
    unchanged. The keys: the constructors' (:data:`rlzoo.conf.history.ADDED`, the record the
    build reads too), the input normalizers (81ec633: a run without the ``normalize`` section ran
    without them, as today's default section does), the critic's network option (e9abd95: null,
    the MLP, before it) and the env backend (d1d3c2d: gymnasium's envs, or a family's PettingZoo
    envs, before it: :data:`rlzoo.conf.history.BACKEND_BEFORE`). Every run lacking a key gets the
    same value (a TD3 run's ``tuner.alpha_optimizer`` too), so runs that lack it alike still
    pool.

    Args:
        config: a run's flattened config.
        defaults: the flattened ``normalize`` section of rlzoo's own conf/config.yaml
            (``{"normalize.obs": False, ...}``), read by the caller.
    """
    if not str(config.get("algo._target_", "")).startswith("rlzoo."):
        return config
    config = {k: current_target(v) if k.endswith("_target_") and isinstance(v, str) else v
              for k, v in config.items()}  # a moved component pools with its new path's runs
    fill: dict[str, Any] = {f"{added.node}.{key}": normalize(value) for added in ADDED
                            for key, value in added.values.items()}
    fill["critic.network"] = None
    fill["env.backend"] = BACKEND_BEFORE["multi" if "env.family" in config else "single"]
    if not any(under(k, "normalize") for k in config):
        fill.update(defaults)
    return {**config, **{k: v for k, v in fill.items() if k not in config}}


class _Missing:
    """The type of :data:`MISSING`."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""The value of a key a run's config does not have."""


def under(key: str, pattern: str) -> bool:
    """``key`` is ``pattern`` or a key below it (``critic.n`` is under ``critic`` and ``log.*``
    matches ``log.every``)."""
    pattern = pattern.removesuffix(".*")
    return key == pattern or key.startswith(pattern + ".")


@functools.cache
def is_ignored(key: str) -> bool:
    """``key`` is one of :data:`IGNORED_KEYS` or below one."""
    return any(under(key, pattern) for pattern in IGNORED_KEYS)


@functools.cache
def is_measurement(key: str) -> bool:
    """``key`` is one of :data:`MEASUREMENT_KEYS` or below one, and not an ignored key
    (``eval.video_every`` is under ``eval.*`` but measures nothing)."""
    return not is_ignored(key) and any(under(key, pattern) for pattern in MEASUREMENT_KEYS)


def normalize(value: Any) -> Any:
    """A config value in a canonical form: integral floats as ints (``5.0`` == ``5``), tuples as
    lists, anything unusual as text."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    return str(value)


def canon(value: Any) -> str:
    """A string equal for equal config values (the identity used to group runs): the value's
    JSON (sorted keys); a scalar's is computed once (grouping 10,000 runs asks for it about a
    million times)."""
    if value is MISSING:
        return "\0unset"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return _scalar_canon(value)


@functools.lru_cache(maxsize=1 << 16, typed=True)  # typed: True, 1 and 1.0 apart
def _scalar_canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def format_value(value: Any) -> str:
    """A config value written as a Hydra override writes it: ``5``, ``0.0003``, ``[64,64]``,
    ``null``, ``true``; a key a run does not have is ``(unset)``."""
    if value is MISSING:
        return "(unset)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def flatten_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The leaves of a nested config as ``{dotted key: value}``, in the file's order.

    Mappings are descended into; lists and empty mappings are leaves. Values are normalized
    (:func:`normalize`).
    """
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten_config(v, key))
        else:
            out[key] = normalize(v)
    return out
