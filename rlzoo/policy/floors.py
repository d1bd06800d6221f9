"""Paired floors: what doing nothing and acting at random score on a run's own evaluation episodes.

A run's evaluation ``i`` starts from env seed ``seed + 10_000 + i`` (``rlzoo.run.evaluation``), the
same episodes at every evaluation. The floors of that run are two scripted policies played on
exactly those episodes, in envs made from the run's own config as its evaluation makes them:

- ``zero``: the env's zero action (no force or torque; in ``[-1, 1]`` units the point that maps
  to 0 in the env's bounds, clipped to them; padding entries 0);
- ``random``: uniform random actions in the env's bounds, drawn from
  ``numpy.random.default_rng(seed)``.

So a seed's final return and its floors are paired episode by episode: "beats the zero action"
compares a seed with what standing still scores on its own ten start states, not with a mean
over other episodes (on MPE simple_spread one seed's ten episodes give the zero action -25.4,
another's -28.2). ``python -m rlzoo.compare --floors`` and the results page use this module;
results are cached by :func:`floor_key` in a JSON file (``{key: {"zero": [returns],
"random": [returns]}}``, one return per episode, team returns in the env's units).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.errors import UserError
from rlzoo.store import for_tools
from rlzoo.store.bounded import load_json
from rlzoo.store.writer import write_atomic

FLOOR_POLICIES = ("zero", "random")
FLOORS_BYTES_LIMIT = 16 * 2**20  # a cache file read: about 200 bytes per run


def scripted_policy(kind: str, env: Any, rng: np.random.Generator
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """Actions ``[B, *act_shape]`` in ``[-1, 1]`` for ``env``'s observations ``[B, ...]``:
    uniform random (``kind="random"``, from ``rng``) or the env's zero action (``"zero"``),
    padding entries 0."""
    span = np.where(env.act_mask, env.action_high - env.action_low, 1.0)
    zero = np.clip(np.where(env.act_mask, -1.0 - 2.0 * env.action_low / span, 0.0), -1.0, 1.0)
    mask = np.asarray(env.act_mask, dtype=float)

    def policy(batch: np.ndarray) -> np.ndarray:
        shape = (len(batch), *env.act_shape)
        if kind == "random":
            return rng.uniform(-1.0, 1.0, shape) * mask
        return np.broadcast_to(zero, shape)

    return policy


def episode_floors(cfg: Any, seed: int, episodes: int) -> dict[str, list[float]]:
    """The returns ``{"zero": [episodes], "random": [episodes]}`` of the scripted policies on
    the evaluation episodes of seed ``seed`` of a run whose config is ``cfg`` (env seeds
    ``seed + 10_000 + i``, ``i < episodes``, envs made as the run's evaluation makes them)."""
    first = seed + for_tools.EVAL_SEED_OFFSET
    out = {}
    for kind in FLOOR_POLICIES:
        env = for_tools.make_env(cfg, episodes, first)
        try:
            obs, _ = env.reset(seed=first)
            policy = scripted_policy(kind, env, np.random.default_rng(seed))
            result = for_tools.run_episodes([env], [obs], lambda b, act=policy: act(b[0])[None])
        finally:
            env.close()
        out[kind] = [float(r) for r in result[0].returns]
    return out


def floor_key(cfg: Any, seed: int, episodes: int) -> str:
    """What a seed's floors depend on: the env section of its config (name, family, kwargs,
    backend, ...; not its budget), the seed and the number of evaluation episodes, as
    ``<env name>/s<seed>/e<episodes>/<hash of the env section>``."""
    from omegaconf import OmegaConf

    env = OmegaConf.to_container(cfg.env, resolve=True)
    assert isinstance(env, dict)
    env.pop("total_steps", None)
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    return f"{env.get('name', '?')}/s{seed}/e{episodes}/{digest}"


def read_cache(path: Path | None) -> dict[str, dict[str, list[float]]]:
    """A floors cache file (``{}`` when absent); one UserError line when it is not one."""
    if path is None or not path.exists():
        return {}
    try:
        data = load_json(path, FLOORS_BYTES_LIMIT)
        ok = isinstance(data, dict) and all(
            isinstance(v, dict) and all(isinstance(v.get(k), list) for k in FLOOR_POLICIES)
            for v in data.values())
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the floors file {path} ({err}); delete it to have the "
                        "floors computed again") from None
    if not ok:
        raise UserError(f"{path} is not a floors file ({{key: {{zero: [...], random: [...]}}}});"
                        " delete it to have the floors computed again")
    return data


def run_floors(runs: Sequence[tuple[Path, int]], cache: Path | None = None,
               on_run: Callable[[Path], None] | None = None) -> dict[str, dict[str, list[float]]]:
    """The paired floors of each run ``(run dir, seed)``: ``{str(run dir): {"zero": [...],
    "random": [...]}}``, one return per evaluation episode of that seed.

    Each run's config (``.hydra/config.yaml``, its ``_target_``s checked as a resume checks
    them) gives the env and ``eval.episodes``. Floors already in ``cache`` (a JSON file, by
    :func:`floor_key`) are read, the others computed and added to it. A run whose config cannot
    be read or built (an env of your own package: it is not trusted here) is left out;
    ``on_run`` is called before each computation (progress)."""
    from rlzoo.config.build import read_run_config

    cached = read_cache(cache)
    found: dict[str, dict[str, list[float]]] = {}
    changed = False
    for run_dir, seed in runs:
        try:
            cfg = read_run_config(Path(run_dir))
            episodes = int(cfg.eval.episodes)
            key = floor_key(cfg, seed, episodes)
            if key not in cached:
                if on_run is not None:
                    on_run(Path(run_dir))
                cached[key] = episode_floors(cfg, seed, episodes)
                changed = True
        except UserError as err:
            print(f"rlzoo: note: {run_dir}: no floors ({' '.join(str(err).split())})",
                  file=sys.stderr)
            continue
        found[str(run_dir)] = cached[key]
    if changed and cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, json.dumps(cached, indent=1, sort_keys=True) + "\n")
    return found
