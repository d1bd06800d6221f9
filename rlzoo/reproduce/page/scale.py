"""The multi-agent tasks' scale: the returns of two scripted policies (uniform random actions
and the env's zero action) on the evaluations' env seeds, computed once into
``RESULTS/<suite>/scale.json``, and the page's sentence about them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo import rundirs
from rlzoo.reproduce.files import read_json, write_text_atomic
from rlzoo.reproduce.page.runs import fmt
from rlzoo.reproduce.schema import Suite, SuiteTask, compose_cell_config

SCALE_FILE = "scale.json"  # RESULTS/<suite>/: returns of scripted policies, computed once
SCALE_EPISODES = 100       # episodes of each scripted policy (env seeds 10000..10099)
MULTI_AGENT_PREFIXES = ("mpe-", "mamujoco-")  # task names of multi-agent envs


def scripted_policy(kind: str, env: Any, rng: np.random.Generator) -> Any:
    """Actions in ``[-1, 1]`` for ``env``'s observations ``[B, ...]``: uniform random
    (``kind="random"``, from ``rng``) or the env's own zero action (``"zero"``), padding 0."""
    span = np.where(env.act_mask, env.action_high - env.action_low, 1.0)
    zero = np.where(env.act_mask, -1.0 - 2.0 * env.action_low / span, 0.0)

    def policy(batch: np.ndarray) -> np.ndarray:
        shape = (len(batch), *env.act_shape)
        return rng.uniform(-1.0, 1.0, shape) if kind == "random" else np.broadcast_to(zero, shape)

    return policy


def scale_returns(env_option: str, episodes: int = SCALE_EPISODES) -> dict[str, list[float]]:
    """Mean and std over ``episodes`` episodes (env seeds ``EVAL_SEED_OFFSET + i``, which
    include every evaluation's ``seed + EVAL_SEED_OFFSET + i`` for seed + i < episodes) of the
    team return under uniform random actions (``random``) and under the env's zero action
    (``zero``: no force in MPE, no torque in MaMuJoCo), for ``env=<env_option>``."""
    cfg = compose_cell_config([f"env={env_option}"])
    out = {}
    for kind in ("random", "zero"):
        env = rundirs.make_env(cfg, episodes, rundirs.EVAL_SEED_OFFSET)
        obs, _ = env.reset()
        policy = scripted_policy(kind, env, np.random.default_rng(0))
        returns = rundirs.run_episodes([env], [obs],
                                       lambda batch, act=policy: act(batch[0])[None])[0]
        env.close()
        out[kind] = [float(returns.returns.mean()), float(returns.returns.std(ddof=1))]
    return out


def scale_line(suite: Suite, task_name: str, root: Path,
               finals: dict[str, list[float]] | None = None, brief: bool = False) -> str | None:
    """The page's scale sentence for a multi-agent task, from ``root/scale.json`` (computed and
    written there when the task is missing from it), and for each row of ``finals`` (label:
    the seeds' final returns, as in the report) how many beat the zero action's; None for other
    tasks. ``brief``: the method was said at an earlier task, so only the numbers are given."""
    task: SuiteTask | None = next((t for t in suite.tasks if t.name == task_name), None)
    if task is None or not task.name.startswith(MULTI_AGENT_PREFIXES):
        return None
    cache = read_json(root / SCALE_FILE) or {}
    if task.name not in cache:
        cache[task.name] = {"episodes": SCALE_EPISODES,
                            **scale_returns(task.env, SCALE_EPISODES)}
        write_text_atomic(root / SCALE_FILE, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    entry = cache[task.name]
    (r_mean, r_std), (z_mean, z_std) = entry["random"], entry["zero"]
    first = rundirs.EVAL_SEED_OFFSET
    last = first + int(entry["episodes"]) - 1
    if brief:  # the method was said at an earlier task of the suite
        line = (f"For scale, as above: uniform random actions {fmt(r_mean)} ± {fmt(r_std)}, the "
                f"env's zero action {fmt(z_mean)} ± {fmt(z_std)}.")
    else:
        line = (f"For scale, two scripted policies, {entry['episodes']} episodes each on env "
                f"seeds {first:,}-{last:,} (which hold every evaluation's: seed + {first:,} + i), "
                f"mean ± std over episodes (a {suite.eval_episodes}-episode mean, as each "
                f"evaluation's, varies {suite.eval_episodes ** -0.5:.2f} times as much): uniform "
                f"random actions {fmt(r_mean)} ± {fmt(r_std)}, the env's zero action (no force or "
                f"torque) {fmt(z_mean)} ± {fmt(z_std)}: floors, not marks of skill (beating them "
                "says a policy does better than not acting, not that it does well).")
    beat = [f"{label} {sum(f > z_mean for f in values)} of {len(values)}"
            for label, values in sorted((finals or {}).items()) if values]
    if beat:
        line += f" Seeds whose final return beats the zero action's: {', '.join(beat)}."
    return line
